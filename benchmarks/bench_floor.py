"""The floor under a `specpim-cp solve` command's wall: its start-up, and the CP-SAT seconds its own process and
the "no speculation" note's other side spend, per scenario and objective.

    python benchmarks/bench_floor.py [SET_OR_FILE ...] [--objectives latency,energy,edp] [--repeat N]

Default set `paper-full`. First the start-up: a fresh interpreter importing what `solve` needs
(`bench_startup.SOLVE_IMPORTS`), with this tree's modules compiled (`python -m compileall`, as an install
leaves them), the median of `--repeat` runs. Then every scenario under each objective as the command a user runs,
`specpim-cp solve FILE --json --objective O` in a fresh process: its wall, the report's `cp_sat_s` (the command's
own process) and the note's (`no_speculation.cp_sat_s`: its other side, solved beside the optimum or after it).
(One process solving scenario after scenario is no stand-in: measured so, CP-SAT's own seconds ran up to twice
a fresh command's, llama-32.5b-full-b32 under energy 2.50 against 1.19 s.) Per objective it prints the medians and how many
commands could meet a wall of at most 1.5x their CP-SAT seconds at all: only those whose CP-SAT seconds (both
counted) reach START / (1.5 - 1), with nothing else besides the start; and the median of START + the own
process's CP-SAT, under which no median wall can go.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_startup import SOLVE_IMPORTS, compile_modules, wall_s

#: The issue's ratio: a command's wall at most this times its CP-SAT seconds.
RATIO = 1.5


def start_up(repeat: int) -> float:
    """Median wall of a fresh interpreter importing what `solve` needs, this tree's modules compiled first."""
    compile_modules(HERE.parent)
    return statistics.median(wall_s(["-c", SOLVE_IMPORTS], str(HERE.parent)) for _ in range(repeat))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["paper-full"])
    ap.add_argument("--objectives", default="latency,energy,edp")
    ap.add_argument("--repeat", type=int, default=5, help="fresh interpreters timed for the start-up")
    args = ap.parse_args()
    start = start_up(args.repeat)
    print(f"start-up (imports of a solve, modules compiled): {start:.2f} s")

    sys.path.insert(0, str(HERE.parent))
    from specpim_cp.problem.builtin_sets import scenario_files

    need = start / (RATIO - 1)
    for objective in args.objectives.split(","):
        rows = []
        for path in scenario_files(args.sets):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "specpim_cp.cli", "solve", str(path), "--json", "--objective",
                                   objective], cwd=HERE.parent, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t0
            extra = json.loads(done.stdout)["solve"]["extra"]
            own = extra.get("cp_sat_s") or 0.0
            note = (extra.get("no_speculation") or {}).get("cp_sat_s") or 0.0
            rows.append((path.stem, wall, own, note))
            print(f"  {objective} {path.stem}: wall {wall:.2f} s, CP-SAT {own:.2f} s here + {note:.2f} s the note's",
                  file=sys.stderr, flush=True)
        walls = [r[1] for r in rows]
        own = [r[2] for r in rows]
        both = [r[2] + r[3] for r in rows]
        print(f"{objective} ({len(rows)} scenarios): wall median {statistics.median(walls):.2f} s; "
              f"CP-SAT median {statistics.median(own):.2f} s here, {statistics.median(both):.2f} s with the note's; "
              f"CP-SAT below {need:.2f} s (no wall of at most {RATIO}x possible): {sum(b < need for b in both)}; "
              f"start + own CP-SAT median {statistics.median(start + o for o in own):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
