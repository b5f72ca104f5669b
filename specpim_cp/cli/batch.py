"""Commands `batch`, `grid`, `report` and `sweep`: benchmark sets, grids, their reports, acceptance sweeps.

They are thin: `batch.run_batch`, `grid.run_grid`, `report.build_report` and `sweep.sweep_acceptance` do
the work; the commands check every option first, resolve inputs, show progress on stderr (a tqdm bar on a
terminal, else one line per finished instance) and print the report.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import click

from specpim_cp.cli.common import (
    SEED_TYPE,
    TIME_LIMIT_TYPE,
    WORKERS_TYPE,
    catalog_option,
    check_workers,
    load,
    user_errors,
)

#: The folder the default output folders of `batch`, `grid` and `sweep` go in (one per set, grid, scenario).
RESULTS = Path("results")


class LineProgress:
    """`BatchProgress` for a log (stderr is not a terminal): one line per finished instance, nothing else."""

    def __init__(self, desc: str):
        self.desc = desc
        self.done = 0
        self.total = 0
        self.t0 = time.perf_counter()

    def start(self, total: int, done: int) -> None:
        self.total, self.done = total, done

    def begin(self, label: str) -> None: ...

    def end(self, label: str, records: list) -> None:
        self.done += 1
        statuses = ", ".join(sorted({r.status or "-" for r in records})) or "skipped (its source failed)"
        errors = "; ".join(f"{r.part}: {r.error}" for r in records if r.status == "ERROR")
        click.echo(f"{self.desc}: {self.done}/{self.total} {label}: {statuses}"
                   + (f" ({errors})" if errors else "") + f" [{time.perf_counter() - self.t0:.0f} s]", err=True)

    def close(self) -> None: ...


def progress_for(desc: str):
    """A tqdm bar on a terminal, one line per finished instance otherwise (no bar in logs)."""
    return TqdmProgress(desc) if sys.stderr.isatty() else LineProgress(desc)


class TqdmProgress:
    """`BatchProgress` as a tqdm bar: instances done / total, the running ones, elapsed time."""

    def __init__(self, desc: str):
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread in a process that forks solver workers
        self._tqdm = tqdm
        self.desc = desc
        self.bar = None
        self.running: list[str] = []

    def start(self, total: int, done: int) -> None:
        self.bar = self._tqdm(total=total, initial=done, desc=self.desc, file=sys.stderr, dynamic_ncols=True,
                              bar_format="{desc}: {n}/{total} |{bar}| {elapsed}{postfix}")

    def _postfix(self) -> None:
        text = ", ".join(self.running)
        self.bar.set_postfix_str(("running: " + text) if text else "", refresh=True)

    def begin(self, label: str) -> None:
        self.running.append(label)
        self._postfix()

    def end(self, label: str, records: list[dict]) -> None:
        if label in self.running:
            self.running.remove(label)
        for r in records:
            if r.status == "ERROR":
                self.bar.write(f"error: {label}: {r.error}", file=sys.stderr)
        self.bar.update(1)
        self._postfix()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_options(f):
    """Options shared by `batch` and `grid`: where and how instances run."""
    for opt in reversed((
        click.option("--out", type=click.Path(file_okay=False), help="results directory [default: results/NAME]"),
        click.option("--jobs", type=int, default=None,
                     help="instances in parallel [default: local 2 worker processes; ray: as many as the "
                          "cluster's CPUs allow]"),
        click.option("--executor", type=click.Choice(EXECUTOR_CHOICES), default="local", show_default=True,
                     help="local process pool, or Ray tasks (pip install -e '.[ray]')"),
        click.option("--ray-address", metavar="HOST:PORT",
                     help="Ray cluster to join (`ray start --head` there) [default: $RAY_ADDRESS, else a "
                          "local Ray runtime]"),
        click.option("--time-limit", type=float, default=60.0, show_default=True,
                     help="per instance: seconds for its whole run, a Pareto front 5 times as many; deterministically "
                          "also each solve's deterministic time units (docs/limits.md)"),
        click.option("--resume/--no-resume", default=True, show_default=True,
                     help="skip instances already in OUT/results.jsonl (--no-resume moves it to "
                          "results.jsonl.old)"),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--workers", type=int, default=1, show_default=True,
                     help="CP-SAT workers per exact solve (non-deterministic solving only; CPUs of a Ray task)"),
        click.option("--deterministic/--no-deterministic", default=True, show_default=True),
    )):
        f = opt(f)
    return f


EXECUTOR_CHOICES = ("local", "ray")


def _finish(summary, out_dir: Path, what: str) -> None:
    from specpim_cp.api import build_report

    for note in summary.notes:
        click.echo(f"note: {note}", err=True)
    report = build_report(out_dir)
    click.echo(report.text)
    click.echo(f"\n{summary.total} {what}: {summary.ran} run, {summary.skipped} already done, "
               f"{len(summary.failed)} failed; wall {summary.wall_s:.1f} s; results and report in {out_dir}/")
    if summary.failed:
        click.echo(f"error: failed (re-run to retry): {', '.join(summary.failed)}", err=True)
        sys.exit(1)


@contextlib.contextmanager
def _stop_on_sigterm():
    """SIGTERM unwinds like Ctrl-C while a run is on (a local Ray runtime and the worker pool are shut
    down; the folder lock and the finished records need nothing: the kernel drops the lock, every record
    is already fsynced)."""
    import signal

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _results_folder(name: str, prefix: str = "", fallback: str = "unnamed") -> Path:
    """The default output folder: results/NAME (a safe file name)."""
    from specpim_cp.api.inputs import path_in

    return path_in(RESULTS, name, prefix=prefix, fallback=fallback)


@click.command()
@click.argument("target", required=False, metavar="[SET|FILE|DIR]")
@run_options
@click.option("--methods", default="exact,heuristic,baselines,ladder", show_default=True,
              help="comma-separated: exact, heuristic, baselines, ladder")
@click.option("--heuristic-budget", default="quick", show_default=True, help="quick | paper | GENxPOPxLEAVES")
@click.option("--pareto/--no-pareto", default=True, show_default=True,
              help="latency-energy front of one scenario per family (with exact)")
@click.option("--mix-objective", type=click.Choice(["latency", "energy", "regret"]), default="latency",
              show_default=True, help="objective of the workload-mix files (solve-mix --objective)")
@click.option("--ranges", "ranges_within", default="1", show_default=True, metavar="PERCENT|off",
              help="with exact: decision ranges within PERCENT of each proven optimum ('Where the PIM goes'); "
                   "off: none")
@catalog_option
@user_errors
def batch(target: str | None, out: str | None, jobs: int | None, executor: str, ray_address: str | None,
          time_limit: float, resume: bool, seed: int, workers: int, deterministic: bool, methods: str,
          heuristic_budget: str, pareto: bool, mix_objective: str, ranges_within: str,
          catalog_files: tuple[str, ...]) -> None:
    """Solve a benchmark set (default: paper) with every method; resumable; then write the report.

    Workload-mix files (the built-in set `mix`, or any TOML with a [mix] table) are solved by solve-mix
    (its --time-limit for the mix model and for each single-cell solve), one instance per file; --methods
    applies to scenario files.
    """
    from specpim_cp.api import batch_inputs, batch_options, run_batch
    from specpim_cp.cli.options import check_ranges_within

    chosen = tuple(m.strip() for m in methods.split(",") if m.strip())
    within = check_ranges_within(ranges_within)
    options = batch_options(executor, jobs, methods=chosen, time_limit_s=time_limit, seed=seed, workers=workers,
                            deterministic=deterministic, heuristic_budget=heuristic_budget, pareto=pareto,
                            resume=resume, ray_address=ray_address, mix_objective=mix_objective,
                            ranges_within=within)
    name, files = batch_inputs(target)
    out_dir = Path(out) if out else _results_folder(name, fallback="batch")
    with _stop_on_sigterm():
        summary = run_batch(files, out_dir, options, progress_for(f"batch {name}"), name=name,
                            catalogs=catalog_files)
    _finish(summary, out_dir, "instances")


@click.command()
@click.argument("grid_file", metavar="GRID.toml")
@run_options
@catalog_option
@user_errors
def grid(grid_file: str, out: str | None, jobs: int | None, executor: str, ray_address: str | None,
         time_limit: float, resume: bool, seed: int, workers: int, deterministic: bool,
         catalog_files: tuple[str, ...]) -> None:
    """Solve every cell of a grid exactly (with the baselines per cell); resumable; then write the report.

    GRID.toml has `base = "SET/NAME or file"` (or a [base] table) and an [axes] table: batch_size,
    prompt_tokens, generated_tokens, acceptance, device_budget, memory_types, host, models (see docs/grids.md).
    """
    from specpim_cp.api import batch_options, load_grid, run_grid

    options = batch_options(executor, jobs, time_limit_s=time_limit, seed=seed, workers=workers,
                            deterministic=deterministic, resume=resume, ray_address=ray_address)
    g = load_grid(grid_file, extra_catalogs=catalog_files)
    out_dir = Path(out) if out else _results_folder(g.name, fallback="grid")
    with _stop_on_sigterm():
        summary = run_grid(g, out_dir, options, progress_for(f"grid {g.name}"))
    _finish(summary, out_dir, f"instances ({len(g.cells)} cells x exact and baselines)")


@click.command()
@click.argument("directory")
@click.option("--no-plots", is_flag=True, help="tables and CSV only")
@user_errors
def report(directory: str, no_plots: bool) -> None:
    """Regenerate summary.md, results.csv and the plots of a batch or grid directory."""
    from specpim_cp.api import build_report

    rep = build_report(directory, plots=not no_plots)
    click.echo(rep.text)
    click.echo("\nwrote " + ", ".join(str(p) for p in rep.files))


@click.command()
@click.argument("scenario")
@click.option("--acceptance", "acceptance", required=True, metavar="LO:HI:STEP",
              help="acceptance rates to solve for, e.g. 0.5:0.9:0.05")
@click.option("--drafter", help="vary only this drafter model (default: every drafter)")
@click.option("--out", type=click.Path(file_okay=False), metavar="DIR",
              help="output directory [default: results/sweep-NAME]")
@click.option("--time-limit", type=TIME_LIMIT_TYPE, default=60.0, show_default=True,
              help="seconds for the whole sweep; deterministically also each solve's deterministic time units")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--workers", type=WORKERS_TYPE, default=1, show_default=True)
@click.option("--deterministic/--no-deterministic", default=True, show_default=True)
@catalog_option
@user_errors
def sweep(scenario: str, acceptance: str, drafter: str | None, out: str | None, time_limit: float, seed: int,
          workers: int, deterministic: bool, catalog_files: tuple[str, ...]) -> None:
    """Re-solve SCENARIO exactly as the drafters' acceptance rate varies; show where the optimum changes."""
    from tqdm import tqdm

    from specpim_cp.api import SweepOptions
    from specpim_cp.api import sweep as run
    from specpim_cp.api.studies import acceptance_values, format_sweep, write_sweep

    check_workers(workers, deterministic)
    sc = load(scenario, catalog_files)  # the scenario carries its catalog files: every solve uses them
    alphas = acceptance_values(acceptance)
    out_dir = Path(out) if out else _results_folder(sc.name, prefix="sweep-")
    t0 = time.perf_counter()
    with tqdm(total=len(alphas), desc=f"sweep {sc.name}", unit="point", file=sys.stderr,
              disable=not sys.stderr.isatty()) as bar:  # no bar in a log
        result = run(sc, SweepOptions(time_limit, workers, seed, deterministic, acceptances=tuple(alphas),
                                      drafter=drafter, on_point=lambda _: bar.update(1)))
    files = write_sweep(result, out_dir)
    click.echo(format_sweep(result))
    for k, p in enumerate(result.change_points()):
        click.echo(f"{k + 1}. alpha = {p.acceptance:g}: {'; '.join(p.changes)}")
    elapsed = time.perf_counter() - t0
    click.echo(f"\n{len(alphas)} solves in {elapsed:.1f} s; wrote " + ", ".join(map(str, files)))

COMMANDS = (batch, grid, report, sweep)
