"""The one parser of percentages (`ranges --within`, `pareto --resolution`, `batch --ranges`, and the same
values given to the Python API or a batch's options): digits and exponent bounded on the text, before any
exact arithmetic (Fraction('1e-999999999') would never return). Cheap to import."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from specpim_cp.errors import ScenarioError

WITHIN_HIGH_PCT = 1000  # `ranges --within`, `batch --ranges`: percent of the optimum, below this
RESOLUTION_HIGH_PCT = 50  # `pareto --resolution`: percent, below this
#: A percentage has at most this many digits and an exponent within +-MAX_PERCENT_EXPONENT: checked on the
#: text, before any exact arithmetic (Fraction('1e-999999999') would never return).
MAX_PERCENT_DIGITS = 30
MAX_PERCENT_EXPONENT = 30
_PERCENT = re.compile(r"^\s*\+?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*%?\s*$")
_RATIO = re.compile(r"^\s*\+?(\d+)\s*/\s*(\d+)\s*%?\s*$")


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
