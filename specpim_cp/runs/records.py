"""Batch result records as typed values, with their JSON form (one line of `results.jsonl` each).

A renamed field is then a type error in the report, not an empty table cell. `Record.from_json`
accepts what `to_json` wrote (and older records without the newer optional fields); anything else
raises `ValueError`, which the result store treats as an unreadable line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from numbers import Real
from typing import Any

from specpim_cp.catalog import Catalog
from specpim_cp.problem.design import Design
from specpim_cp.problem.operators import PLACEABLE_OPS


@dataclass(frozen=True)
class RecordMetrics:
    """The metrics a record keeps of its design (units in the names)."""

    latency_ns_per_token: float
    energy_pj_per_token: float
    throughput_tokens_per_s: float
    tokens_per_round: float
    round_time_ns: int
    edp: float
    # the prompt's prefill (formulations/prefill.md); None in records written before it was priced
    ttft_ns: int | None = None
    prefill_energy_nj_per_request: float | None = None
    request_latency_ns: float | None = None

    def __post_init__(self):
        if not all(isinstance(v, Real) and not isinstance(v, bool) for v in asdict(self).values() if v is not None):
            raise ValueError("malformed record (metrics must be numbers)")

    @classmethod
    def of(cls, metrics) -> RecordMetrics:
        """From an evaluator `Metrics`."""
        return cls(metrics.latency_ns_per_token, metrics.energy_pj_per_token, metrics.throughput_tokens_per_s,
                   metrics.tokens_per_round, metrics.round_time_ns, metrics.edp, metrics.prefill_ns,
                   metrics.prefill_energy_nj / metrics.batch_size, float(metrics.request_fraction()))

    def value(self, objective: str) -> float:
        """The metric of an objective name (latency, energy, edp or request)."""
        return {"latency": self.latency_ns_per_token, "energy": self.energy_pj_per_token, "edp": self.edp,
                "request": self.request_latency_ns}[objective]


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
    tree: tuple[int, ...] | None = None  # a token tree's width profile (draft_length: its depth)

    @classmethod
    def of_design(cls, design: Design, catalog: Catalog) -> tuple[PimAllocation, ...]:
        out = []
        for role, md in design.models():
            per_group = catalog.memory(md.memory_type).units_per_group
            out.append(cls(role, md.model, md.memory_type, md.devices, md.pim_units, per_group,
                           md.pim_units / per_group,
                           _pim_ops(md.placement),
                           md.draft_length, None if md.staging is None else md.staging.model_dump(mode="json"),
                           md.tree))
        return tuple(out)


@dataclass(frozen=True)
class FrontPoint:
    """One point of a latency-energy Pareto front."""

    metrics: RecordMetrics
    design: dict
    pim: tuple[PimAllocation, ...]


@dataclass(frozen=True)
class GridCell:
    """Where a record sits in a grid (`runs/grid.py`): the axes in the grid file's order, the cell's index
    along each, the axis lengths, and the cell's values (JSON) with their labels for tables and plots."""

    grid: str
    axes: tuple[str, ...]
    index: tuple[int, ...]
    sizes: tuple[int, ...]
    labels: tuple[str, ...]
    values: tuple[Any, ...]

    @classmethod
    def from_json(cls, data: Any) -> GridCell:
        if not isinstance(data, dict):
            raise ValueError("malformed record (cell is not an object)")  # noqa: TRY004
        cell = cls(str(data["grid"]), tuple(map(str, data["axes"])), tuple(int(i) for i in data["index"]),
                   tuple(int(n) for n in data["sizes"]), tuple(map(str, data["labels"])), tuple(data["values"]))
        if not len(cell.axes) == len(cell.index) == len(cell.sizes) == len(cell.labels) == len(cell.values):
            raise ValueError("malformed record (cell fields differ in length)")
        return cell


@dataclass(frozen=True)
class MixCellRecord:
    """One cell of a solved mix: its condition, its design on the shared hardware and how far it is from the
    cell's own optimum (`own_objective` in the cell metric's unit: ns/token, or nJ/token for energy)."""

    index: int
    label: str
    batch_size: int
    task: str | None
    weight: float
    acceptance: dict[str, float]
    metrics: RecordMetrics
    design: dict
    pim: tuple[PimAllocation, ...]
    own_objective: float
    own_status: str
    regret: float  # the cell metric / own_objective

    @classmethod
    def from_json(cls, d: dict) -> MixCellRecord:
        return cls(**{**d, "metrics": RecordMetrics(**d["metrics"]), "pim": tuple(_pim(p) for p in d["pim"])})


@dataclass(frozen=True)
class MixComparisonRecord:
    """A reference design of a mix ((a)-(d), `solvers/mix/comparisons.py`): its mix objective and regret, or why it has none."""

    name: str
    objective: float | None
    regret: float | None
    archs: tuple[str, ...] | None  # per model (None: per-cell hardware, or no design)
    error: str | None
    in_space: bool | None = None  # its designs lie in every cell's (restricted) design space

    @classmethod
    def from_json(cls, d: dict) -> MixComparisonRecord:
        archs = d.get("archs")
        return cls(**{**d, "archs": None if archs is None else tuple(archs)})


@dataclass(frozen=True)
class MixOutcome:
    """What a `mix` record keeps of a solved mix: the shared hardware, every cell, every comparison."""

    mix: str
    objective_unit: str
    hardware: tuple[str, ...]  # architecture label per model, verifier first
    cells: tuple[MixCellRecord, ...]
    comparisons: tuple[MixComparisonRecord, ...]

    @classmethod
    def from_json(cls, data: Any) -> MixOutcome:
        if not isinstance(data, dict):
            raise ValueError("malformed record (mix is not an object)")  # noqa: TRY004
        return cls(str(data["mix"]), str(data["objective_unit"]), tuple(map(str, data["hardware"])),
                   tuple(MixCellRecord.from_json(c) for c in data["cells"]),
                   tuple(MixComparisonRecord.from_json(c) for c in data["comparisons"]))

    def comparison(self, name: str) -> MixComparisonRecord | None:
        return next((c for c in self.comparisons if c.name == name), None)


@dataclass(frozen=True)
class Record:
    """One result of one batch instance (a baseline, a solve, a ladder step, a Pareto front, a mix)."""

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
    batch: str | None = None  # name of the set or grid the record was run for (the report's title)
    cell: GridCell | None = None  # grid records: the cell's axis values
    hint_from: str | None = None  # grid records: the neighbour cell whose design warm-started the solve
    mix: MixOutcome | None = None  # `mix` records: the solved mix (cells, shared hardware, comparisons)
    ranges: dict | None = None  # `exact` records: decision ranges (within_pct, proven, ranges: OBJ-4 as_dict)
    step_failed: str | None = None  # a step after the solve that failed or was refused (ranges, front, picture)
    step_error: str | None = None  # why it failed; the solve's status, objective and design stand
    host: str | None = None  # the scenario's host, prompt and generated tokens (None in older records)
    prompt_tokens: int | None = None
    generated_tokens: int | None = None

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
            if kw.get("cell") is not None:
                kw["cell"] = GridCell.from_json(kw["cell"])
            if kw.get("mix") is not None:
                kw["mix"] = MixOutcome.from_json(kw["mix"])
            rec = cls(**kw)
        except (TypeError, KeyError, AttributeError, IndexError) as exc:
            raise ValueError(f"malformed record ({exc})") from None
        _check_types(rec)
        return rec


def package_version() -> str:
    """This package's name and version, as records carry it (the package's own `__version__`: an editable
    install's metadata keeps the version it was installed at)."""
    from specpim_cp import __version__

    return f"specpim-cp {__version__}"


def evaluation_fields(ev, catalog: Catalog) -> dict:
    """The record fields of an evaluation: metrics, design and PIM allocation."""
    return {"metrics": RecordMetrics.of(ev.metrics), "design": ev.design.model_dump(mode="json"),
            "pim": PimAllocation.of_design(ev.design, catalog)}


def objective_fields(obj) -> dict:
    """An exact objective (a Fraction) as the record's float and exact text."""
    return {"objective": float(obj), "objective_exact": f"{obj.numerator}/{obj.denominator}"}


_STRINGS = ("key", "scenario", "scenario_file", "scenario_hash", "family", "scenario_objective", "objective_name",
            "method", "part")
_OPTIONAL = {"status": str, "error": str, "attempt": str, "batch": str, "hint_from": str, "step": str,
             "design": dict, "options": dict, "ranges": dict, "step_failed": str, "step_error": str, "host": str,
             "prompt_tokens": int, "generated_tokens": int}


def _check_types(rec: Record) -> None:
    """The fields the report sorts, groups and divides by have their types (a line of JSON that is not a
    record must not crash the report later)."""
    bad = [k for k in _STRINGS if not isinstance(getattr(rec, k), str)]
    bad += [k for k in ("batch_size", "parts") if type(getattr(rec, k)) is not int]
    bad += [k for k, t in _OPTIONAL.items() if getattr(rec, k) is not None and not isinstance(getattr(rec, k), t)]
    bad += [k for k in ("objective", "bound", "gap", "wall_s")
            if getattr(rec, k) is not None and (isinstance(getattr(rec, k), bool)
                                                or not isinstance(getattr(rec, k), (int, float)))]
    if bad:
        raise ValueError(f"malformed record ({', '.join(bad)}: wrong type)")


def _pim_ops(placement: dict) -> tuple[str, ...]:
    """The operators on PIM in the graph's order (not the placement dict's, which depends on where the
    design came from: a solver, or a record's JSON with sorted keys)."""
    order = {op: i for i, op in enumerate(PLACEABLE_OPS)}
    return tuple(sorted((op for op, p in placement.items() if p.engine == "pim"),
                        key=lambda op: (order.get(op, len(order)), op)))


def _pim(p: dict) -> PimAllocation:
    tree = p.get("tree")
    return PimAllocation(**{**p, "pim_ops": tuple(p["pim_ops"]), "tree": None if tree is None else tuple(tree)})
