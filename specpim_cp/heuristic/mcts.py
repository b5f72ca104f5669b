"""Monte Carlo tree search (UCT) over one model's architecture config.

The tree has three levels of decisions: memory type, PIM units k, device count; its leaves are the
model's architecture configs (`designs.arch_options`, restricted by the scenario's `[space]`). The GA
calls `ArchTree.search` to fill in the architecture of one model for one dataflow candidate: each
descent picks a leaf by UCT, the caller completes it with the candidate's placements (repaired for
that architecture) and prices it with the evaluator, and the reward is backed up the path.

The tree is persistent over the whole run, so its statistics carry what earlier dataflow candidates
taught about each memory type and k (a prior for the next candidate). Rewards are deterministic for a
given candidate, so within one call a leaf already priced is *solved* (MCTS-Solver): descents skip
solved subtrees and the call ends when the tree is exhausted. A leaf budget at least the number of
leaves (the paper's 10,000 against at most a few dozen configs) therefore enumerates the model's
architectures, and a smaller one lets UCT decide which to try.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from specpim_cp.costs import ArchConfig

#: UCT exploration constant for rewards in [0, 1].
UCT_C = math.sqrt(2.0)


class ArchTree:
    """UCT tree over one model's architecture ids; nodes are integer indices into flat arrays."""

    def __init__(self, arch_ids: Iterable[int], archs: list[ArchConfig], rng: np.random.Generator,
                 c: float = UCT_C):
        self.rng = rng
        self.c = c
        self.children: list[list[int]] = [[]]
        self.parent: list[int] = [-1]
        self.leaf_arch: list[int] = [-1]
        self.visits: list[int] = [0]
        self.value: list[float] = [0.0]
        self.leaf_of: dict[int, int] = {}  # arch id -> leaf node
        index: dict[tuple, int] = {(): 0}
        for aid in arch_ids:
            a = archs[aid]
            path: tuple = ()
            node = 0
            for label in (a.memory_type, a.pim_units, a.devices):
                path = path + (label,)
                if path not in index:
                    index[path] = self._new(node)
                node = index[path]
            self.leaf_arch[node] = aid
            self.leaf_of[aid] = node
        self.n_leaves = len(self.leaf_of)
        self._leaves_under = [0] * len(self.children)
        for leaf in self.leaf_of.values():
            for n in self._path(leaf):
                self._leaves_under[n] += 1

    def _new(self, parent: int) -> int:
        node = len(self.children)
        self.children.append([])
        self.parent.append(parent)
        self.leaf_arch.append(-1)
        self.visits.append(0)
        self.value.append(0.0)
        self.children[parent].append(node)
        return node

    def _path(self, node: int) -> list[int]:
        out = []
        while node != -1:
            out.append(node)
            node = self.parent[node]
        return out

    def backup(self, arch_id: int, reward: float) -> None:
        for n in self._path(self.leaf_of[arch_id]):
            self.visits[n] += 1
            self.value[n] += reward

    def best_arch(self, allowed: Callable[[int], bool] = lambda a: True) -> int | None:
        """The allowed leaf with the highest mean reward (unvisited leaves last)."""
        best, best_mean = None, -1.0
        for aid, leaf in self.leaf_of.items():
            if not allowed(aid):
                continue
            mean = self.value[leaf] / self.visits[leaf] if self.visits[leaf] else -0.5
            if mean > best_mean:
                best, best_mean = aid, mean
        return best

    def search(self, leaf_budget: int, price_leaf: Callable[[int], float],
               allowed: Callable[[int], bool] = lambda a: True, solved: Iterable[int] = ()) -> int:
        """Up to `leaf_budget` UCT descents, each pricing one new leaf with `price_leaf(arch_id)`
        (a reward in [0, 1], 0 for infeasible). Leaves in `solved` (already priced by the caller) and
        leaves not `allowed` are skipped. Returns the number of leaves priced."""
        done = [0] * len(self.children)  # solved leaves under each node, this call

        def mark(leaf: int) -> None:
            for n in self._path(leaf):
                done[n] += 1

        for aid, leaf in self.leaf_of.items():
            if not allowed(aid):
                mark(leaf)
        for aid in solved:
            if aid in self.leaf_of and done[self.leaf_of[aid]] == 0:
                mark(self.leaf_of[aid])
        priced = 0
        while priced < leaf_budget and done[0] < self._leaves_under[0]:
            node = 0
            while self.children[node]:
                node = self._select(node, done)
            reward = price_leaf(self.leaf_arch[node])
            self.backup(self.leaf_arch[node], reward)
            mark(node)
            priced += 1
        return priced

    def _select(self, node: int, done: list[int]) -> int:
        """UCT over the children with unsolved leaves; unvisited children first, ties at random."""
        open_children = [ch for ch in self.children[node] if done[ch] < self._leaves_under[ch]]
        fresh = [ch for ch in open_children if self.visits[ch] == 0]
        if fresh:
            return fresh[int(self.rng.integers(len(fresh)))]
        log_n = math.log(max(1, self.visits[node]))
        scores = [self.value[ch] / self.visits[ch] + self.c * math.sqrt(log_n / self.visits[ch])
                  for ch in open_children]
        top = max(scores)
        ties = [ch for ch, s in zip(open_children, scores) if s >= top - 1e-12]
        return ties[int(self.rng.integers(len(ties)))] if len(ties) > 1 else ties[0]
