"""Commands `solve`, `ranges`, `pareto`, `heuristic`, `compare`: the exact optimizer and the paper's explorer."""

from __future__ import annotations

import json

import click

from specpim_cp.api.limits import DEFAULT_MAX_POINTS, DEFAULT_RESOLUTION_PCT
from specpim_cp.cli.common import (
    SEED_TYPE,
    TIME_LIMIT_TYPE,
    WORKERS_TYPE,
    Progress,
    catalog_option,
    check_workers,
    check_writable,
    emit,
    load_with_catalog,
    user_errors,
)
from specpim_cp.errors import ScenarioError


def _solve_hook(bar: Progress):
    """CP-SAT progress (incumbent, bound, gap per Dinkelbach iteration) on the status line."""
    if not bar:
        return None
    from specpim_cp.views.tables import human_objective

    def hook(p) -> None:
        inc = "none yet" if p.incumbent is None else human_objective(p.objective_name, p.incumbent)
        bound = "n/a" if p.bound is None else human_objective(p.objective_name, p.bound)
        gap = "" if p.gap is None else f", gap {100 * p.gap:.3g}%"
        bar.show(f"{p.stage}: iteration {p.iterations}, incumbent {inc}, bound {bound}{gap}")

    return hook


def _warm_start_hook(bar: Progress, sc):
    """The warm start's heuristic progress on the solve's status line."""
    hook = _generation_hook(bar, sc)
    if hook is None:
        return None

    def show(*args) -> None:
        bar.label = "warm start (heuristic, quick)"
        hook(*args)
        bar.label = "solve"

    show.fork_safe = True  # it writes the status line to stderr, which a forked warm start shares
    return show


def _generation_hook(bar: Progress, sc):
    """Heuristic progress (generation, best so far) on the status line."""
    if not bar:
        return None
    from specpim_cp.views.tables import human_objective

    def hook(generation: int, generations: int, best: float, evaluations: int) -> None:
        best_text = "none yet" if best == float("inf") else human_objective(sc.objective, best)
        bar.show(f"generation {generation}/{generations}, best {best_text}, {evaluations:,} evaluations")

    return hook


@click.command()
@click.argument("scenario")
@click.option("--objective", type=click.Choice(["latency", "energy", "edp", "request"]),
              help="default: the scenario's; request: time to first token + generated tokens x latency per token")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=60.0, show_default=True,
              help="seconds for the whole command (with --deterministic also its deterministic time units)")
@click.option("--workers", type=WORKERS_TYPE, default=1, show_default=True,
              help="CP-SAT workers (not with --deterministic)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--deterministic", is_flag=True,
              help="one worker, deterministic time limit: same design every run (rejects --workers > 1)")
@click.option("--method", type=click.Choice(["cp-sat", "brute-force"]), default="cp-sat", show_default=True)
@click.option("--hint", "hint_path", type=click.Path(dir_okay=False), help="design JSON to warm-start from")
@click.option("--warm-start/--no-warm-start", default=True, show_default=True,
              help="hint CP-SAT with the heuristic's design (quick budget)")
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@catalog_option
@user_errors
def solve(scenario, objective, time_limit, workers, seed, deterministic, method, hint_path, warm_start, as_json,
          output, catalog_files) -> None:
    """The provably best design of SCENARIO (or the best found, its bound and gap).

    The report states the objective in us/token (latency), mJ/token (energy), us*mJ/token^2 (EDP) or
    ms/request (request), like the metrics, and the prompt's prefill (time to first token, its energy)
    beside them; --json keeps the evaluator's units, named by `objective_unit` (ns/token, nJ/token, ...).
    """
    from specpim_cp.api import SolveOptions
    from specpim_cp.api import solve as run
    from specpim_cp.views.tables import format_solve, tie_break_line

    check_workers(workers, deterministic)
    check_writable(output, "-o")
    sc, cat = load_with_catalog(scenario, catalog_files)
    with Progress("solve") as bar:
        res = run(sc, SolveOptions(time_limit, workers, seed, deterministic, objective=objective, method=method,
                                   warm_start=warm_start, hint=hint_path or None, hint_label="--hint", catalog=cat,
                                   on_progress=_solve_hook(bar), on_warm_start=_warm_start_hook(bar, sc)))
    text = format_solve(sc, res)
    tie = tie_break_line(res.report.extra)
    emit(res.to_json() if as_json else text + ("\n" + tie if tie else ""), output)


@click.command()
@click.argument("scenario")
@click.option("--within", "within_pct", default="1", show_default=True,
              help="tolerance in percent of the optimum (a number such as 1 or 0.5)")
@click.option("--objective", type=click.Choice(["latency", "energy"]), help="default: the scenario's")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=60.0, show_default=True,
              help="seconds for the whole command, the optimum then the ranges (with --deterministic: "
                   "deterministic units for the optimum, as much again for the ranges, and twice it in seconds)")
@click.option("--workers", type=WORKERS_TYPE, default=1, show_default=True,
              help="CP-SAT workers (not with --deterministic)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--deterministic", is_flag=True, help="one worker, deterministic time limit (rejects --workers > 1)")
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@catalog_option
@user_errors
def ranges(scenario, within_pct, objective, time_limit, workers, seed, deterministic, as_json, output,
           catalog_files) -> None:
    """Which values each decision takes over the designs within --within percent of the optimum.

    For every model and decision (memory type, PIM units, devices, each operator's engine, draft length,
    shape and nodes, staging, pipeline): the values designs within the tolerance reach, each proven by
    CP-SAT (a design that takes it, re-priced by the evaluator) or proven out of reach; "forced" when one
    value remains, "free" otherwise (formulations/objectives.md, OBJ-4).
    """
    from specpim_cp.api import RangesOptions
    from specpim_cp.api import ranges as run
    from specpim_cp.cli.options import check_within
    from specpim_cp.views.ranges import format_ranges

    check_workers(workers, deterministic)
    check_writable(output, "-o")
    within = check_within(within_pct)
    sc, cat = load_with_catalog(scenario, catalog_files)
    with Progress("ranges") as bar:
        res = run(sc, RangesOptions(time_limit, workers, seed, deterministic, within_pct=within, objective=objective,
                                    catalog=cat, on_stage=bar.show if bar else None))
    emit(json.dumps(res.as_dict(), indent=2) if as_json else format_ranges(res), output)


@click.command()
@click.argument("scenario")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=300.0, show_default=True,
              help="seconds for the whole front (with --deterministic also its deterministic time units)")
@click.option("--workers", type=WORKERS_TYPE, default=1, show_default=True,
              help="CP-SAT workers (not with --deterministic)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--deterministic", is_flag=True, help="one worker, deterministic time limit (rejects --workers > 1)")
@click.option("--resolution", default=DEFAULT_RESOLUTION_PCT, show_default=True, metavar="PERCENT",
              help="each next point at least r% below the last in energy per token, every point still proven; "
                   "0 with --max-points 0: the exact front (formulations/objectives.md, OBJ-2r)")
@click.option("--max-points", type=int, default=DEFAULT_MAX_POINTS, show_default=True, metavar="N",
              help="widen the resolution where needed so that the front lists at most N points (0: no budget; "
                   "OBJ-2b)")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="CSV file (default: stdout)")
@catalog_option
@user_errors
def pareto(scenario, time_limit, workers, seed, deterministic, resolution, max_points, output,
           catalog_files) -> None:
    """The latency-energy Pareto front (per token) as CSV, in ns and pJ (units in the header); its last
    line, starting with '#', states the front's status, resolution and the time it took."""
    import csv
    import io

    from specpim_cp.api import ParetoOptions
    from specpim_cp.api import pareto as run
    from specpim_cp.cli.options import check_max_points, check_resolution
    from specpim_cp.views.fronts import front_statement
    from specpim_cp.views.tables import design_summary

    check_workers(workers, deterministic)
    check_writable(output, "-o")
    check_resolution(resolution)
    max_points = check_max_points(max_points)
    sc, cat = load_with_catalog(scenario, catalog_files)
    with Progress("pareto") as bar:
        result = run(sc, ParetoOptions(time_limit, workers, seed, deterministic, resolution_pct=resolution,
                                       max_points=max_points, catalog=cat, on_progress=_solve_hook(bar)))
    front = result.points
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["latency_ns_per_token", "energy_pj_per_token", "edp_ns_pj_per_token2", "round_time_ns",
                "energy_pj_per_round", "tokens_per_round", "design"])
    for e in front:
        m = e.metrics
        w.writerow([f"{m.latency_ns_per_token:.3f}", f"{m.energy_pj_per_token:.1f}",
                    f"{m.latency_ns_per_token * m.energy_pj_per_token:.6g}", m.round_time_ns,
                    m.energy_nj_per_round * 1000, f"{m.tokens_per_round:.6f}", design_summary(sc, e.design)])
    emit(buf.getvalue() + "# " + front_statement(result), output)


def _run_heuristic(sc, budget, seed: int, label: str, catalog, polish: bool = True, time_limit: float | None = None):
    """The front door's heuristic with a progress line."""
    from specpim_cp.api import HeuristicOptions
    from specpim_cp.api import heuristic as run

    with Progress(label) as bar:
        return run(sc, HeuristicOptions(budget, seed, polish, time_limit, catalog=catalog,
                                        on_generation=_generation_hook(bar, sc)))


def _budget(budget: str):
    """--budget checked before any work: quick, paper or GENxPOPxLEAVES within its limits."""
    from specpim_cp.api.solving import heuristic_budget

    return heuristic_budget(budget, "--budget")


@click.command()
@click.argument("scenario")
@click.option("--budget", default="quick", show_default=True, help="quick | paper | GENxPOPxLEAVES")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--polish/--no-polish", default=True, show_default=True,
              help="refine each generation's best design (our addition); --no-polish is the paper's explorer "
                   "as published")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=None,
              help="wall seconds for the search (default: the budget alone); it stops between candidates, so "
                   "the result then depends on the machine")
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@catalog_option
@user_errors
def heuristic(scenario, budget, seed, polish, time_limit, as_json, output, catalog_files) -> None:
    """The paper's explorer: GA over dataflow + per-model MCTS over architecture (seeded)."""
    from specpim_cp.views.tables import format_solve

    bud = _budget(budget)
    check_writable(output, "-o")
    sc, cat = load_with_catalog(scenario, catalog_files)
    res = _run_heuristic(sc, bud, seed, f"heuristic ({budget}{'' if polish else ', no polish'})", cat, polish,
                         time_limit)
    emit(res.to_json() if as_json else format_solve(sc, res), output)


@click.command()
@click.argument("scenario")
@click.option("--budget", default="quick", show_default=True, help="heuristic budget")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=60.0, show_default=True,
              help="the exact solve's, in deterministic time units and in seconds")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@catalog_option
@user_errors
def compare(scenario, budget, time_limit, seed, catalog_files) -> None:
    """Exact optimum (with proof) vs the heuristic (gap, time) vs the baselines, side by side."""
    from specpim_cp.api import CompareOptions
    from specpim_cp.api import compare as run
    from specpim_cp.views.tables import (
        HUMAN_UNITS,
        design_lines,
        devices_text,
        host_line,
        human_objective,
        table,
    )

    bud = _budget(budget)
    sc, cat = load_with_catalog(scenario, catalog_files)
    with Progress(f"compare: heuristic ({budget})") as bar:
        def exact_progress(p) -> None:
            bar.label = "compare: exact"
            solve_hook(p)

        solve_hook = _solve_hook(bar)
        both = run(sc, CompareOptions(bud, time_limit, seed, catalog=cat, on_generation=_generation_hook(bar, sc),
                                      on_progress=exact_progress if solve_hook else None))
    exact, heur = both.exact, both.heuristic
    opt = exact.report.objective
    obj = sc.objective
    unit, factor = HUMAN_UNITS[obj]
    rows = []
    for name, res, wall in (("exact (CP-SAT)", exact.evaluation, exact.report.wall_s),
                            ("heuristic (GA+MCTS)", heur.evaluation, heur.report.wall_s)):
        v = res.metrics.objective(obj)
        rows.append([name, devices_text(res.design), float(v) * factor, f"{100 * float((v - opt) / opt):.3f}",
                     res.metrics.prefill_ns / 1e6, f"{wall:.2f}"])
    for b in both.baselines:
        if b.evaluation is not None:
            v = b.evaluation.metrics.objective(obj)
            rows.append([b.name, devices_text(b.evaluation.design), float(v) * factor,
                         f"{100 * float((v - opt) / opt):.1f}", b.evaluation.metrics.prefill_ns / 1e6, ""])
    status = exact.report.status
    proof = ("proven optimal (objective = bound)" if status == "OPTIMAL"
             else f"{status}, bound {human_objective(obj, exact.report.bound or 0)}, "
                  f"gap {100 * (exact.report.gap or 0):.3g}%")
    ttb = heur.report.extra.get("time_to_best_s")
    click.echo(f"scenario {sc.name}, objective {obj}: exact {proof}; heuristic seed {seed}, budget {budget}, "
               f"{heur.report.extra.get('evaluations', '?')} evaluations, best found after "
               f"{ttb if ttb is None else round(ttb, 2)} s")
    click.echo(host_line(sc, exact.evaluation))
    click.echo(table(["method", "devices", f"{obj} ({unit})", "above optimum (%)", "TTFT (ms)", "wall (s)"], rows))
    click.echo("exact design:")
    click.echo("\n".join(design_lines(sc, exact.design)))
    click.echo("heuristic design:")
    click.echo("\n".join(design_lines(sc, heur.design)))



@click.command()
@click.argument("scenario")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=60.0, show_default=True,
              help="seconds for the whole study; deterministically also each solve's deterministic time units")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--deterministic/--no-deterministic", default=True, show_default=True,
              help="deterministic time limits: the same table every run")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="write the tornado plot (PNG) here")
@click.option("--only", metavar="TEXT", help="vary only the constants whose name contains TEXT (e.g. acceptance, "
                                              "hosts., pim_efficiency)")
@click.option("--json", "as_json", is_flag=True)
@catalog_option
@user_errors
def sensitivity(scenario, time_limit, seed, deterministic, plot_path, only, as_json, catalog_files) -> None:
    """Re-solve with each uncertain constant at its low and high source value: a tornado table (with GPU-SI's
    speedup over GPU-AR at each end; acceptance rates move over their catalog range_KEY)."""
    from specpim_cp.api import SensitivityOptions
    from specpim_cp.api import sensitivity as run
    from specpim_cp.api.studies import format_sensitivity, objective_unit, plot_tornado, sensitivity_constants

    check_writable(plot_path, "--plot")
    if plot_path and not plot_path.lower().endswith(".png"):
        raise ScenarioError(f"--plot {plot_path}: the tornado plot is a PNG; name the file *.png")
    sc, cat = load_with_catalog(scenario, catalog_files)
    constants = sensitivity_constants(sc, only, cat)
    with Progress("sensitivity") as bar:
        n = [0]

        def on_point(label: str) -> None:
            n[0] += 1
            bar.show(f"{n[0]}/{2 * len(constants)} ends solved, last: {label}")

        result = run(sc, SensitivityOptions(time_limit, seed, only, deterministic, catalog=cat, on_point=on_point if bar else None))
    if plot_path:
        plot_tornado(result, plot_path)
    if as_json:
        rows = [{"constant": r.constant, "nominal": r.nominal, "ends": [
            {"value": p.value, "objective": float(p.objective), "relative": p.relative,
             "energy_relative": p.energy_relative,
             "design_changed": p.design_changed, "design": p.summary, "resolved": p.resolved,
             "gpu_si_speedup": p.gpu_si_speedup}
            for p in (r.low, r.high)]} for r in result.rows]
        click.echo(json.dumps({"scenario": result.scenario, "objective": result.objective_name,
                               "nominal": float(result.nominal),
                               "objective_unit": objective_unit(result.objective_name),
                               "design": result.nominal_summary,
                               "nominal_gpu_si_speedup": result.nominal_gpu_si_speedup,
                               "host_kernel_model": cat.host(sc.host).kernel_model,
                               "catalog_files": list(cat.files),
                               "rows": rows, "not_solved": list(result.not_solved)}, indent=2))
    else:
        click.echo(format_sensitivity(result))


COMMANDS = (solve, ranges, pareto, heuristic, compare, sensitivity)
