"""A lower bound on a layer's makespan: its critical path, the schedule's check in tests/test_physics.py."""

from __future__ import annotations

import networkx as nx

from specpim_cp.catalog import ModelSpec
from specpim_cp.problem.operators import layer_graph


def makespan_lower_bound(model: ModelSpec, durations: dict[str, int]) -> int:
    """Critical-path length of one decoder layer of `model` with each operator taking `durations[op]`."""
    g = layer_graph(model)
    dist: dict[str, int] = {}
    for n in nx.topological_sort(g):
        dist[n] = durations.get(n, 0) + max((dist[p] for p in g.predecessors(n)), default=0)
    return max(dist.values())
