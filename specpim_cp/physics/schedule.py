"""Exact minimum makespan of one decoder layer for a given placement (no solver inside).

Resources: the host runs one operator at a time; the PIM units are a cumulative resource of
`share_levels` slots (an operator on a share of s slots uses s of them); all-reduces use the link. A host
operator whose data shares channels with the PIM units (time-shared memory, costs.host_contends_with_pim)
also takes every PIM slot: while it reads those channels no PIM operator can compute on them.
The layer graph has at most 9 nodes, so every precedence-feasible activity list is scheduled with the
serial schedule-generation scheme; the set of schedules it generates (the active schedules) contains
an optimal one for a regular objective such as the makespan, so the minimum over lists is exact.

`layer_schedule` returns what `layer_schedule_reference` (the scheme over every list in sorted order,
written plainly; the first best list wins) returns, start times included, faster on the two layer graphs:
- a chain (sequential blocks) has one list, and the scheme starts every node when its predecessor ends;
- two chains meeting in a last node (PaLM's parallel block): `_two_branch_schedule`, a depth-first
  search over the same lists in the same order that skips lists which cannot be strictly better than the
  best one and stops at the first list that reaches a lower bound.
"""

from __future__ import annotations

from functools import cache, lru_cache

import networkx as nx

from specpim_cp.problem.operators import block_graph, is_chain, layer_order

#: One node of a layer: (name, duration_ns, host demand, PIM demand, link demand).
Node = tuple[str, int, int, int, int]


@cache
def _graph_orders(parallel_block: bool) -> tuple[tuple[str, ...], ...]:
    g = block_graph(parallel_block)
    return tuple(sorted(tuple(o) for o in nx.all_topological_sorts(g)))


@cache
def _preds(parallel_block: bool) -> dict[str, tuple[str, ...]]:
    g = block_graph(parallel_block)
    return {n: tuple(sorted(g.predecessors(n))) for n in g.nodes}


RESOURCES = ("host", "pim", "link")


def layer_schedule(parallel_block: bool, nodes: tuple[Node, ...], pim_capacity: int) -> tuple[int, dict[str, int]]:
    """Minimum makespan and one optimal start time per node.

    `nodes`: (name, duration_ns, host demand, PIM demand, link demand); the host and the link hold one
    operator at a time, the PIM units `pim_capacity` share slots.
    """
    if is_chain(parallel_block):
        return _chain_schedule(parallel_block, nodes)
    return _layer_schedule(parallel_block, nodes, pim_capacity)


def _chain_schedule(parallel_block: bool, nodes: tuple[Node, ...]) -> tuple[int, dict[str, int]]:
    """A chain: each node starts when its predecessor ends (all earlier nodes have ended, so every
    resource is free); the makespan is the sum of the durations."""
    dur = {n[0]: n[1] for n in nodes}
    t = 0
    starts = {}
    for name in layer_order(parallel_block):
        starts[name] = t
        t += dur[name]
    return t, starts


class _Instance:
    """One layer graph with its nodes as indices (`layer_order`): the lists in sorted order, each node's
    predecessors and successors, and its two branches if it has them."""

    def __init__(self, parallel_block: bool):
        names = layer_order(parallel_block)
        self.names = names
        index = {n: i for i, n in enumerate(names)}
        preds = _preds(parallel_block)
        self.preds = tuple(tuple(index[p] for p in preds[n]) for n in names)
        self.orders = tuple(tuple(index[n] for n in o) for o in _graph_orders(parallel_block))
        succ: list[list[int]] = [[] for _ in names]
        for i, ps in enumerate(self.preds):
            for p in ps:
                succ[p].append(i)
        self.succ = tuple(tuple(s) for s in succ)
        self.branches = self._branches()
        if self.branches is not None:
            (a, f), self.join = self.branches
            # at a branch point the lists continue with the smaller name first (sorted lists)
            self.a_first = tuple(tuple(names[a[i]] < names[f[j]] for j in range(len(f))) for i in range(len(a)))
            # the nonempty sets of chain a's nodes: (bit mask, first and last position, positions)
            self.a_groups = tuple((mask, members[0], members[-1], members) for mask in range(1, 1 << len(a))
                                  for members in [tuple(i for i in range(len(a)) if mask >> i & 1)])

    def _branches(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], int] | None:
        """((chain a, chain f), join) when the graph is two chains that meet in a last node, else None."""
        sinks = [i for i, s in enumerate(self.succ) if not s]
        if len(sinks) != 1 or len(self.preds[sinks[0]]) != 2:
            return None
        join = sinks[0]
        chains = []
        for last in self.preds[join]:
            chain = [last]
            while self.preds[chain[-1]]:
                if len(self.preds[chain[-1]]) != 1:
                    return None
                chain.append(self.preds[chain[-1]][0])
            chains.append(tuple(reversed(chain)))
        a, f = chains
        if len(a) + len(f) + 1 != len(self.names) or any(len(self.succ[i]) != 1 for i in a + f):
            return None
        return (a, f), join


@cache
def _instance(parallel_block: bool) -> _Instance:
    return _Instance(parallel_block)


@lru_cache(maxsize=200_000)
def _layer_schedule(parallel_block: bool, nodes: tuple[Node, ...], pim_capacity: int) -> tuple[int, dict[str, int]]:
    inst = _instance(parallel_block)
    if inst.branches is None:
        return layer_schedule_reference(parallel_block, nodes, pim_capacity)
    by_name = {n[0]: n for n in nodes}
    ordered = [by_name[name] for name in inst.names]
    return _two_branch_schedule(inst, [n[1] for n in ordered], [n[2:] for n in ordered], (1, pim_capacity, 1))


def _two_branch_schedule(inst: _Instance, dur: list[int], demands: list[tuple[int, ...]],
                         caps: tuple[int, ...]) -> tuple[int, dict[str, int]]:
    """The scheme on two chains that meet in a last node (a parallel block), lists in sorted order as a
    depth-first search that shares their common prefixes and skips every list that cannot beat the best,
    stopping at the first list that reaches a lower bound.

    Nodes of one chain never overlap (each waits for its predecessor), so at most one node per chain
    runs at a time and a node fits iff it does not overlap a *conflicting* node of the other chain (one
    whose demands and its own exceed a capacity together). The other chain's nodes are placed one after
    another, so one pass over them in order finds the earliest start; the last node finds both chains
    ended and every resource free. When every node of a conflicts with every node of f (all of them
    taking time), no two nodes overlap and each list's makespan is the sum: the first list is the answer.

    Lower bound, the largest of: the longer chain plus the last node; the PIM slots' load over their
    number between the shortest head (time before a node on its chain) and the shortest tail (time after
    it, the last node included); for a set of a's nodes and every node of f that conflicts with all of
    them (no two of these can overlap), their sum between the shortest head and tail (host nodes
    conflict with each other, so this covers the host's load)."""
    (a, f), join = inst.branches
    na, nf = len(a), len(f)
    da, df = [dur[x] for x in a], [dur[y] for y in f]
    dem_a, dem_f = [demands[x] for x in a], [demands[y] for y in f]
    d_join = dur[join]
    cap_h, cap_p, cap_l = caps
    conflict = [[bool(d1 and d2 and (h1 + h2 > cap_h or p1 + p2 > cap_p or l1 + l2 > cap_l))
                 for d2, (h2, p2, l2) in zip(df, dem_f)] for d1, (h1, p1, l1) in zip(da, dem_a)]
    if all(map(all, conflict)):  # no two nodes ever overlap: every list runs them one after another
        t, starts = 0, {}
        for n in inst.orders[0]:
            starts[inst.names[n]] = t
            t += dur[n]
        return t, starts
    # head: time on its chain before a node; rest: time of its chain from a node on
    head_a, head_f = [0], [0]
    for d in da:
        head_a.append(head_a[-1] + d)
    for d in df:
        head_f.append(head_f[-1] + d)
    sum_a, sum_f = head_a[na], head_f[nf]
    rest_a = [sum_a - h for h in head_a]
    rest_f = [sum_f - h for h in head_f]
    bound = max(sum_a, sum_f) + d_join
    users = [(head_a[i], rest_a[i + 1], da[i] * dem_a[i][1]) for i in range(na) if da[i] and dem_a[i][1]]
    users += [(head_f[j], rest_f[j + 1], df[j] * dem_f[j][1]) for j in range(nf) if df[j] and dem_f[j][1]]
    if users and not demands[join][1]:
        area = sum(u[2] for u in users)
        bound = max(bound, min(u[0] for u in users) + -(-area // cap_p) + min(u[1] for u in users) + d_join)
    conflicts_of_f = [sum(1 << i for i in range(na) if conflict[i][j]) for j in range(nf)]
    for mask, first, last, members in inst.a_groups:
        low_head, low_tail = head_a[first], rest_a[last + 1]
        total = sum(da[i] for i in members)
        for j in range(nf):
            if conflicts_of_f[j] & mask == mask:
                total += df[j]
                low_head = min(low_head, head_f[j])
                low_tail = min(low_tail, rest_f[j + 1])
        bound = max(bound, low_head + total + low_tail + d_join)
    start_a, end_a = [0] * na, [0] * na
    start_f, end_f = [0] * nf, [0] * nf
    best = [sum_a + sum_f + d_join + 1, ()]  # worse than any list (they never exceed the sum)
    path: list[tuple[int, int]] = []  # (node, start) in list order
    a_first = inst.a_first

    def search(i: int, j: int, ready_a: int, ready_f: int) -> bool:
        """Lists continuing after a's first i and f's first j nodes; True to stop (the bound is met)."""
        if max(ready_a + rest_a[i], ready_f + rest_f[j]) + d_join >= best[0]:
            return False
        if i == na and j == nf:
            t = max(ready_a, ready_f)
            best[0], best[1] = t + d_join, (*path, (join, t))
            return best[0] <= bound
        for take_a in ((True, False) if a_first[i][j] else (False, True)) if i < na and j < nf else (i < na,):
            if take_a:
                d, t = da[i], ready_a
                if d:
                    row = conflict[i]
                    for k in range(j):
                        if row[k] and start_f[k] < t + d and end_f[k] > t:
                            t = end_f[k]
                start_a[i], end_a[i] = t, t + d
                path.append((a[i], t))
                stop = search(i + 1, j, t + d, ready_f)
            else:
                d, t = df[j], ready_f
                if d:
                    for k in range(i):
                        if conflict[k][j] and start_a[k] < t + d and end_a[k] > t:
                            t = end_a[k]
                start_f[j], end_f[j] = t, t + d
                path.append((f[j], t))
                stop = search(i, j + 1, ready_a, t + d)
            path.pop()
            if stop:
                return True
        return False

    search(0, 0, 0, 0)
    return best[0], {inst.names[n]: t for n, t in best[1]}


def layer_schedule_reference(parallel_block: bool, nodes: tuple[Node, ...],
                             pim_capacity: int) -> tuple[int, dict[str, int]]:
    """The serial schedule-generation scheme over every list, written plainly (what `layer_schedule`
    must return; kept for tests)."""
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
            t = _reference_earliest(ready, dur, busy, demands, caps)
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


def _reference_fits(t: int, dur: int, busy: list[tuple[int, int, int]], demand: int, capacity: int) -> bool:
    """Whether [t, t+dur) fits under `capacity` given busy (s, e, demand)."""
    if demand == 0:
        return True
    # the load can only rise where a busy interval starts, so check t and those starts
    for p in sorted({t} | {s2 for (s2, _, _) in busy if t < s2 < t + dur}):
        if sum(d for (s2, e2, d) in busy if s2 <= p < e2) + demand > capacity:
            return False
    return True


def _reference_earliest(start: int, dur: int, busy: dict[str, list[tuple[int, int, int]]],
                        demands: tuple[int, ...], caps: tuple[int, ...]) -> int:
    """Earliest t >= start such that [t, t+dur) fits every resource's capacity given its busy list."""
    if dur == 0:
        return start
    ends = {e for res in RESOURCES for (_, e, _) in busy[res] if e > start}
    for t in sorted({start} | ends):
        if all(_reference_fits(t, dur, busy[res], d, c) for res, d, c in zip(RESOURCES, demands, caps)):
            return t
    raise AssertionError("unreachable: every resource frees up after the last busy interval")
