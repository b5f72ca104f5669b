"""An interleaved shared device (formulations/edge.md): every model lies over all the device's channels, so their
PIM-side and normal-side bytes add up against one device's capacity [EDGE-2], and the device's idle power is
split over the models that run on it, the whole of it to the verifier when it decodes alone [EDGE-3]."""

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


class Host(Protocol):
    idle_power_mw: int


class IdleCosts(Protocol):
    """What the idle-power rule reads of a scenario's cost model (costs.CostModel)."""

    interleaved: bool
    count_idle: bool
    host: Host


def alone_idle_power_mw(costs: IdleCosts) -> int | None:
    """[EDGE-3] The idle power of a verifier decoding alone on an interleaved shared device: the whole device's,
    no drafter takes a share (0 under dynamic accounting); None when the device is not interleaved (each model's
    `idle_power_mw` is then already what it carries alone)."""
    if not costs.interleaved:
        return None
    return costs.host.idle_power_mw if costs.count_idle else 0


def design_idle_powers_mw(costs: IdleCosts, powers: Sequence[int], colocated: Sequence[bool]) -> list[int]:
    """Per model of a design (verifier first), the idle power it carries: its share `powers[j]`, except that on
    an interleaved shared device a design none of whose drafters holds a share of the device (the verifier
    alone; a lookup on the verifier's devices holds none) charges the verifier the whole device's [EDGE-3]."""
    out = list(powers)
    alone = alone_idle_power_mw(costs)
    if alone is not None and out and all(colocated[1:]):
        out[0] = alone
    return out


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
