"""Exact minimum makespan of one decoder layer for a given placement (no solver inside).

Resources: the host runs one operator at a time; the PIM units are a cumulative resource of
`share_levels` slots (an operator on a share of s slots uses s of them); all-reduces use the link.
The layer graph has at most 9 nodes, so every precedence-feasible activity list is scheduled with the
serial schedule-generation scheme; the set of schedules it generates (the active schedules) contains
an optimal one for a regular objective such as the makespan, so the minimum over lists is exact.
"""

from __future__ import annotations

from functools import cache, lru_cache

import networkx as nx

from specpim_cp.catalog import ModelSpec
from specpim_cp.graph import layer_graph


@cache
def _graph_orders(parallel_block: bool) -> tuple[tuple[str, ...], ...]:
    from specpim_cp.graph import _layer_graph

    g = _layer_graph(parallel_block)
    return tuple(sorted(tuple(o) for o in nx.all_topological_sorts(g)))


@cache
def _preds(parallel_block: bool) -> dict[str, tuple[str, ...]]:
    from specpim_cp.graph import _layer_graph

    g = _layer_graph(parallel_block)
    return {n: tuple(sorted(g.predecessors(n))) for n in g.nodes}


def _earliest(start: int, dur: int, busy: list[tuple[int, int, int]], demand: int, capacity: int) -> int:
    """Earliest t >= start such that [t, t+dur) fits under `capacity` given busy (s, e, demand)."""
    if dur == 0:
        return start
    candidates = sorted({start} | {e for (_, e, _) in busy if e > start})
    for t in candidates:
        ok = True
        # the load can only rise where a busy interval starts, so check t and those starts
        points = sorted({t} | {s2 for (s2, _, _) in busy if t < s2 < t + dur})
        for p in points:
            load = sum(d for (s2, e2, d) in busy if s2 <= p < e2)
            if load + demand > capacity:
                ok = False
                break
        if ok:
            return t
    raise AssertionError("unreachable: the resource frees up after the last busy interval")


def layer_schedule(parallel_block: bool, nodes: tuple[tuple[str, str, int, int], ...],
                   pim_capacity: int) -> tuple[int, dict[str, int]]:
    """Minimum makespan and one optimal start time per node.

    `nodes`: (name, resource, duration_ns, demand) with resource in {"host", "pim", "link"}.
    """
    return _layer_schedule(parallel_block, nodes, pim_capacity)


@lru_cache(maxsize=200_000)
def _layer_schedule(parallel_block: bool, nodes: tuple[tuple[str, str, int, int], ...],
                    pim_capacity: int) -> tuple[int, dict[str, int]]:
    info = {name: (res, dur, dem) for (name, res, dur, dem) in nodes}
    preds = _preds(parallel_block)
    caps = {"host": 1, "pim": pim_capacity, "link": 1}
    best: tuple[int, dict[str, int]] | None = None
    for order in _graph_orders(parallel_block):
        busy: dict[str, list[tuple[int, int, int]]] = {"host": [], "pim": [], "link": []}
        start: dict[str, int] = {}
        end: dict[str, int] = {}
        for n in order:
            res, dur, dem = info[n]
            ready = max((end[p] for p in preds[n]), default=0)
            t = _earliest(ready, dur, busy[res], dem, caps[res])
            start[n], end[n] = t, t + dur
            if dur:
                busy[res].append((t, t + dur, dem))
        makespan = max(end.values())
        if best is None or makespan < best[0]:
            best = (makespan, start)
    assert best is not None
    return best


def makespan_lower_bound(model: ModelSpec, durations: dict[str, int]) -> int:
    """Critical-path length (a bound used in tests)."""
    g = layer_graph(model)
    dist: dict[str, int] = {}
    for n in nx.topological_sort(g):
        dist[n] = durations.get(n, 0) + max((dist[p] for p in g.predecessors(n)), default=0)
    return max(dist.values())
