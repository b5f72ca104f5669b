"""Heuristic speed: designs priced per CPU second, by the whole heuristic and by its pricing alone.

    python benchmarks/bench_heuristic_speed.py [SCENARIO.toml | DIR ...] [--budgets quick,paper]
                                               [--generations N] [--seed S] [--workers W]
                                               [--no-replay] [--sample N]

Default: every scenario of `benchmarks/examples/`, both budgets, the full paper budget (50 generations
x 1000 individuals, 10,000 MCTS leaves per model). `--generations N` trims the paper budget's
generations for a quick look. `--workers W` fills candidates in W processes (same result). Wall time
depends on the machine's load; the CPU time of this process (and, with workers, of its children) is
printed next to it, and every rate is per CPU second.

First table, the whole heuristic (`run_heuristic`, warm starts, final selection and the returned
design's evaluation included): `evaluations` counts every design the search requested from its
`Pricer` (design-cache hits included), `unique` the designs it priced (the design cache's misses).

Second table, the evaluator alone on a replay of the search (one worker only; `--no-replay` skips it):
the stream is the distinct designs the run priced, in the order it priced them (its Pricer's design
cache). Each rate is designs of the stream per CPU second spent in the pricing calls alone (no search,
no design construction):
- `pricer cold`: a fresh `Pricer` (fresh evaluator and cost model; the layer-schedule and
  round-statistics memos emptied) prices the stream with `Pricer.price`, the heuristic's own path;
- `pricer warm`: the same Pricer prices the stream again with its design cache emptied and every
  other cache kept (cost tables, passes, cycles, capacities): the lookups and the round arithmetic;
- `metrics cold` / `metrics warm`: `Evaluator.metrics(design, check=False)` on the first `--sample`
  feasible designs of the stream, built as `Design` values beforehand, by a fresh evaluator (memos
  emptied) and then again by the same one: the public path of the exact optimizer, grid and baselines.
The replayed prices are checked against the run's.
"""

from __future__ import annotations

import argparse
import importlib
import math
import resource
import time
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from specpim_cp.catalog import default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import rounds as passes
from specpim_cp.physics import schedule
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.baselines import gpu_si
from specpim_cp.solvers.heuristic import BUDGETS, run_heuristic
from specpim_cp.solvers.heuristic.genes import SearchSpace
from specpim_cp.solvers.heuristic.pricing import Pricer
from specpim_cp.views.tables import table

EXAMPLES = Path(__file__).resolve().parent / "examples"
RUN = importlib.import_module("specpim_cp.solvers.heuristic.run")


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


class _KeptPricer(Pricer):
    """The run's Pricer, kept so the benchmark can read its design cache (the replay stream) afterwards."""

    made: ClassVar[list[Pricer]] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _KeptPricer.made.append(self)


def _run_keeping_pricer(sc, budget, seed: int, workers: int):
    """run_heuristic, and its Pricer (with worker processes it prices only the final selection)."""
    _KeptPricer.made.clear()
    RUN.Pricer = _KeptPricer
    try:
        res = run_heuristic(sc, budget=budget, seed=seed, workers=workers)
    finally:
        RUN.Pricer = Pricer
    return res, (_KeptPricer.made[-1] if _KeptPricer.made else None)  # the verifier alone's search prices first


def _forget_memos() -> None:
    """Empty the module-level memos a pricing fills (cold caches)."""
    for fn in (getattr(schedule, "_layer_schedule", None), getattr(passes, "_round_stats", None)):
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "-"


def replay(sc, objective: str, stream: dict, sample: int) -> list[str]:
    """Rates of the pricing alone on the stream (see the module docstring), in the second table's order."""
    catalog = default_catalog()
    keys = list(stream)
    _forget_memos()
    pricer = Pricer(SearchSpace(sc, catalog), catalog, objective)
    t0 = time.process_time()
    for key in keys:
        pricer.price(key)
    cold = time.process_time() - t0
    assert pricer.values == stream, "the replay priced the stream differently"
    pricer.values.clear()
    t0 = time.process_time()
    for key in keys:
        pricer.price(key)
    warm = time.process_time() - t0
    feasible = [k for k in keys if stream[k] < math.inf][:sample]
    designs = [pricer.design(k) for k in feasible]
    _forget_memos()
    ev = Evaluator(sc, catalog)
    rates = []
    for _ in range(2):  # cold, then warm
        t0 = time.process_time()
        for d in designs:
            try:
                ev.metrics(d, check=False)
            except ScenarioError:
                pass
        rates.append(time.process_time() - t0)
    return [len(keys), _rate(len(keys), cold), _rate(len(keys), warm), len(designs),
            _rate(len(designs), rates[0]), _rate(len(designs), rates[1])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--budgets", default="quick,paper", help="comma-separated budget names")
    ap.add_argument("--generations", type=int, default=None, help="trim the paper budget to N generations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--no-replay", action="store_true", help="skip the evaluator-alone replay")
    ap.add_argument("--sample", type=int, default=20_000, help="designs replayed through Evaluator.metrics")
    args = ap.parse_args()
    budgets = {}
    for name in args.budgets.split(","):
        b = BUDGETS[name]
        if name == "paper" and args.generations is not None:
            b = replace(b, generations=args.generations)
        budgets[name] = b
    rows, replay_rows = [], []
    for path in scenario_files(args.scenarios):
        sc = load_scenario(path)
        reference = gpu_si(sc).metrics.objective(sc.objective) if sc.drafters else None
        for name, budget in budgets.items():
            label = f"{name} {budget.generations}x{budget.population}/{budget.mcts_leaves_per_model}"
            wall0, cpu0 = time.perf_counter(), _cpu_s()
            res, pricer = _run_keeping_pricer(sc, budget, args.seed, args.workers)
            wall, cpu = time.perf_counter() - wall0, _cpu_s() - cpu0
            x = res.report.extra
            rows.append([
                sc.name, label, f"{wall:.1f}", f"{cpu:.1f}", x["evaluations"], x["unique_designs"],
                f"{x['evaluations'] / cpu:,.0f}", f"{x['unique_designs'] / cpu:,.0f}",
                res.report.iterations, f"{x['time_to_best_s']:.1f}",
                f"{float(res.report.objective):,.6g}",
                "" if reference is None else f"{float(reference / res.report.objective):.3f}x",
            ])
            print(f"{sc.name} {name}: {wall:.1f} s", flush=True)
            if args.workers == 1 and pricer is not None and not args.no_replay:  # workers price elsewhere
                stream = pricer.values
                del pricer
                replay_rows.append([sc.name, label, *replay(sc, x["search_objective"], stream, args.sample)])
    print()
    print(table(["scenario", "budget", "wall s", "cpu s", "evaluations", "unique", "eval/cpu-s",
                 "unique/cpu-s", "generations", "to best s", "objective", "vs GPU-SI"], rows))
    print(f"\nseed {args.seed}, workers {args.workers}; evaluations count every design requested (cache hits "
          "included), unique the designs priced")
    if replay_rows:
        print()
        print(table(["scenario", "budget", "stream", "pricer cold/cpu-s", "pricer warm/cpu-s", "sample",
                     "metrics cold/cpu-s", "metrics warm/cpu-s"], replay_rows))
        print("\nevaluator alone: designs of the run's stream (distinct designs, in pricing order) per CPU second "
              "of the pricing calls; see the module docstring")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
