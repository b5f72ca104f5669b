"""Small CP-SAT helpers every model builder shares (the scenario model, the mix model, the column solver)."""

from __future__ import annotations

from ortools.sat.python import cp_model


def ub(var: cp_model.IntVar) -> int:
    """Upper bound of a variable's domain (positive index: negative indexing is broken in 9.15, G1)."""
    dom = list(var.proto.domain)
    return dom[len(dom) - 1]


def add_ceil(m: cp_model.CpModel, target, numerator, denominator: int, enforce) -> None:
    """target == ceil(numerator / denominator), enforced: two-sided rows leave no slack to shave."""
    m.add(denominator * target >= numerator).only_enforce_if(enforce)
    m.add(denominator * target <= numerator + denominator - 1).only_enforce_if(enforce)


__all__ = ["add_ceil", "ub"]
