"""Classes of token-tree width profiles and their relaxed columns ([TREE-6], formulations/speculation_rounds.md).

When the exact menu ([TREE-4]) is too large, the exact solver offers the model real profiles plus one
*relaxed column* per class of profiles, and refines the classes the optimum picks (solvers/exact/tree_column_set.py).
A class is (depth D, nodes n, fixed leading widths w_1..w_k) with k <= D - 2: every valid profile of depth D
with n nodes that starts with those widths (the last width is then free; k = D - 1 would fix it). Its
relaxed column is at least as good as every member on every design:

- drafting passes (`relaxed_passes`): a sorted vector element-wise no wider than every member's sorted
  passes (w_1..w_{D-1}; the root pass of 1 token is shared);
- verifier tokens: n + 1, the members' own;
- expected tokens (`mass_bound`): an upper bound on E = 1 + sum_d W(d) of every member's top-ranked tree;
  the depth (hence rho = p_1^D, q and q_{c,i}) is the members'.

Pure functions (standard library only), beside `trees.py`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from specpim_cp.problem.trees import level_probabilities

__all__ = [
    "TreeClass",
    "class_members",
    "initial_classes",
    "mass_bound",
    "relaxed_passes",
    "representative",
    "split_class",
]

#: Slack added to `mass_bound` above the float sum of path probabilities: covers the rounding of the
#: products and sums by which the statistics compute W(d) (each far below 1e-12 for 128 nodes).
MASS_SLACK = 1e-9


@dataclass(frozen=True, order=True)
class TreeClass:
    """Profiles of depth `depth` with `nodes` nodes whose first widths are `prefix` (len(prefix) <= depth - 2)."""

    depth: int
    nodes: int
    prefix: tuple[int, ...] = ()

    @property
    def left(self) -> int:
        """Nodes of the members below the prefix (depths len(prefix) + 1 .. depth)."""
        return self.nodes - sum(self.prefix)

    def label(self) -> str:
        head = "-".join(map(str, self.prefix))
        return f"depth {self.depth}, {self.nodes} nodes{', widths ' + head + '-...' if head else ''}"


def _max_below(prev: int, levels: int, max_children: int, cap: int | None = None) -> int:
    """Most nodes `levels` depths can hold below a depth of `prev` nodes (every depth but the last at most
    `cap` wide when given)."""
    total, width = 0, prev
    for d in range(levels):
        width = width * max_children
        if cap is not None and d < levels - 1:
            width = min(width, cap)
        total += width
    return total


def has_members(cls: TreeClass, max_children: int) -> bool:
    """Whether some valid profile, not a chain, belongs to the class. The sums a valid completion can reach
    form an interval (lowering the deepest width above 1 by one keeps a profile valid), from one node per
    depth to every depth at its widest."""
    k = len(cls.prefix)
    prev = cls.prefix[-1] if cls.prefix else 1
    levels = cls.depth - k
    if not cls.depth - k <= cls.left <= _max_below(prev, levels, max_children):
        return False
    return cls.nodes > cls.depth  # n = D is the rank-1 chain only


def relaxed_passes(cls: TreeClass, max_children: int) -> tuple[int, ...]:
    """A sorted drafting-pass vector (w_1..w_{D-1}) element-wise no wider than every member's sorted one.

    The prefix's widths are every member's; of the u = D - 1 - k free passes, each is at least 1 and the
    widest at least the least M for which depths k+1..D-1 at most M wide (and the last depth at most R
    times the one above) can hold the class's remaining nodes. The multiset (1, .., 1, M) is element-wise
    below every member's free passes once sorted, and merging the prefix's passes into both keeps that order.
    """
    k = len(cls.prefix)
    free = cls.depth - 1 - k
    prev = cls.prefix[-1] if cls.prefix else 1
    widest = 1
    while _max_below(prev, free + 1, max_children, cap=widest) < cls.left:
        widest += 1
    return tuple(sorted((*cls.prefix, *([1] * (free - 1)), widest)))


def mass_bound(p: Sequence[float], cls: TreeClass) -> float:
    """An upper bound on E = 1 + sum_d W(d) of the top-ranked tree of every member of the class.

    A member's tree keeps the prefix's top-ranked depths 1..k (the same `level_probabilities`), and its other
    n - sum(prefix) nodes lie below depth k, within depth D. Path probabilities do not grow along a path
    (p_r <= 1), so the r most probable descendants of the depth-k nodes within D - k more depths form a
    subtree, and no r descendants have more mass: their sum bounds the rest of the member's mass.
    """
    pv = tuple(float(x) for x in p)
    k = len(cls.prefix)
    levels = level_probabilities(pv, cls.prefix) if k else ()
    head = math.fsum(prob for level in levels for prob in level)
    tops = list(levels[-1]) if levels else [1.0]
    return 1.0 + head + _top_descendants(pv, tops, cls.depth - k, cls.left) + MASS_SLACK


def _top_descendants(p: tuple[float, ...], tops: Sequence[float], levels: int, count: int) -> float:
    """Sum of the `count` largest path probabilities among the descendants of nodes of probabilities
    `tops`, at most `levels` depths below them (best-first: a node enters after its parent or its
    next-better sibling, both no less probable)."""
    heap = [(-x * p[0], 1, x, 0) for x in tops]
    heapq.heapify(heap)
    taken: list[float] = []
    while heap and len(taken) < count:
        neg, depth, parent, rank = heapq.heappop(heap)
        prob = -neg
        taken.append(prob)
        if depth < levels:
            heapq.heappush(heap, (-prob * p[0], depth + 1, prob, 0))
        if rank + 1 < len(p):
            heapq.heappush(heap, (-parent * p[rank + 1], depth, parent, rank + 1))
    return math.fsum(taken)


def representative(cls: TreeClass, max_children: int) -> tuple[int, ...]:
    """The class's first member in lexicographic order (it has one: `has_members`), e.g. to read the
    depth-only statistics (q, rho) every member shares."""
    return next(class_members(cls, max_children))


def split_class(cls: TreeClass, max_children: int) -> tuple[list[TreeClass], list[tuple[int, ...]]]:
    """The class cut by its next width: (subclasses with members, profiles). With D - 2 widths fixed, the
    next width fixes the last one (n minus the others), so the parts are profiles."""
    k = len(cls.prefix)
    prev = cls.prefix[-1] if cls.prefix else 1
    classes: list[TreeClass] = []
    profiles: list[tuple[int, ...]] = []
    for w in range(1, min(max_children * prev, cls.left - (cls.depth - k - 1)) + 1):
        if k + 1 == cls.depth - 1:
            last = cls.left - w
            ws = (*cls.prefix, w, last)
            if 1 <= last <= max_children * w and any(x > 1 for x in ws):
                profiles.append(ws)
            continue
        sub = TreeClass(cls.depth, cls.nodes, (*cls.prefix, w))
        if has_members(sub, max_children):
            classes.append(sub)
    return classes, profiles


def initial_classes(max_children: int, depths: Sequence[int], max_nodes: int
                    ) -> tuple[list[TreeClass], list[tuple[int, ...]]]:
    """The tree space (depths `depths`, at most `max_nodes` nodes, chains left out) as classes (depth, n)
    for depth >= 2 and, at depth 1, its profiles (w_1) = 2..min(R, n_max)."""
    classes: list[TreeClass] = []
    profiles: list[tuple[int, ...]] = []
    for depth in sorted(set(depths)):
        if depth == 1:
            profiles += [(w,) for w in range(2, min(max_children, max_nodes) + 1)]
            continue
        for n in range(depth + 1, max_nodes + 1):
            cls = TreeClass(depth, n)
            if has_members(cls, max_children):
                classes.append(cls)
    return classes, profiles


def class_members(cls: TreeClass, max_children: int) -> Iterator[tuple[int, ...]]:
    """Every member of the class in lexicographic order (a width is tried only when the nodes left fit the
    depths below it, so the walk never dead-ends)."""

    def grow(prefix: tuple[int, ...], prev: int, left: int) -> Iterator[tuple[int, ...]]:
        levels = cls.depth - len(prefix)
        if levels == 0:
            if any(x > 1 for x in prefix):
                yield prefix
            return
        for w in range(1, min(max_children * prev, left - levels + 1) + 1):
            rest = left - w
            if levels - 1 <= rest <= _max_below(w, levels - 1, max_children):
                yield from grow((*prefix, w), w, rest)

    if has_members(cls, max_children):
        yield from grow(cls.prefix, cls.prefix[-1] if cls.prefix else 1, cls.left)
