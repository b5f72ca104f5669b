"""Results of a workload-mix solve as values: the shared hardware's per-cell evaluations, the solve
report (status, bound, gap, seed, solver version, inputs hash), each cell's own optimum and the
reference designs it is compared with. Nothing here solves or prints."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction

from specpim_cp.design import ArchConfig, Design
from specpim_cp.evaluate import Evaluation
from specpim_cp.mix import MIX_UNITS, Mix
from specpim_cp.result import SolveResult


@dataclass(frozen=True)
class Comparison:
    """A reference mix design (per cell one evaluated design) and its mix objective."""

    name: str
    description: str
    evaluations: tuple[Evaluation, ...] | None
    value: Fraction | None  # the mix objective, exact
    regret: Fraction | None  # max over cells of the cell metric / the cell's own optimum
    extra: dict = field(default_factory=dict)
    error: str | None = None

    def as_dict(self, objective: str) -> dict:
        out = {"name": self.name, "description": self.description, "error": self.error,
               "objective": None if self.value is None else float(self.value), "objective_unit": MIX_UNITS[objective],
               "regret": None if self.regret is None else float(self.regret), **self.extra}
        if self.evaluations is not None:
            out["cells"] = [{"design": e.design.model_dump(mode="json"), "metrics": e.metrics.as_dict()}
                            for e in self.evaluations]
        return out


@dataclass(frozen=True)
class MixReport:
    objective_name: str  # latency | energy | regret
    status: str  # OPTIMAL (proven, up to the stated rounding bound) | FEASIBLE
    objective: Fraction  # the exact mix objective of the returned design (evaluator units)
    bound: Fraction | None  # a proven lower bound on the optimum (rounding subtracted)
    wall_s: float
    seed: int
    solver_version: str
    inputs_hash: str
    extra: dict = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        if self.bound is None:
            return None
        return 0.0 if self.objective == 0 else float((self.objective - self.bound) / self.objective)

    def as_dict(self) -> dict:
        return {"objective_name": self.objective_name, "status": self.status, "objective": float(self.objective),
                "objective_exact": f"{self.objective.numerator}/{self.objective.denominator}",
                "objective_unit": MIX_UNITS[self.objective_name],
                "bound": None if self.bound is None else float(self.bound), "gap": self.gap, "wall_s": self.wall_s,
                "seed": self.seed, "solver_version": self.solver_version, "inputs_hash": self.inputs_hash,
                **self.extra}


@dataclass(frozen=True)
class MixResult:
    mix: Mix
    evaluations: tuple[Evaluation, ...]  # per cell, on the shared hardware
    report: MixReport
    optima: tuple[SolveResult, ...]  # per cell, its own optimum (any hardware)
    comparisons: tuple[Comparison, ...] = ()

    @property
    def designs(self) -> tuple[Design, ...]:
        return tuple(e.design for e in self.evaluations)

    @property
    def archs(self) -> list[ArchConfig]:
        return [md.arch for _, md in self.evaluations[0].design.models()]

    def as_dict(self) -> dict:
        cells = []
        for cell, e, own in zip(self.mix.cells, self.evaluations, self.optima, strict=True):
            metrics = e.as_dict()
            design = metrics.pop("design")
            cells.append({"index": cell.index, "label": cell.label, "weight": float(cell.weight), "task": cell.task,
                          "batch_size": cell.batch_size, "prompt_tokens": cell.scenario.prompt_tokens,
                          "generated_tokens": cell.scenario.generated_tokens,
                          "acceptance": dict(cell.acceptance), "design": design, "metrics": metrics,
                          "own_optimum": {"status": own.report.status, "objective": float(own.report.objective),
                                          "objective_name": own.report.objective_name,
                                          "design": own.design.model_dump(mode="json")}})
        return {"mix": self.mix.name, "base_scenario": self.mix.base.name,
                "hardware": [{"model": md.model, "memory_type": md.memory_type, "pim_units": md.pim_units,
                              "devices": md.devices} for _, md in self.evaluations[0].design.models()],
                "solve": self.report.as_dict(), "cells": cells,
                "comparisons": [c.as_dict(self.report.objective_name) for c in self.comparisons]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)
