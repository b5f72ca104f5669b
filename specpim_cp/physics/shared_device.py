"""The capacity of an interleaved shared device (formulations/edge.md [EDGE-2]): every model lies over all
the device's channels, so their PIM-side and normal-side bytes add up against one device's capacity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from specpim_cp.errors import ScenarioError
from specpim_cp.problem.edge import sharing
from specpim_cp.problem.scenario import Scenario

GIB_IN_KIB = 1 << 20


class Use(Protocol):
    """A model's capacity use (evaluate.CapacityUse)."""

    pim_need_kib: int
    normal_need_kib: int
    pim_capacity_kib: int
    normal_capacity_kib: int


class Part(Protocol):
    model: str


def check_joint_capacity(scenario: Scenario, models: Sequence[Part], caps: Sequence[Use]) -> None:
    """On an interleaved shared device, ScenarioError naming the side whose summed need exceeds the device's
    (every model's architecture is the device's, so each `cap` holds the same capacities); nothing otherwise."""
    if sharing(scenario) != "interleaved" or not caps:
        return
    for side, need, have in (("PIM units", sum(c.pim_need_kib for c in caps), caps[0].pim_capacity_kib),
                             ("normal units", sum(c.normal_need_kib for c in caps), caps[0].normal_capacity_kib)):
        if need > have:
            names = " + ".join(m.model for m in models)
            raise ScenarioError(f"shared_device: the {side} must hold {need / GIB_IN_KIB:.2f} GiB for {names} "
                                f"but the device has {have / GIB_IN_KIB:.2f} GiB there: short by "
                                f"{(need - have) / GIB_IN_KIB:.2f} GiB")
