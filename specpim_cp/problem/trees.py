"""Token trees: positional acceptance, top-ranked trees of a width profile, their depth masses, and the
exact menu of width profiles an optimizer is offered.

Pure functions (standard library, and numpy for the menu's Pareto filter), below `physics/speculation.py`,
which turns depth masses into the round formulas. formulations/speculation_rounds.md, "Token trees
[TREE]", states the model; in short:

- ``p = (p_1, ..., p_R)`` holds marginal, mutually exclusive rank probabilities, the same at every node
  (Sequoia's acceptance vector); p is non-increasing in rank, p_1 < 1, sum(p) <= 1, and a measured
  vector that is not is re-ranked by probability (`rank_by_probability`, [TREE-5]).
- A shape is a width profile ``widths = (w_1, ..., w_D)``; its tree is the top-ranked tree (at each
  depth the w_d most probable extensions, ties to the earlier parent, then the smaller rank), whose
  all-rank-1 path is node 0 of every depth and which maximises W(d) = P(accepted depth >= d) at every
  depth ([TREE-1]). The root (the last committed token) is not a node; a round yields E = 1 + sum_d W(d).
- A chain of draft length gamma and acceptance alpha is the profile (1,)*gamma with p = (alpha,).
- `dominant_profiles` lists the profiles no other one dominates for every hardware and mapping
  ([TREE-4]), generated depth by depth.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Self

import numpy as np

__all__ = [
    "Dominance",
    "MenuTooLarge",
    "RankedVector",
    "TreeDraft",
    "TreeNode",
    "check_positional",
    "check_widths",
    "conditional_rates",
    "count_profiles",
    "depth_masses",
    "dominant_profiles",
    "draft_pass_tokens",
    "level_probabilities",
    "positional_vector",
    "rank_by_probability",
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


#: Most ranks an acceptance vector may give (a scenario's tree.acceptance_vector, a design output's tree_vector).
MAX_RANKS = 1024


def check_positional(p: Sequence[float], name: str = "p", ranked: bool = True) -> tuple[float, ...]:
    """p as a tuple of floats; ValueError unless 0 <= p_r, sum <= 1, every p_r < 1 and (with `ranked`) p
    is non-increasing. `ranked=False` accepts a measured vector in any order (`rank_by_probability`)."""
    if hasattr(p, "__len__") and len(p) > MAX_RANKS:  # counted before any entry is converted
        raise ValueError(f"{name} must hold at most {MAX_RANKS} rank probabilities, got {len(p):,}")
    try:
        vals = tuple(float(x) for x in p)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of probabilities, got {p!r}") from None
    except OverflowError:  # an integer too large for a float: far outside [0, 1]
        raise ValueError(f"{name} must hold probabilities in [0, 1], got an integer too large for a float") from None
    if not vals:
        raise ValueError(f"{name} must hold at least one rank probability")
    for r, x in enumerate(vals, 1):
        if not (0.0 <= x <= 1.0):  # also rejects NaN
            raise ValueError(f"{name}[rank {r}] must be in [0, 1], got {x!r}")
    top = max(range(len(vals)), key=lambda r: vals[r])
    if vals[top] >= 1.0:
        raise ValueError(f"{name}[rank {top + 1}] must be < 1, got {vals[top]!r}")
    for r in range(1, len(vals)) if ranked else ():
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


class RankedVector(tuple):
    """Rank probabilities p_1 >= ... >= p_R as used (a tuple of floats), with `note`: how they were made
    from the measured vector (re-ranked, ranks beyond R dropped), "" when used as measured. Equal to, and
    hashed as, the plain tuple."""

    note: str

    def __new__(cls, values: Iterable[float], note: str = "") -> Self:
        obj = super().__new__(cls, values)
        obj.note = note
        return obj

    def __reduce__(self):
        return (RankedVector, (tuple(self), self.note))


def rank_by_probability(p: Sequence[float], max_children: int, name: str = "p") -> RankedVector:
    """[TREE-5] A measured vector as the tree uses it: sorted non-increasing (a tie keeps the measured
    order), the R = max_children likeliest ranks kept, missing ranks 0. ValueError unless every entry is in
    [0, 1], the largest < 1 and the sum <= 1 (`check_positional(ranked=False)`)."""
    vals = check_positional(p, name, ranked=False)
    r_max = operator.index(max_children)
    if r_max < 1:
        raise ValueError(f"max_children must be >= 1, got {r_max}")
    order = sorted(range(len(vals)), key=lambda r: (-vals[r], r))
    notes = []
    inversion = next((r for r in range(1, len(vals)) if vals[r] > vals[r - 1]), None)
    if inversion is not None:
        notes.append(f"{name} is not non-increasing (measured rank {inversion + 1} {vals[inversion]:.4g} > rank "
                     f"{inversion} {vals[inversion - 1]:.4g}): its ranks are re-ranked by probability, so the tree "
                     "takes the likeliest candidates")
    if len(vals) > r_max:
        dropped = math.fsum(vals[r] for r in order[r_max:])
        notes.append(f"the {len(vals) - r_max} least likely of its {len(vals)} ranks (together {dropped:.4g}) are "
                     f"beyond max_children {r_max} and unused")
    ranked = [vals[r] for r in order[:r_max]] + [0.0] * max(0, r_max - len(vals))
    return RankedVector(ranked, "; ".join(notes))


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


def level_probabilities(p: Sequence[float], widths: Sequence[int]) -> tuple[tuple[float, ...], ...]:
    """Per depth 1..D, the path probabilities of the top-ranked tree's nodes, most probable first (the
    products `depth_masses` sums; p as given, not re-checked: callers pass a ranked vector)."""
    return tuple(tuple(prob for prob, _, _ in level)
                 for level in _levels(tuple(float(x) for x in p), tuple(operator.index(w) for w in widths)))


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


# --------------------------------------------------------------------------- the exact menu [TREE-4]

#: [TREE-4] (c) with one drafter: A's statistics are at least B's when the exact sum_d (W_A(d) - W_B(d)) is
#: >= D x this, which covers the rounding of the round formulas' terms 1 - (1 - W(d)) (at most 2^-54 each).
#: `math.fsum` rounds that sum correctly, so comparing its result with 2 x D x this guarantees it.
_E_MARGIN = 2.0**-53


class MenuTooLarge(ValueError):
    """The exact menu exceeds a limit: `what` is "in the tree space" (the profiles the generator would
    enumerate) or "left after dominance" (the menu so far), `count` how many, `limit` the limit."""

    def __init__(self, what: str, count: int, limit: int):
        super().__init__(f"{count:,} width profiles {what}, more than {limit:,}")
        self.what, self.count, self.limit = what, count, limit


@dataclass(frozen=True)
class Dominance:
    """The comparisons rule [TREE-4] may make (formulations/speculation_rounds.md).

    joint: the scenario has several drafters, so a round's statistics depend on each depth's W(d) (a
    profile dominates only with every W(d) at least as large), not on E alone.
    exact_verify / exact_passes: the verifier's / this drafter's pass prices are not known to be
    non-decreasing in their token count (a mixture-of-experts model), so node counts / sorted drafting
    passes must be equal, not merely no larger.
    """

    joint: bool = False
    exact_verify: bool = False
    exact_passes: bool = False


@lru_cache(maxsize=65_536)
def _count(depth: int, prev: int, left: int, r_max: int) -> int:
    """Width sequences of exactly `depth` depths below `prev` nodes with at most `left` nodes."""
    if depth == 0:
        return 1
    return sum(_count(depth - 1, w, left - w, r_max) for w in range(1, min(r_max * prev, left - depth + 1) + 1))


def count_profiles(max_children: int, depth: int, max_nodes: int) -> int:
    """How many valid profiles have exactly `depth` depths and at most `max_nodes` nodes (chains included)."""
    return _count(depth, 1, max_nodes, max_children) if depth >= 1 else 0


def dominant_profiles(p: Sequence[float], max_children: int, depths: Iterable[int], max_nodes: int,
                      rule: Dominance = Dominance(), limit: int | None = None,
                      work_limit: int | None = None) -> tuple[tuple[int, ...], ...]:
    """[TREE-4] The exact menu: every tree profile (widths not all 1) with a depth in `depths`, at most
    `max_nodes` nodes and `max_children` candidates per node, except those another profile of the menu
    dominates under `rule`. Ordered by (nodes, depth, widths); p is padded with zero ranks to max_children.

    For every hardware and mapping, a design drafting a profile left out is matched or beaten by the same
    design drafting its dominator, in latency, energy and every aggregate of them. MenuTooLarge when the
    tree space holds more than `work_limit` profiles (the generator enumerates them all), or the menu more
    than `limit` (raised after the depth that passes it). Results and refusals are cached.
    """
    r_max = operator.index(max_children)
    pv = check_positional(p)
    if len(pv) > r_max:
        raise ValueError(f"p holds {len(pv)} ranks, more than max_children {r_max}")
    pv = pv + (0.0,) * (r_max - len(pv))
    menu = _menu(pv, r_max, tuple(sorted(set(depths))), operator.index(max_nodes), rule, limit, work_limit)
    if isinstance(menu, MenuTooLarge):  # a fresh exception: the cached one keeps no traceback
        raise MenuTooLarge(menu.what, menu.count, menu.limit)
    return menu


@lru_cache(maxsize=256)
def _menu(p: tuple[float, ...], r_max: int, depths: tuple[int, ...], max_nodes: int, rule: Dominance,
          limit: int | None, work_limit: int | None) -> tuple[tuple[int, ...], ...] | MenuTooLarge:
    enumerated = sum(count_profiles(r_max, depth, max_nodes) for depth in depths)
    if work_limit is not None and enumerated > work_limit:
        return MenuTooLarge("in the tree space", enumerated, work_limit)
    out: list[tuple[int, ...]] = []
    for depth in depths:
        out += _pareto(_candidates(p, r_max, depth, max_nodes, rule), depth, rule)
        if limit is not None and len(out) > limit:
            return MenuTooLarge("left after dominance", len(out), limit)
    out.sort(key=lambda ws: (sum(ws), len(ws), ws))
    return tuple(out)


Masses = tuple[float, ...]
Offers = dict[tuple[int, tuple[int, ...]], list[tuple[Masses, tuple[int, ...]]]]


def _candidates(p: tuple[float, ...], r_max: int, depth: int, max_nodes: int, rule: Dominance) -> Offers:
    """Every tree profile of exactly `depth` depths, by cost key (nodes, sorted drafting passes), each
    key's profiles reduced to those no other profile of the key dominates. Depth masses are the sums
    `depth_masses` takes (the same selected path probabilities, `math.fsum`)."""
    offers: Offers = {}
    stack: list[tuple[tuple[int, ...], tuple[float, ...], int, Masses]] = [((), (1.0,), 0, ())]
    while stack:
        prefix, level, nodes, masses = stack.pop()
        d = len(prefix) + 1
        pool = sorted([x * pr for x in level for pr in p], reverse=True)
        for w in range(1, min(r_max * len(level), max_nodes - nodes - (depth - d)) + 1):
            chosen = pool[:w]
            ms, ws = (*masses, math.fsum(chosen)), (*prefix, w)
            if d < depth:
                stack.append((ws, tuple(chosen), nodes + w, ms))
            elif w > 1 or any(x > 1 for x in prefix):  # all-1 widths are the chain options
                kept = offers.setdefault((nodes + w, tuple(sorted(prefix))), [])
                if not any(_stats_dominate(k, ms, rule.joint, depth) for k, _ in kept):
                    kept[:] = [(k, kw) for k, kw in kept if not _stats_dominate(ms, k, rule.joint, depth)]
                    kept.append((ms, ws))
    return offers


def _stats_dominate(a: Masses, b: Masses, joint: bool, depth: int) -> bool:
    """[TREE-4] (c): depth masses a give every round statistic at least what b gives."""
    if all(x >= y for x, y in zip(a, b, strict=True)):
        return True
    return not joint and math.fsum((*a, *(-y for y in b))) >= 2 * depth * _E_MARGIN


def _pareto(offers: Offers, depth: int, rule: Dominance) -> list[tuple[int, ...]]:
    """The profiles of one depth that no kept profile dominates ([TREE-4] (a)-(c)). Sorted by (nodes, sum
    of passes, passes, -E), a dominator comes before what it dominates, so one pass suffices."""
    items = sorted((nodes, sum(passes), passes, -math.fsum(ms), ws, ms)
                   for (nodes, passes), cands in offers.items() for ms, ws in cands)
    n_items, n_passes = len(items), depth - 1
    kept_nodes = np.empty(n_items, dtype=np.int64)
    kept_passes = np.empty((n_items, n_passes), dtype=np.int64)
    kept_score = np.empty(n_items)
    kept: list[tuple[tuple[int, ...], Masses]] = []
    for nodes, _, passes, neg_score, ws, ms in items:
        k = len(kept)
        mask = kept_nodes[:k] == nodes if rule.exact_verify else kept_nodes[:k] <= nodes
        if n_passes:
            row = np.asarray(passes)
            mask &= (kept_passes[:k] == row if rule.exact_passes else kept_passes[:k] <= row).all(axis=1)
        mask &= kept_score[:k] >= -neg_score  # a dominator's E is at least as large
        if any(_stats_dominate(kept[j][1], ms, rule.joint, depth) for j in np.flatnonzero(mask)):
            continue
        kept_nodes[k], kept_score[k] = nodes, -neg_score
        if n_passes:
            kept_passes[k] = passes
        kept.append((ws, ms))
    return [ws for ws, _ in kept]


#: How every tree output counts tokens (README, "Token trees"; formulations/speculation_rounds.md [TREE]).
TOKEN_CONVENTION = ("the root (the last committed token) is not a node; E = 1 + sum_d W(d) tokens per round: "
                    "the accepted draft tokens plus the verifier's own next token (correction or bonus)")


def render_tree(p: Sequence[float], widths: Sequence[int]) -> str:
    """The top-ranked tree as an indented outline: one line per node, 'r<rank>' (0-based, r0 the drafter's
    likeliest candidate, as `export-tree` writes ranks) and its path probability, children under their
    parent in rank order, after a header with the profile, W(d) and E,
    the token-counting convention and, for a re-ranked vector (`RankedVector.note`), how it was ranked."""
    nodes = top_ranked_tree(p, widths)
    ws = tuple(int(w) for w in widths)
    masses = depth_masses(p, ws)
    children: dict[int, list[int]] = {}
    for k, node in enumerate(nodes):
        children.setdefault(node.parent, []).append(k)
    header = f"tree {'-'.join(map(str, ws))}: {sum(ws)} nodes, depth {len(ws)}, ranks 0-based (as export-tree)"
    lines = [f"{header}, W(d) = {', '.join(f'{w:.3f}' for w in masses)}, E = {1 + math.fsum(masses):.3f}",
             f"({TOKEN_CONVENTION})"]
    if getattr(p, "note", ""):
        lines.append(f"(note: {p.note})")  # type: ignore[attr-defined]

    def walk(parent: int) -> None:
        for k in sorted(children.get(parent, ()), key=lambda k: nodes[k].rank):
            node = nodes[k]
            lines.append(f"{'  ' * (node.depth - 1)}r{node.rank - 1} {node.path_probability:.3f}")
            walk(k)

    walk(-1)
    return "\n".join(lines)
