"""One evaluator per scenario content in a process: the exact solve, its first incumbent's baselines and the
fixed recipes read the same memoised cost model instead of each pricing the same operators again.

An `Evaluator`'s caches never change a price (physics/evaluate.py), so sharing one between callers of the
same scenario content changes no answer. The key is the scenario's content (`Scenario.content_hash`, which
holds its catalog files' content, and whether it sets the fields whose being set changes how it is read:
`SET_FIELDS_READ`) and the catalog's every entry (its repr); the
last `EVALUATOR_CACHE_SIZE` evaluators are kept (least recently used dropped first). Their cost models also
share operator prices across scenario contents that price a model alike (`price_memo`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

from specpim_cp.catalog import Catalog
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.bounded import BoundedCache

#: How many evaluators `shared_evaluator` keeps.
EVALUATOR_CACHE_SIZE = 8
_EVALUATORS: BoundedCache[Evaluator] = BoundedCache(EVALUATOR_CACHE_SIZE)
#: How many models' operator-price memos `price_memo` keeps.
PRICE_MEMO_SIZE = 16
_PRICE_MEMOS: BoundedCache[dict] = BoundedCache(PRICE_MEMO_SIZE)


#: The scenario fields whose being set, not only their value, changes how the scenario is read: a host's native
#: memory replaces `memory_types` only when the file leaves it out (`scenario.with_native_memory`). Any other
#: field set or left at its default is the same input (a copy made with `model_copy(update=...)`, such as the
#: ladder's steps' unrestricted space or the note's speculating side, sets `space` to the same content).
SET_FIELDS_READ = ("memory_types",)


def evaluator_key(scenario: Scenario, catalog: Catalog) -> str:
    """What an evaluator of (scenario, catalog) depends on, as one digest."""
    read = [f for f in SET_FIELDS_READ if f in scenario.model_fields_set]
    blob = f"{scenario.content_hash()}|{read}|{catalog!r}"
    return hashlib.sha256(blob.encode()).hexdigest()


def shared_evaluator(scenario: Scenario, catalog: Catalog) -> Evaluator:
    """`Evaluator(scenario, catalog)`, the same instance for the same content while it stays in the cache."""
    def make() -> Evaluator:
        ev = Evaluator(scenario, catalog)
        ev.costs.share_prices(price_memo)
        return ev

    return _EVALUATORS.get_or_make(evaluator_key(scenario, catalog), make)


def price_memo(key: Hashable) -> dict:
    """The one memo of a model's operator prices for `key` (`CostModel.share_prices`: the pricing context, the
    model's weight precision, its spec), shared by the evaluators of every scenario content with that key (a
    scenario under another `[space]`, without its drafters, at another acceptance, ...); the last
    `PRICE_MEMO_SIZE` are kept (least recently used dropped first)."""
    return _PRICE_MEMOS.get_or_make(key, dict)


__all__ = ["EVALUATOR_CACHE_SIZE", "PRICE_MEMO_SIZE", "SET_FIELDS_READ", "evaluator_key", "price_memo", "shared_evaluator"]
