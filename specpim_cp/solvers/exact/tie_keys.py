"""The canonical optimum's integer keys [OBJ-3] over a SpecModel's decision literals (formulations/objectives.md):
PIM units, devices, then a fixed order of every decision; `add_tie_break` writes them into a clone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from specpim_cp.problem.design import Design
from specpim_cp.problem.operators import PLACEABLE_OPS


@dataclass(frozen=True)
class TieKey:
    """One integer key of the canonical optimum (formulations/objectives.md, OBJ-3): the sum of
    coefficient x decision literal over `terms`, a value in 0..size-1."""

    level: str  # the tie-break level it belongs to: "pim_units", "devices" or "order"
    name: str
    terms: tuple[tuple[int, cp_model.IntVar], ...]
    size: int


def tie_break_keys(sm) -> list[TieKey]:
    """[OBJ] OBJ-3 the integer keys of the canonical optimum, in their lexicographic order: the PIM
    units over all devices (sum over models of k x n), the devices (sum of n), then the fixed order:
    per model (verifier first) its architecture's index in `ModelOptions.archs`, and per operator
    in PLACEABLE_OPS order its placement's index in `places(j, op)`; last the speculation choice's
    index in `choices`. The order keys' values fix every decision literal, so one design attains
    them."""
    # a head on the verifier's devices adds none [HEAD-2]
    pim = tuple((a.pim_units * a.own_devices, v) for xs in sm.x for a, v in xs.items()
                if a.pim_units * a.own_devices)
    devices = tuple((a.own_devices, v) for xs in sm.x for a, v in xs.items() if a.own_devices)
    keys = [TieKey("pim_units", "pim_units", pim, 1 + sum(max(a.pim_units * a.devices for a in xs)
                                                          for xs in sm.x)),
            TieKey("devices", "devices", devices, 1 + sum(max(a.devices for a in xs) for xs in sm.x))]
    for j, xs in enumerate(sm.x):
        keys.append(TieKey("order", f"arch[{j}]", tuple((i, v) for i, v in enumerate(xs.values()) if i),
                           len(xs)))
        for op in PLACEABLE_OPS:
            ys = sm.y[j][op]
            keys.append(TieKey("order", f"placement[{j}][{op}]",
                               tuple((i, v) for i, v in enumerate(ys.values()) if i), len(ys)))
    keys.append(TieKey("order", "choice", tuple((k, z) for k, z in enumerate(sm.z) if k), len(sm.z)))
    return keys


def tie_key_values(sm, design: Design, keys: Sequence[TieKey]) -> list[int]:
    """The value of every key for `design` (its decision literals summed with the keys' coefficients)."""
    value = {v.index: val for v, val in sm.decision_literals(design)}
    return [sum(c * value[v.index] for c, v in key.terms) for key in keys]


def add_tie_break(model: cp_model.CpModel, keys: Sequence[TieKey], fixed: Sequence[int],
                  minimise: Sequence[TieKey] = ()) -> list[cp_model.IntVar]:
    """[OBJ] OBJ-3 on a clone: the first len(fixed) keys equal their proven minima, and the keys
    `minimise` are minimised lexicographically as one mixed-radix number sum_k W_k key_k, W_k the
    product of the later keys' sizes (each key lies in 0..size-1). Returns the minimised keys'
    variables."""
    def key_var(key: TieKey) -> cp_model.IntVar:
        var = model.new_int_var(0, key.size - 1, f"tie[{key.name}]")
        model.add(var == sum(c * model.get_bool_var_from_proto_index(v.index) for c, v in key.terms))
        return var

    for key, value in zip(keys, fixed):
        model.add(key_var(key) == value)
    out = [key_var(key) for key in minimise]
    if out:
        weight, terms = 1, []
        for key, var in reversed(list(zip(minimise, out))):
            terms.append(weight * var)
            weight *= key.size
        model.minimize(sum(terms))
    return out
