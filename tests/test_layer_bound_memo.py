"""CUT-1's parallel-layer bound kept beside its price table (`choice_bounds.parallel_layer_bound`, memoised
per table) is the bound computed afresh: each operator's Pareto front of (duration, host time, PIM area),
every combination of the fronts, the least of the four loads; another table's options are not memoised."""

from __future__ import annotations

import numpy as np
import pytest

from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.exact.choice_bounds import parallel_layer_bound
from specpim_cp.solvers.exact.energy_bounds import dominance_front
from specpim_cp.solvers.exact.prices import PriceTable


def _one_count(prices, j, a, t) -> int:
    """The bound at one token count, every placement combined from the per-operator fronts."""
    pm, mo, levels = prices.models[j], prices.space.models[j], prices.share_levels

    def options(op):
        out = []
        for p in mo.allowed(a, op):
            d = pm.op_cost[(op, a, p)][t].time_ns
            out.append((d, 0, d * p.share) if p.engine == "pim" else
                       (d, d, d * levels if pm.contends[(a, p.layout)] else 0))
        return out

    def branch(ops):
        front = np.zeros((1, 3), dtype=np.int64)
        for op in ops:
            opts = np.array(dominance_front(options(op)) or [(0, 0, 0)], dtype=np.int64)
            front = (front[:, None, :] + opts[None, :, :]).reshape(-1, 3)
        return front

    attn, ffn = branch(("qkv", "score", "context", "o_proj")), branch(("ffn_up", "ffn_down"))
    loads = np.maximum(np.maximum(attn[:, None, 0], ffn[None, :, 0]),
                       np.maximum(attn[:, None, 1] + ffn[None, :, 1],
                                  -(-(attn[:, None, 2] + ffn[None, :, 2]) // levels)))
    return int(loads.min())


@pytest.mark.parametrize("name", ["paper/palm-62b-b1", "paper-full/palm-62b-full-b8",
                                  "paper-assumptions/palm-62b-b4"])
def test_the_kept_bound_is_the_fresh_bound(name):
    sc = load_scenario(resolve_scenario_path(name))
    catalog = scenario_catalog(sc)
    prices = PriceTable.build(Evaluator(sc, catalog), DesignSpace(sc, catalog))
    other = PriceTable.build(Evaluator(sc, catalog), DesignSpace(sc, catalog))  # equal options, not the table's
    compared = 0
    for j, d in enumerate(prices.space.models):
        if not d.spec.parallel_block:
            continue
        for a in d.archs[::5]:
            for t in prices.models[j].tokens:
                fresh = _one_count(prices, j, a, t)
                assert parallel_layer_bound(prices, d, j, a, t) == fresh
                assert parallel_layer_bound(prices, d, j, a, t) == fresh  # asked again: the kept one
                assert parallel_layer_bound(prices, other.space.models[j], j, a, t) == fresh
                compared += 1
    assert compared > 0
