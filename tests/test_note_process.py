"""The note's likely other side solved in a forked process beside the optimum (`api.solving.note_ahead`):
the note is the one computed after the optimum, whichever side the child solved, and a child's answer is
taken only for the side the note asks for (`forked.ForkedCall`)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_no_spec import CASES

from specpim_cp.api import solving
from specpim_cp.api.forked import ForkedCall, spare_cores
from specpim_cp.api.options import SolveOptions
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.solvers.alone import alone_scenario, speculating_scenario
from specpim_cp.solvers.exact import SolverOptions

pytestmark = pytest.mark.skipif(spare_cores() < 1 or "fork" not in multiprocessing.get_all_start_methods(),
                                reason="no spare core or no fork: the note is solved after the optimum")


@pytest.fixture(autouse=True)
def _one_thread(request):
    """A process with other threads does not fork (`ForkedCall.start`): these tests need it alone; in a suite
    whose earlier tests left one running (tqdm's monitor), `test_every_test_here_runs_in_a_fresh_interpreter`
    runs them."""
    if threading.active_count() > 1 and request.node.name != "test_every_test_here_runs_in_a_fresh_interpreter":
        pytest.skip(f"{threading.active_count() - 1} other threads run in this process: nothing is forked")


def test_every_test_here_runs_in_a_fresh_interpreter():
    """Where other threads run in this process the tests of this file skip: they run in a fresh interpreter
    then, and must all pass there (none skipped)."""
    if threading.active_count() == 1:
        return  # they run in this process
    here = Path(__file__)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here)],
                         check=False, capture_output=True, text=True, cwd=here.parent.parent, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    assert "passed" in last and "skipped" not in last, last


def _refuse(message: str) -> None:
    raise ScenarioError(message)


def _fail() -> None:
    raise ValueError("a bug")


def test_a_forked_call_answers_refuses_fails_and_stops():
    assert ForkedCall.start(pow, 2, 10).outcome() == ("ok", 1024)
    assert ForkedCall.start(_refuse, "no speculating design fits").outcome() == ("refused", "no speculating design fits")
    lost = ForkedCall.start(_fail).outcome()
    assert lost.kind == "lost" and "ValueError: a bug" in lost.value
    call = ForkedCall.start(time.sleep, 60)
    t0 = time.perf_counter()
    call.cancel()
    assert time.perf_counter() - t0 < 10 and not call.running
    late = ForkedCall.start(time.sleep, 60)
    assert late.outcome(timeout_s=0.2).kind == "lost" and not late.running  # a child that hangs


def _steps(fail_at: int | None = None, refuse: bool = False):
    for n in range(3):
        if n == fail_at:
            _refuse("step refused") if refuse else _fail()
        yield n * n


def test_a_forked_generator_answers_each_step_in_order():
    first = ForkedCall.start(_steps)
    second = first.following()
    assert first.outcome() == ("ok", 0) and second.outcome() == ("ok", 1)
    assert second.following().outcome() == ("ok", 4)
    ended = second.following().following().outcome()  # the generator is done: no fourth answer
    assert ended.kind == "lost" and not first.running
    refused = ForkedCall.start(_steps, 1, True)
    assert refused.outcome() == ("ok", 0) and refused.following().outcome() == ("refused", "step refused")
    failed = ForkedCall.start(_steps, 0).outcome()
    assert failed.kind == "lost" and "ValueError: a bug" in failed.value


def test_a_forked_generator_read_once_is_stopped_while_its_next_step_runs():
    call = ForkedCall.start(_sleep_after, 60)
    assert call.outcome() == ("ok", "ready") and call.running  # the child went on to its next step
    t0 = time.perf_counter()
    call.cancel()
    assert time.perf_counter() - t0 < 10 and not call.running
    assert call.following().outcome().kind == "lost"


def _sleep_after(seconds: float):
    yield "ready"
    time.sleep(seconds)
    yield "slept"


def test_a_refusal_in_the_child_is_the_notes_error_and_another_side_is_solved_here():
    refused = solving.NoteAhead(True, ForkedCall.start(_refuse, "infeasible: no speculating design fits"),
                                SolverOptions())
    sc = parse_scenario(CASES[0][0])
    with pytest.raises(ScenarioError, match="no speculating design fits"):
        refused.answer(speculating_scenario(sc))
    other = solving.NoteAhead(True, ForkedCall.start(time.sleep, 60), SolverOptions())
    assert other.answer(alone_scenario(sc)) is None  # the child solved the wrong side: stopped
    assert not other.call.running


@pytest.fixture
def forks(monkeypatch) -> list[bool]:
    """Per process forked by `solve`, in order: whether it searches the warm start (then the note's side; else
    only the note's side)."""
    calls: list[bool] = []
    start = solving.ForkedCall.start

    def counted(fn, *args):
        calls.append(fn is solving.warm_starts_then_note)
        return start(fn, *args)

    monkeypatch.setattr(solving.ForkedCall, "start", counted)
    return calls


def _notes(sc, monkeypatch, guess: str | None = None):
    """The note without the child, then with it, and whether the note took the child's answer. `guess`: the
    side the child starts on, None the heuristic's, "flip" the other one, "right" the optimum's own."""
    plain = solving.solve(sc, SolveOptions(deterministic=True, note_process=False)).report.extra["no_speculation"]
    taken: list[bool] = []
    answer, starts = solving.NoteAhead.answer, solving.warm_starts

    def recorded(self, side):
        got = answer(self, side)
        taken.append(got is not None)
        return got

    def guessed(*args, **kw):
        got = starts(*args, **kw)
        return got._replace(speculates=not got.speculates if guess == "flip" else plain["optimum_speculates"])

    monkeypatch.setattr(solving.NoteAhead, "answer", recorded)
    if guess is not None:
        monkeypatch.setattr(solving, "warm_starts", guessed)
    ahead = solving.solve(sc, SolveOptions(deterministic=True)).report.extra["no_speculation"]
    return plain, ahead, taken


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_note_is_the_same_with_its_side_solved_beside_the_optimum(case, monkeypatch):
    sc = parse_scenario(CASES[case][0])
    plain, ahead, taken = _notes(sc, monkeypatch)
    keys = ("optimum_speculates", "other", "other_status", "margin_pct", "error")
    assert {k: plain.get(k) for k in keys} == {k: ahead.get(k) for k in keys}
    assert ("cp_sat_s" in plain) == ("cp_sat_s" in ahead)
    assert len(taken) == 1


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_right_guess_takes_the_note_from_the_warm_starts_process(case, monkeypatch, forks):
    """With the guess set to the optimum's own side, the note is the answer of the one process `solve` forked
    (the warm start's, which went on to the note's side), and the same as the note solved here."""
    sc = parse_scenario(CASES[case][0])
    want, got, taken = _notes(sc, monkeypatch, guess="right")
    keys = ("optimum_speculates", "other", "other_status", "margin_pct", "error")
    assert {k: want.get(k) for k in keys} == {k: got.get(k) for k in keys}
    assert forks == [True] and taken == [True]


@pytest.mark.parametrize("case", [0, 1])
def test_a_wrong_guess_of_the_side_gives_the_same_note(case, monkeypatch):
    """The child solved the side the optimum is on first: the note is its next answer (the other side), or,
    when the child had not answered the first yet, solved here; the same either way."""
    sc = parse_scenario(CASES[case][0])
    plain, ahead, taken = _notes(sc, monkeypatch, guess="flip")
    assert len(taken) == 1
    assert plain["other"] == ahead["other"] and plain["other_status"] == ahead["other_status"]


def _sides(first_after_s: float, first, second):
    time.sleep(first_after_s)
    yield first
    yield second


def test_the_side_after_the_likely_one_is_taken_only_when_the_child_is_on_it():
    sc = parse_scenario(CASES[0][0])
    speculating = speculating_scenario(sc)
    call = ForkedCall.start(_sides, 0, "alone's answer", "speculating's answer")
    ahead = solving.NoteAhead(False, call, SolverOptions(), call.following())
    assert call.outcome() == ("ok", "alone's answer")  # the likely side answered: the child is on the next
    assert ahead.answer(speculating) == "speculating's answer"
    slow = ForkedCall.start(_sides, 60, "alone's answer", "speculating's answer")
    late = solving.NoteAhead(False, slow, SolverOptions(), slow.following())
    t0 = time.perf_counter()
    assert late.answer(speculating) is None  # still on the likely side: stopped, the side solved here
    assert time.perf_counter() - t0 < 10 and not slow.running
    plain = solving.NoteAhead(False, ForkedCall.start(_sides, 0, "a", "b"), SolverOptions())
    assert plain.answer(speculating) is None  # no next answer asked for (a process of its own)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_warm_start_searched_beside_the_model_build_is_the_one_searched_here(case, forks):
    """The heuristic searched in a forked process while the exact model is built gives the same first
    incumbent, optimum, tie-break and note as the heuristic searched first in this process."""
    sc = parse_scenario(CASES[case][0])
    calls = forks
    plain = solving.solve(sc, SolveOptions(deterministic=True, note_process=False))
    assert calls == []
    beside = solving.solve(sc, SolveOptions(deterministic=True))
    assert calls == [True]  # the warm start was searched in the child, which then solved the note's side
    assert beside.design == plain.design and beside.report.objective == plain.report.objective
    for key in ("tie_break", "canonical", "no_speculation"):
        got, want = beside.report.extra.get(key), plain.report.extra.get(key)
        if key == "no_speculation":
            got, want = ({k: v for k, v in n.items() if k != "cp_sat_s"} for n in (got, want))
        assert got == want
    first = [t[1] for t in (plain.report.extra.get("trajectory") or [])[:1]]
    assert first == [t[1] for t in (beside.report.extra.get("trajectory") or [])[:1]]


def test_nothing_is_forked_while_another_thread_runs():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert ForkedCall.start(pow, 2, 10) is None
    finally:
        stop.set()
        other.join()


def test_a_warm_start_hook_is_called_in_this_process_unless_marked_fork_safe(forks):
    sc = parse_scenario(CASES[1][0])
    forked = forks
    seen: list[int] = []
    solving.solve(sc, SolveOptions(deterministic=True, on_warm_start=lambda g, *_: seen.append(g)))
    assert seen and True not in forked  # the user's hook saw every generation: the warm start ran here

    def status_line(g, *_):  # a hook that only writes, like the command's status line
        pass

    status_line.fork_safe = True
    forked.clear()
    solving.solve(sc, SolveOptions(deterministic=True, on_warm_start=status_line))
    assert forked[:1] == [True]
