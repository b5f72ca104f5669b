"""[NOSPEC] The optimum against the other side of its space, on the solve's own model: once the optimum is
known, the speculation literal z_0 is fixed to the side the optimum is not on (the verifier alone when it
speculates, else every design with drafters) and the same objective is minimised again on a copy of the same
model, its proven rows and bounds kept. No model is rebuilt and no tie-break is solved: the note needs only the
other side's optimal value. Its solves are reported under the stage "no speculation note"."""

from __future__ import annotations

from fractions import Fraction

from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import Design
from specpim_cp.solvers.alone import speculation_note_of
from specpim_cp.solvers.exact.finish import explain_infeasible
from specpim_cp.solvers.exact.fronts import epsilon_front
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.ratio import RatioObjective, minimize_ratio
from specpim_cp.solvers.exact.session import SolverOptions, SolveSession
from specpim_cp.solvers.exact.starts import best_choice_for, best_known
from specpim_cp.solvers.result import SolveResult, Status

#: The stage name of the note's solves in the report's solve log.
NOTE_STAGE = "no speculation note"


def other_side_note(sm: SpecModel, opts: SolverOptions, objective: str, result: SolveResult,
                    starts: list[Evaluation | Design | None]) -> dict | None:
    """The optimum's comparison with the other side (`alone.speculation_note_of`'s record), None when the
    space offers no design without drafters. `starts`: designs of the space known so far; those on the other
    side start its search. Adds the note's CP-SAT seconds and solves to `result`'s report."""
    if sm.no_spec is None or not sm.n_drafters:
        return None
    speculates = bool(result.design.drafters)
    base = sm.m
    sm.m = base.clone()  # the other side on a copy: the solve's model stays whole (`settled.py` keeps it)
    sm.excluded = frozenset(k for k, c in enumerate(sm.choices) if c.speculates == speculates)
    try:
        sm.m.add(sm.m.get_bool_var_from_proto_index(sm.no_spec.index) == (1 if speculates else 0))
        run = SolveSession(sm, opts)
        run.stage = NOTE_STAGE
        status, value = other_optimum(sm, run, objective, side_starts(sm, objective, not speculates, starts))
        error = explain_infeasible(sm, opts) if status == Status.INFEASIBLE else None
    finally:
        sm.m, sm.excluded = base, frozenset()
    extra = result.report.extra
    extra["cp_sat_s"] = round(extra.get("cp_sat_s", 0.0) + run.cp_sat_s, 3)
    extra.setdefault("solves", []).extend(
        {**entry, "stage": entry["stage"] if entry["stage"].startswith(NOTE_STAGE)
         else f"{NOTE_STAGE}: {entry['stage']}" if entry["stage"] else NOTE_STAGE}
        for entry in run.solve_log)
    return speculation_note_of(speculates, objective, result.report.objective,
                               None if value is None else (value, status), error)


def side_starts(sm: SpecModel, objective: str, speculating: bool, known: list[Evaluation | Design | None]
                ) -> list[Evaluation]:
    """The known designs on one side, with (speculating side) the best of the hint and baselines that
    speculate, given the best speculation choice (`best_choice_for`): a close first incumbent spares the
    first solution's search and Dinkelbach steps."""
    side = [e if isinstance(e, Evaluation) else sm.ev.evaluate(e) for e in known if e is not None]
    side = [e for e in side if bool(e.design.drafters) == speculating]
    if speculating:
        key = "energy" if objective == "edp" else objective
        best = min(side, key=lambda e: e.metrics.objective(key), default=None)
        best = best or best_known(sm, sm.ev, key, None, sm.scenario, speculating=True)
        if best is not None:
            alone = [k for k, c in enumerate(sm.choices) if not c.speculates]
            side.append(best_choice_for(sm, sm.ev, key, best, exclude=alone))
    return side


def other_optimum(sm: SpecModel, run: SolveSession, objective: str, side: list[Evaluation]
                  ) -> tuple[Status, Fraction | None]:
    """The other side's status and optimum (None without a design) for `objective` (latency, energy, EDP)."""
    if objective == "edp":
        start = min(side, key=lambda e: e.metrics.objective("energy"), default=None)
        front, status, _, _ = epsilon_front(sm, run, edp=True, start=start)
        if not front:
            return status, None
        best = min(e.metrics.objective("edp") for e in front)
        return (Status.OPTIMAL if status == Status.OPTIMAL else Status.FEASIBLE), best
    start = min(side, key=lambda e: e.metrics.objective(objective), default=None)
    status, _, value, _ = minimize_ratio(run, RatioObjective(sm, objective), start=start)
    return status, value
