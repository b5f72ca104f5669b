"""The evaluator's records of where a design's bytes and time go: a model's capacity use and the breakdown of
a priced design (operators, models, staging, the round), each with its JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass

GIB_IN_KIB = 1 << 20


@dataclass(frozen=True)
class CapacityUse:
    """Bytes a model keeps in its PIM units and in its normal units, against what each side holds.
    `spill` (a fixed recipe's spilled model, `ModelDesign.spill`): the PIM-side bytes beyond the PIM
    units' capacity (`spill_kib`) are kept in the normal units instead, and moved every pass."""

    pim_need_kib: int
    normal_need_kib: int
    pim_capacity_kib: int
    normal_capacity_kib: int
    spill: bool = False

    @property
    def spill_kib(self) -> int:
        """KiB of the PIM side kept in the normal units and moved into the PIM units every pass (0 unless
        the model spills)."""
        return max(0, self.pim_need_kib - self.pim_capacity_kib) if self.spill else 0  # SPILL-1

    @property
    def holds(self) -> bool:
        """Each side holds what the layouts put there (CAP-1, CAP-2: capacity-checked layouts; a
        spilled model's normal units hold its PIM overflow too)."""
        if self.spill:
            return self.normal_need_kib + self.spill_kib <= self.normal_capacity_kib
        return self.pim_need_kib <= self.pim_capacity_kib and self.normal_need_kib <= self.normal_capacity_kib

    def overflow(self) -> tuple[str, int, int] | None:
        """The first side that overflows as (side, need KiB, have KiB), or None when both hold."""
        spill = self.spill_kib
        for side, need, have in (("PIM units", self.pim_need_kib - spill, self.pim_capacity_kib),
                                 ("normal units", self.normal_need_kib + spill, self.normal_capacity_kib)):
            if need > have:
                return side, need, have
        return None


@dataclass(frozen=True)
class OperatorBreakdown:
    engine: str
    share: int | None  # PIM share (None on the host)
    layout: str
    time_ns: int
    energy_nj: int


@dataclass(frozen=True)
class ModelBreakdown:
    """One model's pass as priced: the pass the round uses (verification, or the drafter's cycle pass)."""

    model: str
    memory_type: str
    pim_units: int
    devices: int
    pass_tokens: int
    pass_time_ns: int
    pass_energy_nj: int
    layer_makespan_ns: int
    allreduce_ns: int
    embedding_ns: int
    spill_ns: int  # moving a spilled model's PIM overflow, per pass (0 unless it spills), in pass_time_ns
    operators: dict[str, OperatorBreakdown]
    capacity: CapacityUse

    @property
    def spill_share(self) -> float:
        """The share of the pass time spent moving the spilled PIM overflow."""
        return self.spill_ns / self.pass_time_ns if self.pass_time_ns else 0.0

    def as_dict(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k not in ("operators", "capacity")}
        out["spill_share_of_pass"] = self.spill_share
        out["operators"] = {op: asdict(o) for op, o in self.operators.items()}
        cap = self.capacity
        out["capacity"] = {"pim_need_gib": cap.pim_need_kib / GIB_IN_KIB,
                           "normal_need_gib": cap.normal_need_kib / GIB_IN_KIB,
                           "pim_capacity_gib": cap.pim_capacity_kib / GIB_IN_KIB,
                           "normal_capacity_gib": cap.normal_capacity_kib / GIB_IN_KIB,
                           "spill_gib": cap.spill_kib / GIB_IN_KIB}
        return out


@dataclass(frozen=True)
class StagingBreakdown:
    draft2: str
    draft_length: int
    alpha2: float
    draft2_step_ns: int


@dataclass(frozen=True)
class DrafterBreakdown(ModelBreakdown):
    alpha: float
    draft_length: int
    cycle_ns: int
    drafting_energy_nj_per_round: int
    staging: StagingBreakdown | None
    tree: tuple[int, ...] | None = None  # a token tree's width profile (draft_length is its depth)
    tree_vector: tuple[float, ...] | None = None  # its positional acceptance p_1..p_R

    def as_dict(self) -> dict:
        out = super().as_dict()
        for k in ("alpha", "draft_length", "cycle_ns", "drafting_energy_nj_per_round"):
            out[k] = getattr(self, k)
        out["staging"] = None if self.staging is None else asdict(self.staging)
        out["tree"] = None if self.tree is None else list(self.tree)
        out["tree_vector"] = None if self.tree_vector is None else list(self.tree_vector)
        return out


@dataclass(frozen=True)
class RoundBreakdown:
    pipeline: bool
    verify_ns: int
    sync_ns: int
    fail_probability: float  # P(a pipelined round fails) (0 without a pipeline)
    idle_energy_nj: int  # idle power of every device for the round (0 under dynamic accounting)
    verifier_energy_nj: int
    energy_nj_by_component: dict[str, float]  # expected nJ per round, costs.COMPONENTS + "idle"
    head_transfer_ns: int = 0  # hidden states sent to heads on devices of their own, per round


@dataclass(frozen=True)
class Breakdown:
    verifier: ModelBreakdown
    drafters: tuple[DrafterBreakdown, ...]
    round: RoundBreakdown

    def models(self) -> list[tuple[str, ModelBreakdown]]:
        return [("verifier", self.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(self.drafters)]

    def as_dict(self) -> dict:
        return {"verifier": self.verifier.as_dict(), "drafters": [d.as_dict() for d in self.drafters],
                "round": asdict(self.round)}
