"""What every command shares: user errors as one line and exit code 2, the option types with their limits,
scenario loading, output, progress.

One validator per shared option: `SEED_TYPE`, `TIME_LIMIT_TYPE`, `WORKERS_TYPE` and `ROUNDS_TYPE` check
a value against its `Limit` (`runs/instances.py`, which `BatchOptions.validate` asks too) while click
parses the command line, so every command refuses `--seed -1` or `--time-limit nan` with the same line,
`error: --seed: must be an integer from 0 to 2147483647 (...), got -1`, before any work.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from typing import Self

import click

from specpim_cp.check.simulate import MAX_ROUNDS
from specpim_cp.errors import ScenarioError
from specpim_cp.files import write_atomic
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.runs.instances import SEED, TIME_LIMIT, WORKERS, Limit


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
    """A number option checked against its `Limit` while click parses (text is refused the same way)."""

    def __init__(self, limit: Limit):
        self.limit = limit
        self.name = "integer" if limit.integer else "float"

    def get_metavar(self, param, ctx=None) -> str:
        """The type and its range in --help, e.g. `INTEGER 0..2147483647`."""
        return f"{self.name.upper()} {self.limit.low:g}..{self.limit.high:.15g}"

    def convert(self, value, param, ctx):
        number = value
        if isinstance(value, str):
            try:
                number = int(value) if self.limit.integer else float(value)
            except ValueError:  # not a number (or thousands of digits): refused as the text it is
                pass
        problem = self.limit.problem(number)
        if problem is not None:
            option = param.opts[0] if param is not None and param.opts else self.name
            raise OptionValueError(option, problem, ctx, param)
        return number if self.limit.integer else float(number)


MIN_SIMULATE_ROUNDS = 100  # `simulate`: fewer rounds say nothing about a 95% confidence interval
ROUNDS = Limit(True, MIN_SIMULATE_ROUNDS, MAX_ROUNDS, why="at most about 90 s and 250 MB")
SEED_TYPE = LimitedNumber(SEED)
TIME_LIMIT_TYPE = LimitedNumber(TIME_LIMIT)
WORKERS_TYPE = LimitedNumber(WORKERS)
ROUNDS_TYPE = LimitedNumber(ROUNDS)


def catalog_option(f):
    """`--catalog FILE` (repeatable): user catalog TOML merged over the built-in catalog, after a
    scenario's own `catalog` files."""
    return click.option("--catalog", "catalog_files", multiple=True, metavar="FILE",
                        help="user catalog TOML (models, hosts, memories, acceptance; repeatable), merged over "
                             "the built-in catalog after the scenario's own `catalog` files")(f)


def load(name: str, catalog_files: tuple[str, ...] = ()):
    """A scenario from a TOML/JSON path or a built-in `SET/NAME`, with --catalog files added to its own."""
    from specpim_cp.problem.scenario import load_scenario

    return load_scenario(resolve_scenario_path(name), extra_catalogs=catalog_files)


def load_with_catalog(name: str, catalog_files: tuple[str, ...] = ()):
    """(scenario, the one Catalog every step of the command prices it with)."""
    from specpim_cp.problem.scenario import scenario_catalog

    sc = load(name, catalog_files)
    return sc, scenario_catalog(sc)


def user_catalog(catalog_files: tuple[str, ...] = ()):
    """The catalog of a command without a scenario: built-in plus --catalog files."""
    from pathlib import Path

    from specpim_cp.catalog import load_catalog

    return load_catalog([str(Path(p).absolute()) for p in catalog_files])


def emit(text: str, output: str | None) -> None:
    """Print, or write atomically to `output`."""
    check_writable(output, "-o")
    if output is not None:
        write_atomic(output, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


def check_time_limit(value: float, option: str = "--time-limit") -> float:
    """A time limit within TIME_LIMIT (finite: click's FloatRange lets nan and inf through)."""
    return TIME_LIMIT.check(value, option)


def check_workers(workers: int, deterministic: bool) -> None:
    """Workers within WORKERS; --deterministic solves with one CP-SAT worker: more with it is a contradiction."""
    WORKERS.check(workers, "--workers")
    if deterministic and workers > 1:
        raise ScenarioError(f"--workers {workers}: --deterministic solves with one worker (the same design every "
                            "run); drop --deterministic to use several workers")


def check_writable(path: str | None, option: str) -> None:
    """Fail before a long run when `path`'s folder exists as a regular file (write_atomic fails later)."""
    if path is None:
        return
    if not path.strip():
        raise ScenarioError(f"{option}: an empty file name")
    from pathlib import Path

    for parent in Path(path).absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ScenarioError(f"{option} {path}: '{parent}' is a file, not a folder")
            return


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
