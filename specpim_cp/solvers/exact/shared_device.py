"""[EDGE-2] The shared device in the CP-SAT model (formulations/edge.md): every model's architecture is a
channel slice of one memory, and the slices take each of its channels exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ortools.sat.python import cp_model

from specpim_cp.catalog.slices import parse_slice
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.scenario import Scenario


class ArchitectureRows(Protocol):
    """What this family reads of the model builder (model.py SpecModel, which imports this module)."""

    scenario: Scenario
    m: cp_model.CpModel
    x: Sequence[dict[ArchConfig, cp_model.IntVar]]
    assumption_families: dict[str, cp_model.IntVar]


def add_shared_device(sm: ArchitectureRows) -> None:
    """On a shared device (`scenario.shared_device`): EDGE-2a every model on slices of the same memory,
    EDGE-2b their channels sum to the device's, under the literal `assume[EDGE-2]` registered in
    `sm.assumption_families`; nothing otherwise."""
    if not sm.scenario.shared_device:
        return
    m, x = sm.m, sm.x
    lit = m.new_bool_var("assume[EDGE-2]")
    sm.assumption_families["EDGE-2 shared device"] = lit
    bases: dict[str, int] = {}
    for xs in x:
        for a in xs:
            parsed = parse_slice(a.memory_type)
            if parsed is None:
                raise ValueError(f"shared device: architecture {a.label()} is no channel slice")
            bases[parsed[0]] = parsed[2]
    for base, total in bases.items():
        on_base = [sum(v for a, v in xs.items() if parse_slice(a.memory_type)[0] == base) for xs in x]
        for j in range(1, len(x)):
            m.add(on_base[j] == on_base[0]).only_enforce_if(lit)                                   # EDGE-2a
        used = sum(parse_slice(a.memory_type)[1] * v for xs in x for a, v in xs.items()
                   if parse_slice(a.memory_type)[0] == base)
        m.add(used == total * on_base[0]).only_enforce_if(lit)                                     # EDGE-2b
