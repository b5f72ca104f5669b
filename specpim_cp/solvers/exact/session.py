"""The CP-SAT session every exact solve runs in: options, time budget, progress events, the incumbent's
hint, the solve log, and the retry ladder (ladder.py) on its solves (`SolveSession.solve_with_ladder`).
CP-SAT's integer statuses leave it as a `Status`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Protocol

from ortools.sat.python import cp_model

from specpim_cp.problem.design import Design
from specpim_cp.solvers.deadline import DETERMINISTIC_FLOOR_S, Deadline, cap_seconds, expired
from specpim_cp.solvers.exact.guards import ModelMismatch
from specpim_cp.solvers.exact.ladder import NO_PRESOLVE, Answer, Part, Solved, solve_with_ladder
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.result import Status


@dataclass(frozen=True)
class SolveProgress:
    """A progress event of a solve (for a CLI status line; nothing below the CLI prints): the stage,
    the incumbent's objective and the proven bound in evaluator units (ns/token, nJ/token)."""

    stage: str  # "latency" | "energy" | "pareto point N: latency" ...
    objective_name: str  # latency | energy
    incumbent: Fraction | None
    bound: Fraction | None
    iterations: int
    wall_s: float

    @property
    def gap(self) -> float | None:
        if self.incumbent is None or self.bound is None or self.incumbent == 0:
            return None
        return float((self.incumbent - self.bound) / self.incumbent)


ProgressHook = Callable[[SolveProgress], None]


@dataclass(frozen=True)
class SolverOptions:
    """How CP-SAT runs: the time limit (wall seconds, or deterministic time units with `deterministic`,
    which also means one worker), CP-SAT workers and the random seed. Part of every `inputs_hash`.
    `deadline`: the whole command's (solvers/deadline.py), not part of the answer's inputs; None: each
    solve has only its own budget."""

    time_limit_s: float = 60.0
    workers: int = 1
    seed: int = 0
    deterministic: bool = False
    deadline: Deadline | None = field(default=None, compare=False, repr=False)

    def with_deadline(self, deterministic_solves: float = 1.0) -> SolverOptions:
        """These options with the command's wall-clock deadline started now (kept when set): the time limit in
        seconds, or with `deterministic` `deterministic_solves` times it (a command whose limit counts per solve,
        such as the optimum then as much again for the ranges). Deterministic solves keep their deterministic
        limit; the deadline only stops new solves and caps each solve's wall safety net (docs/limits.md)."""
        if self.deadline is not None:
            return self
        seconds = self.time_limit_s * (deterministic_solves if self.deterministic else 1.0)
        return replace(self, deadline=Deadline.for_limit(seconds))

    @property
    def expired(self) -> bool:
        """Whether the command's deadline has passed."""
        return expired(self.deadline)

    def as_dict(self) -> dict:
        return {"time_limit_s": self.time_limit_s, "workers": self.workers, "seed": self.seed,
                "deterministic": self.deterministic}

    @classmethod
    def from_dict(cls, data: Mapping) -> SolverOptions:
        """The options `as_dict` wrote (other keys of `data` are ignored)."""
        return cls(data["time_limit_s"], data["workers"], data["seed"], data["deterministic"])


@dataclass
class TimeBudget:
    """Remaining time (wall seconds, or deterministic time units in deterministic mode)."""

    opts: SolverOptions
    used: float = 0.0

    def remaining(self) -> float:
        """Budget left; 0 once the command's deadline has passed."""
        if self.opts.expired:
            return 0.0
        return max(0.0, self.opts.time_limit_s - self.used)

    def configure(self, solver: cp_model.CpSolver) -> None:
        p = solver.parameters
        p.random_seed = self.opts.seed
        p.presolve_inclusion_work_limit = 0  # works around a presolve bug of OR-Tools 9.15
        # one presolve pass with light probing: each Dinkelbach iteration re-presolves a clone, and on the
        # large spaces the default effort costs more than it saves (formulations/objectives.md)
        p.max_presolve_iterations = 1
        p.cp_model_probing_level = 1
        p.log_search_progress = False
        rem = max(self.remaining(), 0.05)
        if self.opts.deterministic:
            p.num_workers = 1
            p.max_deterministic_time = rem
            # a wall safety net only, cut to the command's deadline (at least DETERMINISTIC_FLOOR_S)
            p.max_time_in_seconds = max(cap_seconds(max(10.0 * rem, 60.0), self.opts.deadline), DETERMINISTIC_FLOOR_S)
        else:
            p.num_workers = self.opts.workers
            p.max_time_in_seconds = cap_seconds(rem, self.opts.deadline)

    def charge(self, solver: cp_model.CpSolver) -> None:
        self.used += solver.deterministic_time if self.opts.deterministic else solver.wall_time


class Named(Protocol):
    """What a progress event reads of the objective it reports (a `RatioObjective`)."""

    name: str


class SolveSession:
    """One solve session over a SpecModel: incumbent, hints, budget, statistics."""

    def __init__(self, sm: SpecModel, opts: SolverOptions):
        self.sm = sm
        self.opts = opts
        self.budget = TimeBudget(opts)
        self.iterations = 0
        self.hint: list[tuple[cp_model.IntVar, int]] | None = None
        self.t0 = time.perf_counter()
        self.trajectory: list[tuple[float, float]] = []  # (wall s, objective) of every new incumbent
        self.deterministic_time = 0.0  # CP-SAT deterministic time summed over the optimisation solves
        self.cp_sat_s = 0.0  # CP-SAT's wall time summed over every solve of the session (tie-break included)
        self.solve_log: list[dict] = []  # per solve: stage, status, deterministic and wall time (profiling)
        self.on_progress: ProgressHook | None = None
        self.stage = ""
        #: CP-SAT's linearization level for the solves, None: TimeBudget's (CP-SAT's default). Energy
        #: steps use 0: the LP of the idle-energy rows stalled them (objectives.md, 'Scaled rows')
        self.linearization: int | None = None
        #: whether `finish` runs the canonical tie-break [OBJ-3]; off where only the optimum's value is used
        self.canonical = True
        #: whether the first incumbent is also chosen among the baselines (starts.py)
        self.start_baselines = True

    def progress(self, ratio: Named, incumbent: Fraction | None, bound: Fraction | None) -> None:
        if self.on_progress is not None:
            self.on_progress(SolveProgress(self.stage or ratio.name, ratio.name, incumbent, bound, self.iterations,
                                           time.perf_counter() - self.t0))

    @contextmanager
    def lp_level(self, level: int | None) -> Iterator[None]:
        """The solves inside at CP-SAT linearization `level` (None: TimeBudget's), the level before restored."""
        before, self.linearization = self.linearization, level
        try:
            yield
        finally:
            self.linearization = before

    def solve_confirmed(self, model: cp_model.CpModel, first_solution: bool = False) -> Solved:
        """`solve`, whose INFEASIBLE answer stands only when a cautious solve says it too: for a question
        nothing known can contradict (the ladder's trigger), on a model where the CP-SAT 9.15 fault was met
        (energy rows; objectives.md)."""
        solved = self.solve(model, first_solution)
        return self.solve(model, first_solution, cautious=True) if solved.status == Status.INFEASIBLE else solved

    def solve(self, model: cp_model.CpModel, first_solution: bool = False, cautious: bool | str = False) -> Solved:
        """One CP-SAT solve on the budget; `cautious` uses CP-SAT's own presolve and LP settings
        (`NO_PRESOLVE`: no presolve at all), the ladder's rungs after a contradiction."""
        invalid = model.validate()
        if invalid:
            raise ModelMismatch(f"CP-SAT rejects the model: {invalid}")
        if self.hint is not None:  # written into the proto in bulk (the model's own indices: a clone keeps them)
            model.clear_hints()
            hint = model.proto.solution_hint
            hint.vars.extend([v.index for v, _ in self.hint])
            hint.values.extend([int(val) for _, val in self.hint])
        solver = cp_model.CpSolver()
        self.budget.configure(solver)
        if cautious:
            default = cp_model.CpSolver().parameters
            # all of presolve at CP-SAT's defaults, the presolve-bug workaround too: on some energy steps that
            # workaround itself gave INFEASIBLE, the defaults the improving design
            for name in ("max_presolve_iterations", "cp_model_probing_level", "linearization_level",
                         "presolve_inclusion_work_limit"):
                setattr(solver.parameters, name, getattr(default, name))
        if self.linearization is not None:  # the energy steps' LP level holds in a cautious solve too
            solver.parameters.linearization_level = self.linearization
        if cautious == NO_PRESOLVE:  # the last resort after two contradictions: no presolve at all
            solver.parameters.cp_model_presolve = False
        if first_solution:
            solver.parameters.stop_after_first_solution = True
        status = Status.of_cp_sat(solver, solver.solve(model))
        self.budget.charge(solver)
        self.iterations += 1
        self.deterministic_time += solver.deterministic_time
        self.cp_sat_s += solver.wall_time
        self.solve_log.append({"stage": self.stage + (f" ({'no presolve' if cautious == NO_PRESOLVE else 'cautious'})"
                                                      if cautious else ""),
                               "status": status.value,
                               "deterministic_time": round(solver.deterministic_time, 3),
                               "wall_s": round(solver.wall_time, 3)})
        return Solved(status, solver)

    def solve_with_ladder(self, model: cp_model.CpModel, value: Callable[[cp_model.CpSolver], int],
                          contradicts: Callable[[Answer], bool] | None = None,
                          split: Callable[[], Iterable[Part] | None] | None = None,
                          payload: object = None) -> Answer:
        """`ladder.solve_with_ladder` on this session's solves (each part's label added to the stage)."""
        return solve_with_ladder(self.solve_rung, model, value, contradicts, split, payload)

    def solve_rung(self, model: cp_model.CpModel, cautious: bool | str, part: str | None = None) -> Solved:
        """One rung of the ladder: `solve`, the stage naming the part of a split solve."""
        if part is None:
            return self.solve(model, cautious=cautious)
        stage = self.stage
        self.stage = f"{stage} ({part})"
        try:
            return self.solve(model, cautious=cautious)
        finally:
            self.stage = stage

    def remember(self, solver: cp_model.CpSolver) -> Design:
        design = self.sm.decode(solver.boolean_value)
        self.hint = self.sm.decision_literals(design)
        return design
