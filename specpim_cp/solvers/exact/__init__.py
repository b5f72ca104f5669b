"""The exact optimizer: CP-SAT model (`model.py`) and its drivers (`solve.py`)."""

from specpim_cp.solvers.exact.solve import ModelMismatch, SolverOptions, pareto_front, solve

__all__ = ["ModelMismatch", "SolverOptions", "pareto_front", "solve"]
