"""Command `solve-mix`: one hardware for a workload mix, the best dataflow per cell, proven optimal."""

from __future__ import annotations

import os
from pathlib import Path

import click

from specpim_cp.api.limits import MIX_METHODS, MIX_OBJECTIVES
from specpim_cp.cli.common import (
    SEED_TYPE,
    TIME_LIMIT_TYPE,
    WORKERS_TYPE,
    Progress,
    catalog_option,
    check_time_limit,
    check_workers,
    check_writable,
    emit,
    user_errors,
)
from specpim_cp.errors import ScenarioError


def load_mix_arg(name: str, catalog_files: tuple[str, ...] = ()):
    """The mix named on the command line (a mix TOML, a scenario with a [mix] table, or built-in mix/NAME),
    with --catalog files added to its base scenario's own, and the one Catalog every step prices it with."""
    from specpim_cp.api import load_mix, scenario_catalog

    mix = load_mix(name, catalog_files)
    return mix, scenario_catalog(mix.base)


def check_output_and_policy_dir(output: str | None, policy_dir: str | None) -> None:
    """Before any work: -o (a file) and --policy-dir (a folder written whole) must not share a path or
    lie one inside the other (compared with symlinks and `..` resolved)."""
    if output is None or policy_dir is None:
        return
    out, pol = Path(os.path.realpath(output)), Path(os.path.realpath(policy_dir))
    if out == pol:
        raise ScenarioError(f"--policy-dir {policy_dir}: the same path as -o {output} (a folder of policy files "
                            "and the result's JSON file cannot share a path)")
    if pol in out.parents:
        raise ScenarioError(f"-o {output}: inside --policy-dir {policy_dir}, which holds only the policy files "
                            "(written whole); give -o a path outside it")
    if out in pol.parents:
        raise ScenarioError(f"--policy-dir {policy_dir}: inside the path of -o {output}, which is a file; "
                            "give the policy folder a path outside it")


@click.command("solve-mix")
@click.argument("mix")
@click.option("--objective", type=click.Choice(MIX_OBJECTIVES), default="latency", show_default=True,
              help="weighted mean latency or energy per token, or the worst cell's regret (its latency over its "
                   "own optimum's)")
@click.option("--method", type=click.Choice(MIX_METHODS), default="auto", show_default=True,
              help="decomposition (latency, regret: pass tables and a branch and bound over the hardware and the "
                   "weight copies), cp-sat (the mix model, every objective), auto (the decomposition for latency, "
                   "the mix model otherwise)")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=120.0, show_default=True,
              help="seconds for the whole command, model building and every solve included (with --deterministic "
                   "also CP-SAT's deterministic time units)")
@click.option("--cell-time-limit", type=TIME_LIMIT_TYPE, default=60.0, show_default=True,
              help="seconds for each single-cell solve of the mix model's method (each cell's own optimum, each "
                   "fixed-hardware dataflow), within --time-limit")
@click.option("--workers", type=WORKERS_TYPE, default=1, show_default=True,
              help="CP-SAT workers (not with --deterministic)")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
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
def solve_mix(mix, objective, method, time_limit, cell_time_limit, workers, seed, deterministic, as_json, output,
              policy_dir, catalog_files) -> None:
    """One hardware for every cell of MIX, with the best dataflow per cell, proven optimal (or bound and gap).

    MIX is a mix TOML file (`scenario = "SET/NAME or file"` and [[mix.cells]] with batch_size and weight),
    a scenario file with a [mix] table, or a built-in mix/NAME (mix/opt-13b, mix/llama-32.5b, mix/palm-62b).
    The report gives the objective in us/token (latency), mJ/token (energy) or as a ratio (regret), the
    shared hardware, the policy table (one row per cell), the rule view (per operator, the cells where it
    runs on PIM) and the comparisons: (a) per-cell optima, (b) the median cell's hardware, (c) a
    PAPI-style runtime rule, (d) GPU-SI. JSON (--json, -o) keeps the evaluator's units, named by
    `objective_unit`.
    """
    from specpim_cp.api import MixOptions
    from specpim_cp.api import solve_mix as run
    from specpim_cp.api.studies import check_policy_folder, write_policy_dir
    from specpim_cp.views.mix import format_mix

    check_time_limit(time_limit)
    check_time_limit(cell_time_limit, "--cell-time-limit")
    check_workers(workers, deterministic)
    check_writable(output, "-o")
    check_writable(policy_dir, "--policy-dir")
    check_output_and_policy_dir(output, policy_dir)
    mx, cat = load_mix_arg(mix, catalog_files)
    if policy_dir is not None:
        check_policy_folder(policy_dir, mx)
    with Progress(f"solve-mix {mx.name}") as bar:
        res = run(mx, MixOptions(time_limit, workers, seed, deterministic, objective=objective, method=method,
                                 cell_time_limit_s=cell_time_limit, catalog=cat, on_stage=bar.show if bar else None))
    if policy_dir is not None:
        write_policy_dir(res, policy_dir)
    if output is not None:
        emit(res.to_json(), output)
    if not (as_json and output is not None):
        emit(res.to_json() if as_json else format_mix(res, cat), None)


COMMANDS = (solve_mix,)
