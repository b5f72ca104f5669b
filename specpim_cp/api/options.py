"""The options of the front door: one frozen dataclass per function, with the defaults of its command, so
that `specpim-cp solve` and `specpim_cp.solve` run the same solve. Cheap to import (no solver)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from specpim_cp.api.limits import DEFAULT_MAX_POINTS, DEFAULT_RESOLUTION_PCT, option_limit
from specpim_cp.errors import ScenarioError

#: Progress hooks: CP-SAT's (a SolveProgress per Dinkelbach iteration), the heuristic's
#: (generation, generations, best so far, evaluations), a stage line, a finished point.
ProgressHook = Callable[[Any], None]
GenerationHook = Callable[[int, int, float, int], None]
StageHook = Callable[[str], None]


def check_solver(time_limit_s: float, workers: int, seed: int, deterministic: bool,
                 time_limit_option: str = "--time-limit") -> None:
    """The CP-SAT options every solve shares, each within its limit; --deterministic solves with one worker,
    so more workers with it is a contradiction."""
    option_limit("time_limit").check(time_limit_s, time_limit_option)
    option_limit("workers").check(workers, "--workers")
    option_limit("seed").check(seed, "--seed")
    if deterministic and workers > 1:
        raise ScenarioError(f"--workers {workers}: --deterministic solves with one worker (the same design every "
                            "run); drop --deterministic to use several workers")


@dataclass(frozen=True)
class SolverRun:
    """The CP-SAT options of one solve (`SolverOptions` of the exact solver)."""

    time_limit_s: float = 60.0
    workers: int = 1
    seed: int = 0
    deterministic: bool = False

    def validate(self) -> None:
        check_solver(self.time_limit_s, self.workers, self.seed, self.deterministic)

    def solver_options(self):
        from specpim_cp.solvers.exact import SolverOptions

        return SolverOptions(self.time_limit_s, self.workers, self.seed, self.deterministic)


@dataclass(frozen=True)
class SolveOptions(SolverRun):
    """`solve`: the objective (None: the scenario's), CP-SAT's options, the method (`cp-sat` or
    `brute-force`), the warm start (the heuristic's quick design as a CP-SAT hint, unless `warm_start` is
    False or a `hint` is given: a Design or a design file of the scenario's space), the catalog (None: the
    scenario's own) and progress hooks. `hint_label` is how messages name the hint. `note_process`: the note's
    likely other side solved beside the optimum in a forked process (where one can fork and a core is spare); the
    warm start goes there too unless `on_warm_start` must run in this process (a hook is called where the
    heuristic runs: one with a true `fork_safe` attribute, such as a status line on stderr, may run in the child)."""

    objective: str | None = None
    method: str = "cp-sat"
    warm_start: bool = True
    hint: Any = None  # a Design, or the path of a design file
    hint_label: str = "hint"
    catalog: Any = None
    on_progress: ProgressHook | None = None
    on_warm_start: GenerationHook | None = None
    #: Whether the note's likely other side is solved in a forked process beside the optimum, on a spare core
    #: (`api.solving.note_ahead`; the answers are the same either way)
    note_process: bool = True


@dataclass(frozen=True)
class ParetoOptions(SolverRun):
    """`pareto`: the front's time limit (300 s), resolution in percent [OBJ-2r] and point budget [OBJ-2b]
    (0 or None: no budget)."""

    time_limit_s: float = 300.0
    resolution_pct: str | Fraction | float = DEFAULT_RESOLUTION_PCT
    max_points: int | None = DEFAULT_MAX_POINTS
    catalog: Any = None
    on_progress: ProgressHook | None = None


@dataclass(frozen=True)
class RangesOptions(SolverRun):
    """`ranges`: the tolerance in percent of the optimum, the objective (None: the scenario's; latency or
    energy), CP-SAT's options (the time limit for the optimum, and as much again for the ranges)."""

    within_pct: str | Fraction | float = "1"
    objective: str | None = None
    catalog: Any = None
    on_stage: StageHook | None = None


@dataclass(frozen=True)
class HeuristicOptions:
    """`heuristic`: the budget (quick, paper, GENxPOPxLEAVES or a Budget), the seed, the polish (our
    addition; False: the paper's explorer as published), a wall-clock time limit (None: the budget alone;
    the search stops between candidates, so the result then depends on the machine)."""

    budget: Any = "quick"
    seed: int = 0
    polish: bool = True
    time_limit_s: float | None = None
    catalog: Any = None
    on_generation: GenerationHook | None = None


@dataclass(frozen=True)
class CompareOptions:
    """`compare`: the heuristic's budget and seed, the exact solve's time limit (deterministic units, and
    seconds for its wall-clock deadline)."""

    budget: Any = "quick"
    time_limit_s: float = 60.0
    seed: int = 0
    catalog: Any = None
    on_generation: GenerationHook | None = None
    on_progress: ProgressHook | None = None


@dataclass(frozen=True)
class MixOptions(SolverRun):
    """`solve-mix`: the objective (latency, energy, regret), the method (auto, decomposition, cp-sat), the
    whole solve's time limit (120 s) and each single-cell solve's (60 s)."""

    time_limit_s: float = 120.0
    objective: str = "latency"
    method: str = "auto"
    cell_time_limit_s: float = 60.0
    catalog: Any = None
    on_stage: StageHook | None = None

    def validate(self) -> None:
        option_limit("time_limit").check(self.time_limit_s, "--time-limit")
        option_limit("time_limit").check(self.cell_time_limit_s, "--cell-time-limit")
        super().validate()


@dataclass(frozen=True)
class SensitivityOptions:
    """`sensitivity`: the time limit (wall seconds for the whole study; deterministically also each solve's
    deterministic units), the seed, and `only` (vary the constants whose name contains it)."""

    time_limit_s: float = 60.0
    seed: int = 0
    only: str | None = None
    deterministic: bool = True
    catalog: Any = None
    on_point: StageHook | None = None


@dataclass(frozen=True)
class SweepOptions(SolverRun):
    """`sweep`: the acceptance rates to solve for, the drafter varied (None: every drafter)."""

    acceptances: Sequence[float] = ()
    drafter: str | None = None
    deterministic: bool = True
    on_point: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class SimulateOptions:
    """`simulate`: Monte Carlo rounds and their seed."""

    rounds: int = 100_000
    seed: int = 0
    catalog: Any = None


@dataclass(frozen=True)
class TreeOptions:
    """`export-tree`: the drafter (its 0-based index or model name; None: the only tree drafter), the engine
    whose loading limits the tree must meet (`medusa`, the strictest, or `eagle`), and Medusa's head count
    (None: not checked, the depth is stated in a note)."""

    drafter: str | None = None
    engine: str = "medusa"
    medusa_heads: int | None = None


PathLike = str | Path
