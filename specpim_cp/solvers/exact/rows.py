"""Small CP-SAT helpers every model builder shares (the scenario model, the mix model, the column solver)."""

from __future__ import annotations

from ortools.sat.python import cp_model

from specpim_cp.problem.operators import PLACEABLE_OPS


def ub(var: cp_model.IntVar) -> int:
    """Upper bound of a variable's domain (positive index: negative indexing is broken in 9.15, G1)."""
    dom = list(var.proto.domain)
    return dom[len(dom) - 1]


def add_ceil(m: cp_model.CpModel, target, numerator, denominator: int, enforce) -> None:
    """target == ceil(numerator / denominator), enforced: two-sided rows leave no slack to shave."""
    m.add(denominator * target >= numerator).only_enforce_if(enforce)
    m.add(denominator * target <= numerator + denominator - 1).only_enforce_if(enforce)


def capacity_terms(sm, j: int, a) -> tuple[list, list]:
    """Model j's (PIM-side, normal-side) KiB terms on architecture `a` (CAP-1/2): the coefficients on its
    placement literals and on its staging literals (a draft2 model on the drafter's host; a pair whose host
    may use no memory adds none, CYC-2 excludes it). `sm` is a model builder (model.py SpecModel)."""
    pm = sm.prices.models[j]
    pim, normal = [], []
    if a not in pm.capacity_kib:
        return pim, normal
    for op in PLACEABLE_OPS:
        for p, yp in sm.y[j][op].items():
            if sm.valid(j, a, op, p):
                pk, nk = pm.tensor_kib[(a, op, p.layout)]
                pim.append(pk * yp)
                normal.append(nk * yp)
    if j > 0:
        for st, stage in sm.stage_lit[j - 1].items():
            if st is not None and st.draft2 in sm.catalog.models:
                split = pm.draft2_kib[(a, st.draft2)]
                if split is not None:
                    pim.append(split[0] * stage)
                    normal.append(split[1] * stage)
    return pim, normal


__all__ = ["add_ceil", "capacity_terms", "ub"]
