"""Model-build benchmark: per scenario of a set, the exact model's build time and the part of it spent
pricing (the price table), each scenario from a fresh evaluator (nothing priced before it).

    python benchmarks/bench_prices.py [SET_OR_DIR ...]

Default: the `paper-full` set. Per scenario: `build_s`, `build_model` (the price table, the rows, the
bounds, the integer-range check); `prices_s`, the price table alone (`PriceTable.build`, part of
build_s); the operator prices in the table (`entries`) and how many it prices per second. Prints the
median and the total, and the 1-minute load average (the machine may be shared): compare trees by
running the script in each (`PYTHONPATH=TREE`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.builtin_sets import resolve_scenario_path, scenario_files
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.exact.guards import build_model
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.views.tables import table

#: A small scenario priced once first (its table not kept), so the kernel tables' fits are not charged to the
#: first scenario.
WARM_UP = "paper/opt-13b-b1"


def build_times(path) -> tuple[float, float, int]:
    """(build_model seconds, price-table seconds, operator prices) of one scenario, each from a fresh
    evaluator (its own cost model: nothing priced yet; the scenario's table not yet kept either)."""
    sc = load_scenario(path)
    catalog = scenario_catalog(sc)
    t0 = time.perf_counter()
    prices = PriceTable.build(Evaluator(sc, catalog), DesignSpace(sc, catalog))
    t1 = time.perf_counter()
    build_model(sc, catalog, Evaluator(sc, catalog))
    t2 = time.perf_counter()
    entries = sum(len(by_tokens) for pm in prices.models for by_tokens in pm.op_cost.values())
    return t2 - t1, t1 - t0, entries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["paper-full"])
    args = ap.parse_args()
    warm = load_scenario(resolve_scenario_path(WARM_UP))
    PriceTable.build(Evaluator(warm, scenario_catalog(warm)), DesignSpace(warm, scenario_catalog(warm)))
    rows, builds, priced = [], [], []
    for path in scenario_files(args.sets):
        build_s, prices_s, entries = build_times(path)
        builds.append(build_s)
        priced.append(prices_s)
        rows.append([path.stem, f"{build_s:.3f}", f"{prices_s:.3f}", f"{entries:,}", f"{entries / prices_s:,.0f}",
                     f"{os.getloadavg()[0]:.2f}"])
    print(table(["scenario", "build_s", "prices_s", "entries", "prices/s", "load"], rows))
    print(f"median build {statistics.median(builds):.3f} s (prices {statistics.median(priced):.3f} s); "
          f"total {sum(builds):.2f} s (prices {sum(priced):.2f} s) over {len(rows)} scenarios on "
          f"{os.cpu_count()} cores")


if __name__ == "__main__":
    main()
