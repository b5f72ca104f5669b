"""Solve times of the `edge` set against its targets: every exact solve proven optimal in at most 60 s, the
median at most 5 s (formulations/edge.md; the machine may be shared, so the 1-minute load is printed).

    python benchmarks/bench_edge.py [--objective latency|energy|edp ...] [--time-limit S]

Exit status 1 when a solve is not proven optimal or a target is missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.views.tables import table

MAX_SOLVE_S = 60.0
MEDIAN_SOLVE_S = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objective", action="append", choices=("latency", "energy", "edp"))
    ap.add_argument("--time-limit", type=float, default=MAX_SOLVE_S)
    args = ap.parse_args()
    objectives = args.objective or ["latency", "energy"]
    rows, times, proven = [], [], True
    for path in scenario_files(["edge"]):
        sc = load_scenario(path)
        for objective in objectives:
            t0 = time.perf_counter()
            result = solve(sc, objective=objective, options=SolverOptions(args.time_limit, deterministic=True))
            wall = time.perf_counter() - t0
            times.append(wall)
            proven &= result.report.status == "OPTIMAL"
            rows.append([sc.name, objective, result.report.status, f"{wall:.2f}", f"{os.getloadavg()[0]:.1f}"])
    print(table(["scenario", "objective", "status", "wall s", "load"], rows))
    median, worst = statistics.median(times), max(times)
    ok = proven and worst <= MAX_SOLVE_S and median <= MEDIAN_SOLVE_S
    print(f"\nmedian {median:.2f} s (target <= {MEDIAN_SOLVE_S:g}), max {worst:.2f} s (target <= {MAX_SOLVE_S:g}), "
          f"{'all proven optimal' if proven else 'NOT all proven optimal'}: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
