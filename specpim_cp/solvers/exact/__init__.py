"""The exact optimizer: the price table it reads (`prices.py`), the CP-SAT model (`model.py`, one `add_*`
method per constraint family of formulations/), the session it solves in (`session.py`) and its drivers:
`solve.py` (the pipeline), `ratio.py` (Dinkelbach), `fronts.py` (Pareto fronts, EDP), `canonical.py` (the
canonical optimum), `tree_columns.py` (tree spaces beyond the menu), `finish.py` (the re-check of every claim
against the evaluator) and `ranges.py` (decision ranges)."""

from specpim_cp.solvers.exact.fronts import ParetoFront, pareto, pareto_front
from specpim_cp.solvers.exact.guards import ModelMismatch
from specpim_cp.solvers.exact.session import SolverOptions
from specpim_cp.solvers.exact.solve import solve

__all__ = ["ModelMismatch", "ParetoFront", "SolverOptions", "pareto", "pareto_front", "solve"]
