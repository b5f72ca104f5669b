"""CP-SAT's integer rule read row by row through OR-Tools' proto wrapper: the answer guards.py's array
screen must give (the worst row's sum and largest term, or the first row whose bound lies beyond 2^62)."""

from __future__ import annotations

from ortools.sat.python import cp_model

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def worst_row(model: cp_model.CpModel, limit: int) -> tuple:
    """("rhs", constraint index, |bound|) for the first row with a finite bound beyond `limit`, else
    ("part", constraint index, max(positive, -negative) sum, (|k| x max|b|, variable, k)) of the first row
    with the largest sum, or None without a linear row."""
    proto = model.proto
    worst = None
    for i, c in enumerate(proto.constraints):
        if not c.has_linear():
            continue
        pos = neg = 0
        big = (0, 0, 0)
        for ref, coeff in zip(c.linear.vars, c.linear.coeffs):
            idx = ref if ref >= 0 else -ref - 1
            dom = list(proto.variables[idx].domain)
            lo, hi = dom[0], dom[-1]
            k = coeff if ref >= 0 else -coeff
            pos += max(0, k * lo, k * hi)
            neg += min(0, k * lo, k * hi)
            if abs(k) * max(abs(lo), abs(hi)) > big[0]:
                big = (abs(k) * max(abs(lo), abs(hi)), idx, k)
        rhs = max((abs(b) for b in c.linear.domain if b not in (INT64_MIN, INT64_MAX)), default=0)
        if rhs > limit:
            return "rhs", i, rhs
        if worst is None or max(pos, -neg) > worst[2]:
            worst = ("part", i, max(pos, -neg), big)
    return worst
