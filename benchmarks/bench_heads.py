"""Solve times of the `heads` set (drafter kinds: EAGLE-3, MTP, Medusa, prompt lookup) with `specpim-cp solve`'s
exact solver: each scenario's status, wall time and design (where the head goes, where the PIM goes, how far
it speculates), the GPU-SI and GPU-AR baselines beside it. Targets: every solve proven within 60 s on 2
cores, median at most 10 s.

    python benchmarks/bench_heads.py            # every scenario of the set
    python benchmarks/bench_heads.py NAME ...   # some of them
"""

from __future__ import annotations

import statistics
import sys
import time

from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.baselines import run_baselines
from specpim_cp.solvers.exact import SolverOptions, solve


def head_line(design) -> str:
    if not design.drafters:  # the verifier alone is the optimum ([NOSPEC])
        return (f"no speculation: the verifier alone wins; verifier {design.verifier.memory_type} "
                f"k={design.verifier.pim_units}")
    d = design.drafters[0]
    where = "on the verifier's devices" if d.colocated else f"{d.devices} own device(s)"
    draft = f"tree {list(d.tree)}" if d.tree else f"draft length {d.draft_length}"
    return (f"{d.model} {where}, {draft}; verifier {design.verifier.memory_type} k={design.verifier.pim_units}, "
            f"head {d.memory_type} k={d.pim_units}")


def main(names: list[str]) -> int:
    files = sorted(builtin_sets()["heads"].glob("*.toml"))
    files = [f for f in files if not names or f.stem in names]
    times = []
    for f in files:
        sc = load_scenario(f)
        t0 = time.perf_counter()
        r = solve(sc, options=SolverOptions(60, workers=2))
        wall = time.perf_counter() - t0
        times.append(wall)
        base = {b.name: b.evaluation.metrics.latency_ns_per_token for b in run_baselines(sc)
                if b.evaluation is not None}
        opt = r.evaluation.metrics.latency_ns_per_token
        gpu = "  ".join(f"{k} {v / opt:.2f}x" for k, v in base.items() if k in ("GPU-AR", "GPU-SI"))
        print(f"{f.stem}: {r.report.status} in {wall:.1f} s, {opt / 1e3:,.1f} us/token; {head_line(r.design)}; "
              f"optimum vs {gpu}", flush=True)
    if times:
        print(f"median {statistics.median(times):.1f} s, max {max(times):.1f} s over {len(times)} scenarios")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
