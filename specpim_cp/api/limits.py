"""The option limits and defaults of the front door, cheap to import (no solver, no pydantic model), so that
`specpim-cp --help` stays fast; and the one parser of percentages (`--within`, `--resolution`, `--ranges`).

The plain values below copy constants of the stages they belong to (named in each comment);
tests/test_cli_options.py checks that every copy equals its source.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from specpim_cp.errors import ScenarioError

DEFAULT_RESOLUTION_PCT = "0.1"  # solvers/result.py: a Pareto front's resolution, percent [OBJ-2r]
DEFAULT_MAX_POINTS = 32  # solvers/result.py: a Pareto front's point budget [OBJ-2b]
MAX_FRONT_POINTS = 10_000  # solvers/result.py: the largest point budget
MIX_OBJECTIVES = ("latency", "energy", "regret")  # problem/mix.py
MIX_METHODS = ("auto", "decomposition", "cp-sat")  # solvers/mix/records.py
MAX_FEATURES = 10**8  # kernels/linear.py: a layer's width
MAX_TOKENS = 10**6  # kernels/linear.py: tokens of a pass
MAX_TENSOR_PARALLEL = 1024  # kernels/linear.py: GPUs sharing a layer
MIN_SIMULATE_ROUNDS = 100  # `simulate`: fewer rounds say nothing about a 95% confidence interval
WITHIN_HIGH_PCT = 1000  # `ranges --within`, `batch --ranges`: percent of the optimum, below this
RESOLUTION_HIGH_PCT = 50  # `pareto --resolution`: percent, below this
#: A percentage has at most this many digits and an exponent within +-MAX_PERCENT_EXPONENT: checked on the
#: text, before any exact arithmetic (Fraction('1e-999999999') would never return).
MAX_PERCENT_DIGITS = 30
MAX_PERCENT_EXPONENT = 30
_PERCENT = re.compile(r"^\s*\+?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*%?\s*$")
_RATIO = re.compile(r"^\s*\+?(\d+)\s*/\s*(\d+)\s*%?\s*$")


def option_limit(name: str) -> Any:
    """The `Limit` (runs/instances.py) of the option `seed`, `time_limit`, `workers` or `rounds`; imported
    when a command parses or shows its options, not when the package is imported."""
    from specpim_cp.runs.instances import SEED, TIME_LIMIT, WORKERS, Limit

    if name == "rounds":
        from specpim_cp.check.simulate import MAX_ROUNDS

        return Limit(True, MIN_SIMULATE_ROUNDS, MAX_ROUNDS, why="at most about 90 s and 250 MB")
    return {"seed": SEED, "time_limit": TIME_LIMIT, "workers": WORKERS}[name]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def percent(value: Any, option: str, high: int) -> Fraction:
    """A percentage (1, 0.5, 1e-3, 1%, a Fraction) as an exact Fraction of percent in [0, high); ScenarioError
    naming `option` and the accepted range otherwise. The text's digits and exponent are bounded first."""
    if isinstance(value, Fraction):
        value = f"{value.numerator}/{value.denominator}"
    elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ScenarioError(f"{option}: a percentage in [0, {high}) such as 1, 0.5, 1e-3 or 1%, got {_shown(value)}")
    text = str(value)
    ratio = _RATIO.match(text)
    m = None if ratio else _PERCENT.match(text)
    if ratio is None and (m is None or not (m.group(1) or m.group(2))):
        if text.strip().startswith("-") and _PERCENT.match(text.strip()[1:]):
            raise ScenarioError(f"{option}: must be in [0, {high}) percent, got {text.strip()}")
        raise ScenarioError(f"{option}: a percentage is a number in [0, {high}) such as 1, 0.5, 1e-3 or 1%, "
                            f"got {_shown(value)}")
    digits = sum(map(len, ratio.groups())) if ratio else len(m.group(1) or "") + len(m.group(2) or "")
    exponent = None if ratio else m.group(3)
    if digits > MAX_PERCENT_DIGITS or (exponent is not None and (
            len(exponent.lstrip("+-").lstrip("0")) > 3 or abs(int(exponent)) > MAX_PERCENT_EXPONENT)):
        raise ScenarioError(f"{option}: a percentage in [0, {high}) with at most {MAX_PERCENT_DIGITS} digits and "
                            f"an exponent from -{MAX_PERCENT_EXPONENT} to {MAX_PERCENT_EXPONENT}, got {_shown(value)}")
    try:
        pct = Fraction(text.strip().rstrip("%").strip().replace(" ", ""))
    except (ValueError, ZeroDivisionError):
        raise ScenarioError(f"{option}: a percentage is a number in [0, {high}) such as 1, 0.5, 1e-3 or 1%, "
                            f"got {_shown(value)}") from None
    if not 0 <= pct < high:
        raise ScenarioError(f"{option}: must be in [0, {high}) percent, got {text.strip()}")
    return pct
