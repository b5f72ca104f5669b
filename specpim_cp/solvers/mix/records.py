"""Results of a workload-mix solve as values: the shared hardware's per-cell evaluations, the solve
report (status, bound, gap, seed, solver version, inputs hash), each cell's own optimum and the
reference designs it is compared with. Nothing here solves or prints. Also the options a solve runs
with (`MixOptions`) and its log (`MixSolveLog`: stages, phases, claims, hardware tried), the report's
`extra`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import ClassVar

from specpim_cp.physics.evaluate import Evaluation, Metrics
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.problem.mix import MIX_UNITS, Mix
from specpim_cp.solvers.exact.session import SolverOptions
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


# ------------------------------------------------------------------------------------------------
# How a solve runs, and what it did
# ------------------------------------------------------------------------------------------------
#: The mix model's CP-SAT options by default: 120 s, one worker, seed 0.
MIX_SOLVER_OPTIONS = SolverOptions(time_limit_s=120.0)
#: How a mix is solved: `decomposition` (latency and regret: pass tables and a branch and bound over the
#: hardware and the weight copies, MIX-14..19), `cp-sat` (the mix model, every objective), `auto` (the
#: decomposition for latency, the mix model otherwise).
MIX_METHODS = ("auto", "decomposition", "cp-sat")
#: The objectives the decomposition solves (energy depends on the round time through idle power: a model's
#: least pass time is not its best choice there).
DECOMPOSED_OBJECTIVES = ("latency", "regret")
#: The objectives `auto` decomposes: regret too is exact by decomposition, but its max over cells leaves the
#: search's bound at the worst cell while copies elsewhere are branched on, so auto keeps the mix model
#: there.
AUTO_DECOMPOSED = ("latency",)


@dataclass(frozen=True)
class MixOptions:
    """How `solve_mix` runs: `solver` for the mix model's CP-SAT solves (its time limit in deterministic
    time units with `solver.deterministic`), `cell_time_limit_s` for each single-cell solve, `jobs` cells
    solved alone at a time (None: `solver.workers`), `screen` extra candidate hardwares tried before the
    mix model (lowest MIX-10/11 bound first), `cuts` adds MIX-10/11, `comparisons` the reference designs."""

    solver: SolverOptions = MIX_SOLVER_OPTIONS
    cell_time_limit_s: float = 60.0
    jobs: int | None = None
    screen: int = 0
    cuts: bool = True
    comparisons: bool = True
    method: str = "auto"

    def uses_decomposition(self, objective: str) -> bool:
        return self.method == "decomposition" or (self.method == "auto" and objective in AUTO_DECOMPOSED)

    @property
    def cell_jobs(self) -> int:
        """Cells solved alone at a time."""
        return self.solver.workers if self.jobs is None else max(1, self.jobs)

    def cell_solver(self) -> SolverOptions:
        """The options of each single-cell solve: one CP-SAT worker when cells run side by side or
        deterministically."""
        s = self.solver
        workers = 1 if self.cell_jobs > 1 or s.deterministic else s.workers
        return SolverOptions(self.cell_time_limit_s, workers, s.seed, s.deterministic, s.deadline)

    def as_dict(self) -> dict:
        """The options as the report states them (`jobs` resolved; the comparisons show in the result)."""
        return {**self.solver.as_dict(), "cell_time_limit_s": self.cell_time_limit_s, "jobs": self.cell_jobs,
                "screen": self.screen, "cuts": self.cuts, "method": self.method}

    def hashed(self, objective: str) -> dict:
        """The options that change the answer, with the objective: what the report's `inputs_hash` covers."""
        return {"objective": objective, **self.solver.as_dict(), "cell_time_limit_s": self.cell_time_limit_s,
                "screen": self.screen, "cuts": self.cuts, "method": self.method}


class HowFound(Enum):
    """How the best per-cell dataflow on one fixed hardware was found (`hardware_tried[].how`)."""

    PER_CELL = "per cell"  # the cells' separate optima fit together (the relaxation is tight)
    SINGLE_COPY = "one weight copy per operator"  # every model keeps one copy of each weight tensor
    MIX_MODEL = "mix model, hardware fixed"
    DECOMPOSITION = "decomposition, hardware fixed"  # the search of MIX-17 on that one tuple


@dataclass
class HardwareResult:
    """The best per-cell dataflow found on one fixed hardware, and how it was found."""

    archs: tuple[ArchConfig, ...]
    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN
    evaluations: list[Evaluation] | None
    how: HowFound
    value: Fraction | None = None  # the mix objective, exact

    def as_dict(self) -> dict:
        return {"archs": [a.label() for a in self.archs], "status": self.status, "how": self.how.value,
                "objective": None if self.value is None else float(self.value)}


@dataclass(frozen=True)
class CellClaim:
    """What a model computes for one cell's design: round time (ns), energy per round (nJ) and expected
    tokens per round (x TOKENS_SCALE); the evaluator must price the design the same."""

    round_time_ns: int
    energy_nj_per_round: int
    tokens_per_round_micro: int

    @classmethod
    def of(cls, m: Metrics) -> CellClaim:
        """The evaluator's values."""
        return cls(m.round_time_ns, m.energy_nj_per_round, m.tokens_per_round_micro)

    def as_dict(self) -> dict:
        return {"round_time_ns": self.round_time_ns, "energy_nj_per_round": self.energy_nj_per_round,
                "tokens_per_round_micro": self.tokens_per_round_micro}


@dataclass(frozen=True)
class StageSolve:
    """The numbers of one objective model's CP-SAT solve (`scale`: units per 10^6 ns or nJ)."""

    solver_wall_s: float
    deterministic_time: float
    scale: int
    variables: int
    constraints: int
    cp_objective: int | None
    cp_bound: int | None


@dataclass(frozen=True)
class MixStage:
    """One entry of a solve's stage log: a CP-SAT solve (its status, and `solve` for an objective model),
    or a note (no status)."""

    stage: str
    wall_s: float
    status: str | None = None
    solve: StageSolve | None = None

    def as_dict(self) -> dict:
        out: dict = {"stage": self.stage}
        if self.status is not None:
            out["status"] = self.status
        out["wall_s"] = self.wall_s
        if self.solve is not None:
            s = self.solve
            out.update({"solver_wall_s": s.solver_wall_s, "deterministic_time": s.deterministic_time,
                        "scale": s.scale, "variables": s.variables, "constraints": s.constraints,
                        "cp_objective": s.cp_objective, "cp_bound": s.cp_bound})
        return out


@dataclass(frozen=True)
class MixSolveLog:
    """What `solve_mix` did besides its answer (the report's `extra`, `as_dict`): the options, the rounding
    of the final model's metrics, every CP-SAT stage, seconds per phase, the claims verified against the
    evaluator, the hardware tried before the mix model, and sizes."""

    options: MixOptions
    scale: int | None  # the mix model's units per 10^6 ns (nJ); None when no stage ran
    rounding: str | None
    stages: tuple[MixStage, ...]
    phases_s: Mapping[str, float]  # phase -> seconds, in the order run
    claimed: tuple[CellClaim, ...]
    hardware_tried: tuple[HardwareResult, ...]
    single_cell_fixed_hardware_solves: int
    weights_integer: tuple[int, ...]
    model_variables: int
    model_constraints: int

    def as_dict(self) -> dict:
        return {"options": self.options.as_dict(), "scale": self.scale, "rounding": self.rounding,
                "stages": [s.as_dict() for s in self.stages], "phases_s": dict(self.phases_s),
                "claimed": [c.as_dict() for c in self.claimed],
                "hardware_tried": [hr.as_dict() for hr in self.hardware_tried],
                "single_cell_fixed_hardware_solves": self.single_cell_fixed_hardware_solves,
                "weights_integer": list(self.weights_integer),
                "model_size": {"variables": self.model_variables, "constraints": self.model_constraints}}
