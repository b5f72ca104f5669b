"""Commands `solve`, `pareto`, `heuristic`, `compare`: the exact optimizer and the paper's explorer."""

from __future__ import annotations

import json

import click

from specpim_cp.cli.common import emit, load, user_errors
from specpim_cp.errors import ScenarioError


def _warm_start(sc, hint_path, warm_start: bool, seed: int):
    from specpim_cp.design import load_design

    if hint_path:
        return load_design(hint_path)
    if not warm_start:
        return None
    try:
        from specpim_cp.heuristic import run_heuristic
    except ImportError:
        return None
    return run_heuristic(sc, budget="quick", seed=seed).design


@click.command()
@click.argument("scenario")
@click.option("--objective", type=click.Choice(["latency", "energy", "edp"]), help="default: the scenario's")
@click.option("--time-limit", type=click.FloatRange(0.1), default=60.0, show_default=True,
              help="seconds (deterministic time units with --deterministic)")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--deterministic", is_flag=True, help="one worker, deterministic time limit: same design every run")
@click.option("--method", type=click.Choice(["cp-sat", "brute-force"]), default="cp-sat", show_default=True)
@click.option("--hint", "hint_path", type=click.Path(dir_okay=False), help="design JSON to warm-start from")
@click.option("--warm-start/--no-warm-start", default=True, show_default=True,
              help="hint CP-SAT with the heuristic's design (quick budget)")
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@user_errors
def solve(scenario, objective, time_limit, workers, seed, deterministic, method, hint_path, warm_start, as_json,
          output) -> None:
    """The provably best design of SCENARIO (or the best found, its bound and gap)."""
    from specpim_cp.report_text import format_solve

    sc = load(scenario)
    if method == "brute-force":
        from specpim_cp.brute import brute_force

        res = brute_force(sc, objective=objective)
    else:
        from specpim_cp.exact import solve as cp_solve

        hint = _warm_start(sc, hint_path, warm_start, seed)
        res = cp_solve(sc, objective=objective, time_limit_s=time_limit, workers=workers, seed=seed,
                       deterministic=deterministic, hint=hint)
    emit(res.to_json() if as_json else format_solve(sc, res), output)


@click.command()
@click.argument("scenario")
@click.option("--time-limit", type=click.FloatRange(0.1), default=300.0, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--deterministic", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="CSV file (default: stdout)")
@user_errors
def pareto(scenario, time_limit, workers, seed, deterministic, output) -> None:
    """The exact latency-energy Pareto front (per token) as CSV."""
    import csv
    import io

    from specpim_cp.exact import pareto_front
    from specpim_cp.report_text import design_summary

    sc = load(scenario)
    front = pareto_front(sc, time_limit_s=time_limit, workers=workers, seed=seed, deterministic=deterministic)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["latency_ns_per_token", "energy_pj_per_token", "edp", "round_time_ns", "tokens_per_round", "design"])
    for e in front:
        m = e.metrics
        w.writerow([f"{m.latency_ns_per_token:.3f}", f"{m.energy_pj_per_token:.1f}", f"{m.edp:.6g}",
                    m.round_time_ns, f"{m.tokens_per_round:.6f}", design_summary(sc, e.design)])
    emit(buf.getvalue().rstrip("\n"), output)


def _budget(value: str):
    """'quick', 'paper', or GENERATIONSxPOPULATIONxLEAVES (e.g. 20x200x500)."""
    if value in ("quick", "paper"):
        return value
    from specpim_cp.heuristic import Budget

    try:
        g, p, leaves = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise ScenarioError(f"--budget: '{value}' is not quick, paper or GENxPOPxLEAVES (e.g. 20x200x500)") from None
    return Budget(generations=g, population=p, mcts_leaves_per_model=leaves)


@click.command()
@click.argument("scenario")
@click.option("--budget", default="quick", show_default=True, help="quick | paper | GENxPOPxLEAVES")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@user_errors
def heuristic(scenario, budget, seed, as_json, output) -> None:
    """The paper's explorer: GA over dataflow + per-model MCTS over architecture (seeded)."""
    from specpim_cp.heuristic import run_heuristic
    from specpim_cp.report_text import format_solve

    sc = load(scenario)
    res = run_heuristic(sc, budget=_budget(budget), seed=seed)
    emit(res.to_json() if as_json else format_solve(sc, res), output)


@click.command()
@click.argument("scenario")
@click.option("--budget", default="quick", show_default=True, help="heuristic budget")
@click.option("--time-limit", type=click.FloatRange(0.1), default=60.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@user_errors
def compare(scenario, budget, time_limit, seed) -> None:
    """Exact optimum (with proof) vs the heuristic (gap, time) vs the baselines, side by side."""
    from specpim_cp.baselines import run_baselines
    from specpim_cp.exact import solve as cp_solve
    from specpim_cp.heuristic import run_heuristic
    from specpim_cp.report_text import design_lines, table

    sc = load(scenario)
    heur = run_heuristic(sc, budget=_budget(budget), seed=seed)
    exact = cp_solve(sc, time_limit_s=time_limit, seed=seed, deterministic=True, hint=heur.design)
    opt = exact.report.objective
    obj = sc.objective
    rows = []
    for name, res, wall in (("exact (CP-SAT)", exact.evaluation, exact.report.wall_s),
                            ("heuristic (GA+MCTS)", heur.evaluation, heur.report.wall_s)):
        v = res.metrics.objective(obj)
        rows.append([name, float(v), f"{100 * float((v - opt) / opt):.3f}%", f"{wall:.2f}"])
    for b in run_baselines(sc):
        if b.evaluation is not None:
            v = b.evaluation.metrics.objective(obj)
            rows.append([b.name, float(v), f"{100 * float((v - opt) / opt):.1f}%", ""])
    status = exact.report.status
    proof = ("proven optimal (objective = bound)" if status == "OPTIMAL"
             else f"{status}, bound {float(exact.report.bound or 0):,.1f}, gap {100 * (exact.report.gap or 0):.3g}%")
    ttb = heur.report.extra.get("time_to_best_s")
    click.echo(f"scenario {sc.name}, objective {obj}: exact {proof}; heuristic seed {seed}, budget {budget}, "
               f"{heur.report.extra.get('evaluations', '?')} evaluations, best found after "
               f"{ttb if ttb is None else round(ttb, 2)} s")
    click.echo(table(["method", f"{obj} per token", "gap to optimum", "wall s"], rows))
    click.echo("exact design:")
    click.echo("\n".join(design_lines(sc, exact.design)))
    click.echo("heuristic design:")
    click.echo("\n".join(design_lines(sc, heur.design)))



@click.command()
@click.argument("scenario")
@click.option("--time-limit", type=click.FloatRange(0.1), default=60.0, show_default=True,
              help="per solve (deterministic time units)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="write the tornado plot (PNG) here")
@click.option("--json", "as_json", is_flag=True)
@user_errors
def sensitivity(scenario, time_limit, seed, plot_path, as_json) -> None:
    """Re-solve with each uncertain constant at its low and high source value: a tornado table."""
    from specpim_cp.sensitivity import format_sensitivity, plot_tornado
    from specpim_cp.sensitivity import sensitivity as run

    sc = load(scenario)
    result = run(sc, time_limit_s=time_limit, seed=seed)
    if plot_path:
        plot_tornado(result, plot_path)
    if as_json:
        rows = [{"constant": r.constant, "nominal": r.nominal, "ends": [
            {"value": p.value, "objective": float(p.objective), "relative": p.relative,
             "energy_relative": p.energy_relative,
             "design_changed": p.design_changed, "design": p.summary, "resolved": p.resolved}
            for p in (r.low, r.high)]} for r in result.rows]
        click.echo(json.dumps({"scenario": result.scenario, "objective": result.objective_name,
                               "nominal": float(result.nominal), "design": result.nominal_summary,
                               "rows": rows}, indent=2))
    else:
        click.echo(format_sensitivity(result))


COMMANDS = (solve, pareto, heuristic, compare, sensitivity)
