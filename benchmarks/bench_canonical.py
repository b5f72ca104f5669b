"""Canonical optimum benchmark (OBJ-3, formulations/objectives.md): the same design whatever the workers.

    python benchmarks/bench_canonical.py [SET_OR_DIR ...] [--time-limit S] [--json OUT]

Default sets: `paper` and `paper-full`; the `mix` set (or any mix file) is solved with `solve-mix` and
compared cell by cell (formulations/mix.md, MIX-13; `--cell-time-limit` for its single-cell solves). Every
scenario is solved twice: deterministic (one worker,
deterministic time limit) and with `--workers 2` (non-deterministic, wall-time limit). The row says
whether the two design JSONs are byte-identical, both solve times, the tie-break's own cost (wall and
deterministic time of the OBJ-3 solves, formulations/objectives.md), and the levels at which other
designs tie. The last line counts the identical designs (the goal: all of them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.runs.mixes import is_mix_file
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.mix import MixOptions, solve_mix
from specpim_cp.views.tables import table


def ties_text(extra: dict) -> str:
    """The tied levels, then the level that leaves one design ('latency,energy>pim_units'; 'unique (latency)':
    no other design attains the objective), or why the design is not canonical."""
    levels = extra["tie_break"]
    if not extra.get("canonical"):
        fault = [lv["level"] for lv in levels if lv["status"] == "FAULT"]
        return f"not canonical ({', '.join(fault)} level: CP-SAT fault)" if fault else "not canonical"
    tied = [lv["level"] for lv in levels if lv["ties"]]
    unique = next((lv["level"] for lv in levels if lv["ties"] is False), "?")
    return ",".join(tied) + ">" + unique if tied else f"unique ({unique})"


@dataclass(frozen=True)
class Solved:
    """One solve's design text (a mix: its cells' designs), status, report extra."""

    design_json: str
    status: str
    extra: dict


def run(path: Path, opts: SolverOptions, cell_time_limit: float) -> tuple[Solved | None, float, str]:
    t0 = time.perf_counter()
    try:
        if is_mix_file(path):
            res = solve_mix(load_mix(path), "latency", MixOptions(opts, cell_time_limit_s=cell_time_limit))
            out = Solved("[" + ",".join(d.to_json() for d in res.designs) + "]", res.report.status,
                         {**res.report.extra, "deterministic_time": sum(
                             st.get("deterministic_time", 0) for st in res.report.extra["stages"])})
        else:
            r = solve(load_scenario(path), options=opts)
            out = Solved(r.design.to_json(), r.report.status, r.report.extra)
        return out, time.perf_counter() - t0, ""
    except ScenarioError as exc:
        return None, time.perf_counter() - t0, str(exc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["paper", "paper-full"])
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--cell-time-limit", type=float, default=60.0, help="each single-cell solve of a mix")
    ap.add_argument("--json", help="write the per-scenario records to this file")
    args = ap.parse_args()
    rows, records, same, walls = [], [], 0, []
    files = scenario_files(args.sets)
    for path in files:
        det, det_s, det_err = run(path, SolverOptions(args.time_limit, 1, 0, deterministic=True), args.cell_time_limit)
        par, par_s, par_err = run(path, SolverOptions(args.time_limit, 2, 0, deterministic=False), args.cell_time_limit)
        if det is None or par is None:
            rows.append([path.stem, "ERROR", f"{det_s:.1f}", "", "", f"{par_s:.1f}", "", (det_err or par_err)[:60]])
            records.append({"file": path.stem, "error": det_err or par_err})
            continue
        identical = det.design_json == par.design_json
        same += identical
        walls.append(det_s)
        cost = det.extra.get("tie_break_cost", {})
        rows.append([path.stem, det.status, f"{det_s:.1f}", f"{det.extra.get('deterministic_time', 0):.2f}",
                     f"{cost.get('wall_s', 0):.1f}", f"{par_s:.1f}", "yes" if identical else "NO",
                     ties_text(det.extra)])
        records.append({"file": path.stem, "status": det.status, "identical": identical,
                        "deterministic_wall_s": round(det_s, 3), "workers2_wall_s": round(par_s, 3),
                        "deterministic_time": det.extra.get("deterministic_time"), "tie_break_cost": cost,
                        "tie_break": det.extra.get("tie_break"), "canonical": det.extra.get("canonical"),
                        "workers2_canonical": par.extra.get("canonical"), "workers2_status": par.status})
        print(f"done {path.stem}: identical {identical}, {det_s:.1f} s / {par_s:.1f} s", file=sys.stderr, flush=True)
    print(table(["scenario", "status", "det. wall s", "det. time", "tie-break s", "workers=2 wall s", "identical",
                 "ties"], rows))
    if walls:
        print(f"\n{same}/{len(files)} designs byte-identical (deterministic vs --workers 2); deterministic wall median "
              f"{statistics.median(walls):.1f} s, max {max(walls):.1f} s (time limit {args.time_limit})")
    if args.json:
        Path(args.json).write_text(json.dumps({"sets": args.sets, "scenarios": records}, indent=1, default=str))
    return 0 if same == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
