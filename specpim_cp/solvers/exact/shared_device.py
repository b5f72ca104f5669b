"""[EDGE-2] The shared device in the CP-SAT model (formulations/edge.md): every model's architecture is a
channel slice of one memory, and the slices take each of its channels exactly once."""

from __future__ import annotations

from collections.abc import Sequence

from ortools.sat.python import cp_model

from specpim_cp.catalog.slices import parse_slice
from specpim_cp.problem.design import ArchConfig


def add_shared_device(m: cp_model.CpModel, x: Sequence[dict[ArchConfig, cp_model.IntVar]]
                      ) -> cp_model.IntVar:
    """EDGE-2a every model on slices of the same memory; EDGE-2b their channels sum to the device's.
    Returns the family's assumption literal."""
    lit = m.new_bool_var("assume[EDGE-2]")
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
    return lit
