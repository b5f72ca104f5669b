"""The exact optimizer: the price table it reads (`prices.py`, built once from the evaluator's cost
model), the CP-SAT model (`model.py`, one `add_*` method per constraint family of formulations/) and its
drivers (`solve.py`: Dinkelbach for the ratio objectives, epsilon-constraint Pareto fronts, the
re-check of every claim against the evaluator)."""

from specpim_cp.solvers.exact.solve import (
    ModelMismatch,
    ParetoFront,
    SolverOptions,
    pareto,
    pareto_front,
    solve,
)

__all__ = ["ModelMismatch", "ParetoFront", "SolverOptions", "pareto", "pareto_front", "solve"]
