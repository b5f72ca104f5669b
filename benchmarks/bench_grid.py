"""Grid throughput: exact cells per hour on this machine, Ray's per-task overhead, a cluster projection.

    python benchmarks/bench_grid.py                    # the 200-cell grid, 2 local jobs (about 10 min on 2 cores)
    python benchmarks/bench_grid.py --cells 40         # a smaller grid (axes thinned evenly)
    python benchmarks/bench_grid.py --no-ray           # skip the Ray overhead measurement

The grid: base `examples/opt-13b` with the device counts left to the optimizer, over batch size
(1..64, 8 values) x acceptance rate (5 values) x device budget (5 values) = 200 cells, each an exact
solve (deterministic, `--time-limit`) plus the baselines. It runs through `specpim_cp.runs.grid.run_grid`
with the local executor and `--jobs` workers into a fresh folder, then reports:

- cells per hour, and the share of cells proven optimal;
- the per-cell exact solve time distribution (and the baselines' time);
- Ray's per-task overhead: `--ray-tasks` trivial tasks through the Ray executor vs the local pool;
- a projection for N machines of C cores. Model: cells are independent tasks apart from the warm-start
  chains (a cell waits for its parent), so
      T(N) ~ max(W / (N C) + n o / (N C), P)
  with W the measured total instance time (exact + baselines), n the number of instances, o the
  measured Ray overhead per task, and P the longest warm-start chain (sum of the exact times along it).
  Ray's runtime start (measured) and the report are added once.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from specpim_cp.runs.executors import InlineExecutor, PoolExecutor, RayExecutor, ray_available
from specpim_cp.runs.grid import load_grid, run_grid
from specpim_cp.runs.instances import BatchOptions
from specpim_cp.runs.store import read_records

ROOT = Path(__file__).resolve().parent.parent
AXES = {
    "batch_size": [1, 2, 4, 8, 16, 32, 48, 64],
    "acceptance": [0.5, 0.6, 0.7, 0.8, 0.9],
    "device_budget": [3, 4, 6, 8, 12],
}
GRID_TOML = """name = "bench-grid"

[base]
from = "examples/opt-13b"
verifier = {{model = "opt-13b"}}     # devices chosen by the optimizer under the budget
drafters = [{{model = "opt-1.3b"}}]
device_budget = 3

[axes]
{axes}
"""


def thin(axes: dict[str, list], cells: int) -> dict[str, list]:
    """Drop middle values of the longest axis until the product is at most `cells` (ends kept)."""
    axes = {k: list(v) for k, v in axes.items()}
    while math.prod(len(v) for v in axes.values()) > cells:
        k = max(axes, key=lambda a: len(axes[a]))
        if len(axes[k]) <= 1:
            break
        del axes[k][len(axes[k]) // 2 if len(axes[k]) > 2 else 1]
    return axes


def grid_file(out: Path, cells: int) -> Path:
    axes = thin(AXES, cells)
    text = GRID_TOML.format(axes="\n".join(f"{k} = {json.dumps(v)}" for k, v in axes.items()))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench-grid.toml"
    path.write_text(text)
    return path


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def trivial(x: int) -> int:
    return x + 1


def executor_overhead(executor, tasks: int) -> float:
    """Seconds per task to run `tasks` trivial tasks through an executor (submit all, wait all)."""
    t0 = time.perf_counter()
    pending = list(range(tasks))
    running = 0
    while pending or running:
        while pending and running < executor.slots:
            executor.submit(pending.pop())
            running += 1
        running -= len(executor.wait())
    return (time.perf_counter() - t0) / tasks


def measure_overheads(tasks: int, jobs: int, ray: bool) -> dict:
    out = {"tasks": tasks}
    inline = InlineExecutor(trivial)
    out["inline_s_per_task"] = executor_overhead(inline, tasks)
    pool = PoolExecutor(trivial, jobs)
    executor_overhead(pool, jobs)  # start the workers
    out["pool_s_per_task"] = executor_overhead(pool, tasks)
    pool.close()
    if ray and ray_available():
        t0 = time.perf_counter()
        rex = RayExecutor(trivial, workers=1, jobs=jobs, local_cpus=jobs)
        out["ray_start_s"] = time.perf_counter() - t0
        executor_overhead(rex, jobs)  # warm the workers
        out["ray_s_per_task"] = executor_overhead(rex, tasks)
        rex.close()
    return out


def critical_path_s(records) -> float:
    """The longest warm-start chain: sum of exact solve times from a cell back along its parents."""
    exact = {r.scenario: r for r in records if r.method == "exact"}
    memo: dict[str, float] = {}

    def path(name: str) -> float:
        if name not in memo:
            r = exact[name]
            memo[name] = (r.wall_s or 0.0) + (path(r.hint_from) if r.hint_from in exact else 0.0)
        return memo[name]

    return max((path(n) for n in exact), default=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=200, help="grid size (axes thinned evenly below 200)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-grid"))
    ap.add_argument("--ray-tasks", type=int, default=50)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--cores-per-machine", type=int, default=2, help="C of the projection")
    ap.add_argument("--resume", action="store_true", help="reuse the folder's results (no fresh run)")
    args = ap.parse_args()

    out = Path(args.out) / f"cells-{args.cells}"
    grid = load_grid(grid_file(out, args.cells))
    print(f"grid: {len(grid.cells)} cells over " + ", ".join(f"{a.name} {list(a.values)}" for a in grid.axes),
          flush=True)
    options = BatchOptions(jobs=args.jobs, time_limit_s=args.time_limit, resume=args.resume)
    t0 = time.perf_counter()
    summary = run_grid(grid, out, options)
    wall = time.perf_counter() - t0
    records = read_records(out)
    exact = [r for r in records if r.method == "exact"]
    base_times = {r.key: r.wall_s or 0.0 for r in records if r.method == "baselines"}  # one per instance
    exact_times = [r.wall_s or 0.0 for r in exact]
    optimal = sum(r.status == "OPTIMAL" for r in exact)
    work = sum(exact_times) + sum(base_times.values())
    instances = len(exact) + len(base_times)
    ran_cells = summary.ran / 2
    print(f"\nlocal run: {summary.ran} instances run ({summary.skipped} already done), {len(summary.failed)} failed, "
          f"wall {wall:.1f} s with {args.jobs} jobs")
    if summary.ran and not args.resume:
        print(f"throughput: {3600 * ran_cells / wall:,.0f} cells per hour on {args.jobs} cores "
              f"({wall / max(ran_cells, 1):.2f} s wall per cell)")
    print(f"proven optimal: {optimal}/{len(exact)} cells ({100 * optimal / max(len(exact), 1):.0f}%); "
          + ", ".join(f"{s}: {sum(r.status == s for r in exact)}" for s in sorted({r.status for r in exact})))
    if exact_times:
        print(f"exact solve time per cell (s): mean {statistics.mean(exact_times):.2f}, median "
              f"{statistics.median(exact_times):.2f}, p90 {pct(exact_times, 0.9):.2f}, max {max(exact_times):.2f}, "
              f"min {min(exact_times):.2f}")
        print(f"baselines per cell (s): mean {statistics.mean(base_times.values()):.2f}; total instance time "
              f"W = {work:.0f} s over n = {instances} instances")
    chain = critical_path_s(records)
    print(f"longest warm-start chain P = {chain:.1f} s")

    over = measure_overheads(args.ray_tasks, args.jobs, not args.no_ray)
    print(f"\nper-task overhead ({over['tasks']} trivial tasks, {args.jobs} slots): in-process "
          f"{1e3 * over['inline_s_per_task']:.3f} ms, local pool {1e3 * over['pool_s_per_task']:.2f} ms"
          + (f", Ray {1e3 * over['ray_s_per_task']:.2f} ms (Ray runtime start {over['ray_start_s']:.1f} s)"
             if "ray_s_per_task" in over else ", Ray not measured"))
    o = over.get("ray_s_per_task", over["pool_s_per_task"])
    start = over.get("ray_start_s", 0.0)
    c = args.cores_per_machine
    print(f"\nprojection (model: T(N) = max(W/(N*C) + n*o/(N*C), P) + Ray start; W = {work:.0f} s, n = {instances}, "
          f"o = {1e3 * o:.2f} ms, P = {chain:.1f} s, C = {c} cores per machine, start = {start:.1f} s):")
    print("machines  cores  time (s)  cells per hour")
    for n in (1, 2, 4, 8, 16, 32, 64):
        t = max(work / (n * c) + instances * o / (n * c), chain) + start
        print(f"{n:8d}  {n * c:5d}  {t:8.1f}  {3600 * len(exact) / t:14,.0f}")
    (out / "bench_grid.json").write_text(json.dumps({
        "cells": len(grid.cells), "jobs": args.jobs, "time_limit_s": args.time_limit, "wall_s": wall,
        "ran": summary.ran, "optimal": optimal, "exact_times_s": exact_times, "work_s": work,
        "critical_path_s": chain, "overheads": over}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
