"""Workload-mix solvers: one hardware for every cell of a mix, the dataflow per cell (formulations/mix.md).

`solve_mix` (`solve.py`) is the entry point. The decomposition: `pass_tables` (MIX-14), `branch_bound`
(MIX-15..17), `decomposition` (its driver). The CP-SAT mix model: `cpsat_model` (MIX-1..12, 18, 19),
`arch_bounds` (the constants of MIX-10/11), `cpsat` (its driver), `session` (CP-SAT runs, stage log,
claims verified against the evaluator). Both: `cell_solves` (single-cell solves), `canonical` and
`canonical_cells` (the canonical optimum, MIX-13), `comparisons` (references (a)-(d)), `records` (the
options and results as values). The mix itself is `problem/mix.py`, its price `physics/mix.py`.
"""

from specpim_cp.solvers.mix.comparisons import GPU_SI, MEDIAN, PAPI_HALF, PAPI_MIX, PER_CELL
from specpim_cp.solvers.mix.records import MIX_METHODS, MixOptions, MixReport, MixResult
from specpim_cp.solvers.mix.solve import solve_mix

__all__ = ["GPU_SI", "MEDIAN", "MIX_METHODS", "PAPI_HALF", "PAPI_MIX", "PER_CELL", "MixOptions", "MixReport",
           "MixResult", "solve_mix"]
