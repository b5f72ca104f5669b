"""Command `solve-mix`: one hardware for a workload mix, the best dataflow per cell, proven optimal."""

from __future__ import annotations

from pathlib import Path

import click

from specpim_cp.cli.common import (
    Progress,
    catalog_option,
    check_time_limit,
    check_workers,
    check_writable,
    emit,
    user_errors,
)
from specpim_cp.errors import ScenarioError
from specpim_cp.mix.spec import MIX_OBJECTIVES


def load_mix_arg(name: str, catalog_files: tuple[str, ...] = ()):
    """The mix named on the command line (a mix TOML, a scenario with a [mix] table, or built-in mix/NAME),
    with --catalog files added to its base scenario's own, and the one Catalog every step prices it with."""
    from specpim_cp.mix.spec import load_mix
    from specpim_cp.problem.builtin_sets import builtin_sets, resolve_scenario_path
    from specpim_cp.problem.scenario import scenario_catalog

    try:
        resolve_scenario_path(name)
    except ScenarioError:
        folder = builtin_sets().get("mix")
        known = ", ".join(f"mix/{p.stem}" for p in sorted(folder.glob("*.toml"))) if folder else "none"
        raise ScenarioError(f"{name}: no such mix file (or built-in mix/NAME: {known})") from None
    mix = load_mix(name, extra_catalogs=[str(Path(p).absolute()) for p in catalog_files])
    return mix, scenario_catalog(mix.base)


@click.command("solve-mix")
@click.argument("mix")
@click.option("--objective", type=click.Choice(MIX_OBJECTIVES), default="latency", show_default=True,
              help="weighted mean latency or energy per token, or the worst cell's regret (its latency over its "
                   "own optimum's)")
@click.option("--time-limit", type=click.FloatRange(0.1), default=120.0, show_default=True,
              help="seconds for the mix model's CP-SAT solves (deterministic time units with --deterministic)")
@click.option("--cell-time-limit", type=click.FloatRange(0.1), default=60.0, show_default=True,
              help="seconds for each single-cell solve (each cell's own optimum, each fixed-hardware dataflow)")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="CP-SAT workers (not with --deterministic)")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--deterministic", is_flag=True,
              help="one worker, deterministic time limits: the same design every run (rejects --workers > 1)")
@click.option("--json", "as_json", is_flag=True, help="the whole result as JSON on stdout (evaluator units)")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="write the whole result as JSON to FILE (stdout keeps the human report unless --json)")
@click.option("--policy-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="write per cell its scenario (cell-I.toml) and its design (cell-I.json), which `specpim-cp "
                   "evaluate cell-I.toml --design cell-I.json` re-prices, and an index policy.json")
@catalog_option
@user_errors
def solve_mix(mix, objective, time_limit, cell_time_limit, workers, seed, deterministic, as_json, output, policy_dir,
              catalog_files) -> None:
    """One hardware for every cell of MIX, with the best dataflow per cell, proven optimal (or bound and gap).

    MIX is a mix TOML file (`scenario = "SET/NAME or file"` and [[mix.cells]] with batch_size and weight),
    a scenario file with a [mix] table, or a built-in mix/NAME (mix/opt-13b, mix/llama-32.5b, mix/palm-62b).
    The report gives the objective in us/token (latency), mJ/token (energy) or as a ratio (regret), the
    shared hardware, the policy table (one row per cell), the rule view (per operator, the cells where it
    runs on PIM) and the comparisons: (a) per-cell optima, (b) the median cell's hardware, (c) a
    PAPI-style runtime rule, (d) GPU-SI. JSON (--json, -o) keeps the evaluator's units, named by
    `objective_unit`.
    """
    from specpim_cp.mix.exact import solve_mix as run
    from specpim_cp.mix.policy import write_policy_dir
    from specpim_cp.mix.result import MixOptions
    from specpim_cp.mix.text import format_mix
    from specpim_cp.solvers.exact import SolverOptions

    check_time_limit(time_limit)
    check_time_limit(cell_time_limit, "--cell-time-limit")
    check_workers(workers, deterministic)
    check_writable(output, "-o")
    check_writable(policy_dir, "--policy-dir")
    mx, cat = load_mix_arg(mix, catalog_files)
    options = MixOptions(SolverOptions(time_limit, workers, seed, deterministic), cell_time_limit_s=cell_time_limit)
    with Progress(f"solve-mix {mx.name}") as bar:
        res = run(mx, objective, options, catalog=cat, on_stage=bar.show if bar else None)
    if policy_dir is not None:
        write_policy_dir(res, policy_dir)
    if output is not None:
        emit(res.to_json(), output)
    if not (as_json and output is not None):
        emit(res.to_json() if as_json else format_mix(res, cat), None)


COMMANDS = (solve_mix,)
