"""Heuristic gap benchmark: GA+MCTS vs the proven CP-SAT optimum, over seeds and budgets.

    python benchmarks/bench_heuristic.py [SET_OR_DIR_OR_FILE ...] [--seeds 0 1 2] [--budgets quick paper]
                                         [--polish on off] [--time-limit S] [--json OUT]

For every scenario: the exact optimum (deterministic CP-SAT, proven), then for each budget, polish
setting (`off` is the paper's explorer as published, `on` adds our polish step) and seed the
heuristic's objective, its gap to the optimum (percent), its wall time, and the time each method needs
to reach the optimum and to come within 1% of it.

Times to the optimum: CP-SAT's from its incumbent trajectory, counted from the `solve` call (model
building included), is when the optimum is first *found*; its wall time is when it is *proven*. The
heuristic reaches the optimum only if the design it returns has exactly the optimal objective (exact
fractions compared); its time is the search's own record of when that design was first priced
(`time_to_best_s`, counted from the start of the search, so without the search-space set-up). The time
to within 1% comes from the best-so-far history, whose evaluation counts are converted to seconds at the
run's mean rate. Every row carries the 1-minute load average when it finished (the machine may be
shared); the CP-SAT row also CP-SAT's deterministic time. `--json` writes every row as it goes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.heuristic import run_heuristic
from specpim_cp.views.tables import table

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_solver import scenario_files

#: Relative slack when a float best-so-far value is compared with a target (float rounding of fractions).
FLOAT_SLACK = 1e-12


def time_to_within(points: list[tuple[float, float]], target: float) -> float | None:
    for t, v in points:
        if v <= target * (1 + FLOAT_SLACK):
            return t
    return None


def heuristic_points(res) -> list[tuple[float, float]]:
    """(seconds, best value so far) from the run's history of (evaluations, best value)."""
    extra = res.report.extra
    evals = max(1, extra.get("evaluations", 1))
    rate = res.report.wall_s / evals
    out = []
    for entry in extra.get("history", []):
        if len(entry) >= 3:
            out.append((float(entry[2]), float(entry[1])))
        else:
            out.append((entry[0] * rate, float(entry[1])))
    return out


def fmt(t: float | None) -> str:
    return "never" if t is None else f"{t:.2f}"


def load_1min() -> float:
    return os.getloadavg()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["examples"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--budgets", nargs="*", default=["quick", "paper"])
    ap.add_argument("--polish", nargs="*", default=["on", "off"], choices=["on", "off"])
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--json", help="write every row to this file as the benchmark goes")
    args = ap.parse_args()
    rows, records = [], []
    runs = [(b, p) for b in args.budgets for p in args.polish]
    gaps: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
    reach: dict[tuple[str, str], list[float | None]] = {r: [] for r in runs}
    exact_found, exact_proven = [], []

    def save() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps({"sets": args.sets, "rows": records}, indent=1))

    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        exact = solve(sc, options=SolverOptions(args.time_limit, deterministic=True))
        opt_exact = exact.report.objective
        opt = float(opt_exact)
        trajectory = exact.report.extra.get("trajectory", [])
        t_found = time_to_within(trajectory, opt)
        exact_found.append(t_found)
        exact_proven.append(exact.report.wall_s)
        load = load_1min()
        dtime = exact.report.extra.get("deterministic_time", float("nan"))
        rows.append([sc.name, "CP-SAT", "-", f"{exact.report.status}, det. time {dtime:.1f}", "0.000%",
                     f"{exact.report.wall_s:.2f}", fmt(t_found), fmt(time_to_within(trajectory, 1.01 * opt)),
                     f"{load:.2f}"])
        records.append({"scenario": sc.name, "method": "cp-sat", "status": exact.report.status,
                        "objective_exact": f"{opt_exact.numerator}/{opt_exact.denominator}",
                        "wall_s": exact.report.wall_s, "deterministic_time": dtime, "s_to_optimum": t_found,
                        "load_1min": load})
        save()
        for budget, polish in runs:
            for seed in args.seeds:
                h = run_heuristic(sc, budget=budget, seed=seed, polish=polish == "on")
                value = h.report.objective
                gap = 100 * float((value - opt_exact) / opt_exact)
                gaps[(budget, polish)].append(gap)
                points = heuristic_points(h)
                t_opt = h.report.extra.get("time_to_best_s") if value == opt_exact else None
                reach[(budget, polish)].append(t_opt)
                load = load_1min()
                rows.append([sc.name, f"GA+MCTS {budget} polish {polish}", seed,
                             f"{h.report.extra.get('evaluations', '?')} evals", f"{gap:.3f}%", f"{h.report.wall_s:.2f}",
                             fmt(t_opt), fmt(time_to_within(points, 1.01 * opt)), f"{load:.2f}"])
                records.append({"scenario": sc.name, "method": "heuristic", "budget": budget, "polish": polish,
                                "seed": seed, "gap_percent": gap, "wall_s": h.report.wall_s,
                                "s_to_optimum": t_opt, "s_to_within_1pct": time_to_within(points, 1.01 * opt),
                                "evaluations": h.report.extra.get("evaluations"), "load_1min": load})
                save()
                print(f"  {sc.name} {budget} polish {polish} seed {seed}: gap {gap:.3f}%, {h.report.wall_s:.1f} s, "
                      f"load {load:.2f}", file=sys.stderr, flush=True)
        print(f"done {sc.name}", file=sys.stderr, flush=True)
    print(table(["scenario", "method", "seed", "status / evals", "gap to optimum", "wall s", "s to optimum",
                 "s to within 1%", "load"], rows))
    found = [t for t in exact_found if t is not None]
    if exact_proven:
        print(f"CP-SAT: optimum proven in {len(exact_proven)}/{len(exact_proven)} scenarios, median "
              f"{statistics.median(exact_proven):.1f} s, max {max(exact_proven):.1f} s; found after median "
              f"{statistics.median(found):.1f} s, max {max(found):.1f} s")
    for (budget, polish), g in gaps.items():
        if g:
            hit = [t for t in reach[(budget, polish)] if t is not None]
            print(f"{budget}, polish {polish}: mean gap {statistics.mean(g):.3f}%, max {max(g):.3f}%, "
                  f"within 1% in {sum(x <= 1.0 for x in g)}/{len(g)} runs, optimum reached in {len(hit)}/{len(g)}"
                  + (f" (after median {statistics.median(hit):.1f} s, max {max(hit):.1f} s)" if hit else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
