"""Results of a workload-mix solve as values: the shared hardware's per-cell evaluations, the solve
report (status, bound, gap, seed, solver version, inputs hash), each cell's own optimum and the
reference designs it is compared with. Nothing here solves or prints."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

from specpim_cp.mix.spec import MIX_UNITS, Mix
from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.solvers.result import ObjectiveReport, SolveResult


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


@dataclass(frozen=True, kw_only=True)
class MixReport(ObjectiveReport):
    """objective_name: latency | energy | regret; status: OPTIMAL (proven, up to the stated rounding bound)
    | FEASIBLE; objective: the exact mix objective of the returned design; bound: a proven lower bound on
    the optimum (rounding subtracted)."""

    UNITS: ClassVar[dict[str, str]] = MIX_UNITS

    def as_dict(self) -> dict:
        num = self.objective_fields()
        return {"objective_name": self.objective_name, "status": self.status, "objective": num["objective"],
                "objective_exact": num["objective_exact"], "objective_unit": num["objective_unit"],
                "bound": num["bound"], "gap": num["gap"], "wall_s": self.wall_s, "seed": self.seed,
                "solver_version": self.solver_version, "inputs_hash": self.inputs_hash, **self.extra}


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
