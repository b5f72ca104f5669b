"""The limits of the options every command shares (`--seed`, `--time-limit`, `--workers`, heuristic budgets),
one rule per option: `BatchOptions.validate` and the CLI's option types both ask them, so every command refuses the same
values with the same words. Cheap to import (no scenario, no solver), so that `--help` shows them quickly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from specpim_cp.errors import ScenarioError


def shown(value: Any) -> str:
    """A user's value for an error line: numbers as given (very long ones cut), text quoted."""
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value) if isinstance(value, int) else repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Limit:
    """The values an option allows: an integer (`integer`) or a finite number from `low` to `high`, both
    included; `problem` says why a value is refused, in the words every command prints."""

    integer: bool
    low: float
    high: float
    unit: str = ""  # after "a finite number of", e.g. "seconds"
    why: str = ""  # where the high end comes from

    def describe(self) -> str:
        """E.g. 'an integer from 0 to 2147483647 (why)'."""
        what = "an integer" if self.integer else "a finite number" + (f" of {self.unit}" if self.unit else "")
        why = f" ({self.why})" if self.why else ""
        return f"{what} from {_plain(self.low)} to {_plain(self.high)}{why}"

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused (None: it is allowed)."""
        number = isinstance(value, int) if self.integer else isinstance(value, (int, float))
        if isinstance(value, bool) or not number or not self.low <= value <= self.high:  # NaN fails too
            return f"must be {self.describe()}, got {shown(value)}"
        return None

    def check(self, value: Any, option: str) -> Any:
        """`value`, or ScenarioError `OPTION: must be ..., got VALUE`."""
        problem = self.problem(value)
        if problem is not None:
            raise ScenarioError(f"{option}: {problem}")
        return value


MAX_SEED = 2**31 - 1  # CP-SAT's random_seed is a 32-bit integer
MIN_TIME_LIMIT_S = 0.1
MAX_TIME_LIMIT_S = 86_400.0  # one day per solve
MAX_WORKERS = 64  # CP-SAT workers (threads) of one solve
SEED = Limit(True, 0, MAX_SEED, why="CP-SAT's random seed is a 32-bit integer")
TIME_LIMIT = Limit(False, MIN_TIME_LIMIT_S, MAX_TIME_LIMIT_S, "seconds", "one day per solve")
WORKERS = Limit(True, 1, MAX_WORKERS, why="CP-SAT workers of one solve")
MAX_GENERATIONS, MAX_POPULATION, MAX_LEAVES = 100_000, 1_000_000, 10_000_000  # a GENxPOPxLEAVES budget


_BUDGET = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*$")


def heuristic_budget(value: str, option: str = "--heuristic-budget"):
    """'quick', 'paper' or GENERATIONSxPOPULATIONxLEAVES (e.g. 20x200x500) as run_heuristic's budget, within
    MAX_GENERATIONS, MAX_POPULATION and MAX_LEAVES (`heuristic --budget`, `batch --heuristic-budget`)."""
    if value in ("quick", "paper"):
        return value
    m = _BUDGET.match(str(value).lower())
    if m is None:
        raise ScenarioError(f"{option}: {shown(value)} is not quick, paper or GENxPOPxLEAVES (e.g. 20x200x500)")
    # more than 12 digits is beyond every limit (and int() refuses thousands of digits)
    generations, population, leaves = (int(x) if len(x) <= 12 else 10**12 for x in m.groups())
    if generations > MAX_GENERATIONS or not 2 <= population <= MAX_POPULATION or leaves > MAX_LEAVES:
        raise ScenarioError(f"{option}: {shown(value)} needs 0 <= generations <= {MAX_GENERATIONS}, "
                            f"2 <= population <= {MAX_POPULATION} and 0 <= leaves <= {MAX_LEAVES}")
    try:
        from specpim_cp.solvers.heuristic import Budget
    except ImportError:  # the method is skipped with a note anyway
        return value
    return Budget(generations=generations, population=population, mcts_leaves_per_model=leaves)
