"""Pareto-front benchmark: `pareto_front` on one scenario under both energy accountings (total, dynamic).

    python benchmarks/bench_pareto.py SCENARIO [--time-limit S] [--workers N] [--deterministic]
                                      [--accounting total|dynamic ...] [--resolution PCT] [--max-points N]
                                      [--json OUT]

SCENARIO is a file or a built-in SET/NAME (e.g. paper/opt-13b-b1). `--time-limit` bounds each front (all
its Dinkelbach solves share it; default 120 s). Printed per accounting: every point (latency and energy
per token, EDP, whether both of its solves were proven), the wall time, CP-SAT's deterministic time summed
over the front's solves, the number of solves and whether the whole front is proven (the front's own
status: every Dinkelbach run OPTIMAL and the sweep ended by an INFEASIBLE stage or by OBJ-2s's floor,
formulations/objectives.md OBJ-2); a point is proven when both of its Dinkelbach runs returned OPTIMAL.

`pareto` returns the points and the front's status, so this script records each solve of the front by
wrapping the solve session that `specpim_cp.solvers.exact.fronts` opens for the duration of the call (status,
objective F, bound, deterministic and wall time), and the status of each Dinkelbach run by wrapping
`minimize_ratio`; nothing in the package changes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

from ortools.sat.python import cp_model

from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.scenario import Scenario, load_scenario, parse_scenario
from specpim_cp.solvers.exact import ModelMismatch, SolverOptions
from specpim_cp.solvers.result import DEFAULT_MAX_POINTS, DEFAULT_RESOLUTION_PCT, Status
from specpim_cp.views.fronts import front_statement
from specpim_cp.views.tables import table

ACCOUNTINGS = ("total", "dynamic")
#: Points printed per front without --all-points (the first and last half of them).
SHOWN = 20
#: The module whose session and Dinkelbach runs a front uses.
exact_solve = importlib.import_module("specpim_cp.solvers.exact.fronts")


@contextmanager
def recorded_solves():
    """Yield a list that receives one dict per CP-SAT solve made while the context is open."""
    log: list[dict] = []
    base = exact_solve.SolveSession

    class Recording(base):  # type: ignore[misc, valid-type]
        def solve(self, model, first_solution=False, cautious=False):
            status, solver = super().solve(model, first_solution, cautious)
            found = status in (Status.OPTIMAL, Status.FEASIBLE)
            log.append({"stage": self.stage, "status": status.value, "first_solution": first_solution,
                        "cautious": cautious, "objective": exact_objective(model, solver) if found else None,
                        "bound": solver.best_objective_bound if found else None,
                        "deterministic_time": solver.deterministic_time, "wall_s": solver.wall_time})
            return status, solver

    minimize = exact_solve.minimize_ratio

    def recorded_run(run, ratio, *args, **kwargs):
        out = minimize(run, ratio, *args, **kwargs)
        log.append({"run": run.stage, "status": out[0]})
        return out

    exact_solve.SolveSession = Recording
    exact_solve.minimize_ratio = recorded_run
    try:
        yield log
    finally:
        exact_solve.SolveSession = base
        exact_solve.minimize_ratio = minimize


def exact_objective(model: cp_model.CpModel, solver: cp_model.CpSolver) -> int:
    """The objective at the solution in integers (CP-SAT's `objective_value` is a double)."""
    obj = model.proto.objective
    return int(obj.offset) + sum(c * solver.value(model.get_int_var_from_proto_index(v))
                                 for v, c in zip(list(obj.vars), list(obj.coeffs)))


def points_proven(log: list[dict], n_points: int) -> list[bool]:
    """Per point, whether both of its Dinkelbach runs (latency, then energy) returned OPTIMAL."""
    runs = {r["run"]: r["status"] for r in log if "run" in r}
    return [runs.get(f"pareto point {k}: latency") == runs.get(f"pareto point {k}: energy") == "OPTIMAL"
            for k in range(1, n_points + 1)]


def short_design(design) -> str:
    """Architectures per model (verifier first), draft lengths and the pipeline, in one short line."""
    archs = " ".join(md.arch.label() for _, md in design.models())
    drafts = ",".join(str(d.draft_length) for d in design.choice.drafters)
    return f"{archs}; gamma {drafts or '-'}; pipeline {'on' if design.pipeline else 'off'}"


def with_accounting(sc: Scenario, accounting: str) -> Scenario:
    data = sc.model_dump(mode="python")
    data["assumptions"] = {**data["assumptions"], "energy_accounting": accounting}
    return parse_scenario(data)


def run_front(sc: Scenario, opts: SolverOptions, resolution: str = DEFAULT_RESOLUTION_PCT,
              max_points: int = DEFAULT_MAX_POINTS) -> dict:
    t0 = time.perf_counter()
    error, statement, proven = None, "", False
    with recorded_solves() as records:
        try:
            result = exact_solve.pareto(sc, options=opts, resolution=Fraction(resolution) / 100,
                                        max_points=max_points)
            front, statement, proven = result.points, front_statement(result), result.status == "OPTIMAL"
        except ModelMismatch as exc:  # the 9.15 fault guard (objectives.md)
            front, error = [], f"ModelMismatch: {exc}"
    wall = time.perf_counter() - t0
    per_point = points_proven(records, len(front))
    log = [r for r in records if "run" not in r]
    points = [{"latency_ns_per_token": float(e.metrics.latency_fraction()),
               "energy_nj_per_token": float(e.metrics.energy_fraction()), "edp": e.metrics.edp,
               "design": e.design.key(), "summary": short_design(e.design), "proven": p} for e, p in zip(front, per_point)]
    return {"scenario": sc.name, "accounting": sc.assumptions.energy_accounting, "points": points,
            "wall_s": round(wall, 3), "deterministic_time": round(sum(s["deterministic_time"] for s in log), 3),
            "solves": len(log), "proven": proven and error is None, "error": error, "load_1min": os.getloadavg()[0],
            "resolution_pct": resolution, "statement": statement, "solve_log": log}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="a scenario file or a built-in SET/NAME, e.g. paper/opt-13b-b1")
    ap.add_argument("--time-limit", type=float, default=120.0, help="per front (default 120 s)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accounting", action="append", choices=ACCOUNTINGS, help="repeatable; default: both")
    ap.add_argument("--resolution", default=DEFAULT_RESOLUTION_PCT,
                    help=f"front resolution in percent (OBJ-2r; default {DEFAULT_RESOLUTION_PCT}, as `pareto`; 0: exact)")
    ap.add_argument("--max-points", type=int, default=DEFAULT_MAX_POINTS,
                    help=f"point budget (OBJ-2b; default {DEFAULT_MAX_POINTS}, as `pareto`; 0: none)")
    ap.add_argument("--json", help="write both fronts (points and every solve) here")
    ap.add_argument("--all-points", action="store_true", help=f"print every point (default: the first and last "
                    f"{SHOWN // 2} of a front with more than {SHOWN})")
    args = ap.parse_args()
    base = load_scenario(resolve_scenario_path(args.scenario))
    opts = SolverOptions(args.time_limit, args.workers, args.seed, args.deterministic)
    results = []
    for accounting in args.accounting or ACCOUNTINGS:
        r = run_front(with_accounting(base, accounting), opts, args.resolution, args.max_points)
        results.append(r)
        rows = [[k + 1, f"{p['latency_ns_per_token'] / 1e3:,.3f}", f"{p['energy_nj_per_token']:,.1f}",
                 f"{p['edp']:.4g}", "yes" if p["proven"] else "no", p["summary"]] for k, p in enumerate(r["points"])]
        if len(rows) > SHOWN and not args.all_points:
            rows = rows[:SHOWN // 2] + [["...", "", "", "", "", ""]] + rows[-(SHOWN // 2):]
        print(f"\n{base.name}, energy accounting {accounting}:")
        print(table(["point", "latency us/token", "energy nJ/token", "EDP ns*nJ", "proven", "design"], rows))
        best = min(r["points"], key=lambda p: p["edp"], default=None)
        if best is not None:
            print(f"least EDP: {best['edp']:.6g} ns*nJ/token^2 at {best['latency_ns_per_token'] / 1e3:,.3f} us/token, "
                  f"{best['energy_nj_per_token']:,.1f} nJ/token")
        print(f"{len(r['points'])} points; wall {r['wall_s']:.1f} s, deterministic time {r['deterministic_time']:.2f}, "
              f"{r['solves']} solves; every point proven: {'yes' if r['proven'] else 'no'}"
              f"{'; ' + r['error'][:160] if r['error'] else ''} (time limit {args.time_limit} s per front, "
              f"workers {args.workers}, deterministic {args.deterministic}, 1-min load {r['load_1min']:.2f})",
              flush=True)
        print(r["statement"], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"scenario": args.scenario, "fronts": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
