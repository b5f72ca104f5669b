"""What every command shares: user errors as one line and exit code 2, scenario loading, output."""

from __future__ import annotations

import functools
import sys

import click

from specpim_cp.errors import ScenarioError
from specpim_cp.files import write_atomic
from specpim_cp.sets import resolve_scenario_path


def fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


def user_errors(fn):
    """Turn user-caused errors into one line and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ScenarioError as exc:
            fail(str(exc))
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            fail(f"{exc.filename}: {exc.strerror}")

    return wrapper


def load(name: str):
    """A scenario from a TOML/JSON path or a built-in `SET/NAME`."""
    from specpim_cp.scenario import load_scenario

    return load_scenario(resolve_scenario_path(name))


def emit(text: str, output: str | None) -> None:
    """Print, or write atomically to `output`."""
    if output:
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)
