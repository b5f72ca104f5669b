"""Exact minimum makespan of one decoder layer for a given placement (no solver inside).

Resources: the host runs one operator at a time; the PIM units are a cumulative resource of
`share_levels` slots (an operator on a share of s slots uses s of them); all-reduces use the link. A host
operator whose data shares channels with the PIM units (time-shared memory, costs.host_contends_with_pim)
also takes every PIM slot: while it reads those channels no PIM operator can compute on them.
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


RESOURCES = ("host", "pim", "link")


def _fits(t: int, dur: int, busy: list[tuple[int, int, int]], demand: int, capacity: int) -> bool:
    """Whether [t, t+dur) fits under `capacity` given busy (s, e, demand)."""
    if demand == 0:
        return True
    # the load can only rise where a busy interval starts, so check t and those starts
    for p in sorted({t} | {s2 for (s2, _, _) in busy if t < s2 < t + dur}):
        if sum(d for (s2, e2, d) in busy if s2 <= p < e2) + demand > capacity:
            return False
    return True


def _earliest(start: int, dur: int, busy: dict[str, list[tuple[int, int, int]]], demands: tuple[int, ...],
              caps: tuple[int, ...]) -> int:
    """Earliest t >= start such that [t, t+dur) fits every resource's capacity given its busy list."""
    if dur == 0:
        return start
    ends = {e for res in RESOURCES for (_, e, _) in busy[res] if e > start}
    for t in sorted({start} | ends):
        if all(_fits(t, dur, busy[res], d, c) for res, d, c in zip(RESOURCES, demands, caps)):
            return t
    raise AssertionError("unreachable: every resource frees up after the last busy interval")


def layer_schedule(parallel_block: bool, nodes: tuple[tuple[str, int, int, int, int], ...],
                   pim_capacity: int) -> tuple[int, dict[str, int]]:
    """Minimum makespan and one optimal start time per node.

    `nodes`: (name, duration_ns, host demand, PIM demand, link demand); the host and the link hold one
    operator at a time, the PIM units `pim_capacity` share slots.
    """
    return _layer_schedule(parallel_block, nodes, pim_capacity)


@lru_cache(maxsize=200_000)
def _layer_schedule(parallel_block: bool, nodes: tuple[tuple[str, int, int, int, int], ...],
                    pim_capacity: int) -> tuple[int, dict[str, int]]:
    info = {name: (dur, (h, p, lk)) for (name, dur, h, p, lk) in nodes}
    preds = _preds(parallel_block)
    caps = (1, pim_capacity, 1)
    best: tuple[int, dict[str, int]] | None = None
    for order in _graph_orders(parallel_block):
        busy: dict[str, list[tuple[int, int, int]]] = {res: [] for res in RESOURCES}
        start: dict[str, int] = {}
        end: dict[str, int] = {}
        for n in order:
            dur, demands = info[n]
            ready = max((end[p] for p in preds[n]), default=0)
            t = _earliest(ready, dur, busy, demands, caps)
            start[n], end[n] = t, t + dur
            if dur:
                for res, d in zip(RESOURCES, demands):
                    if d:
                        busy[res].append((t, t + dur, d))
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
