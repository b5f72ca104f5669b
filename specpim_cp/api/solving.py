"""The front door's solves: `solve` (with the one warm-start and hint policy), `heuristic`, `pareto`,
`ranges`, `compare`, and the evaluator's prices `evaluate`, `baselines`, `simulate`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from specpim_cp.api.forked import ForkedCall
from specpim_cp.api.limits import RESOLUTION_HIGH_PCT, WITHIN_HIGH_PCT, percent
from specpim_cp.api.options import (
    CompareOptions,
    HeuristicOptions,
    ParetoOptions,
    RangesOptions,
    SimulateOptions,
    SolveOptions,
)
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.design import Design, load_design
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.runs.limits import heuristic_budget
from specpim_cp.solvers.result import MAX_FRONT_POINTS, SolveResult

if TYPE_CHECKING:  # the baselines and the Monte Carlo load with the functions that run them
    from specpim_cp.check.simulate import SimulationResult
    from specpim_cp.solvers.baselines import BaselineResult

__all__ = ["Comparison", "baseline_results", "baselines", "check_hint", "check_max_points", "compare", "design_of",
           "evaluate", "format_simulation", "heuristic", "heuristic_budget", "no_fit_detail", "pareto", "ranges",
           "simulate", "solve", "warm_start", "warm_starts"]


def _catalog(scenario: Scenario, catalog):
    return catalog if catalog is not None else scenario_catalog(scenario)


def format_simulation(result: SimulationResult) -> str:
    """A Monte Carlo result as a short table: simulated mean +- 95% CI vs the closed form."""
    from specpim_cp.check.simulate import format_simulation as formatted

    return formatted(result)


def design_of(design: Design | str | Path) -> Design:
    """A Design, or the design a file holds (a design, or any --json output holding one; FILE#NAME)."""
    return design if isinstance(design, Design) else load_design(str(design))


def check_hint(scenario: Scenario, design: Design, label: str = "hint", catalog=None) -> Design:
    """`design` as a CP-SAT hint: it must be a design of the scenario's (restricted) space, and evaluate."""
    from specpim_cp.problem.space import DesignSpace

    catalog = _catalog(scenario, catalog)
    bad = DesignSpace(scenario, catalog).violations(design)
    if bad:
        raise ScenarioError(f"{label}: not a design of scenario '{scenario.name}': {bad[0]}")
    try:
        Evaluator(scenario, catalog).evaluate(design)
    except ScenarioError as exc:
        raise ScenarioError(f"{label}: {exc}") from None
    return design


#: Largest share of a wall-clock time limit the warm start's heuristic may use (the exact solve gets the rest).
WARM_START_SHARE = 0.5


def warm_start(scenario: Scenario, options: SolveOptions, catalog=None, deadline=None) -> Design | None:
    """The design CP-SAT starts from: the checked hint, else the heuristic's quick design (none when
    `warm_start` is off or the heuristic finds none: the exact solver then names the real reason). With the
    command's `deadline` the heuristic stops at WARM_START_SHARE of the time left (deterministic: only at the
    deadline itself, so that the hint, and so the answer, is the same on any machine that ends in time)."""
    return warm_starts(scenario, options, catalog, deadline)[0]


class WarmStarts(NamedTuple):
    """`warm_starts`' answer: the design CP-SAT starts from, the heuristic's best speculating design when its
    quick design is the verifier alone, and the side of [NOSPEC] the optimum is likely on (`speculates`: the
    heuristic's best design of each side compared by the command's objective; None without the heuristic)."""

    start: Design | None = None
    speculating: Design | None = None
    speculates: bool | None = None


def warm_starts(scenario: Scenario, options: SolveOptions, catalog=None, deadline=None) -> WarmStarts:
    """`warm_start`'s design, then the heuristic's best speculating design when its quick design is the
    verifier alone ([NOSPEC]; else None): the note's speculating side starts from it; then the side the
    optimum is likely on (the note's other side is solved beside the optimum: `note_ahead`)."""
    catalog = _catalog(scenario, catalog)
    if options.hint is not None:
        label = options.hint_label if isinstance(options.hint, Design) else f"{options.hint_label} {options.hint}"
        hint = check_hint(scenario, design_of(options.hint), label, catalog)
        return WarmStarts(hint, None, bool(hint.drafters))
    if not options.warm_start:
        return WarmStarts()
    try:
        from specpim_cp.solvers.heuristic import run_heuristic
    except ImportError:
        return WarmStarts()
    try:
        share = 1.0 if options.deterministic else WARM_START_SHARE
        limit = None if deadline is None else share * deadline.remaining()
        found = run_heuristic(scenario, budget="quick", seed=options.seed, catalog=catalog,
                              on_generation=options.on_warm_start, time_limit_s=limit)
    except ScenarioError:
        return WarmStarts()
    objective = options.objective or scenario.objective
    sides = [e for e in (found.evaluation, found.speculating, found.alone) if e is not None]
    best = min(sides, key=lambda e: e.metrics.objective(objective))  # the returned design on a tie
    return WarmStarts(found.design, None if found.speculating is None else found.speculating.design,
                      bool(best.design.drafters))


def solve(scenario: Scenario, options: SolveOptions | None = None) -> SolveResult:
    """The provably best design of `scenario` (or the best found, its bound and gap): `report` (status,
    objective in evaluator units, bound, tie-break levels in `report.extra`), `design`, `evaluation`."""
    options = options or SolveOptions()
    options.validate()
    catalog = _catalog(scenario, options.catalog)
    if options.method == "brute-force":
        from specpim_cp.solvers.brute import brute_force

        if options.hint is not None:
            raise ScenarioError(f"{options.hint_label}: brute force enumerates every design; a hint is for "
                                "--method cp-sat")
        return with_speculation_note(scenario, brute_force(scenario, objective=options.objective, catalog=catalog),
                                     options, catalog)
    if options.method != "cp-sat":
        raise ScenarioError(f"method: cp-sat or brute-force, got {options.method!r}")
    from specpim_cp.solvers.exact import solve as cp_solve

    solver = options.solver_options().with_deadline()  # the command's: the warm start and the solves share it
    beside = Beside(scenario, options, catalog, solver)
    try:
        hint = beside.hint()
        res = cp_solve(scenario, objective=options.objective, options=solver, hint=hint, catalog=catalog,
                       on_progress=options.on_progress, start_baselines=baselines_start(scenario, options, hint))
        return with_speculation_note(scenario, res, options, catalog, solver, beside.starts()[:2], beside.note)
    finally:
        beside.close()


class Beside:
    """What `solve` runs beside the optimum's solve, in forked processes on a spare core
    (`SolveOptions.note_process`): the warm start's heuristic while the exact model is built and the verifier
    alone settled (`hint`, asked for by the exact solve when it picks its first incumbent), then, in the same
    process, the note's likely other side (`warm_starts_then_note`) while the optimum is built and searched.
    Without a spare core, fork or the option, both run here, one after the other, as before: the answers are
    the same either way."""

    def __init__(self, scenario: Scenario, options: SolveOptions, catalog, solver):
        self.scenario, self.options, self.catalog, self.solver = scenario, options, catalog, solver
        self._starts: WarmStarts | None = None
        self.note: NoteAhead | None = None
        self._search = None  # the warm start's heuristic, then the note's side, in a forked process
        hook = options.on_warm_start  # called where the heuristic runs: only a hook marked fork-safe goes along
        if options.hint is None and options.warm_start and options.note_process and options.workers == 1 and (
                hook is None or getattr(hook, "fork_safe", False)):
            self._search = ForkedCall.start(warm_starts_then_note, scenario, options, catalog, solver)
        if self._search is None:
            self.starts()

    def starts(self) -> WarmStarts:
        """The warm start (the forked search's, else searched here), and the note's side solved beside (by the
        same process after its search, else by one started now)."""
        if self._starts is None:
            got = None if self._search is None else self._search.result(_waiting(self.solver), lambda: None)
            if got is not None:
                self._starts = got
                guess = note_guess(self.scenario, self.options, got)  # the child's sides follow its starts
                first = self._search.following()
                self.note = None if guess is None else NoteAhead(not guess, first, self.solver, first.following())
            else:
                self._starts = warm_starts(self.scenario, self.options, self.catalog, self.solver.deadline)
                self.note = note_ahead(self.scenario, self.options, self.catalog, self.solver, self._starts)
        return self._starts

    def hint(self) -> Design | Callable[[], Design | None] | None:
        """The exact solve's hint: the warm start's design, or while the heuristic still searches beside, the
        function that waits for it (`exact.solve` asks for it once the model is built)."""
        return (lambda: self.starts().start) if self._starts is None else self._starts.start

    def close(self) -> None:
        """Stop what still runs beside (its answer is no longer wanted)."""
        for call in (self._search, self.note):
            if call is not None:
                call.cancel()


def baselines_start(scenario: Scenario, options: SolveOptions,
                    hint: Design | Callable[[], Design | None] | None) -> bool:
    """Whether the exact solve also starts from the baselines (`exact.solve(start_baselines=...)`): not when
    the hint is the heuristic's quick design and the objective is latency, the heuristic's own search objective
    (its search starts from the baselines' recipes: GPU-SI and the fixed-recipe PIM designs; on every
    paper-full scenario its design beat every baseline on latency). Under energy and EDP a baseline is often
    the better start (10 of 21 paper-full scenarios under energy, 6 under EDP), and a user's hint is only a hint.
    `hint` may be the function that gives the heuristic's design later (`Beside.hint`): the exact solve then prices
    the baselines when it gives none."""
    heuristic_hint = options.hint is None and hint is not None
    return not (heuristic_hint and (options.objective or scenario.objective) == "latency"
                and scenario.objective in ("latency", "request"))


def side_solver(options: SolveOptions, catalog, solver, starts: Sequence[Design | None] = ()
                ) -> Callable[[Scenario], SideAnswer]:
    """How the note solves a side of [NOSPEC] (the verifier alone, or the speculating scenario): with the
    command's options and deadline, no progress hooks and no tie-break (only its value is reported), hinted by
    the first of `starts` on that side (else the best speculating design by the heuristic's quick design, the
    verifier alone by its own settling)."""
    quiet = replace(options, hint=None, on_progress=None, on_warm_start=None, catalog=catalog)
    solver = quiet.solver_options() if solver is None else solver

    def solve_side(sc: Scenario) -> SideAnswer:
        if options.method == "brute-force":
            from specpim_cp.solvers.brute import brute_force

            got = brute_force(sc, objective=options.objective, catalog=catalog)
            return SideAnswer(got.report.objective, got.report.status, None)
        from specpim_cp.solvers.exact import solve as cp_solve

        start = next((d for d in starts if d is not None and bool(d.drafters) == bool(sc.drafters)), None)
        if start is None and sc.drafters:  # the verifier alone: its settling finds the optimum
            start = warm_start(sc, quiet, catalog, solver.deadline)
        got = cp_solve(sc, objective=options.objective, options=solver, hint=start, catalog=catalog,
                       canonical=False, start_baselines=baselines_start(sc, options, start))
        return SideAnswer(got.report.objective, got.report.status, got.report.extra.get("cp_sat_s", 0.0))

    return solve_side


class SideAnswer(NamedTuple):
    """A side's optimum for the note: its objective, status and seconds inside CP-SAT (None: no CP-SAT)."""

    objective: Fraction
    status: str
    cp_sat_s: float | None


#: Seconds past the command's deadline a process beside it may take to answer (its own solves stop at the
#: deadline; this bounds the wait should the child hang), then the call is run here.
BESIDE_GRACE_S = 10.0


def _waiting(solver) -> float | None:
    """How long to wait for a process beside `solver`'s solve: its deadline and BESIDE_GRACE_S (None: none)."""
    return None if solver.deadline is None else solver.deadline.remaining() + BESIDE_GRACE_S


class NoteAhead(NamedTuple):
    """The note's likely other side, solved in a forked process while this one solves the optimum
    (`note_ahead`, `warm_starts_then_note`): `speculates` says which side (the speculating scenario, or the
    verifier alone); `then`, where the process goes on to the side after it, that side's answer."""

    speculates: bool
    call: ForkedCall
    solver: object  # the command's SolverOptions, with its deadline
    then: ForkedCall | None = None

    def answer(self, side: Scenario) -> SideAnswer | None:
        """The child's answer for `side` (None when the child did not solve it, or failed otherwise than by
        refusing: `side` is then solved here); a refusal is raised as the ScenarioError it was. For the side
        after the likely one, the child is waited for only when it has answered the likely one (it is on
        `side` then, started earlier than this process could start it); else it is stopped."""
        if bool(side.drafters) == self.speculates:
            return self.call.result(_waiting(self.solver), lambda: None)
        if self.then is None or self.call.outcome(0).kind != "ok":
            self.call.cancel()
            return None
        return self.then.result(_waiting(self.solver), lambda: None)

    def cancel(self) -> None:
        self.call.cancel()


def note_guess(scenario: Scenario, options: SolveOptions, starts: WarmStarts) -> bool | None:
    """Whether the optimum likely speculates, for the note's side solved beside it (None when there is no note,
    the option is off, or CP-SAT already runs several workers): `starts.speculates`, True when unknown."""
    from specpim_cp.solvers.alone import has_note

    if not (options.note_process and has_note(scenario) and options.method == "cp-sat" and options.workers == 1):
        return None
    return starts.speculates if starts.speculates is not None else True


def note_sides(scenario: Scenario, options: SolveOptions, starts: WarmStarts) -> tuple[Scenario, Scenario] | None:
    """The note's likely other side, to solve beside the optimum, then the side after it (None: `note_guess`):
    first the side opposite to the likely optimum's."""
    from specpim_cp.solvers.alone import other_side

    guess = note_guess(scenario, options, starts)
    return None if guess is None else (other_side(scenario, guess), other_side(scenario, not guess))


def note_ahead(scenario: Scenario, options: SolveOptions, catalog, solver, starts: WarmStarts) -> NoteAhead | None:
    """Start solving the note's likely other side (`note_sides`) in a forked process, beside the optimum's
    solve (None when there is none to solve or no spare core). Its answer is the one the note would compute
    after the optimum (the same solve, its value proven either way); when the optimum lands on the other side,
    the child is stopped and the note solves its side as before."""
    sides = note_sides(scenario, options, starts)
    if sides is None:
        return None
    call = ForkedCall.start(side_solver(options, catalog, solver, starts[:2]), sides[0])
    return None if call is None else NoteAhead(bool(sides[0].drafters), call, solver)


def warm_starts_then_note(scenario: Scenario, options: SolveOptions, catalog, solver) -> Iterator:
    """The warm start's forked process: `warm_starts`' answer, then the note's likely other side solved, then
    the side after it (`note_sides`). The note's side so starts as soon as the heuristic has answered, not
    when the exact model, built meanwhile, asks for the hint; and when the guess was wrong, the right side is
    under way where the likely one was quick (the verifier alone, most often)."""
    starts = warm_starts(scenario, options, catalog, solver.deadline)
    yield starts
    solve_side = side_solver(options, catalog, solver, starts[:2])
    for side in note_sides(scenario, options, starts) or ():
        yield solve_side(side)


def with_speculation_note(scenario: Scenario, res: SolveResult, options: SolveOptions, catalog,
                          solver=None, starts: Sequence[Design | None] = (),
                          ahead: NoteAhead | None = None) -> SolveResult:
    """`res` with `report.extra["no_speculation"]`: the optimum against the other side of [NOSPEC] (the verifier
    alone, or the best speculating design), solved by `side_solver` (or taken from `ahead`, when it solved
    that side); and `report.extra["acceptance"]`: each drafter's acceptance rate and its origin."""
    from specpim_cp.problem.space import acceptance_origin
    from specpim_cp.solvers.alone import speculation_note

    solve_side = side_solver(options, catalog, solver, starts)

    def other(sc: Scenario) -> tuple[Fraction, str]:
        got = ahead.answer(sc) if ahead is not None else None
        if got is None:
            got = solve_side(sc)
        if got.cp_sat_s is not None:
            spent.append(got.cp_sat_s)
        return got.objective, got.status

    spent: list[float] = []  # the other side's seconds inside CP-SAT (the note's `cp_sat_s`)
    note = speculation_note(scenario, res, other)
    if note is not None:
        if spent:
            note["cp_sat_s"] = round(sum(spent), 3)
        res.report.extra["no_speculation"] = note
    res.report.extra["acceptance"] = [acceptance_origin(scenario, catalog, i).as_dict()
                                      for i in range(len(scenario.drafters))]
    return res


def no_fit_detail(scenario: Scenario, catalog=None) -> str:
    """Why no design fits, when a model's tensors exceed every allowed architecture (else '')."""
    from specpim_cp.solvers.exact.guards import check_capacity
    from specpim_cp.solvers.exact.model import SpecModel

    catalog = _catalog(scenario, catalog)
    try:
        check_capacity(SpecModel(scenario, catalog, Evaluator(scenario, catalog)))
    except ScenarioError as exc:
        return str(exc)
    return ""


def heuristic(scenario: Scenario, options: HeuristicOptions | None = None) -> SolveResult:
    """The paper's explorer (GA over dataflow, per-model MCTS over architecture), seeded; when no design
    fits, the capacity shortfall when there is one."""
    options = options or HeuristicOptions()
    from specpim_cp.solvers.heuristic import run_heuristic

    budget = heuristic_budget(options.budget, "budget") if isinstance(options.budget, str) else options.budget
    catalog = _catalog(scenario, options.catalog)
    try:
        return run_heuristic(scenario, budget=budget, seed=options.seed, catalog=catalog, polish=options.polish,
                             on_generation=options.on_generation, time_limit_s=options.time_limit_s)
    except ScenarioError as exc:
        if "no design" not in str(exc):
            raise
        raise ScenarioError(no_fit_detail(scenario, catalog) or str(exc)) from None


def check_max_points(max_points: Any, option: str = "max-points") -> int | None:
    """A front's point budget [OBJ-2b]: None for 0 or None, else an integer from 2 to MAX_FRONT_POINTS."""
    if max_points is None:
        return None
    if isinstance(max_points, bool) or not isinstance(max_points, int) or not (
            max_points == 0 or 2 <= max_points <= MAX_FRONT_POINTS):
        raise ScenarioError(f"{option}: an integer from 2 to {MAX_FRONT_POINTS} (0: no budget), got {max_points!r}")
    return max_points or None


def pareto(scenario: Scenario, options: ParetoOptions | None = None):
    """The latency-energy front (per token) with its status, resolution and cost (a ParetoFront)."""
    options = options or ParetoOptions()
    from specpim_cp.solvers import exact

    options.validate()
    resolution = percent(options.resolution_pct, "resolution", RESOLUTION_HIGH_PCT) / 100
    max_points = check_max_points(options.max_points)
    return exact.pareto(scenario, options=options.solver_options(), catalog=_catalog(scenario, options.catalog),
                        on_progress=options.on_progress, resolution=resolution, max_points=max_points)


def ranges(scenario: Scenario, options: RangesOptions | None = None):
    """Which values each decision takes over the designs within `within_pct` percent of the optimum, each
    proven (a RangesResult)."""
    options = options or RangesOptions()
    from specpim_cp.solvers.exact.ranges import decision_ranges

    options.validate()
    within = percent(options.within_pct, "within", WITHIN_HIGH_PCT)
    return decision_ranges(scenario, within_pct=within, objective=options.objective,
                           catalog=_catalog(scenario, options.catalog), options=options.solver_options(),
                           on_stage=options.on_stage)


@dataclass(frozen=True)
class Comparison:
    """`compare`: the exact optimum (hinted with the heuristic's design), the heuristic, the baselines."""

    exact: SolveResult
    heuristic: SolveResult
    baselines: list[BaselineResult]


def compare(scenario: Scenario, options: CompareOptions | None = None) -> Comparison:
    """Exact optimum (with proof) vs the heuristic (gap, time) vs the baselines."""
    options = options or CompareOptions()
    from specpim_cp.solvers.exact import SolverOptions
    from specpim_cp.solvers.exact import solve as cp_solve

    catalog = _catalog(scenario, options.catalog)
    heur = heuristic(scenario, HeuristicOptions(options.budget, options.seed, catalog=catalog,
                                                on_generation=options.on_generation))
    exact = cp_solve(scenario, options=SolverOptions(options.time_limit_s, seed=options.seed, deterministic=True),
                     hint=heur.design, catalog=catalog, on_progress=options.on_progress)
    from specpim_cp.solvers.baselines import run_baselines

    return Comparison(exact, heur, run_baselines(scenario, catalog))


def evaluate(scenario: Scenario, design: Design | str | Path, catalog=None) -> Evaluation:
    """The evaluator's price of `design` (a Design or a design file): the one source of truth."""
    return Evaluator(scenario, _catalog(scenario, catalog)).evaluate(design_of(design))


def baseline_results(scenario: Scenario, catalog=None) -> list[BaselineResult]:
    """Every baseline as the reports list it (an infeasible one carries its error); ScenarioError when even
    GPU-AR is infeasible (the verifier does not fit its devices)."""
    from specpim_cp.solvers.baselines import run_baselines

    res = run_baselines(scenario, _catalog(scenario, catalog))
    if res and res[0].evaluation is None:
        raise ScenarioError(res[0].error or "the verifier does not fit its devices")
    return res


def baselines(scenario: Scenario, catalog=None) -> dict[str, Evaluation]:
    """The feasible baselines by the names reports print ("GPU-AR", "GPU-SI", ...) -> their Evaluation."""
    return {b.name: b.evaluation for b in baseline_results(scenario, catalog) if b.evaluation is not None}


def simulate(scenario: Scenario, design: Design | str | Path, options: SimulateOptions | None = None):
    """Monte Carlo rounds of `design` next to the closed forms (a DesignSimulation)."""
    options = options or SimulateOptions()
    from specpim_cp.check.simulate_design import simulate_design

    return simulate_design(scenario, design_of(design), options.rounds, options.seed,
                           _catalog(scenario, options.catalog))
