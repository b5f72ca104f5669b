"""Sequoia's tree-search dynamic program, as an independent test reference (not part of the package).

Transcribed from Infini-AI-Lab/Sequoia, tree_search.py (commit 0ff3ff7). Sequoia's conventions:

* A tree has m nodes *including the root* (the last committed token, always "accepted") and at most
  l levels *including the root*: draft depth D = l - 1, draft nodes n = m - 1. Its budget m is also
  the number of tokens the verifier checks per sequence (n + 1).
* p[1..R] are the marginal rank acceptance probabilities (Sequoia loads its vector x with x[0] = 0 and
  drops the last entry, the rejection remainder). A node with b children has the ranks 1..b.
* T[m][l][b] = max expected accepted tokens, root included, of a tree with exactly m nodes, at most
  l levels and b root children: T[1][l][0] = 1; T[m][l][1] = 1 + p[1] * max_b' T[m-1][l-1][b'];
  T[m][l][b] = max_{1<=y<m} T[y][l][b-1] + p[b] * max_b' T[m-y][l-1][b'] (b >= 2); -inf if
  impossible. The value is 1 + sum over draft nodes of their path probabilities = our E of the tree.
* Selection: over the valid budgets m (those with a verification time) and l = 0..max levels,
  minimise (l * draft_time + verify_time[m]) / T[m][l]: Sequoia charges l = D + 1 drafter steps.
  First strict minimum wins (budgets in the order given, then l ascending).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

NEG = -math.inf

Table = list[list[list[float]]]
BranchMap = dict[tuple[int, int, int], list[tuple[int, int, int]]]


def sequoia_table(p: Sequence[float], max_nodes: int, max_depth: int) -> tuple[Table, BranchMap]:
    """(T, branch_map): T[m][l][b] for m <= max_nodes + 1 nodes and l <= max_depth + 1 levels."""
    pv = [0.0, *map(float, p)]  # 1-based ranks, as Sequoia's tensor
    max_branch = len(pv) - 1
    max_budget, max_level = max_nodes + 1, max_depth + 1
    T = [[[NEG] * (max_branch + 1) for _ in range(max_level + 1)] for _ in range(max_budget + 1)]
    branch_map: BranchMap = {}

    best_of: dict[tuple[int, int], tuple[float, int]] = {}

    def best(m: int, l: int) -> tuple[float, int]:
        # asked only of complete rows (fewer nodes, or the same nodes one level up), so cached
        if (m, l) not in best_of:
            row = T[m][l]
            b = max(range(len(row)), key=lambda k: (row[k], -k))  # argmax, first index on ties (torch)
            best_of[(m, l)] = (row[b], b)
        return best_of[(m, l)]

    for l in range(1, max_level + 1):
        T[1][l][0] = 1.0
        branch_map[(1, l, 0)] = []
    for m in range(2, max_budget + 1):
        for l in range(2, max_level + 1):
            v, b1 = best(m - 1, l - 1)
            T[m][l][1] = 1 + pv[1] * v
            if T[m][l][1] > 0:
                branch_map[(m, l, 1)] = [(m - 1, l - 1, b1)]
            for b in range(2, max_branch + 1):
                max_value, new_y = NEG, -1
                for y in range(1, m):
                    new_value = T[y][l][b - 1] + pv[b] * best(m - y, l - 1)[0]  # -inf stays -inf
                    if new_value > max_value:
                        max_value, new_y = new_value, y
                T[m][l][b] = max_value
                if max_value >= 0:
                    branch = best(m - new_y, l - 1)[1]
                    branch_map[(m, l, b)] = [*branch_map[(new_y, l, b - 1)], (m - new_y, l - 1, branch)]
    return T, branch_map


def sequoia_values(p: Sequence[float], max_nodes: int, max_depth: int) -> dict[tuple[int, int], float]:
    """{(n, D): best expected tokens of a tree with exactly n draft nodes and draft depth <= D}
    (only the feasible pairs), i.e. Sequoia's results[n + 1][D + 1]."""
    T, _ = sequoia_table(p, max_nodes, max_depth)
    out = {}
    for n in range(1, max_nodes + 1):
        for d in range(1, max_depth + 1):
            v = max(T[n + 1][d + 1])
            if v > NEG:
                out[(n, d)] = v
    return out


def sequoia_widths(branch_map: BranchMap, state: tuple[int, int, int]) -> tuple[int, ...]:
    """Rebuild Sequoia's tree from a state, breadth first, as a width profile (root excluded)."""
    widths, level = [], [state]
    while True:
        nxt = [child for s in level for child in branch_map[s]]
        assert all(len(branch_map[s]) == s[2] for s in level)
        if not nxt:
            return tuple(widths)
        widths.append(len(nxt))
        level = nxt


def sequoia_best_tree(
    p: Sequence[float], max_nodes: int, max_depth: int, draft_time: float, verify_time: Mapping[int, float]
) -> tuple[tuple[int, ...], float]:
    """Sequoia's choice: (widths, expected tokens) of the tree minimising (l * draft_time + V_m) / T.

    max_nodes, max_depth: draft nodes and draft depth (root excluded). verify_time: {m: time} for the
    valid budgets m = verified tokens per sequence = draft nodes + 1 (m = 1: no draft, widths ()).
    """
    T, branch_map = sequoia_table(p, max_nodes, max_depth)
    dec_time, pair = math.inf, None
    for m, target_time in verify_time.items():
        if not 1 <= m <= max_nodes + 1:
            continue
        for l in range(max_depth + 2):
            ac_len = max(T[m][l])
            if ac_len < 0:
                continue
            x = (l * draft_time + target_time) / ac_len
            if x < dec_time:
                dec_time, pair = x, (m, l)
    if pair is None:
        raise ValueError("no valid budget")
    m, l = pair
    row = T[m][l]
    b = max(range(len(row)), key=lambda k: (row[k], -k))
    return sequoia_widths(branch_map, (m, l, b)), row[b]
