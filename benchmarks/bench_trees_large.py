"""Large token trees: the exact menu's size ([TREE-4]) and the exact solves of the `paper-trees-large` set, or of
`paper-trees-deep` (depth <= 6: relaxed tree classes refined, [TREE-6]).

    python benchmarks/bench_trees_large.py [SET_OR_FILE ...] [--time-limit S] [--json OUT]
                                           [--counts] [--counts-max-space N] [--prices]
    python benchmarks/bench_trees_large.py paper-trees-deep --time-limit 60

Default: every scenario of `paper-trees-large`, solved deterministically (one worker; the time limit is in
CP-SAT deterministic time units). Per scenario it prints the drafter's menu (tree profiles left after
dominance, out of the tree space; "classes" when the menu is beyond the exact model and the solve refines
tree classes), the speculation choices, status, wall time, deterministic time, the objective, the gap to
the proven bound, the nodes and depth of the chosen draft and the draft, then the median and maximum wall
and deterministic times.

`--counts` prints how many profiles the dominance rule leaves for Sequoia's shipped acceptance vector
(re-ranked, 16 candidates per node) at 16 to 128 nodes and depths up to 2, 3, 4 and 8, building a menu
only when its tree space holds at most `--counts-max-space` profiles (default 2,000,000; n <= 32 at depth
<= 8 holds 14.9 million and takes about 3 minutes). `--prices` checks the rule's premise on every
scenario's price tables: every operator, all-reduce and embedding price of every model, on every
architecture and placement of its space, is non-decreasing over the token counts of its passes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from specpim_cp.catalog import default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.costs import CostModel
from specpim_cp.physics.rounds import falling_prices
from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.problem.space import MAX_TREE_PROFILES, DesignSpace, TreeMenuTooLarge
from specpim_cp.problem.trees import count_profiles, dominant_profiles, rank_by_probability
from specpim_cp.solvers.exact import ModelMismatch, SolverOptions, solve
from specpim_cp.views.tables import table

#: Sequoia's shipped acceptance-rate-vector.pt (Infini-AI-Lab/Sequoia@0ff3ff7): float32(count / 667) per rank
#: (formulations/physics_sources.md section 10).
SEQUOIA_COUNTS = (423, 72, 38, 15, 13, 10, 3, 2, 8, 3, 5, 3, 4, 2, 1, 2, 1, 2, 0, 2, 2, 2, 0, 1, 0, 1, 0, 0, 0,
                  1, 1, 1)
SEQUOIA_SHIPPED = tuple(float(np.float32(c) / np.float32(667)) for c in SEQUOIA_COUNTS)
COUNT_NODES = (16, 20, 24, 32, 64, 128)
COUNT_DEPTHS = (2, 3, 4, 8)


def draft_text(design) -> str:
    d = design.drafters[0]
    draft = f"tree {'-'.join(map(str, d.tree))}" if d.tree is not None else f"chain {d.draft_length}"
    return f"{draft}{', pipeline' if design.pipeline else ''}"


def nodes_depth(design) -> tuple[int, int]:
    """(nodes, depth) of the drafter's draft (a chain: its length both)."""
    d = design.drafters[0]
    return (sum(d.tree), len(d.tree)) if d.tree is not None else (d.draft_length, d.draft_length)


def menu_text(space: DesignSpace) -> tuple[str, str]:
    """(tree menu size, speculation choices), or the tree classes' note when the menu is beyond the exact
    model ([TREE-6]: the solve refines relaxed classes instead)."""
    try:
        menu = sum(o.tree is not None for opts in space.drafter_options for o in opts)
        return str(menu), str(len(space.choice_list))
    except TreeMenuTooLarge:
        return "classes", ""


def solve_rows(paths: list[Path], time_limit: float) -> tuple[list[list], list[dict]]:
    rows, records = [], []
    for path in paths:
        sc = load_scenario(path)
        cat = scenario_catalog(sc)
        t0 = time.perf_counter()
        try:
            menu, n_choices = menu_text(DesignSpace(sc, cat))
            r = solve(sc, catalog=cat, options=SolverOptions(time_limit, deterministic=True))
        except (ScenarioError, ModelMismatch) as exc:
            wall = time.perf_counter() - t0
            rows.append([sc.name, "", "", "ERROR", f"{wall:.1f}", "", "", "", "", str(exc)[:70]])
            records.append({"file": path.stem, "status": "ERROR", "wall_s": round(wall, 3), "error": str(exc)})
            print(f"done {sc.name}: ERROR {wall:.1f} s ({str(exc)[:100]})", file=sys.stderr, flush=True)
            continue
        wall = time.perf_counter() - t0
        dtime = r.report.extra.get("deterministic_time", float("nan"))
        obj, bound = r.report.objective, r.report.bound
        gap = "" if bound is None else f"{float((obj - bound) / obj) * 100:.2f}"
        nodes, depth = nodes_depth(r.design)
        rows.append([sc.name, menu, n_choices, r.report.status, f"{wall:.1f}", f"{dtime:.2f}",
                     f"{float(obj) / 1e3:,.1f}", gap, f"{nodes}/{depth}", draft_text(r.design)])
        records.append({"file": path.stem, "name": sc.name, "menu": menu, "choices": n_choices,
                        "status": r.report.status, "wall_s": round(wall, 3), "deterministic_time": dtime,
                        "objective_exact": f"{obj.numerator}/{obj.denominator}", "objective": float(obj),
                        "bound": None if bound is None else float(bound), "gap_pct": gap, "nodes": nodes,
                        "depth": depth, "design": draft_text(r.design),
                        "tree_columns": r.report.extra.get("tree_columns")})
        print(f"done {sc.name}: {r.report.status} {wall:.1f} s, dtime {dtime:.2f}", file=sys.stderr, flush=True)
    return rows, records


def count_rows(max_space: int) -> list[list]:
    """Menu sizes for Sequoia's shipped vector, 16 candidates per node: (nodes, depth, space, menu)."""
    p = rank_by_probability(SEQUOIA_SHIPPED, 16)
    rows = []
    for depth in COUNT_DEPTHS:
        for nodes in COUNT_NODES:
            space = sum(count_profiles(16, d, nodes) for d in range(1, depth + 1))
            if space > max_space:
                rows.append([nodes, depth, f"{space:,}", "not built", ""])
                continue
            t0 = time.perf_counter()
            menu = len(dominant_profiles(p, 16, range(1, depth + 1), nodes))
            rows.append([nodes, depth, f"{space:,}", f"{menu:,}", f"{time.perf_counter() - t0:.1f}"])
            print(f"counted {nodes} nodes, depth <= {depth}: {menu:,} of {space:,}", file=sys.stderr, flush=True)
    return rows


def price_rows(paths: list[Path]) -> list[list]:
    """[TREE-4] premise per scenario and model: falling prices over the token counts of its passes."""
    rows = []
    for path in paths:
        sc = load_scenario(path)
        cat = scenario_catalog(sc)
        space, costs = DesignSpace(sc, cat), CostModel(sc, cat)
        top = sum(t.max_nodes for t in (d.tree for d in sc.drafters) if t is not None) + 1
        tokens = [sc.batch_size * w for w in range(1, top + 1)]
        for m in space.models:
            bad = falling_prices(costs, m, tokens)
            rows.append([sc.name, m.label, m.spec.name, len(m.archs), f"{tokens[0]}..{tokens[-1]}",
                         "yes" if not bad else f"no: {bad[0]} (+{len(bad) - 1})"])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["paper-trees-large"])
    ap.add_argument("--time-limit", type=float, default=600.0, help="deterministic time units per scenario")
    ap.add_argument("--json", help="write the per-scenario records to this file")
    ap.add_argument("--counts", action="store_true", help="print menu sizes for Sequoia's shipped vector")
    ap.add_argument("--counts-max-space", type=int, default=2_000_000)
    ap.add_argument("--prices", action="store_true", help="check the dominance rule's premise on the prices")
    ap.add_argument("--no-solve", action="store_true", help="skip the solves")
    args = ap.parse_args()
    default_catalog()  # load once before timing
    paths = scenario_files(args.sets)
    if args.counts:
        print(f"Exact menu sizes ([TREE-4]), Sequoia's shipped vector re-ranked, 16 candidates per node; the exact "
              f"model takes {MAX_TREE_PROFILES:,}:")
        print(table(["nodes <=", "depth <=", "tree space", "menu", "s"], count_rows(args.counts_max_space)))
    if args.prices:
        print("Prices non-decreasing in tokens ([TREE-4] premise):")
        print(table(["scenario", "model", "name", "archs", "tokens", "non-decreasing"], price_rows(paths)))
    if args.no_solve:
        return 0
    rows, records = solve_rows(paths, args.time_limit)
    print(table(["scenario", "menu", "choices", "status", "wall s", "det time", "us/token", "gap %", "nodes/depth",
                 "draft"], rows))
    ok = [r for r in records if r["status"] != "ERROR"]
    if ok:
        walls = [r["wall_s"] for r in ok]
        dts = [r["deterministic_time"] for r in ok]
        proven = sum(r["status"] == "OPTIMAL" for r in ok)
        print(f"\n{proven}/{len(records)} proven optimal; wall median {statistics.median(walls):.1f} s, max "
              f"{max(walls):.1f} s; deterministic time median {statistics.median(dts):.2f}, max {max(dts):.2f} "
              "(one worker, deterministic)")
    if args.json:
        Path(args.json).write_text(json.dumps({"sets": args.sets, "scenarios": records}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
