"""Brute force with draft heads: which of a model's options may be compared ([HEAD-2]). A head on the
verifier's devices adds its tensors to the verifier's capacity and runs on the verifier's architecture, so
options are compared only within a colocation class (a verifier's or a colocated head's architecture, or
"own" devices) and, where they share the verifier's devices, on the capacity they take as well."""

from __future__ import annotations

from specpim_cp.physics.evaluate import CapacityUse
from specpim_cp.problem.design import ArchConfig, ModelDesign
from specpim_cp.problem.heads import arch_on_verifier
from specpim_cp.problem.space import DesignSpace


def colocation_matters(space: DesignSpace) -> bool:
    """Whether some head of the space may sit on the verifier's devices."""
    return any(arch_on_verifier(space.scenario, i) for i in range(space.n_drafters))


def colocation_class(space: DesignSpace, j: int, md: ModelDesign) -> ArchConfig | str | None:
    """The class model j's option `md` is compared within: the architecture (without the colocation mark)
    of the verifier and of a colocated head, "own" for a head on devices of its own, None otherwise."""
    if not colocation_matters(space):
        return None
    if j == 0 or md.colocated:
        return ArchConfig(md.memory_type, md.pim_units, md.devices)
    return "own" if space.scenario.drafters[j - 1].kind != "model" else None


def colocation_needs(space: DesignSpace, j: int, md: ModelDesign, cap: CapacityUse) -> tuple[int, ...]:
    """The capacity an option takes on the verifier's devices (compared like a price: less is better), for
    the verifier and colocated heads when some head may colocate; empty otherwise."""
    if not colocation_matters(space) or (j and not md.colocated):
        return ()
    return (cap.pim_need_kib, cap.normal_need_kib)
