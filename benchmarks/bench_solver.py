"""Solver benchmark: status, solve time, iterations, gap and model size for every scenario of a set.

    python benchmarks/bench_solver.py [SET_OR_DIR ...] [--objective latency|energy|edp] [--time-limit S]
                                      [--workers N] [--deterministic] [--json OUT] [--compare REF.json ...]
                                      [--profile] [--cli]

Default: the `examples` set (and `paper`/`staged` when given), objective latency (whatever the scenario
files say; energy and EDP solve the same scenarios for those objectives: EDP by the exact Pareto front,
formulations/objectives.md). Prints a table and the median and maximum times. The time limit holds per
scenario (for EDP: the whole front).
Every row carries the wall time, the time inside CP-SAT (the wall seconds of every CP-SAT solve, summed:
`cp_sat_s` of the report), their ratio (what the Python around the solver costs), CP-SAT's deterministic
time (summed over the Dinkelbach solves; comparable across machine loads, unlike the wall time) and the
1-minute load average when the scenario finished, since the machine may be shared. `--json` writes one record per scenario (exact
objective included); `--compare` reads such a file, or a golden file (`tests/golden/paper.json`, latency),
and adds the objective's change against it per scenario (matched by file stem, then scenario name; a
record of another objective is not compared): 0 for an unchanged optimum. `--profile` prints every
CP-SAT solve of every scenario (stage, status, times). For EDP the gap is 0 when the front is proven and
n/a otherwise (no bound), and the iterations count every Dinkelbach solve of the front.

`--cli` runs each scenario as a user does, `specpim-cp solve FILE --json` in a fresh process: the wall is the
whole command's (Python start-up, imports, the heuristic's warm start, the "no speculation" note, the
output), CP-SAT's seconds those the command's report sums. Without it the exact solver is called in this
process (no warm start, no note).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact import ModelMismatch, SolverOptions, solve
from specpim_cp.views.tables import table

#: Objectives `--objective` can ask for, and how the table prints each one's value.
OBJECTIVE_TEXT = {
    "latency": lambda v: f"{v / 1e3:,.3f} us/token",
    "energy": lambda v: f"{v:,.1f} nJ/token",
    "edp": lambda v: f"{v:.4g} ns*nJ/token^2",
}


def load_reference(paths: list[str], objective: str = "latency") -> dict[str, Fraction]:
    """Exact objectives by file stem and scenario name, from bench JSON files or golden files (records
    without an `objective_name` are latency ones, as the golden files and older bench files hold)."""
    ref: dict[str, Fraction] = {}
    for p in paths:
        data = json.loads(Path(p).read_text())
        records = data["scenarios"]
        items = records.items() if isinstance(records, dict) else ((r["file"], r) for r in records)
        for key, r in items:
            if r.get("objective_name", "latency") != objective:
                continue
            if r.get("objective_exact"):
                ref[key] = Fraction(r["objective_exact"])
                if "name" in r:
                    ref.setdefault(r["name"], ref[key])
    return ref


def load_1min() -> float:
    return os.getloadavg()[0]


@dataclass
class Run:
    """One scenario's solve as the table reads it, from the solver's result or the CLI's JSON."""

    status: str
    objective: Fraction
    iterations: int
    gap: float | None
    extra: dict
    design: str | None


def solve_in_process(sc, args) -> Run:
    r = solve(sc, objective=args.objective,
              options=SolverOptions(args.time_limit, args.workers, deterministic=args.deterministic))
    return Run(r.report.status, r.report.objective, r.report.iterations, r.report.gap, r.report.extra,
               r.design.key() if hasattr(r.design, "key") else None)


def solve_by_cli(path: Path, args) -> Run:
    """`specpim-cp solve PATH --json` in a fresh process (ScenarioError with its one line when it fails)."""
    cmd = [sys.executable, "-m", "specpim_cp.cli", "solve", str(path), "--json", "--objective", args.objective,
           "--time-limit", str(args.time_limit)]
    cmd += ["--deterministic"] if args.deterministic else ["--workers", str(args.workers)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if out.returncode != 0:
        raise ScenarioError((out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1])
    data = json.loads(out.stdout)
    rep = data["solve"]
    note = rep["extra"].get("no_speculation") or {}  # the note's other side: CP-SAT seconds of the command too
    rep["extra"]["cp_sat_s"] = rep["extra"].get("cp_sat_s", 0.0) + note.get("cp_sat_s", 0.0)
    return Run(rep["status"], Fraction(rep["objective_exact"]), rep["iterations"], rep.get("gap"), rep["extra"],
               json.dumps(data["design"], sort_keys=True))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["examples"])
    ap.add_argument("--objective", default="latency", choices=tuple(OBJECTIVE_TEXT),
                    help="objective solved for every scenario (default latency)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--json", help="write the per-scenario records to this file")
    ap.add_argument("--compare", nargs="*", default=[], help="bench JSON or golden files to compare objectives with")
    ap.add_argument("--profile", action="store_true", help="print every CP-SAT solve of every scenario")
    ap.add_argument("--cli", action="store_true", help="time `specpim-cp solve FILE --json` in a fresh process")
    args = ap.parse_args()
    ref = load_reference(args.compare, args.objective)
    rows, times, dtimes, ratios, records = [], [], [], [], []
    load_start = load_1min()
    for path in scenario_files(args.sets):
        sc = load_scenario(path)
        t0 = time.perf_counter()
        try:
            r = solve_by_cli(path, args) if args.cli else solve_in_process(sc, args)
        except (ScenarioError, ModelMismatch) as exc:  # ModelMismatch: the 9.15 fault guard refused a claim
            status = "ERROR" if isinstance(exc, ScenarioError) else "MISMATCH"
            wall = time.perf_counter() - t0
            rows.append([sc.name, status, f"{wall:.1f}", "", "", "", f"{load_1min():.2f}", "", "", "", "", "",
                         str(exc)[:60]])
            records.append({"file": path.stem, "name": sc.name, "objective_name": args.objective, "status": status,
                            "wall_s": round(wall, 3), "error": str(exc)})
            print(f"done {sc.name}: {status} {wall:.1f} s ({str(exc)[:100]})", file=sys.stderr, flush=True)
            continue
        wall = time.perf_counter() - t0
        load = load_1min()
        dtime = r.extra.get("deterministic_time", float("nan"))
        cp_sat = r.extra.get("cp_sat_s", float("nan"))
        ratio = wall / cp_sat if cp_sat > 0 else float("nan")
        times.append(wall)
        dtimes.append(dtime)
        ratios.append(ratio)
        size = r.extra.get("model_size", {})
        gap = "n/a" if r.gap is None else f"{100 * r.gap:.2g}%"
        obj = r.objective
        base = ref.get(path.stem, ref.get(sc.name))
        change = "" if base is None else f"{100 * float((obj - base) / base):+.3f}%"
        rows.append([sc.name, r.status, f"{wall:.1f}", f"{cp_sat:.1f}", f"{ratio:.2f}", f"{dtime:.1f}",
                     f"{load:.2f}", r.iterations, gap,
                     size.get("variables", ""), size.get("constraints", ""),
                     OBJECTIVE_TEXT[args.objective](float(obj)), change])
        records.append({"file": path.stem, "name": sc.name, "objective_name": args.objective,
                        "status": r.status, "wall_s": round(wall, 3), "cp_sat_s": cp_sat,
                        "wall_over_cp_sat": round(ratio, 3), "deterministic_time": dtime, "load_1min": round(load, 2),
                        "iterations": r.iterations, "gap": r.gap, "objective": float(obj),
                        "objective_exact": f"{obj.numerator}/{obj.denominator}", "design": r.design,
                        "pareto_points": r.extra.get("pareto_points"), "cli": args.cli,
                        "solves": r.extra.get("solves", [])})
        if args.profile:
            for k, s in enumerate(r.extra.get("solves", [])):
                print(f"  {sc.name} solve {k}: {s['stage'] or args.objective} {s['status']} "
                      f"dtime {s['deterministic_time']:.2f} wall {s['wall_s']:.2f}", file=sys.stderr, flush=True)
        print(f"done {sc.name}: {r.status} {wall:.1f} s, dtime {dtime:.1f}, load {load:.2f}",
              file=sys.stderr, flush=True)
    print(table(["scenario", "status", "wall s", "CP-SAT s", "wall/CP-SAT", "det time", "load", "iterations", "gap", "variables", "constraints",
                 "objective", "vs ref"], rows))
    settings = ("" if args.objective == "latency" else f"objective {args.objective}, ")
    settings += "by the CLI, " if args.cli else ""
    settings += (f"time limit {args.time_limit} s, workers {args.workers}, deterministic {args.deterministic}; "
                f"1-min load {load_start:.2f} at start, {load_1min():.2f} at end")
    if times:
        print(f"\n{len(times)} solved; wall median {statistics.median(times):.1f} s, max {max(times):.1f} s; "
              f"wall / CP-SAT median {statistics.median(ratios):.2f}, max {max(ratios):.2f}; "
              f"deterministic time median {statistics.median(dtimes):.1f}, max {max(dtimes):.1f} ({settings})")
    if args.json:
        Path(args.json).write_text(json.dumps({"sets": args.sets, "objective": args.objective, "settings": settings,
                                               "scenarios": records},
                                              indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
