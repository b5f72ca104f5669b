"""Decision ranges [OBJ-4]: questions asked and time per scenario, with and without the designs near the
witnesses (`harvest`), and whether both give the same ranges.

    python benchmarks/bench_ranges.py [SET_OR_FILE ...] [--objectives latency,energy] [--within 1]

Default: the `paper` set under latency, at 1% (the main job's ranges). Per scenario and objective it solves
the canonical optimum once, then the ranges twice from it in this process (harvest on, then
`NEIGHBOUR_LIMIT = 0`: CP-SAT's questions alone) and prints each run's solves, wall seconds, seconds inside
CP-SAT, and "same" when every range agrees; then the totals. Deterministic solves (one worker).
"""

from __future__ import annotations

import argparse
import time

from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.exact import ranges as ranges_mod


def one(sc, catalog, objective: str, within: str, optimum, harvest: bool):
    limit = ranges_mod.NEIGHBOUR_LIMIT
    ranges_mod.NEIGHBOUR_LIMIT = limit if harvest else 0
    try:
        t0 = time.perf_counter()
        res = ranges_mod.decision_ranges(sc, within_pct=within, objective=objective, catalog=catalog,
                                         options=SolverOptions(60, deterministic=True), optimum=optimum)
        return res, time.perf_counter() - t0
    finally:
        ranges_mod.NEIGHBOUR_LIMIT = limit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["paper"])
    ap.add_argument("--objectives", default="latency")
    ap.add_argument("--within", default="1")
    args = ap.parse_args()
    totals = {True: [0, 0.0, 0.0], False: [0, 0.0, 0.0]}
    differ = 0
    print(f"{'scenario':28s} {'objective':9s} {'harvest: solves':>16s} {'wall s':>7s} {'CP-SAT s':>8s}   "
          f"{'CP-SAT alone: solves':>20s} {'wall s':>7s} {'CP-SAT s':>8s}  ranges")
    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        catalog = scenario_catalog(sc)
        for objective in args.objectives.split(","):
            optimum = solve(sc, objective=objective, catalog=catalog,
                            options=SolverOptions(60, deterministic=True).with_deadline(2.0))
            runs = {h: one(sc, catalog, objective, args.within, optimum, h) for h in (True, False)}
            cells = []
            for h, (res, wall) in runs.items():
                cp_sat = res.cp_sat_s
                totals[h][0] += res.solves
                totals[h][1] += wall
                totals[h][2] += cp_sat
                cells.append(f"{res.solves:{16 if h else 20}d} {wall:7.2f} {cp_sat:8.2f}")
            same = [r.as_dict() for r in runs[True][0].ranges] == [r.as_dict() for r in runs[False][0].ranges]
            differ += not same
            print(f"{sc.name:28s} {objective:9s} {cells[0]}   {cells[1]:>36s}  {'same' if same else 'DIFFER'}",
                  flush=True)
    (hs, hw, hc), (ns, nw, nc) = totals[True], totals[False]
    print(f"total: harvest {hs} solves, {hw:.1f} s wall, {hc:.1f} s in CP-SAT; CP-SAT alone {ns} solves, "
          f"{nw:.1f} s wall, {nc:.1f} s in CP-SAT; ranges that differ: {differ}")


if __name__ == "__main__":
    main()
