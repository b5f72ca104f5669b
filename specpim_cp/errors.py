"""The one exception type users can cause: the CLI prints its message on one line and exits with 2."""

from __future__ import annotations

from pydantic import ValidationError


class ScenarioError(ValueError):
    """Bad input or an infeasible request; the message names the field or the shortfall."""


def format_validation_error(exc: ValidationError, root: str = "scenario") -> str:
    """The first pydantic error as one line that starts with the field's path (`drafters[1].devices: ...`)."""
    err = exc.errors()[0]
    loc = ""
    for part in err["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
        if ":" in msg.split(" ")[0]:  # the validator already named the field
            return msg
    return f"{loc or root}: {msg}"
