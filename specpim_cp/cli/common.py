"""What every command shares: user errors as one line and exit code 2, the option types with their limits,
scenario loading, output, progress.

One validator per shared option: `SEED_TYPE`, `TIME_LIMIT_TYPE`, `WORKERS_TYPE` and `ROUNDS_TYPE` check
a value against its `Limit` (`runs/instances.py`, which `BatchOptions.validate` asks too, fetched through
`specpim_cp.api.limits` when a command parses or shows its options) while click parses the command line, so
every command refuses `--seed -1` or `--time-limit nan` with the same line,
`error: --seed: must be an integer from 0 to 2147483647 (...), got -1`, before any work.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from typing import Self

import click

from specpim_cp.api.limits import (
    MIN_SIMULATE_ROUNDS,  # noqa: F401 -- the least `simulate --rounds`
    option_limit,
)
from specpim_cp.api.options import check_solver
from specpim_cp.errors import ScenarioError


def one_line(msg: str) -> str:
    """A message as one line (newlines joined with '; ')."""
    return "; ".join(part.strip() for part in str(msg).splitlines() if part.strip())


def fail(msg: str) -> None:
    click.echo(f"error: {one_line(msg)}", err=True)
    sys.exit(2)


def user_errors(fn):
    """Turn user-caused errors into one line and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ScenarioError as exc:
            fail(str(exc))
        except OSError as exc:  # a file the user named: unreadable, unwritable, a directory, ...
            where = exc.filename or "file"
            fail(f"{where}: {exc.strerror or exc}")

    return wrapper


class OptionValueError(click.BadParameter):
    """A value outside its option's limit, shown as `OPTION: must be ..., got VALUE` (as BatchOptions.validate
    words it), with no pointer to --help: the line already says what is allowed."""

    def __init__(self, option: str, problem: str, ctx: click.Context | None = None,
                 param: click.Parameter | None = None):
        super().__init__(problem, ctx=ctx, param=param)
        self.option = option

    def format_message(self) -> str:
        return f"{self.option}: {self.message}"


class LimitedNumber(click.ParamType):
    """A number option checked against its `Limit` while click parses (text is refused the same way); the
    Limit is looked up by name when first needed, so that defining the commands imports no solver."""

    def __init__(self, limit_name: str, integer: bool):
        self.limit_name = limit_name
        self.name = "integer" if integer else "float"

    @property
    def limit(self):
        return option_limit(self.limit_name)

    def get_metavar(self, param, ctx=None) -> str:
        """The type and its range in --help, e.g. `INTEGER 0..2147483647`."""
        return f"{self.name.upper()} {self.limit.low:g}..{self.limit.high:.15g}"

    def convert(self, value, param, ctx):
        number = value
        limit = self.limit
        if isinstance(value, str):
            try:
                number = int(value) if limit.integer else float(value)
            except ValueError:  # not a number (or thousands of digits): refused as the text it is
                pass
        problem = limit.problem(number)
        if problem is not None:
            option = param.opts[0] if param is not None and param.opts else self.name
            raise OptionValueError(option, problem, ctx, param)
        return number if limit.integer else float(number)


SEED_TYPE = LimitedNumber("seed", True)
TIME_LIMIT_TYPE = LimitedNumber("time_limit", False)
WORKERS_TYPE = LimitedNumber("workers", True)
ROUNDS_TYPE = LimitedNumber("rounds", True)


def catalog_option(f):
    """`--catalog FILE` (repeatable): user catalog TOML merged over the built-in catalog, after a
    scenario's own `catalog` files."""
    return click.option("--catalog", "catalog_files", multiple=True, metavar="FILE",
                        help="user catalog TOML (models, hosts, memories, acceptance; repeatable), merged over "
                             "the built-in catalog after the scenario's own `catalog` files")(f)


def load(name: str, catalog_files: tuple[str, ...] = ()):
    """A scenario from a TOML/JSON path or a built-in `SET/NAME`, with --catalog files added to its own."""
    from specpim_cp.api import load_scenario

    return load_scenario(name, catalog_files)


def load_with_catalog(name: str, catalog_files: tuple[str, ...] = ()):
    """(scenario, the one Catalog every step of the command prices it with)."""
    from specpim_cp.api import scenario_catalog

    sc = load(name, catalog_files)
    return sc, scenario_catalog(sc)


def user_catalog(catalog_files: tuple[str, ...] = ()):
    """The catalog of a command without a scenario: built-in plus --catalog files."""
    from specpim_cp.api import user_catalog as catalog

    return catalog(catalog_files)


def emit(text: str, output: str | None) -> None:
    """Print, or write atomically to `output`."""
    check_writable(output, "-o")
    if output is not None:
        from specpim_cp.api.inputs import write_atomic

        write_atomic(output, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


def check_time_limit(value: float, option: str = "--time-limit") -> float:
    """A time limit within its Limit (finite: click's FloatRange lets nan and inf through)."""
    return option_limit("time_limit").check(value, option)


def check_workers(workers: int, deterministic: bool) -> None:
    """Workers within their Limit; --deterministic solves with one CP-SAT worker: more with it is a
    contradiction (the front door's rule, asked before any work)."""
    check_solver(60.0, workers, 0, deterministic)


def check_writable(path: str | None, option: str) -> None:
    """Fail before a long run when `path` cannot be written (the front door's check of an output)."""
    from specpim_cp.api.inputs import check_output

    check_output(path, option)


class Progress:
    """One status line on stderr, rewritten in place; only when stderr is a terminal (else inert)."""

    def __init__(self, label: str):
        self.label = label
        self.active = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.shown = False

    def __bool__(self) -> bool:
        return self.active

    def show(self, text: str) -> None:
        if not self.active:
            return
        width = shutil.get_terminal_size((100, 20)).columns
        line = f"{self.label} [{time.perf_counter() - self.t0:.0f} s]: {text}"
        sys.stderr.write("\r" + line[: max(10, width - 1)] + "\033[K")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.active and self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
