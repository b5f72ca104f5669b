"""The last settled model of a scenario's content: `solve` leaves its model here once the verifier alone's
bounds are settled ([NOSPEC-6]), and `ranges` (and the batch's ranges after its solve) start from it instead
of building and settling the same model again. Every row a solve adds to its model (the settled bounds,
CUT-4's energy bounds) holds for every design of the space, so a later search over the same model finds
the same designs. Kept: the last `SETTLED_CACHE_SIZE` models, keyed like the shared evaluator."""

from __future__ import annotations

from specpim_cp.catalog import Catalog
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.bounded import BoundedCache
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.shared_evaluator import evaluator_key

#: How many settled models are kept (each holds its CP-SAT model and price tables: a few MB).
SETTLED_CACHE_SIZE = 2
_SETTLED: BoundedCache[SpecModel] = BoundedCache(SETTLED_CACHE_SIZE)


def keep_settled(scenario: Scenario, catalog: Catalog, sm: SpecModel) -> None:
    """Remember `sm`, a settled model of (scenario, catalog)."""
    _SETTLED.put(evaluator_key(scenario, catalog), sm)


def settled_model(scenario: Scenario, catalog: Catalog) -> SpecModel | None:
    """The settled model of (scenario, catalog) a solve left, None when none is kept."""
    return _SETTLED.get(evaluator_key(scenario, catalog))
