"""The one exception type users can cause: the CLI prints its message on one line and exits with 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic loads with the models that raise it, not with `--help`
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
        if ":" in msg.split(" ")[0]:  # the validator already named the field, relative to `loc`
            return f"{loc}.{msg}" if loc else msg
    return f"{loc or root}: {msg}"


def reject_bool_numbers(model_cls, data):
    """A `mode="before"` check: `true`/`false` where a number belongs (pydantic's lax mode reads
    `batch_size = true` as 1) is an error naming the field."""
    if not isinstance(data, dict):
        return data
    names = _NOT_BOOL.get(model_cls)
    if names is None:  # once per class: a check runs on every model built, designs in hot loops included
        names = _NOT_BOOL[model_cls] = tuple(
            name for name, field in model_cls.model_fields.items()
            if field.annotation is not bool and bool not in getattr(field.annotation, "__args__", ()))
    for name in names:
        value = data.get(name)
        if value is True or value is False:
            raise ValueError(f"{name}: expected a number, got {str(value).lower()}")
    return data


#: Per model class, its fields where `true`/`false` is refused (`reject_bool_numbers`), in field order.
_NOT_BOOL: dict[type, tuple[str, ...]] = {}
