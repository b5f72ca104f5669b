"""Commands `batch`, `report` and `sweep`: benchmark sets, their reports, acceptance sweeps.

They are thin: `batch.run_batch`, `report.build_report` and `sweep.sweep_acceptance` do the work; the
commands resolve inputs, draw progress bars (tqdm on stderr) and print the report.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from specpim_cp.cli.common import load, user_errors
from specpim_cp.errors import ScenarioError
from specpim_cp.sets import builtin_sets


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


@click.command()
@click.argument("target", required=False, metavar="[SET|FILE|DIR]")
@click.option("--out", type=click.Path(file_okay=False), help="results directory [default: results/NAME]")
@click.option("--jobs", type=click.IntRange(1), default=2, show_default=True,
              help="worker processes (instances solved in parallel)")
@click.option("--time-limit", type=click.FloatRange(0, min_open=True), default=60.0, show_default=True,
              help="per exact solve (deterministic time units when solving deterministically)")
@click.option("--methods", default="exact,heuristic,baselines,ladder", show_default=True,
              help="comma-separated: exact, heuristic, baselines, ladder")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="skip instances already in OUT/results.jsonl (--no-resume moves it to results.jsonl.old)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
              help="CP-SAT workers per exact solve (non-deterministic solving only)")
@click.option("--deterministic/--no-deterministic", default=True, show_default=True)
@click.option("--heuristic-budget", default="quick", show_default=True)
@click.option("--pareto/--no-pareto", default=True, show_default=True,
              help="latency-energy front of one scenario per family (with exact)")
@user_errors
def batch(target: str | None, out: str | None, jobs: int, time_limit: float, methods: str, resume: bool,
          seed: int, workers: int, deterministic: bool, heuristic_budget: str, pareto: bool) -> None:
    """Solve a benchmark set (default: paper) with every method; resumable; then write the report."""
    from specpim_cp.batch import BatchOptions, resolve_inputs, run_batch
    from specpim_cp.report import build_report

    name, files = resolve_inputs(target, builtin_sets())
    out_dir = Path(out) if out else Path("results") / name
    chosen = tuple(m.strip() for m in methods.split(",") if m.strip())
    if not chosen:
        raise ScenarioError("--methods: name at least one method")
    options = BatchOptions(methods=chosen, time_limit_s=time_limit, seed=seed, jobs=jobs, workers=workers,
                           deterministic=deterministic, heuristic_budget=heuristic_budget, pareto=pareto,
                           resume=resume)
    summary = run_batch(files, out_dir, options, TqdmProgress(f"batch {name}"))
    for note in summary.notes:
        click.echo(f"note: {note}", err=True)
    report = build_report(out_dir)
    click.echo(report.text)
    click.echo(f"\n{summary.total} instances: {summary.ran} run, {summary.skipped} already done, "
               f"{len(summary.failed)} failed; wall {summary.wall_s:.1f} s; results and report in {out_dir}/")
    if summary.failed:
        click.echo(f"error: failed (re-run to retry): {', '.join(summary.failed)}", err=True)
        sys.exit(1)


@click.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--no-plots", is_flag=True, help="tables and CSV only")
@user_errors
def report(directory: str, no_plots: bool) -> None:
    """Regenerate summary.md, results.csv, pareto/*.csv and the plots of a batch directory."""
    from specpim_cp.report import build_report

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
@click.option("--time-limit", type=click.FloatRange(0, min_open=True), default=60.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=click.IntRange(1), default=1, show_default=True)
@click.option("--deterministic/--no-deterministic", default=True, show_default=True)
@user_errors
def sweep(scenario: str, acceptance: str, drafter: str | None, out: str | None, time_limit: float, seed: int,
          workers: int, deterministic: bool) -> None:
    """Re-solve SCENARIO exactly as the drafters' acceptance rate varies; show where the optimum changes."""
    from tqdm import tqdm

    from specpim_cp.sweep import format_sweep, parse_range, sweep_acceptance, write_sweep

    sc = load(scenario)
    alphas = parse_range(acceptance)
    out_dir = Path(out) if out else Path("results") / f"sweep-{sc.name}"
    t0 = time.perf_counter()
    with tqdm(total=len(alphas), desc=f"sweep {sc.name}", unit="point", file=sys.stderr) as bar:
        result = sweep_acceptance(sc, alphas, drafter=drafter, time_limit_s=time_limit, workers=workers,
                                  seed=seed, deterministic=deterministic, on_point=lambda _: bar.update(1))
    files = write_sweep(result, out_dir)
    click.echo(format_sweep(result))
    for k, p in enumerate(result.change_points()):
        click.echo(f"{k + 1}. alpha = {p.acceptance:g}: {'; '.join(p.changes)}")
    elapsed = time.perf_counter() - t0
    click.echo(f"\n{len(alphas)} solves in {elapsed:.1f} s; wrote " + ", ".join(map(str, files)))

COMMANDS = (batch, report, sweep)
