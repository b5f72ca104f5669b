"""`specpim-cp`: a thin click layer over the Python API. Nothing below the CLI prints.

User errors (ScenarioError) become one line on stderr and exit code 2; outputs written with -o are
written atomically (temporary file + rename), so a failed run leaves nothing half-written.
"""

from __future__ import annotations

import functools
import json
import sys
from importlib import resources
from pathlib import Path

import click

from specpim_cp.errors import ScenarioError
from specpim_cp.files import write_atomic


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


def user_errors(fn):
    """Turn user-caused errors into one line and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ScenarioError as exc:
            _fail(str(exc))
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            _fail(f"{exc.filename}: {exc.strerror}")

    return wrapper


def builtin_sets() -> dict[str, Path]:
    root = Path(str(resources.files("specpim_cp") / "benchmarks"))
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir()}


def resolve_scenario_path(name: str) -> Path:
    """A path, or a built-in scenario as `SET/NAME` (e.g. `examples/opt-13b`)."""
    p = Path(name)
    if p.exists():
        return p
    if "/" in name:
        set_name, scen = name.split("/", 1)
        sets = builtin_sets()
        if set_name in sets:
            cand = sets[set_name] / (scen if scen.endswith(".toml") else f"{scen}.toml")
            if cand.exists():
                return cand
    raise ScenarioError(f"{name}: no such scenario file (or built-in SET/NAME, e.g. examples/opt-13b)")


def load(name: str):
    from specpim_cp.scenario import load_scenario

    return load_scenario(resolve_scenario_path(name))


def emit(text: str, output: str | None) -> None:
    if output:
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specpim-cp")
def main() -> None:
    """Exact (CP-SAT) design-space exploration for speculative LLM inference on PIM systems."""


# ------------------------------------------------------------------------------------------------
@main.group()
def catalog() -> None:
    """List the built-in catalogs."""


@catalog.command("models")
@user_errors
def catalog_models() -> None:
    """Model shapes and their sources."""
    from specpim_cp.catalog import default_catalog
    from specpim_cp.report_text import table

    cat = default_catalog()
    rows = [[m.name, m.family, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.ffn_kind,
             "yes" if m.parallel_block else "no", m.vocab, f"{m.parameter_count() / 1e9:.2f}"]
            for m in cat.models.values()]
    click.echo(table(["model", "family", "layers", "hidden", "heads", "kv", "head", "ffn", "ffn kind",
                      "parallel", "vocab", "params (B)"], rows))
    click.echo("")
    for m in cat.models.values():
        click.echo(f"{m.name}: {m.source}")


@catalog.command("devices")
@user_errors
def catalog_devices() -> None:
    """Hosts and memory systems (PIM and normal units) with their sources."""
    from specpim_cp.catalog import default_catalog
    from specpim_cp.report_text import table

    cat = default_catalog()
    rows = [[h.name, h.peak_fp16_tflops, h.kernel_table, h.kernel_table_bandwidth_gbps, h.static_power_mw / 1000,
             h.link_bandwidth_gbps] for h in cat.hosts.values()]
    click.echo(table(["host", "FP16 TFLOPS", "kernel table", "table GB/s", "static W", "link GB/s"], rows))
    click.echo("")
    rows = []
    for m in cat.memories.values():
        units = m.groups * m.units_per_group
        rows.append([m.name, f"{m.groups} x {m.units_per_group}", m.group_external_bandwidth_gbps * m.groups,
                     units * m.normal_unit_capacity_mib / 1024, m.pim_unit_capacity_mib / 1024,
                     m.pim_lanes_per_unit * m.pim_lane_bandwidth_gbps, m.external_energy_pj_per_bit,
                     m.internal_energy_pj_per_bit])
    click.echo(table(["memory", "groups x units", "ext GB/s", "GiB (k=0)", "GiB/PIM unit", "PIM GB/s/unit",
                      "ext pJ/bit", "PIM pJ/bit"], rows))
    click.echo("\nRULE 2 (modelling assumption): host bandwidth = external x normal units / all units.")
    for m in list(cat.hosts.values()) + list(cat.memories.values()):
        for k, v in m.sources.items():
            click.echo(f"{m.name}.{k}: {v}")


# ------------------------------------------------------------------------------------------------
@main.group()
def kernels() -> None:
    """The fitted host kernel model."""


@kernels.command("predict")
@click.option("--gpu", required=True, help="a100 | h100 | a40")
@click.option("--in-features", type=click.IntRange(1), required=True)
@click.option("--out-features", type=click.IntRange(1), required=True)
@click.option("--tokens", type=click.IntRange(1), required=True)
@click.option("--tensor-parallel", type=click.IntRange(1), default=1, show_default=True)
@user_errors
def kernels_predict(gpu: str, in_features: int, out_features: int, tokens: int, tensor_parallel: int) -> None:
    """Predicted latency (microseconds) of an FP16 linear layer."""
    from specpim_cp.kernels import predict_linear_us

    try:
        us = predict_linear_us(gpu, in_features, out_features, tokens, tensor_parallel)
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    click.echo(f"{us:.2f}")


@kernels.command("fit-report")
@user_errors
def kernels_fit_report() -> None:
    """Leave-one-source-model-out cross-validated error of the fit, per GPU."""
    from specpim_cp.kernels import fit_report, format_fit_report

    click.echo(format_fit_report(fit_report()))


# ------------------------------------------------------------------------------------------------
@main.command()
@click.argument("scenario")
@click.option("--design", "design_path", required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write to FILE instead of stdout")
@user_errors
def evaluate(scenario: str, design_path: str, as_json: bool, output: str | None) -> None:
    """Price a design (metrics and breakdown)."""
    from specpim_cp.evaluate import Evaluator
    from specpim_cp.report_text import format_evaluation
    from specpim_cp.scenario import load_design

    sc = load(scenario)
    ev = Evaluator(sc).evaluate(load_design(design_path))
    emit(json.dumps(ev.as_dict(), indent=2) if as_json else format_evaluation(sc, ev), output)


@main.command()
@click.argument("scenario")
@click.option("--json", "as_json", is_flag=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False))
@user_errors
def baselines(scenario: str, as_json: bool, output: str | None) -> None:
    """Evaluate the baselines (GPU-AR, GPU-SI, FC-offload, attention-offload, off-the-shelf)."""
    from specpim_cp.baselines import run_baselines
    from specpim_cp.report_text import format_baselines

    sc = load(scenario)
    res = run_baselines(sc)
    if res and res[0].evaluation is None:  # GPU-AR infeasible: the verifier does not fit its devices
        raise ScenarioError(res[0].error or "the verifier does not fit its devices")
    emit(json.dumps([r.as_dict() for r in res], indent=2) if as_json else format_baselines(sc, res), output)


@main.command()
@click.argument("scenario")
@click.option("--design", "design_path", required=True, type=click.Path(dir_okay=False))
@click.option("--rounds", type=click.IntRange(100), default=100_000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@user_errors
def simulate(scenario: str, design_path: str, rounds: int, seed: int, as_json: bool) -> None:
    """Monte Carlo simulation of rounds vs the closed forms (95% confidence intervals)."""
    from specpim_cp.scenario import load_design
    from specpim_cp.simulate import format_simulation
    from specpim_cp.simulate_design import simulate_design

    sc = load(scenario)
    res = simulate_design(sc, load_design(design_path), rounds, seed)
    if as_json:
        click.echo(json.dumps(res.as_dict(), indent=2))
    else:
        click.echo(format_simulation(res.simulation))
        click.echo(f"evaluator (integer units): round {res.evaluator_round_ns} ns, "
                   f"{res.evaluator_tokens:.6f} tokens/round")


# ------------------------------------------------------------------------------------------------
def _warm_start(sc, hint_path, warm_start: bool, seed: int):
    from specpim_cp.scenario import load_design

    if hint_path:
        return load_design(hint_path)
    if not warm_start:
        return None
    try:
        from specpim_cp.heuristic import run_heuristic
    except ImportError:
        return None
    return run_heuristic(sc, budget="quick", seed=seed).design


@main.command()
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


@main.command()
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


@main.command()
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


@main.command()
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


# batch, report and sweep live in cli_batch (they import the helpers above)
from specpim_cp.cli_batch import batch, report, sweep

for _cmd in (batch, report, sweep):
    main.add_command(_cmd)

if __name__ == "__main__":  # pragma: no cover
    main()
