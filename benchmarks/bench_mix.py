"""Workload-mix solve time: `solve-mix` on every family of the built-in `mix` set (the target:
proven optimal in <= 120 s per family on 2 cores, or bound and gap when the time limit stops it).

    python benchmarks/bench_mix.py                         # the three families, latency objective
    python benchmarks/bench_mix.py --objective regret      # or energy
    python benchmarks/bench_mix.py --mix opt-13b --json out.json

Latency families are solved by the decomposition (`--method auto`; formulations/mix.md, MIX-14..19): pass
tables, a branch and bound over the hardware and the weight copies, then the canonical tie-break on the
hardware and leaves that attain the optimum; `--method decomposition` also decomposes regret (exact, but its
bound stays at the worst cell: slow on the larger families). `--method cp-sat` (and every energy and, under
`auto`, regret family) runs the mix model instead, on `--workers` CP-SAT workers (default 2, the machine's
cores; cells alone run two at a time) with wall-clock limits: `--time-limit` for the mix model's stages,
`--cell-time-limit` per single-cell solve, so a family ends within about the two plus the cells' phase.
`--deterministic` runs one worker with deterministic time limits instead (same design every run, wall time
not bounded). Printed per family: status, the mix objective and its proven bound and gap, wall time and its
phases (cells alone, hardware screening or the search, mix model, tie-break), the search's nodes, the
model's size, and what the shared hardware loses against per-cell optima and gains over the median-cell
hardware, the PAPI-style rule and GPU-SI. The machine's load average is printed with the
figures (wall times on a shared machine are not comparable without it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.mix import MIX_UNITS, load_mix
from specpim_cp.solvers.exact import SolverOptions
from specpim_cp.solvers.mix import GPU_SI, MEDIAN, MIX_METHODS, PAPI_HALF, PER_CELL, MixOptions, solve_mix

TARGET_S = 120.0


def _canonical(s: dict) -> str:
    """'yes (ties: latency, energy)', 'yes (unique)', or 'no: why' (formulations/mix.md, MIX-13)."""
    if not s.get("canonical"):
        return "no: " + s.get("tie_break_note", "")[:50]
    tied = [lv["level"] for lv in s["tie_break"] if lv["ties"]]
    return f"yes (ties: {', '.join(tied)})" if tied else "yes (unique)"


def _ratio(value: float | None, ref: float | None) -> str:
    if value is None or ref is None:
        return "-"
    return f"{(ref / value - 1) * 100:+.1f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mix", action="append", help="a family name of the mix set (repeatable; default: all)")
    ap.add_argument("--objective", default="latency", choices=("latency", "energy", "regret"))
    ap.add_argument("--time-limit", type=float, default=120.0, help="as solve-mix's (default 120 s)")
    ap.add_argument("--cell-time-limit", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write every family's full result here")
    ap.add_argument("--stages", action="store_true", help="print each solve stage with its start time (stderr)")
    ap.add_argument("--method", default="auto", choices=MIX_METHODS,
                    help="decomposition, cp-sat or auto (the decomposition for latency and regret)")
    args = ap.parse_args()
    folder = builtin_sets()["mix"]
    names = args.mix or sorted(p.stem for p in folder.glob("*.toml"))
    unit = MIX_UNITS[args.objective]
    mode = ("deterministic, 1 worker, time limits in deterministic units" if args.deterministic
            else f"{args.workers} workers, wall-clock time limits")
    print(f"mix set, objective {args.objective} ({unit}), {mode}: mix model {args.time_limit}, each cell "
          f"{args.cell_time_limit}; load average {os.getloadavg()[0]:.2f}")
    head = ("family", "cells", "method", "status", "objective", "gap", "wall s", "cells alone s", "screening s",
            "search / mix model s", "tie-break s", "canonical", "search nodes", "vars", "constraints", "vs per-cell optima",
            "median-cell hw", "PAPI rule", "GPU-SI")
    print(" | ".join(head))
    out, worst = {}, 0.0
    for name in names:
        mix = load_mix(folder / f"{name}.toml")
        t0 = time.perf_counter()

        def stage(text: str, t0: float = t0) -> None:
            if args.stages:
                print(f"  {time.perf_counter() - t0:7.1f} s  {text}", file=sys.stderr, flush=True)

        solver = SolverOptions(args.time_limit, 1 if args.deterministic else args.workers, args.seed,
                               args.deterministic)
        res = solve_mix(mix, args.objective, MixOptions(solver, cell_time_limit_s=args.cell_time_limit,
                                                        method=args.method), on_stage=stage)
        wall = time.perf_counter() - t0
        worst = max(worst, wall)
        d = res.as_dict()
        s = d["solve"]
        comps = {c["name"]: c["objective"] for c in d["comparisons"]}
        phases = s["phases_s"]
        value = s["objective"]
        per_cell = comps.get(PER_CELL)
        search = s.get("decomposition", {}).get("exact")
        row = (name, str(len(mix.cells)), s.get("method", "mix model (cp-sat)"), s["status"], f"{value:,.1f}",
               f"{s['gap']:.2e}", f"{wall:.1f}",
               f"{phases.get('cells_alone_s', 0):.1f}", f"{phases.get('hardware_screening_s', 0):.1f}",
               f"{phases.get('mix_model_s', phases.get('search_s', 0)):.1f}", f"{phases.get('tie_break_s', 0):.1f}",
               _canonical(s), "-" if search is None else f"{search['nodes']:,}", f"{s['model_size']['variables']:,}",
               f"{s['model_size']['constraints']:,}",
               "-" if per_cell is None else f"loses {(value / per_cell - 1) * 100:.1f}%",
               _ratio(value, comps.get(MEDIAN)),
               _ratio(value, comps.get(PAPI_HALF)), _ratio(value, comps.get(GPU_SI)))
        print(" | ".join(row), flush=True)
        out[name] = {**d, "bench_wall_s": wall}
    print(f"slowest family {worst:.1f} s (target <= {TARGET_S:.0f} s); load average now {os.getloadavg()[0]:.2f}")
    print("columns median-cell hw / PAPI rule / GPU-SI: how much more that reference costs than the mix optimum")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
