"""Token trees: positional acceptance, top-ranked trees of a width profile, and their depth masses.

Pure functions (standard library only), below `physics/speculation.py`, which turns depth masses into the
round formulas (formulations/speculation_rounds.md, "Token trees [TREE]").

Model. A drafter proposes, at every node of its tree, its top-ranked candidates. ``p = (p_1, ..., p_R)``
holds *marginal, mutually exclusive* rank probabilities: given that the path to a node is accepted,
the verifier's next token is the drafter's rank-r candidate with probability p_r (at most one child
is accepted) and none of them with 1 - sum(p) (Sequoia's acceptance vector). The same p applies at
every node. p must be non-increasing in rank (a drafter ranks its candidates), p_1 < 1, sum(p) <= 1.

A shape is a width profile ``widths = (w_1, ..., w_D)``: w_d nodes at depth d (the root, the last
committed token, is depth 0 and not a node), 1 <= w_1 <= R and 1 <= w_d <= R * w_{d-1}. Its tree is
the *top-ranked tree*: at each depth the w_d most probable extensions (parent path probability x p_r)
of the depth-(d-1) nodes, ties to the earlier parent, then the smaller rank. The depth-d nodes are
kept in that order, so the all-rank-1 path is always node 0 of every depth. Among all trees with a
profile, the top-ranked tree maximises W(d) = P(accepted depth >= d) at every depth (theorem [TREE-1]).

A chain of draft length gamma and acceptance alpha is the profile (1,)*gamma with p = (alpha,).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "TreeDraft",
    "TreeNode",
    "check_positional",
    "check_widths",
    "conditional_rates",
    "depth_masses",
    "draft_pass_tokens",
    "positional_vector",
    "render_tree",
    "top_ranked_tree",
    "tree_profiles",
]

_SUM_EPS = 1e-12  # float slack on sum(p) <= 1


class TreeNode(NamedTuple):
    """One node of a top-ranked tree: depth >= 1, parent index into the same tuple (-1: the root)."""

    depth: int
    parent: int
    rank: int  # 1..R: the drafter's rank of this candidate among its parent's candidates
    path_probability: float  # P(path from the root to this node accepted) = prod of p_rank on the path
    ranks: tuple[int, ...]  # the ranks from the root down to this node


# --------------------------------------------------------------------------- validation


def check_positional(p: Sequence[float], name: str = "p") -> tuple[float, ...]:
    """p as a tuple of floats; ValueError unless 0 <= p_r, p_1 < 1, sum <= 1 and p is non-increasing."""
    try:
        vals = tuple(float(x) for x in p)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of probabilities, got {p!r}") from None
    if not vals:
        raise ValueError(f"{name} must hold at least one rank probability")
    for r, x in enumerate(vals, 1):
        if not (0.0 <= x <= 1.0):  # also rejects NaN
            raise ValueError(f"{name}[rank {r}] must be in [0, 1], got {x!r}")
    if vals[0] >= 1.0:
        raise ValueError(f"{name}[rank 1] must be < 1, got {vals[0]!r}")
    for r in range(1, len(vals)):
        if vals[r] > vals[r - 1]:
            raise ValueError(
                f"{name} must be non-increasing in rank: "
                f"rank {r + 1} ({vals[r]!r}) > rank {r} ({vals[r - 1]!r})"
            )
    if math.fsum(vals) > 1.0 + _SUM_EPS:
        raise ValueError(f"{name} must sum to at most 1 (mutually exclusive ranks), got {math.fsum(vals)!r}")
    return vals


def check_widths(widths: Sequence[int], max_children: int, name: str = "widths") -> tuple[int, ...]:
    """widths as a tuple of ints; ValueError unless 1 <= w_1 <= R and 1 <= w_d <= R * w_{d-1}."""
    try:
        ws = tuple(operator.index(w) for w in widths)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of integers, got {widths!r}") from None
    if not ws:
        raise ValueError(f"{name} must have depth >= 1")
    prev = 1  # the root
    for d, w in enumerate(ws, 1):
        if not 1 <= w <= max_children * prev:
            raise ValueError(
                f"{name}[depth {d}] = {w} must be in 1..{max_children * prev} "
                f"({max_children} children x {prev} nodes at depth {d - 1})"
            )
        prev = w
    return ws


# --------------------------------------------------------------------------- positional vectors


def positional_vector(
    alpha: float, conditional_tail: Sequence[float], max_children: int
) -> tuple[float, ...]:
    """Marginal rank probabilities p_1..p_R (R = max_children) from conditional rates.

    c_1 = alpha, c_r = conditional_tail[r - 2] for r >= 2 (P(rank r accepted | ranks < r rejected));
    p_r = c_r * prod_{i<r} (1 - c_i). ValueError if the tail is too short or the result increases in
    rank, which happens when alpha < c_2 / (1 + c_2) (about 0.227 for c_2 = 0.294).
    """
    r_max = operator.index(max_children)
    if r_max < 1:
        raise ValueError(f"max_children must be >= 1, got {r_max}")
    if len(conditional_tail) < r_max - 1:
        raise ValueError(f"conditional_tail holds {len(conditional_tail)} rates, {r_max - 1} needed")
    cond = [float(alpha)] + [float(c) for c in conditional_tail[: r_max - 1]]
    for r, c in enumerate(cond, 1):
        if not (0.0 <= c < 1.0):
            raise ValueError(f"conditional rate of rank {r} must be in [0, 1), got {c!r}")
    out: list[float] = []
    rejected = 1.0
    for c in cond:
        out.append(c * rejected)
        rejected *= 1.0 - c
    return check_positional(out, "positional_vector")


def conditional_rates(p: Sequence[float]) -> tuple[float, ...]:
    """The inverse of `positional_vector`: c_r = p_r / (1 - sum_{i<r} p_i) (0 when nothing is left)."""
    vals = [float(x) for x in p]
    out = []
    for r, x in enumerate(vals):
        left = 1.0 - math.fsum(vals[:r])
        out.append(x / left if left > 0.0 else 0.0)
    return tuple(out)


# --------------------------------------------------------------------------- top-ranked trees


@lru_cache(maxsize=65_536)
def _levels(p: tuple[float, ...], widths: tuple[int, ...]) -> tuple[tuple[tuple[float, int, int], ...], ...]:
    """Per depth 1..D, the selected (path probability, parent index, rank), most probable first.

    Cached on the profile, and built from the cached prefix, so enumerating profiles shares work.
    """
    if not widths:
        return ()
    head = _levels(p, widths[:-1])
    parents = head[-1] if head else ((1.0, -1, 0),)
    cands = [(prob * pr, j, r) for j, (prob, _, _) in enumerate(parents) for r, pr in enumerate(p, 1)]
    # stable sort on probability alone: ties keep (parent order, rank) order
    cands.sort(key=lambda c: -c[0])
    return (*head, tuple(cands[: widths[-1]]))


def top_ranked_tree(p: Sequence[float], widths: Sequence[int]) -> tuple[TreeNode, ...]:
    """The nodes of the top-ranked tree, depth by depth, most probable first within a depth.

    Node k of depth d is at index sum(widths[:d-1]) + k; index 0 of each depth is the all-rank-1 path.
    """
    pv = check_positional(p)
    ws = check_widths(widths, len(pv))
    nodes: list[TreeNode] = []
    offset_prev = -1  # index of the first node of the previous depth (-1: the root)
    for level in _levels(pv, ws):
        start = len(nodes)
        for prob, j, r in level:
            parent = -1 if offset_prev < 0 else offset_prev + j
            ranks = (r,) if parent < 0 else (*nodes[parent].ranks, r)
            nodes.append(TreeNode(len(ranks), parent, r, prob, ranks))
        offset_prev = start
    return tuple(nodes)


@lru_cache(maxsize=65_536)
def _masses(p: tuple[float, ...], widths: tuple[int, ...]) -> tuple[float, ...]:
    return tuple(math.fsum(prob for prob, _, _ in level) for level in _levels(p, widths))


def depth_masses(p: Sequence[float], widths: Sequence[int]) -> tuple[float, ...]:
    """W(d) = P(accepted depth >= d), d = 1..D, of the top-ranked tree: math.fsum of the depth-d path
    probabilities (the accepted events of the depth-d nodes are disjoint)."""
    pv = check_positional(p)
    return _masses(pv, check_widths(widths, len(pv)))


def draft_pass_tokens(widths: Sequence[int]) -> tuple[int, ...]:
    """Tokens per sequence of the drafter's passes building a tree: 1 (the root), w_1, ..., w_{D-1}.

    One pass per depth over the previous depth's nodes; D passes in all (a chain: gamma passes of 1).
    The verifier checks every node of every tree plus the root in one pass: sum(widths) + 1 per drafter
    tree, the root shared (speculation_rounds.md, [TREE]).
    """
    ws = tuple(operator.index(w) for w in widths)
    return (1, *ws[:-1]) if ws else ()


@dataclass(frozen=True)
class TreeDraft:
    """A drafter's token tree: positional acceptance p and width profile (validated, stored as tuples)."""

    p: tuple[float, ...]
    widths: tuple[int, ...]

    def __post_init__(self) -> None:
        pv = check_positional(self.p, "TreeDraft.p")
        object.__setattr__(self, "p", pv)
        object.__setattr__(self, "widths", check_widths(self.widths, len(pv), "TreeDraft.widths"))

    @property
    def depth(self) -> int:
        return len(self.widths)

    @property
    def nodes(self) -> int:
        return sum(self.widths)

    @property
    def is_chain(self) -> bool:
        """Width 1 at every depth: the rank-1 chain (alpha = p_1, gamma = depth)."""
        return all(w == 1 for w in self.widths)

    @property
    def masses(self) -> tuple[float, ...]:
        return _masses(self.p, self.widths)

    @property
    def rank1_mass(self) -> float:
        """rho = P(the all-rank-1 path accepted to full depth) = p_1 ** D (as a chain's alpha ** gamma)."""
        return self.p[0] ** self.depth


# --------------------------------------------------------------------------- enumeration and drawing


def tree_profiles(max_children: int, max_depth: int, max_nodes: int) -> list[tuple[int, ...]]:
    """Every valid profile with depth 1..max_depth and at most max_nodes nodes, chains included.

    Order: by node count, then depth, then widths lexicographically. The count grows quickly (for
    max_children >= max_nodes it is the number of compositions of 1..max_nodes into <= max_depth parts).
    """
    r_max, d_max, n_max = (operator.index(x) for x in (max_children, max_depth, max_nodes))
    if r_max < 1 or d_max < 0 or n_max < 0:
        raise ValueError(
            f"need max_children >= 1, max_depth >= 0, max_nodes >= 0; got {r_max}, {d_max}, {n_max}"
        )
    out: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...], prev: int, left: int) -> None:
        if prefix:
            out.append(prefix)
        if len(prefix) == d_max:
            return
        for w in range(1, min(r_max * prev, left) + 1):
            grow((*prefix, w), w, left - w)

    grow((), 1, n_max)
    out.sort(key=lambda ws: (sum(ws), len(ws), ws))
    return out


def render_tree(p: Sequence[float], widths: Sequence[int]) -> str:
    """The top-ranked tree as an indented outline: one line per node, 'r<rank>' and its path
    probability, children under their parent in rank order, after a header with the profile and W(d)."""
    nodes = top_ranked_tree(p, widths)
    ws = tuple(int(w) for w in widths)
    masses = depth_masses(p, ws)
    children: dict[int, list[int]] = {}
    for k, node in enumerate(nodes):
        children.setdefault(node.parent, []).append(k)
    header = f"tree {'-'.join(map(str, ws))}: {sum(ws)} nodes, depth {len(ws)}"
    lines = [f"{header}, W(d) = {', '.join(f'{w:.3f}' for w in masses)}"]

    def walk(parent: int) -> None:
        for k in sorted(children.get(parent, ()), key=lambda k: nodes[k].rank):
            node = nodes[k]
            lines.append(f"{'  ' * (node.depth - 1)}r{node.rank} {node.path_probability:.3f}")
            walk(k)

    walk(-1)
    return "\n".join(lines)
