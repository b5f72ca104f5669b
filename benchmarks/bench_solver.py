"""Solver benchmark: status, solve time, iterations, gap and model size for every scenario of a set.

    python benchmarks/bench_solver.py [SET_OR_DIR ...] [--time-limit S] [--workers N] [--deterministic]

Default: the `examples` set (and `paper`/`staged` when given). Prints a table and the median time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.exact import solve
from specpim_cp.report_text import table
from specpim_cp.scenario import load_scenario
from specpim_cp.sets import builtin_sets


def scenario_files(names: list[str]) -> list[Path]:
    sets = builtin_sets()
    out: list[Path] = []
    for n in names:
        p = sets.get(n, Path(n))
        out += sorted(p.glob("*.toml")) if p.is_dir() else [p]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["examples"])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--deterministic", action="store_true")
    args = ap.parse_args()
    rows, times = [], []
    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        t0 = time.perf_counter()
        try:
            r = solve(sc, time_limit_s=args.time_limit, workers=args.workers, deterministic=args.deterministic)
        except ScenarioError as exc:
            rows.append([sc.name, "ERROR", f"{time.perf_counter() - t0:.1f}", "", "", "", "", str(exc)[:60]])
            continue
        wall = time.perf_counter() - t0
        times.append(wall)
        size = r.report.extra.get("model_size", {})
        gap = "n/a" if r.report.gap is None else f"{100 * r.report.gap:.2g}%"
        rows.append([sc.name, r.report.status, f"{wall:.1f}", r.report.iterations, gap,
                     size.get("variables", ""), size.get("constraints", ""),
                     f"{float(r.report.objective) / 1e3:,.1f} us/token" if sc.objective == "latency" else
                     f"{float(r.report.objective):.4g}"])
    print(table(["scenario", "status", "wall s", "iterations", "gap", "variables", "constraints", "objective"],
                rows))
    if times:
        print(f"\n{len(times)} solved; median {statistics.median(times):.1f} s, max {max(times):.1f} s "
              f"(time limit {args.time_limit} s, workers {args.workers}, deterministic {args.deterministic})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
