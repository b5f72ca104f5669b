"""Batch result records as typed values, with their JSON form (one line of `results.jsonl` each).

A renamed field is then a type error in the report, not an empty table cell. `Record.from_json`
accepts what `to_json` wrote (and older records without the newer optional fields); anything else
raises `ValueError`, which the result store treats as an unreadable line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from specpim_cp.catalog import Catalog
from specpim_cp.design import Design


@dataclass(frozen=True)
class RecordMetrics:
    """The metrics a record keeps of its design (units in the names)."""

    latency_ns_per_token: float
    energy_pj_per_token: float
    throughput_tokens_per_s: float
    tokens_per_round: float
    round_time_ns: int
    edp: float

    @classmethod
    def of(cls, metrics) -> RecordMetrics:
        """From an evaluator `Metrics`."""
        return cls(metrics.latency_ns_per_token, metrics.energy_pj_per_token, metrics.throughput_tokens_per_s,
                   metrics.tokens_per_round, metrics.round_time_ns, metrics.edp)

    def value(self, objective: str) -> float:
        """The metric of an objective name (latency, energy or edp)."""
        return {"latency": self.latency_ns_per_token, "energy": self.energy_pj_per_token, "edp": self.edp}[objective]


@dataclass(frozen=True)
class PimAllocation:
    """Where one model's PIM goes: memory type, PIM units of units per group, the operators on PIM."""

    role: str
    model: str
    memory_type: str
    devices: int
    pim_units: int
    units_per_group: int
    pim_fraction: float
    pim_ops: tuple[str, ...]
    draft_length: int | None
    staging: dict | None

    @classmethod
    def of_design(cls, design: Design, catalog: Catalog) -> tuple[PimAllocation, ...]:
        out = []
        for role, md in design.models():
            per_group = catalog.memory(md.memory_type).units_per_group
            out.append(cls(role, md.model, md.memory_type, md.devices, md.pim_units, per_group,
                           md.pim_units / per_group,
                           tuple(op for op, p in md.placement.items() if p.engine == "pim"),
                           md.draft_length, None if md.staging is None else md.staging.model_dump(mode="json")))
        return tuple(out)


@dataclass(frozen=True)
class FrontPoint:
    """One point of a latency-energy Pareto front."""

    metrics: RecordMetrics
    design: dict
    pim: tuple[PimAllocation, ...]


@dataclass(frozen=True)
class Record:
    """One result of one batch instance (a baseline, a solve, a ladder step, a Pareto front)."""

    key: str  # the instance's content hash
    scenario: str
    scenario_file: str
    scenario_hash: str
    family: str
    batch_size: int
    scenario_objective: str
    objective_name: str
    method: str
    part: str  # the result's name within the instance (baseline name, ladder step, "exact", ...)
    parts: int  # how many records the instance has
    step: str | None = None
    status: str | None = None  # OPTIMAL | FEASIBLE | HEURISTIC | BASELINE | FRONT | INFEASIBLE | ERROR
    objective: float | None = None
    objective_exact: str | None = None  # "numerator/denominator"
    bound: float | None = None
    gap: float | None = None
    wall_s: float | None = None
    metrics: RecordMetrics | None = None
    design: dict | None = None
    pim: tuple[PimAllocation, ...] | None = None
    seed: int | None = None
    options: dict = field(default_factory=dict)
    solver_version: str | None = None
    inputs_hash: str | None = None
    error: str | None = None
    finished_at: str | None = None
    attempt: str | None = None
    iterations: int | None = None
    description: str | None = None
    copied_from: str | None = None
    front: tuple[FrontPoint, ...] | None = None

    def with_(self, **changes: Any) -> Record:
        return replace(self, **changes)

    @property
    def solved(self) -> bool:
        """The record holds a priced design."""
        return self.metrics is not None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Any) -> Record:
        if not isinstance(data, dict):
            raise ValueError("a record is a JSON object")  # noqa: TRY004 -- one error type for unreadable lines
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        try:
            if kw.get("metrics") is not None:
                kw["metrics"] = RecordMetrics(**kw["metrics"])
            if kw.get("pim") is not None:
                kw["pim"] = tuple(_pim(p) for p in kw["pim"])
            if kw.get("front") is not None:
                kw["front"] = tuple(FrontPoint(RecordMetrics(**p["metrics"]), p["design"],
                                               tuple(_pim(q) for q in p["pim"])) for p in kw["front"])
            rec = cls(**kw)
        except (TypeError, KeyError) as exc:
            raise ValueError(f"malformed record ({exc})") from None
        if not all(isinstance(getattr(rec, k), str) for k in ("key", "scenario", "method", "part")):
            raise ValueError("malformed record (key, scenario, method and part must be strings)")
        return rec


def _pim(p: dict) -> PimAllocation:
    return PimAllocation(**{**p, "pim_ops": tuple(p["pim_ops"])})
