"""Monte Carlo tree search (UCT) over one model's architecture config.

The tree has three levels of decisions: memory type, PIM units k, device count; its leaves are the
model's architecture configs (`space.DesignSpace`, restricted by the scenario's `[space]`). The GA
calls the search to fill in the architecture of one model for one dataflow candidate: each descent
picks a leaf by UCT, the caller completes it with the candidate's placements (repaired for that
architecture) and prices it with the evaluator, and the reward is backed up the path.

The statistics persist over the whole run, so what earlier dataflow candidates taught about each
memory type and k guides the next candidate. Within a generation every candidate searches a *fork* of
the statistics as they stood when the generation began, and the forks' backups are merged in
candidate order when it ends (batch-parallel MCTS): the result does not depend on how candidates are
spread over worker processes.

Rewards are deterministic for a given candidate, so within one search a leaf already priced is
*solved* (MCTS-Solver): descents skip solved subtrees and the search ends when the tree is exhausted.
A leaf budget at least the number of leaves (the paper's 10,000 against at most a few dozen configs)
therefore enumerates the model's architectures; a smaller one lets UCT decide which to try.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from specpim_cp.problem.design import ArchConfig

#: UCT exploration constant for rewards in [0, 1].
UCT_C = math.sqrt(2.0)


class ArchTree:
    """UCT tree over one model's architecture ids; nodes are integer indices into flat lists."""

    def __init__(self, arch_ids: Iterable[int], archs: list[ArchConfig], c: float = UCT_C):
        self.c = c
        self.children: list[list[int]] = [[]]
        self.leaf_arch: list[int] = [-1]
        self.leaf_of: dict[int, int] = {}  # arch id -> leaf node
        self.arch_devices: dict[int, int] = {}  # arch id -> its devices
        parent = [-1]
        index: dict[tuple, int] = {(): 0}
        for aid in arch_ids:
            a = archs[aid]
            path: tuple = ()
            node = 0
            for label in (a.memory_type, a.pim_units, a.devices):
                path = path + (label,)
                if path not in index:
                    index[path] = len(self.children)
                    self.children.append([])
                    self.leaf_arch.append(-1)
                    parent.append(node)
                    self.children[node].append(index[path])
                node = index[path]
            self.leaf_arch[node] = aid
            self.leaf_of[aid] = node
            self.arch_devices[aid] = a.devices
        self.parent = parent
        self.paths: dict[int, tuple[int, ...]] = {}
        for leaf in self.leaf_of.values():
            path_nodes, n = [], leaf
            while n != -1:
                path_nodes.append(n)
                n = parent[n]
            self.paths[leaf] = tuple(path_nodes)
        self.leaves_under = [0] * len(self.children)
        for path_nodes in self.paths.values():
            for n in path_nodes:
                self.leaves_under[n] += 1
        self.visits = [0] * len(self.children)
        self.value = [0.0] * len(self.children)
        self._blocked: dict[int, list[int]] = {}  # max devices -> solved leaves under each node (`search`)

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_of)

    def stats(self) -> tuple[list[int], list[float]]:
        return list(self.visits), list(self.value)

    def set_stats(self, stats: tuple[list[int], list[float]]) -> None:
        self.visits, self.value = list(stats[0]), list(stats[1])

    def backup(self, arch_id: int, reward: float) -> None:
        visits, value = self.visits, self.value
        for n in self.paths[self.leaf_of[arch_id]]:
            visits[n] += 1
            value[n] += reward

    def _blocked_done(self, max_devices: int) -> list[int]:
        """Per node, the marks `search` makes for its architectures with more than `max_devices` devices
        (once per architecture id, as `allowed` marks them: ids that share a leaf mark it once each)."""
        done = self._blocked.get(max_devices)
        if done is None:
            done = self._blocked[max_devices] = [0] * len(self.children)
            for aid, leaf in self.leaf_of.items():
                if self.arch_devices[aid] > max_devices:
                    for n in self.paths[leaf]:
                        done[n] += 1
        return done

    def search(self, rng: np.random.Generator, leaf_budget: int, price_leaf: Callable[[int], float],
               allowed: Callable[[int], bool] | None = None, solved: Iterable[int] = (),
               max_devices: int | None = None) -> list[tuple[int, float]]:
        """Up to `leaf_budget` UCT descents, each pricing one new leaf with `price_leaf(arch_id)`
        (a reward in [0, 1], 0 for infeasible) and backing it up. Leaves in `solved` (already priced
        by the caller), leaves not `allowed` and leaves with more than `max_devices` devices are skipped.
        Returns the (arch id, reward) backups."""
        # solved leaves under each node, this search
        done = [0] * len(self.children) if max_devices is None else list(self._blocked_done(max_devices))
        paths = self.paths

        def mark(leaf: int) -> None:
            for n in paths[leaf]:
                done[n] += 1

        if allowed is not None:
            for aid, leaf in self.leaf_of.items():
                if not allowed(aid):
                    mark(leaf)
        for aid in solved:
            leaf = self.leaf_of.get(aid)
            if leaf is not None and done[leaf] == 0:
                mark(leaf)
        backups = []
        under = self.leaves_under
        total = under[0]
        children, parent, select, leaf_arch = self.children, self.parent, self._select, self.leaf_arch
        open_children: dict[int, list[int]] = {}  # per node reached: its children with unsolved leaves
        while len(backups) < leaf_budget and done[0] < total:
            node = 0
            while children[node]:  # an only child is open whenever its parent is
                kids = children[node]
                if len(kids) == 1:
                    node = kids[0]
                    continue
                opened = open_children.get(node)
                if opened is None:
                    opened = open_children[node] = [ch for ch in kids if done[ch] < under[ch]]
                node = select(rng, node, opened)
            aid = leaf_arch[node]
            reward = price_leaf(aid)
            visits, value = self.visits, self.value  # backup(aid, reward) and mark(node), one walk
            for n in paths[node]:
                visits[n] += 1
                value[n] += reward
                done[n] += 1
                if done[n] == under[n] and parent[n] in open_children:  # n is solved: no longer open
                    open_children[parent[n]].remove(n)
            backups.append((aid, reward))
        return backups

    def _select(self, rng: np.random.Generator, node: int, open_children: list[int]) -> int:
        """UCT over `open_children` (the node's children with unsolved leaves, in order); unvisited
        children first, ties at random."""
        visits = self.visits
        if len(open_children) == 1:
            return open_children[0]
        fresh = [ch for ch in open_children if not visits[ch]]
        if fresh:
            return fresh[int(rng.integers(len(fresh)))] if len(fresh) > 1 else fresh[0]
        value, sqrt = self.value, math.sqrt
        c_log_n = self.c * self.c * math.log(max(1, visits[node]))
        scores = [value[ch] / visits[ch] + sqrt(c_log_n / visits[ch]) for ch in open_children]
        near_top = max(scores) - 1e-12
        ties = [ch for ch, s in zip(open_children, scores) if s >= near_top]
        return ties[int(rng.integers(len(ties)))] if len(ties) > 1 else ties[0]
