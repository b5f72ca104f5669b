"""Heuristic gap benchmark: GA+MCTS vs the proven CP-SAT optimum, over seeds and budgets.

    python benchmarks/bench_heuristic.py [SET_OR_DIR ...] [--seeds 0 1 2] [--budgets quick paper]
                                         [--polish on off] [--time-limit S]

For every scenario: the exact optimum (deterministic CP-SAT, proven), then for each budget, polish
setting (`off` is the paper's explorer as published, `on` adds our polish step) and seed the
heuristic's objective, its gap to the optimum (percent), its wall time, and the time each method needs
to reach the optimum and to come within 1% of it (CP-SAT from its incumbent trajectory; the heuristic
from its best-so-far history, whose evaluation counts are converted to seconds at the run's mean rate).
"""

from __future__ import annotations

import argparse
import statistics
import sys

from specpim_cp.exact import solve
from specpim_cp.heuristic import run_heuristic
from specpim_cp.report_text import table
from specpim_cp.scenario import load_scenario

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_solver import scenario_files


def time_to_within(points: list[tuple[float, float]], target: float) -> float | None:
    for t, v in points:
        if v <= target:
            return t
    return None


def heuristic_points(res) -> list[tuple[float, float]]:
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["examples"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    ap.add_argument("--budgets", nargs="*", default=["quick", "paper"])
    ap.add_argument("--polish", nargs="*", default=["on", "off"], choices=["on", "off"])
    ap.add_argument("--time-limit", type=float, default=120.0)
    args = ap.parse_args()
    rows = []
    runs = [(b, p) for b in args.budgets for p in args.polish]
    gaps: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
    reach: dict[tuple[str, str], list[float | None]] = {r: [] for r in runs}
    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        exact = solve(sc, deterministic=True, time_limit_s=args.time_limit)
        opt = float(exact.report.objective)
        t_exact = time_to_within(exact.report.extra.get("trajectory", []), 1.01 * opt)
        t_opt = time_to_within(exact.report.extra.get("trajectory", []), opt)
        rows.append([sc.name, "CP-SAT", "-", exact.report.status, "0.000%", f"{exact.report.wall_s:.2f}", fmt(t_opt),
                     fmt(t_exact)])
        for budget, polish in runs:
            for seed in args.seeds:
                h = run_heuristic(sc, budget=budget, seed=seed, polish=polish == "on")
                v = float(h.report.objective)
                gap = 100 * (v - opt) / opt
                gaps[(budget, polish)].append(gap)
                points = heuristic_points(h)
                reach[(budget, polish)].append(time_to_within(points, opt))
                rows.append([sc.name, f"GA+MCTS {budget} polish {polish}", seed,
                             f"{h.report.extra.get('evaluations', '?')} evals", f"{gap:.3f}%", f"{h.report.wall_s:.2f}",
                             fmt(time_to_within(points, opt)), fmt(time_to_within(points, 1.01 * opt))])
        print(f"done {sc.name}", file=sys.stderr, flush=True)
    print(table(["scenario", "method", "seed", "status / evals", "gap to optimum", "wall s", "s to optimum",
                 "s to within 1%"], rows))
    for (budget, polish), g in gaps.items():
        if g:
            hit = [t for t in reach[(budget, polish)] if t is not None]
            print(f"{budget}, polish {polish}: mean gap {statistics.mean(g):.3f}%, max {max(g):.3f}%, "
                  f"within 1% in {sum(x <= 1.0 for x in g)}/{len(g)} runs, optimum reached in {len(hit)}/{len(g)}"
                  + (f" (median {statistics.median(hit):.1f} s)" if hit else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
