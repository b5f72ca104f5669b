"""The one retry ladder for CP-SAT answers that contradict a design known to satisfy the model (OR-Tools
9.15 answered INFEASIBLE, or OPTIMAL above the known design, on some models with large coefficients:
formulations/objectives.md, 'A CP-SAT 9.15 fault'): CP-SAT's own presolve, a split into parts, no presolve."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, Protocol

from ortools.sat.python import cp_model

from specpim_cp.solvers.result import Status

#: CP-SAT's linearization level in energy solves (objectives.md, 'Scaled rows'): at the default (1) the LP
#: of the idle-energy rows stalls some energy steps (and the verifier alone's least energy, 7 s against
#: 0.2 s); at 0 they finish.
ENERGY_LINEARIZATION = 0


#: A rung's `cautious=NO_PRESOLVE`: CP-SAT without presolve, the ladder's last rung.
NO_PRESOLVE = "no presolve"
#: The ladder's middle rung: the caller's split of the solve into parts (per choice, per architecture).
SPLIT = "split"


class Solved(NamedTuple):
    """One CP-SAT solve: its status and the solver that holds the solution."""

    status: Status
    solver: cp_model.CpSolver


class Answer(NamedTuple):
    """An answer of `solve_with_ladder`: the status, the solver holding the solution (None when every part
    of a split was INFEASIBLE), the objective at the solution in integers (None without one: CP-SAT's
    `objective_value` is a double, inexact beyond 2^53) and what the caller attached to the model solved."""

    status: Status
    solver: cp_model.CpSolver | None
    value: int | None
    payload: object = None


class Part(NamedTuple):
    """One part of a split solve: a label for the stage, the model, its objective in integers, a payload."""

    label: str
    model: cp_model.CpModel
    value: Callable[[cp_model.CpSolver], int]
    payload: object = None


class RungSolve(Protocol):
    """How a ladder solves: `model` with `cautious` False (the caller's settings), True (CP-SAT's own presolve
    and LP settings) or `NO_PRESOLVE`; `part` labels a part of a split solve (None: the whole model)."""

    def __call__(self, model: cp_model.CpModel, cautious: bool | str, part: str | None = None) -> Solved: ...


def answer(solve: RungSolve, model: cp_model.CpModel, value: Callable[[cp_model.CpSolver], int],
           payload: object = None, cautious: bool | str = False) -> Answer:
    """One solve, with the objective read in integers (`value`) when there is a solution."""
    status, solver = solve(model, cautious)
    found = status in (Status.OPTIMAL, Status.FEASIBLE)
    return Answer(status, solver, value(solver) if found else None, payload)


def solve_with_ladder(solve: RungSolve, model: cp_model.CpModel, value: Callable[[cp_model.CpSolver], int],
                      contradicts: Callable[[Answer], bool] | None = None,
                      split: Callable[[], Iterable[Part] | None] | None = None, payload: object = None,
                      rungs: tuple[bool | str, ...] = (True, SPLIT, NO_PRESOLVE)) -> Answer:
    """Solve `model`; when the answer contradicts a design known to satisfy it (`contradicts`), climb until
    an answer does not: CP-SAT's own presolve settings, then the caller's `split` into parts solved one by
    one (`least_part`; skipped when `split` returns None or a part is not proven), then no presolve. Returns
    the first answer that does not contradict, else the last one (the caller checks `contradicts` again and
    says what the fault means). `rungs`: the rungs to climb, in order (a caller whose first solve already
    uses CP-SAT's own presolve starts at NO_PRESOLVE)."""
    got = answer(solve, model, value, payload)
    if contradicts is None or not contradicts(got):
        return got
    for rung in rungs:
        if rung == SPLIT:
            parts = None if split is None else split()
            if parts is None:
                continue
            whole = least_part(solve, parts)
            if whole.status == Status.UNKNOWN:
                continue
            got = whole
        else:
            got = answer(solve, model, value, payload, cautious=rung)
        if not contradicts(got):
            break
    return got


def least_part(solve: RungSolve, parts: Iterable[Part]) -> Answer:
    """Solve the parts of a split solve one after another on CP-SAT's own presolve; UNKNOWN when a part is
    not proven, INFEASIBLE when every part is, else OPTIMAL with the part of least value."""
    best: Answer | None = None
    for part in parts:
        status, solver = solve(part.model, True, part.label)
        if status == Status.INFEASIBLE:
            continue
        if status != Status.OPTIMAL:
            return Answer(Status.UNKNOWN, None, None)
        v = part.value(solver)
        if best is None or v < best.value:
            best = Answer(Status.OPTIMAL, solver, v, part.payload)
    return Answer(Status.INFEASIBLE, None, None) if best is None else best
