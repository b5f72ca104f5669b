"""`solve_mix`, the one entry of the mix solvers: checks the options, then hands the mix to the
decomposition (latency, and regret on request; MIX-14..19) or to the CP-SAT mix model (every objective)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specpim_cp.catalog import Catalog, default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.mix import MIX_OBJECTIVES, Mix
from specpim_cp.solvers.mix.cpsat import solve_mix_model
from specpim_cp.solvers.mix.decomposition import solve_decomposed
from specpim_cp.solvers.mix.records import DECOMPOSED_OBJECTIVES, MIX_METHODS, MixOptions, MixResult
from specpim_cp.solvers.mix.session import StageHook
from specpim_cp.solvers.mix.sizing import check_mix_size
from specpim_cp.solvers.result import SolveResult


def solve_mix(mix: Mix, objective: str = "latency", options: MixOptions | None = None, *,
              catalog: Catalog | None = None, on_stage: StageHook | None = None,
              optima: Sequence[SolveResult] | None = None) -> MixResult:
    """The mix-optimal shared hardware with per-cell dataflow, its proof (bound, gap) and comparisons.

    `options` (default `MixOptions()`): the method (`auto`: the decomposition for latency), the CP-SAT
    options (120 s), each single-cell solve's time limit (60 s), how many cells are solved alone at a time,
    the screening, the cuts, the comparisons. `optima`: the cells' own optima if already known.
    """
    options = options or MixOptions()
    check_mix_options(objective, options)
    options = replace(options, solver=options.solver.with_deadline())  # the command's, unless started above
    catalog = catalog or default_catalog()
    check_mix_size(mix, catalog)  # memory, before anything is built
    if options.uses_decomposition(objective):  # [MIX-14..19]
        return solve_decomposed(mix, objective, options, catalog, on_stage, optima)
    return solve_mix_model(mix, objective, options, catalog, on_stage, optima)


def check_mix_options(objective: str, options: MixOptions) -> None:
    """Input guards of `solve_mix`: a known objective, finite positive time limits, at least one worker."""
    if objective not in MIX_OBJECTIVES:
        raise ScenarioError(f"objective: '{objective}' is not one of {', '.join(MIX_OBJECTIVES)}")
    time_limit_s, cell_time_limit_s = options.solver.time_limit_s, options.cell_time_limit_s
    if not time_limit_s > 0 or time_limit_s == float("inf"):
        raise ScenarioError(f"time_limit_s: must be a finite number above 0, got {time_limit_s}")
    if not cell_time_limit_s > 0 or cell_time_limit_s == float("inf"):
        raise ScenarioError(f"cell_time_limit_s: must be a finite number above 0, got {cell_time_limit_s}")
    if options.solver.workers < 1:
        raise ScenarioError(f"workers: must be at least 1, got {options.solver.workers}")
    if options.method not in MIX_METHODS:
        raise ScenarioError(f"method: '{options.method}' is not one of {', '.join(MIX_METHODS)}")
    if options.method == "decomposition" and objective not in DECOMPOSED_OBJECTIVES:
        raise ScenarioError(f"method: the decomposition solves the {' and '.join(DECOMPOSED_OBJECTIVES)} objectives, "
                            f"not {objective} (use --method cp-sat or auto)")
