"""Numeric safety of the exact model: the largest row magnitude (log2) per scenario x objective x profile.

    python benchmarks/bench_numeric.py [SET ...] [--objective latency|energy|edp ...] [--json OUT]

Default: every built-in set (examples, paper, paper-full, paper-trees, paper-assumptions, the large tree
sets, staged, and the base scenarios of the mix set). Builds each model under every assumption profile (memory_model x energy_accounting), adds
the rows a solve of each objective adds at the worst incumbent (`solvers/exact/numeric.py`), and solves
nothing. Printed per row (log2 of the largest worst-case |activity| = sum |coefficient| x max |bound|):

  max       over every row the solve sees, at the model's own ub(round time / energy) as incumbent
  base      over the base model's rows the solve keeps (a latency solve empties the energy rows)
  guarded   CP-SAT's own sum (max of the positive and negative parts) at the largest incumbent
            `ratio.measure` admits: what CP-SAT actually checks; <= 62 means accepted
  refuse    rows CP-SAT would refuse at the model's bound / whether `ratio.measure` refuses such an incumbent
  cross     log2 of the largest coefficient x another variable's bound (the 9.15 fault's product) and
            the rows where it reaches 2^63 (base model rows / all)

The last lines name the closest row to the limit and every row over it. Tests:
tests/test_numeric_safety.py (paper, examples and staged by default; the rest marked slow).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.scenario import Scenario, load_scenario
from specpim_cp.solvers.exact.guards import INT_LIMIT
from specpim_cp.solvers.exact.numeric import (
    OBJECTIVES,
    PROFILES,
    NumericReport,
    profile_reports,
    with_profile,
)
from specpim_cp.views.tables import table

ALL_SETS = tuple(sorted(builtin_sets()))


def set_scenarios(name: str) -> list[Scenario]:
    """The scenarios of a built-in set (for `mix`: the base scenario of each family) or of a folder/file."""
    sets = builtin_sets()
    path = sets.get(name, Path(name))
    files = sorted(path.glob("*.toml")) if path.is_dir() else [path]
    if name == "mix":
        return [load_mix(p).base for p in files]
    return [load_scenario(p) for p in files]


def _short(family: str) -> str:
    return family.split(" ")[0]


def report_row(set_name: str, r: NumericReport) -> list:
    if r.refused:
        return [set_name, r.scenario, r.objective, r.profile, "refused", "", "", "", "", "", r.refused[:60]]
    w, b, g, x = r.worst, r.base_worst, r.guarded_worst, r.worst_cross
    guarded = f"{math.log2(max(g.checker, 1)):.2f} ({g.checker / INT_LIMIT:.2f}x)"
    return [set_name, r.scenario, r.objective, r.profile, f"{w.log2:.2f} {_short(w.family)}",
            f"{b.log2:.2f} {_short(b.family)}", guarded, f"{len(r.checker_over)}/{'yes' if r.guard_refuses else 'no'}",
            f"{x.cross_log2:.1f} {_short(x.family)}", f"{r.cross_wraps_base}/{r.cross_wraps}", ""]


def record(set_name: str, r: NumericReport) -> dict:
    def row(m):
        return None if m is None else {"family": m.family, "index": m.index, "log2": round(m.log2, 3),
                                       "checker": m.checker, "cross_log2": round(m.cross_log2, 3),
                                       "coeff": m.coeff, "coeff_var": m.coeff_var, "bound": m.bound,
                                       "bound_var": m.bound_var}
    return {"set": set_name, "scenario": r.scenario, "objective": r.objective, "profile": r.profile,
            "refused": r.refused, "rows": r.rows, "worst": row(r.worst), "base_worst": row(r.base_worst),
            "guarded_worst": row(r.guarded_worst), "worst_cross": row(r.worst_cross),
            "checker_over": [row(m) for m in r.checker_over], "guard_refuses": r.guard_refuses,
            "cross_wraps": r.cross_wraps, "cross_wraps_base": r.cross_wraps_base,
            "above_2_53": r.above_headroom}


def summary(built: list[tuple[str, NumericReport]]) -> None:
    """The rows closest to CP-SAT's limit, and every report with a row over it."""
    s, top = max(built, key=lambda sr: sr[1].base_worst.activity)
    print(f"\nlargest base-model row (every solve submits it): {s}/{top.scenario} {top.profile}: "
          f"{top.base_worst.describe()} = {top.base_worst.activity / INT_LIMIT:.3f} x 2^62")
    admitted = [(s, r) for s, r in built if not r.guard_refuses]
    if admitted:
        s, top = max(admitted, key=lambda sr: sr[1].worst.checker)
        print(f"closest to the limit where `ratio.measure` admits the model's ub(N) as incumbent: {s}/{top.scenario} "
              f"{top.objective} {top.profile}: {top.worst.describe()}, CP-SAT's sum {top.worst.checker / INT_LIMIT:.3f}"
              " x 2^62")
    s, top = max(built, key=lambda sr: sr[1].log2)
    print(f"largest worst-case |activity| (model bounds as incumbent): {s}/{top.scenario} {top.objective} "
          f"{top.profile}: {top.worst.describe()}")
    over = [(s, r) for s, r in built if r.checker_over]
    print(f"{len(over)} of {len(built)} scenario x objective x profile have rows CP-SAT would refuse at the model's "
          f"bound as incumbent ({sum(r.guard_refuses for _, r in over)} of them refused before by ratio.measure's "
          f"guard); rows over 2^62 at the guarded incumbent: {sum(r.guarded_worst.checker > INT_LIMIT for _, r in built)}")
    for s, r in over:
        fams = sorted({m.family for m in r.checker_over})
        print(f"  {s}/{r.scenario} {r.objective} {r.profile}: {len(r.checker_over)} rows ({'; '.join(fams)}), "
              f"guard refuses: {r.guard_refuses}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=list(ALL_SETS))
    ap.add_argument("--objective", action="append", choices=OBJECTIVES, help="repeatable; default: all three")
    ap.add_argument("--json", help="write one record per scenario x objective x profile")
    args = ap.parse_args()
    objectives = tuple(args.objective or OBJECTIVES)
    seen: set[str] = set()
    rows, reports = [], []
    t_all = time.perf_counter()
    for set_name in args.sets:
        for sc in set_scenarios(set_name):
            key = sc.content_hash()
            if key in seen:  # a mix base that another set already holds
                print(f"skip {set_name}/{sc.name}: already measured", file=sys.stderr)
                continue
            seen.add(key)
            t0 = time.perf_counter()
            for memory_model, accounting in PROFILES:
                for r in profile_reports(with_profile(sc, memory_model, accounting), objectives):
                    rows.append(report_row(set_name, r))
                    reports.append((set_name, r))
            print(f"done {set_name}/{sc.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print(table(["set", "scenario", "objective", "profile", "max log2", "base log2", "guarded checker log2",
                 "refuse rows/guard", "cross log2", "cross>=2^63 base/all", "note"], rows))
    built = [(s, r) for s, r in reports if not r.refused]
    if built:
        summary(built)
    print(f"\n{len(reports)} reports in {time.perf_counter() - t_all:.0f} s", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"sets": args.sets, "reports": [record(s, r) for s, r in reports]},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
