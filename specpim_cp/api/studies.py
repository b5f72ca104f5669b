"""The front door's studies of many solves: workload mixes, sensitivity, acceptance sweeps, batches and
grids (with their reports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specpim_cp.api.inputs import builtin_sets, scenario_catalog
from specpim_cp.api.options import MixOptions, SensitivityOptions, SweepOptions
from specpim_cp.check.sensitivity import format_sensitivity, plot_tornado
from specpim_cp.check.sweep import format_sweep, write_sweep
from specpim_cp.check.sweep import parse_range as acceptance_values
from specpim_cp.errors import ScenarioError
from specpim_cp.report.batch import build_report
from specpim_cp.runs.grid import load_grid, run_grid
from specpim_cp.runs.instances import BatchOptions, resolve_inputs
from specpim_cp.runs.mix_policy import check_policy_dir, policy_names, write_policy_dir
from specpim_cp.solvers.result import OBJECTIVE_UNITS

__all__ = ["BatchOptions", "acceptance_values", "batch_inputs", "batch_options", "build_report",
           "check_policy_folder", "format_sensitivity", "format_sweep", "load_grid", "objective_unit",
           "plot_tornado", "run_batch", "run_grid", "sensitivity", "sensitivity_constants", "solve_mix", "sweep",
           "write_policy_dir", "write_sweep"]


def objective_unit(objective: str) -> str:
    """The evaluator's unit of an objective ("ns/token" for latency), as JSON outputs name it."""
    return OBJECTIVE_UNITS[objective]


def solve_mix(mix, options: MixOptions | None = None):
    """One hardware for every cell of `mix`, the best dataflow per cell, proven optimal (or bound and gap),
    with the comparisons (a MixResult)."""
    options = options or MixOptions()
    from specpim_cp.solvers.mix import MixOptions as SolverMixOptions
    from specpim_cp.solvers.mix import solve_mix as run

    options.validate()
    catalog = options.catalog if options.catalog is not None else scenario_catalog(mix.base)
    solver = SolverMixOptions(options.solver_options(), cell_time_limit_s=options.cell_time_limit_s,
                              method=options.method)
    return run(mix, options.objective, solver, catalog=catalog, on_stage=options.on_stage)


def check_policy_folder(folder: str | Path, mix) -> None:
    """Before a mix solve: the folder `write_policy_dir` will fill must hold nothing but its own files."""
    check_policy_dir(folder, policy_names(mix))


def sensitivity_constants(scenario, only: str | None = None, catalog=None) -> list:
    """The uncertain constants `sensitivity` varies (those whose name contains `only`); ScenarioError when
    the scenario has none."""
    from specpim_cp.check.sensitivity import selected_constants, uncertain_constants

    catalog = catalog if catalog is not None else scenario_catalog(scenario)
    if not uncertain_constants(scenario, catalog):
        raise ScenarioError(f"scenario '{scenario.name}' has no uncertain constants (no range_ entries for its host "
                            "and memory types in the catalog, and no drafters): nothing to vary")
    return selected_constants(scenario, catalog, only)


def sensitivity(scenario, options: SensitivityOptions | None = None):
    """Re-solve with each uncertain constant at its low and high source value (a SensitivityResult)."""
    options = options or SensitivityOptions()
    from specpim_cp.check.sensitivity import sensitivity as run
    from specpim_cp.solvers.exact import SolverOptions

    catalog = options.catalog if options.catalog is not None else scenario_catalog(scenario)
    sensitivity_constants(scenario, options.only, catalog)
    solver = SolverOptions(options.time_limit_s, seed=options.seed, deterministic=options.deterministic)
    return run(scenario, catalog, options=solver,
               on_point=options.on_point, only=options.only)


def sweep(scenario, options: SweepOptions):
    """Re-solve `scenario` exactly at each acceptance rate of `options` (a SweepResult)."""
    from specpim_cp.check.sweep import sweep_acceptance

    options.validate()
    return sweep_acceptance(scenario, list(options.acceptances), drafter=options.drafter,
                            options=options.solver_options(), on_point=options.on_point)


def batch_options(executor: str = "local", jobs: int | None = None, **fields: Any) -> BatchOptions:
    """Validated batch options; `jobs` None: 2 local processes, or as many Ray tasks as the cluster allows."""
    if jobs is None:
        jobs = 0 if executor == "ray" else 2
    elif jobs < 1:
        raise ScenarioError(f"--jobs: must be at least 1, got {jobs}")
    return BatchOptions(executor=executor, jobs=jobs, **fields).validate()


def batch_inputs(target: str | None) -> tuple[str, list[Path]]:
    """(batch name, scenario files) of a built-in set, a scenario file or a folder (default: paper)."""
    name, files = resolve_inputs(target, builtin_sets())
    if name in ("", ".", "..") and target is not None:  # `batch .`, `batch ..`, `batch /`: the folder's own name
        name = Path(target).resolve().name or "batch"
    return name, files


def run_batch(files, out: str | Path, options: BatchOptions, progress=None, name: str | None = None,
              catalogs=()):
    """Run every missing instance of the scenario `files` into `out` (resumable); a BatchSummary."""
    from specpim_cp.runs.batch import run_batch as run

    return run(files, out, options, progress, name=name, extra_catalogs=catalogs)
