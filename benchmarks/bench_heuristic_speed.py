"""Heuristic speed: designs priced per second and run time at the quick and paper budgets.

    python benchmarks/bench_heuristic_speed.py [SCENARIO.toml | DIR ...] [--budgets quick,paper]
                                               [--generations N] [--seed S] [--workers W]

Default: every scenario of `benchmarks/examples/`, both budgets, the full paper budget (50 generations
x 1000 individuals, 10,000 MCTS leaves per model). `--generations N` trims the paper budget's
generations for a quick look. `--workers W` fills candidates in W processes (same result). Wall time
depends on the machine's load; the CPU time of this process (and, with workers, of its children) is
printed next to it, and the rates are per CPU second.
"""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import replace
from pathlib import Path

from specpim_cp.baselines import gpu_si
from specpim_cp.heuristic import BUDGETS, run_heuristic
from specpim_cp.report_text import table
from specpim_cp.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parent / "examples"


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def scenario_files(names: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in names or [str(EXAMPLES)]:
        p = Path(name)
        out += sorted(p.glob("*.toml")) if p.is_dir() else [p]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--budgets", default="quick,paper", help="comma-separated budget names")
    ap.add_argument("--generations", type=int, default=None, help="trim the paper budget to N generations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    budgets = {}
    for name in args.budgets.split(","):
        b = BUDGETS[name]
        if name == "paper" and args.generations is not None:
            b = replace(b, generations=args.generations)
        budgets[name] = b
    rows = []
    for path in scenario_files(args.scenarios):
        sc = load_scenario(path)
        reference = gpu_si(sc).metrics.objective(sc.objective) if sc.drafters else None
        for name, budget in budgets.items():
            wall0, cpu0 = time.perf_counter(), _cpu_s()
            res = run_heuristic(sc, budget=budget, seed=args.seed, workers=args.workers)
            wall, cpu = time.perf_counter() - wall0, _cpu_s() - cpu0
            x = res.report.extra
            rows.append([
                sc.name, f"{name} {budget.generations}x{budget.population}/{budget.mcts_leaves_per_model}",
                f"{wall:.1f}", f"{cpu:.1f}", x["evaluations"], x["unique_designs"],
                f"{x['evaluations'] / cpu:,.0f}", f"{x['unique_designs'] / cpu:,.0f}",
                res.report.iterations, f"{x['time_to_best_s']:.1f}",
                f"{float(res.report.objective):,.6g}",
                "" if reference is None else f"{float(reference / res.report.objective):.3f}x",
            ])
            print(f"{sc.name} {name}: {wall:.1f} s", flush=True)
    print()
    print(table(["scenario", "budget", "wall s", "cpu s", "evaluations", "unique", "eval/cpu-s",
                 "unique/cpu-s", "generations", "to best s", "objective", "vs GPU-SI"], rows))
    print(f"\nseed {args.seed}, workers {args.workers}; evaluations count every design requested (cache hits "
          "included), unique the designs priced")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
