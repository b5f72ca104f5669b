"""Parsing of the CLI's percentage and point-budget options into the validated values the solvers take
(`ScenarioError` naming the option otherwise)."""

from __future__ import annotations

from fractions import Fraction

from specpim_cp.errors import ScenarioError
from specpim_cp.solvers.result import MAX_FRONT_POINTS


def percent(value, name: str, high: int) -> Fraction:
    """A percentage option (`--within`, `--resolution`) as an exact Fraction of percent; ScenarioError
    naming `name` unless it is a number in [0, high)."""
    try:
        pct = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise ScenarioError(f"{name}: a percentage is a number such as 1 or 0.5, got {value!r}") from None
    if not 0 <= pct < high:
        raise ScenarioError(f"{name}: must be in [0, {high}) percent, got {value}")
    return pct


def check_resolution(resolution_pct) -> Fraction:
    """A front resolution in percent as a fraction of 1 (0 <= r < 50%)."""
    return percent(resolution_pct, "resolution", 50) / 100


def check_max_points(max_points) -> int | None:
    """A front's point budget [OBJ-2b]: None for 0 or None, else an integer from 2 to MAX_FRONT_POINTS."""
    if max_points is None:
        return None
    if isinstance(max_points, bool) or not isinstance(max_points, int) or not (
            max_points == 0 or 2 <= max_points <= MAX_FRONT_POINTS):
        raise ScenarioError(f"max-points: an integer from 2 to {MAX_FRONT_POINTS} (0: no budget), got {max_points!r}")
    return max_points or None


def check_within(within_pct: Fraction | float | str) -> Fraction:
    """The tolerance in percent as a Fraction (0 <= within < 1000)."""
    return percent(within_pct, "within", 1000)
