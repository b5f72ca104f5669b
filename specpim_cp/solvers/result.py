"""Solve results are values: a Design, its Evaluation (the evaluator's price) and a SolveReport."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import ClassVar

from specpim_cp.physics.evaluate import Evaluation

#: Unit of SolveReport.objective and .bound (the evaluator's exact units) and of `objective` in JSON.
OBJECTIVE_UNITS = {"latency": "ns/token", "energy": "nJ/token", "edp": "ns*nJ/token^2", "request": "ns/request"}
#: [OBJ-2r] The default front resolution, in percent of energy per token: a point at least every 0.1% (the
#: exact front, 0, under dynamic accounting can have hundreds of points closer than that).
DEFAULT_RESOLUTION_PCT = "0.1"
#: The same as a fraction of 1 (what `pareto` takes).
DEFAULT_RESOLUTION = Fraction(DEFAULT_RESOLUTION_PCT) / 100
#: [OBJ-2b] The default point budget of a front: the resolution is widened where needed so that at most this
#: many points are listed (a front whose energy spans 3%, as paper/opt-13b-b1's, is not widened at 0.1%).
DEFAULT_MAX_POINTS = 32
#: The largest point budget accepted (each point costs two Dinkelbach solves).
MAX_FRONT_POINTS = 10_000


class Status(enum.StrEnum):
    """The status of a solve, a solve step or a tie-break level; its value is the word JSON and text print
    (a StrEnum: `str()`, f-strings and `json.dumps` give "OPTIMAL", and it equals the plain string)."""

    OPTIMAL = "OPTIMAL"  # the objective equals its proven bound
    FEASIBLE = "FEASIBLE"  # a design, not proven optimal
    INFEASIBLE = "INFEASIBLE"  # proven: no design
    UNKNOWN = "UNKNOWN"  # no design and no proof within the time limit
    MODEL_INVALID = "MODEL_INVALID"  # CP-SAT refused the model
    HEURISTIC = "HEURISTIC"  # a heuristic's design, no bound
    SKIPPED = "SKIPPED"  # a tie-break level not reached (the time limit came first)
    FAULT = "FAULT"  # a tie-break level left out: CP-SAT contradicted a known design
    OUT_OF_RANGE = "OUT_OF_RANGE"  # a tie-break level left out: its rows exceed the 64-bit range

    @classmethod
    def of_cp_sat(cls, solver, status: int) -> Status:
        """CP-SAT's integer status as a Status (the session boundary converts every answer)."""
        return cls(solver.status_name(status))


def solver_version() -> str:
    import ortools

    return f"ortools {ortools.__version__}"


@dataclass(frozen=True, kw_only=True)
class ObjectiveReport:
    """What every solve reports about its answer: the objective, a proven bound and the gap between
    them, time, seed, solver version and inputs hash. `UNITS` names the objective's unit per name."""

    UNITS: ClassVar[dict[str, str]] = OBJECTIVE_UNITS

    objective_name: str
    status: Status | str  # a Status; mixes and records also write their own words (BASELINE, FRONT)
    objective: Fraction  # exact, in the evaluator's units
    bound: Fraction | None  # a proven lower bound on the optimum (None: none proven)
    wall_s: float
    seed: int | None
    solver_version: str
    inputs_hash: str
    extra: dict = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """(objective - bound) / objective; 0 for a zero objective, None without a bound."""
        if self.bound is None:
            return None
        if self.objective == 0:
            return 0.0
        return float((self.objective - self.bound) / self.objective)

    def objective_fields(self) -> dict:
        """The objective and bound as JSON: floats, the exact fraction, the unit and the gap."""
        return {"objective": float(self.objective),
                "objective_exact": f"{self.objective.numerator}/{self.objective.denominator}",
                "objective_unit": self.UNITS.get(self.objective_name, ""),
                "bound": None if self.bound is None else float(self.bound), "gap": self.gap}


@dataclass(frozen=True, kw_only=True)
class SolveReport(ObjectiveReport):
    method: str  # "cp-sat" | "brute-force" | "heuristic" | "baseline"
    # status: Status.OPTIMAL (objective == proven bound) | FEASIBLE | HEURISTIC | INFEASIBLE
    iterations: int

    def as_dict(self) -> dict:
        d = asdict(self)  # `extra` converted as dataclasses.asdict does
        num = self.objective_fields()
        return {"method": self.method, "objective_name": self.objective_name, "status": self.status,
                "objective": num["objective"], "bound": num["bound"], "wall_s": self.wall_s,
                "iterations": self.iterations, "seed": self.seed, "solver_version": self.solver_version,
                "inputs_hash": self.inputs_hash, "extra": d["extra"], "objective_unit": num["objective_unit"],
                "objective_exact": num["objective_exact"], "gap": num["gap"]}


@dataclass(frozen=True)
class SolveResult:
    evaluation: Evaluation
    report: SolveReport
    #: The heuristic's best speculating design when it returns the verifier alone ([NOSPEC]), else None: the
    #: warm start of the optimum's speculating side (`api.solving.with_speculation_note`). Not reported.
    speculating: Evaluation | None = field(default=None, compare=False, repr=False)
    #: The heuristic's best verifier-alone design when it returns a speculating design, else None: with
    #: `speculating`, which side the optimum is likely on (`api.solving.warm_starts`). Not reported.
    alone: Evaluation | None = field(default=None, compare=False, repr=False)

    @property
    def design(self):
        return self.evaluation.design

    def as_dict(self) -> dict:
        metrics = self.evaluation.as_dict()
        design = metrics.pop("design")
        return {"design": design, "host_kernel_model": metrics.pop("host_kernel_model"),
                "catalog_files": metrics.pop("catalog_files"), "metrics": metrics, "solve": self.report.as_dict()}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def inputs_hash(scenario, options: dict) -> str:
    """The scenario's fields, the content of its catalog files (`Scenario.hash_data`) and the options."""
    blob = json.dumps({"scenario": scenario.hash_data(), "options": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
