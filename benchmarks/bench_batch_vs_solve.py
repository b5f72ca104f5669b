"""Batch records what solve proves: every exact instance of the built-in sets under `batch`'s default options.

    python benchmarks/bench_batch_vs_solve.py [SET ...] [--time-limit S] [--jobs N] [--out DIR]

For each set (default: every built-in scenario set; the `mix` set is bench_mix.py's), runs `batch` with the exact method and its default steps after
the solve (decision ranges within 1%, a Pareto front per family), then solves every scenario alone with the
same solver options, and prints per scenario the two statuses and whether the exact objectives agree. A step
after the solve that fails or is refused must never change the solve's record (the batch's `step_failed`
column says which step failed). Exits 1 when any instance disagrees.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from specpim_cp.problem.builtin_sets import builtin_sets, scenario_files
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.instances import BatchOptions
from specpim_cp.runs.store import read_records
from specpim_cp.solvers import exact
from specpim_cp.views.tables import table


def _exact(fraction) -> str:
    return f"{fraction.numerator}/{fraction.denominator}"


def compare_set(name: str, out: Path, time_limit_s: float, jobs: int) -> list[list[str]]:
    """One row per exact instance of set `name`: scenario, batch status, solve status, same objective, step."""
    files = scenario_files([name])
    options = BatchOptions(methods=("exact",), jobs=jobs, time_limit_s=time_limit_s)
    run_batch(files, out, options)
    records = {r.scenario: r for r in read_records(out) if r.method == "exact"}
    rows = []
    for path in files:
        sc = load_scenario(path)
        rec = records.get(sc.name)
        alone = exact.solve(sc, options=options.solver_options("exact"))
        same = rec is not None and rec.status == alone.report.status and (
            rec.objective_exact == _exact(alone.report.objective))
        rows.append([f"{name}/{path.stem}", rec.status if rec else "missing", str(alone.report.status),
                     "yes" if same else "NO", (rec.step_failed or "") if rec else ""])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", help="built-in set names (default: all)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", help="results folder (default: a temporary one)")
    args = ap.parse_args()
    names = args.sets or sorted(n for n in builtin_sets() if n != "mix")  # mixes: bench_mix.py
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out) if args.out else Path(tmp)
        for name in names:
            rows += compare_set(name, root / name, args.time_limit, args.jobs)
    print(table(["instance", "batch status", "solve status", "same objective", "step failed"], rows))
    bad = sum(r[3] != "yes" for r in rows)
    print(f"\n{len(rows)} exact instances, {bad} disagree; {time.perf_counter() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
