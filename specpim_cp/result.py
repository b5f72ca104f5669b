"""Solve results are values: a Design, its Evaluation (the evaluator's price) and a SolveReport."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from fractions import Fraction

from specpim_cp.evaluate import Evaluation

#: Unit of SolveReport.objective and .bound (the evaluator's exact units) and of `objective` in JSON.
OBJECTIVE_UNITS = {"latency": "ns/token", "energy": "nJ/token", "edp": "ns*nJ/token^2"}


def solver_version() -> str:
    import ortools

    return f"ortools {ortools.__version__}"


@dataclass(frozen=True)
class SolveReport:
    method: str  # "cp-sat" | "brute-force" | "heuristic" | "baseline"
    objective_name: str  # latency | energy | edp
    status: str  # OPTIMAL (objective == proven bound) | FEASIBLE | HEURISTIC | INFEASIBLE
    objective: Fraction
    bound: Fraction | None
    wall_s: float
    iterations: int
    seed: int | None
    solver_version: str
    inputs_hash: str
    extra: dict = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        if self.bound is None:
            return None
        if self.objective == 0:
            return 0.0
        return float((self.objective - self.bound) / self.objective)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["objective"] = float(self.objective)
        d["objective_unit"] = OBJECTIVE_UNITS.get(self.objective_name, "")
        d["objective_exact"] = f"{self.objective.numerator}/{self.objective.denominator}"
        d["bound"] = None if self.bound is None else float(self.bound)
        d["gap"] = self.gap
        return d


@dataclass(frozen=True)
class SolveResult:
    evaluation: Evaluation
    report: SolveReport

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
