"""One whole-command deadline: a wall-clock time limit is a promise for the command, not for each of its
solves. Created once from `--time-limit` (`Deadline.for_limit`), carried by `SolverOptions`; every CP-SAT
solve is capped by `remaining()` and every loop (cells, stages, Dinkelbach steps, tie-break levels, range
questions, front points, sweep points) stops when it has `expired`, returning its best proven-so-far result
as FEASIBLE or TIME_LIMIT. With a deterministic time limit each solve keeps its deterministic budget (the same
answer on every machine whenever the command ends in time) and the deadline, the limit in seconds, only stops
new solves and caps each solve's wall safety net (docs/limits.md, "Time limits")."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from specpim_cp.errors import ScenarioError

#: Wall seconds a command may run past its time limit: start-up, reading the inputs, verifying the answer
#: with the evaluator and writing the report (docs/limits.md, measured by benchmarks/bench_time_limits.py).
MARGIN_S = 10.0
#: Least wall time a CP-SAT solve is given once the deadline has passed (it then only reports what it has).
LEAST_SOLVE_S = 0.01
#: Least wall safety net of a deterministic solve: one started just before the deadline may finish a little
#: of its deterministic budget, well within `MARGIN_S`.
DETERMINISTIC_FLOOR_S = 1.0


@dataclass(frozen=True)
class Deadline:
    """A point in time on a clock (`time.monotonic` by default; tests pass a deterministic one)."""

    at: float
    clock: Callable[[], float] = time.monotonic
    limit_s: float | None = None  # the time limit it was made from (for messages)

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock, seconds)

    @classmethod
    def for_limit(cls, time_limit_s: float) -> Deadline:
        """The deadline of a command given a wall-clock `time_limit_s`: that many seconds from now."""
        return cls.after(time_limit_s)

    def remaining(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at - self.clock())

    @property
    def expired(self) -> bool:
        return self.clock() > self.at

    def passed(self) -> bool:
        """`expired` as a call (the heuristic's spelling)."""
        return self.expired

    def cap(self, seconds: float) -> float:
        """`seconds`, cut to the time left (at least `LEAST_SOLVE_S`, so that a solve still reports)."""
        return max(min(seconds, self.remaining()), LEAST_SOLVE_S)


def cap_seconds(seconds: float, deadline: Deadline | None) -> float:
    """`seconds` cut to `deadline` (unchanged without one)."""
    return seconds if deadline is None else deadline.cap(seconds)


def expired(deadline: Deadline | None) -> bool:
    """Whether `deadline` (None: no deadline) has passed."""
    return deadline is not None and deadline.expired


class TimeLimitReached(ScenarioError):
    """The command's deadline passed before any answer existed (a one-line error, exit code 2)."""


def check(deadline: Deadline | None, doing: str) -> None:
    """Raise `TimeLimitReached` naming what was being done when `deadline` has passed (no answer yet)."""
    if expired(deadline):
        limit = f" ({deadline.limit_s:g} s)" if deadline.limit_s is not None else ""
        raise TimeLimitReached(f"--time-limit{limit}: no design found within the time limit (it passed while "
                               f"{doing})")
