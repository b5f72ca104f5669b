"""The CLI's percentage and point-budget options, parsed into the values the front door takes: one parser
for every percentage (`ranges --within`, `pareto --resolution`, `batch --ranges`), which accepts 1, 0.5,
1e-3 and 1% and refuses, in one line naming the option and its range, a value outside it or with more digits
or a larger exponent than a percentage needs, before any exact arithmetic (`specpim_cp.api.limits.percent`).
"""

from __future__ import annotations

from fractions import Fraction

from specpim_cp.api.limits import RESOLUTION_HIGH_PCT, WITHIN_HIGH_PCT, percent


def check_resolution(resolution_pct, option: str = "--resolution") -> Fraction:
    """A front resolution in percent as a fraction of 1 (0 <= r < 50%)."""
    return percent(resolution_pct, option, RESOLUTION_HIGH_PCT) / 100


def check_max_points(max_points, option: str = "--max-points") -> int | None:
    """A front's point budget [OBJ-2b]: None for 0 or None, else an integer from 2 to MAX_FRONT_POINTS."""
    from specpim_cp.api.solving import check_max_points as check

    return check(max_points, option)


def check_within(within_pct: Fraction | float | str, option: str = "--within") -> Fraction:
    """The tolerance in percent as a Fraction (0 <= within < 1000)."""
    return percent(within_pct, option, WITHIN_HIGH_PCT)


def check_ranges_within(value: str, option: str = "--ranges") -> str | None:
    """`batch --ranges PERCENT|off`: None for off, else the percentage as given without a trailing % (the
    text is part of each instance's key), checked here first."""
    if value.strip().lower() == "off":
        return None
    check_within(value, option)
    return value.strip().removesuffix("%").strip() if value.strip().endswith("%") else value
