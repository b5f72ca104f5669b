"""Solver benchmark: status, solve time, iterations, gap and model size for every scenario of a set.

    python benchmarks/bench_solver.py [SET_OR_DIR ...] [--time-limit S] [--workers N] [--deterministic]
                                      [--json OUT] [--compare REF.json ...] [--profile]

Default: the `examples` set (and `paper`/`staged` when given). Prints a table and the median time.
Every row carries the wall time, CP-SAT's deterministic time (summed over the Dinkelbach solves;
comparable across machine loads, unlike the wall time) and the 1-minute load average when the
scenario finished, since the machine may be shared. `--json` writes one record per scenario (exact
objective included); `--compare` reads such a file, or a golden file (`tests/golden/paper.json`), and
adds the objective's change against it per scenario (matched by file stem, then scenario name): 0 for
an unchanged optimum. `--profile` prints every CP-SAT solve of every scenario (stage, status, times).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.views.tables import table


def scenario_files(names: list[str]) -> list[Path]:
    sets = builtin_sets()
    out: list[Path] = []
    for n in names:
        p = sets.get(n, Path(n))
        out += sorted(p.glob("*.toml")) if p.is_dir() else [p]
    return out


def load_reference(paths: list[str]) -> dict[str, Fraction]:
    """Exact objectives by file stem and scenario name, from bench JSON files or golden files."""
    ref: dict[str, Fraction] = {}
    for p in paths:
        data = json.loads(Path(p).read_text())
        records = data["scenarios"]
        items = records.items() if isinstance(records, dict) else ((r["file"], r) for r in records)
        for key, r in items:
            if r.get("objective_exact"):
                ref[key] = Fraction(r["objective_exact"])
                if "name" in r:
                    ref.setdefault(r["name"], ref[key])
    return ref


def load_1min() -> float:
    return os.getloadavg()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["examples"])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--json", help="write the per-scenario records to this file")
    ap.add_argument("--compare", nargs="*", default=[], help="bench JSON or golden files to compare objectives with")
    ap.add_argument("--profile", action="store_true", help="print every CP-SAT solve of every scenario")
    args = ap.parse_args()
    ref = load_reference(args.compare)
    rows, times, dtimes, records = [], [], [], []
    load_start = load_1min()
    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        t0 = time.perf_counter()
        try:
            r = solve(sc, options=SolverOptions(args.time_limit, args.workers, deterministic=args.deterministic))
        except ScenarioError as exc:
            rows.append([sc.name, "ERROR", f"{time.perf_counter() - t0:.1f}", "", "", "", "", "", "", "",
                         str(exc)[:60]])
            records.append({"file": path.stem, "name": sc.name, "status": "ERROR", "error": str(exc)})
            continue
        wall = time.perf_counter() - t0
        load = load_1min()
        dtime = r.report.extra.get("deterministic_time", float("nan"))
        times.append(wall)
        dtimes.append(dtime)
        size = r.report.extra.get("model_size", {})
        gap = "n/a" if r.report.gap is None else f"{100 * r.report.gap:.2g}%"
        obj = r.report.objective
        base = ref.get(path.stem, ref.get(sc.name))
        change = "" if base is None else f"{100 * float((obj - base) / base):+.3f}%"
        rows.append([sc.name, r.report.status, f"{wall:.1f}", f"{dtime:.1f}", f"{load:.2f}", r.report.iterations, gap,
                     size.get("variables", ""), size.get("constraints", ""),
                     f"{float(obj) / 1e3:,.3f} us/token" if sc.objective == "latency" else f"{float(obj):.4g}", change])
        records.append({"file": path.stem, "name": sc.name, "status": r.report.status, "wall_s": round(wall, 3),
                        "deterministic_time": dtime, "load_1min": round(load, 2), "iterations": r.report.iterations,
                        "gap": r.report.gap, "objective": float(obj),
                        "objective_exact": f"{obj.numerator}/{obj.denominator}",
                        "design": r.design.key() if hasattr(r.design, "key") else None,
                        "solves": r.report.extra.get("solves", [])})
        if args.profile:
            for k, s in enumerate(r.report.extra.get("solves", [])):
                print(f"  {sc.name} solve {k}: {s['stage'] or 'latency'} {s['status']} "
                      f"dtime {s['deterministic_time']:.2f} wall {s['wall_s']:.2f}", file=sys.stderr, flush=True)
        print(f"done {sc.name}: {r.report.status} {wall:.1f} s, dtime {dtime:.1f}, load {load:.2f}",
              file=sys.stderr, flush=True)
    print(table(["scenario", "status", "wall s", "det time", "load", "iterations", "gap", "variables", "constraints",
                 "objective", "vs ref"], rows))
    settings = (f"time limit {args.time_limit} s, workers {args.workers}, deterministic {args.deterministic}; "
                f"1-min load {load_start:.2f} at start, {load_1min():.2f} at end")
    if times:
        print(f"\n{len(times)} solved; wall median {statistics.median(times):.1f} s, max {max(times):.1f} s; "
              f"deterministic time median {statistics.median(dtimes):.1f}, max {max(dtimes):.1f} ({settings})")
    if args.json:
        Path(args.json).write_text(json.dumps({"sets": args.sets, "settings": settings, "scenarios": records},
                                              indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
