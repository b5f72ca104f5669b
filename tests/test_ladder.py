"""The one retry ladder for CP-SAT answers that contradict a known design (solvers/exact/ladder.py): which
rungs it climbs, in which order, and the mix session's use of it (its last rung only)."""

from __future__ import annotations

from ortools.sat.python import cp_model

from specpim_cp.solvers.exact.ladder import NO_PRESOLVE, Part, Solved, solve_with_ladder
from specpim_cp.solvers.exact.session import SolverOptions
from specpim_cp.solvers.mix.session import MixRun
from specpim_cp.solvers.result import Status


def _fake(answers: dict):
    """A rung solve answering `answers[cautious or part label]`, recording every call."""
    calls = []

    def solve(model, cautious, part=None):
        key = part if part is not None else cautious
        calls.append(key)
        return Solved(answers[key], None)

    return solve, calls


def _infeasible(a) -> bool:
    return a.status == Status.INFEASIBLE


def test_an_answer_that_does_not_contradict_is_solved_once():
    solve, calls = _fake({False: Status.OPTIMAL})
    got = solve_with_ladder(solve, None, lambda s: 7, _infeasible)
    assert calls == [False] and got.status == Status.OPTIMAL and got.value == 7


def test_the_default_ladder_climbs_cautious_then_split_then_no_presolve():
    answers = {False: Status.INFEASIBLE, True: Status.INFEASIBLE, "a": Status.UNKNOWN,
               NO_PRESOLVE: Status.OPTIMAL}
    solve, calls = _fake(answers)
    got = solve_with_ladder(solve, None, lambda s: 3, _infeasible, split=lambda: [Part("a", None, lambda s: 1)])
    assert calls == [False, True, "a", NO_PRESOLVE]  # an unproven part skips the split rung
    assert got.status == Status.OPTIMAL and got.value == 3


def test_a_proven_split_ends_the_climb_with_its_least_part():
    answers = {False: Status.INFEASIBLE, True: Status.INFEASIBLE, "a": Status.OPTIMAL, "b": Status.OPTIMAL}
    solve, calls = _fake(answers)
    parts = [Part("a", None, lambda s: 5, "A"), Part("b", None, lambda s: 2, "B")]
    got = solve_with_ladder(solve, None, lambda s: 0, _infeasible, split=lambda: parts)
    assert calls == [False, True, "a", "b"] and (got.value, got.payload) == (2, "B")


def test_given_rungs_replace_the_default_ladder():
    solve, calls = _fake({False: Status.INFEASIBLE, NO_PRESOLVE: Status.FEASIBLE})
    got = solve_with_ladder(solve, None, lambda s: 1, _infeasible, rungs=(NO_PRESOLVE,))
    assert calls == [False, NO_PRESOLVE] and got.status == Status.FEASIBLE


def _mix_run() -> MixRun:
    return MixRun(None, SolverOptions(10.0, 1, 0, True), None)  # `run` needs no mix model


def _counting(monkeypatch) -> list[bool]:
    presolve = []
    real = cp_model.CpSolver.solve

    def solve(self, model, *args, **kwargs):
        presolve.append(self.parameters.cp_model_presolve)
        return real(self, model, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", solve)
    return presolve


def test_the_mix_re_solves_an_optimal_answer_above_its_design_without_presolve(monkeypatch):
    """`above` (the tie-break's "OPTIMAL above the design so far") climbs to no presolve, without the
    INFEASIBLE stage note."""
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    run, presolve = _mix_run(), _counting(monkeypatch)
    status, solver = run.run(model, x, None, known_feasible=True, above=lambda s: s.value(x) >= 0)
    assert presolve == [True, False] and status == cp_model.OPTIMAL and solver.value(x) == 0
    assert run.stages == []


def test_the_mix_re_solves_an_infeasible_answer_with_a_known_design_and_says_so(monkeypatch):
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    model.add(x >= 11)
    run, presolve = _mix_run(), _counting(monkeypatch)
    status, _ = run.run(model, x, None, known_feasible=True)
    assert presolve == [True, False] and status == cp_model.INFEASIBLE
    assert [s.stage for s in run.stages] == [
        "CP-SAT returned INFEASIBLE on a model with a known feasible design; re-solved without presolve"]


def test_the_mix_takes_an_infeasible_answer_without_a_known_design(monkeypatch):
    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    model.add(x >= 11)
    run, presolve = _mix_run(), _counting(monkeypatch)
    status, _ = run.run(model, x, None)
    assert presolve == [True] and status == cp_model.INFEASIBLE
