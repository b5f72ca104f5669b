"""CUT-3 against CUT-4: how close the per-choice energy bounds come to the optimum, and what CUT-4 costs.

    python benchmarks/bench_energy_bounds.py [SET_OR_DIR ...] [--against BENCH.json]

For every scenario: the best start design's energy per token (the baselines' best, `best_start`), the least
CUT-3 and CUT-4 bound over the speculation choices, how many choices each leaves at or below the reference
(the optimum from `--against`, a `bench_solver.py --objective energy --json` file; else the start), and the
time `SpecModel.tighten_energy` takes at the start's ratio (formulations/placement_schedule.md, CUT-4).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

from bench_solver import load_reference

from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.solvers.exact.guards import build_model
from specpim_cp.solvers.exact.ratio import RatioObjective
from specpim_cp.solvers.exact.starts import best_start
from specpim_cp.views.tables import table


def bounds(ratio: RatioObjective) -> list[Fraction]:
    """Per choice: the bound of the energy per token (nJ)."""
    return [ratio.value(lb, st.tokens_micro) for lb, st in zip(ratio.num_bounds, ratio.sm.stats)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sets", nargs="*", default=["paper-full"])
    ap.add_argument("--against", action="append", default=[], help="bench_solver --objective energy --json output")
    args = ap.parse_args(argv)
    ref = load_reference(args.against, "energy") if args.against else {}
    rows, times = [], []
    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        catalog = scenario_catalog(sc)
        ev = Evaluator(sc, catalog)
        sm = build_model(sc, catalog, ev)
        ratio = RatioObjective(sm, "energy")
        start = best_start(sm, ev, "energy", None)
        if start is None:
            rows.append([Path(path).stem, "no start design"] + [""] * 6)
            continue
        old = bounds(ratio)
        t0 = time.perf_counter()
        sm.tighten_energy(Fraction(start.metrics.energy_nj_per_round, start.metrics.tokens_per_round_micro))
        took = time.perf_counter() - t0
        times.append(took)
        new = bounds(ratio)
        best = ref.get(Path(path).stem, ref.get(sc.name))
        against = best if best is not None else start.metrics.objective("energy")
        rows.append([Path(path).stem, f"{float(start.metrics.objective('energy')):,.0f}",
                     "optimum" if best is not None else "start",
                     f"{float(min(old) / against):.3f}", f"{float(min(new) / against):.3f}",
                     f"{sum(b <= against for b in old)}/{len(old)}", f"{sum(b <= against for b in new)}/{len(new)}",
                     f"{took:.2f}"])
    print(table(["scenario", "start nJ/token", "against", "CUT-3 least / ref", "CUT-4 least / ref",
                 "choices <= ref (CUT-3)", "(CUT-4)", "CUT-4 s"], rows))
    if times:
        print(f"\nCUT-4 time: median {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)} scenarios")
    return 0


if __name__ == "__main__":
    sys.exit(main())
