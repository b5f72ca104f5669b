"""Wall time and peak memory of `solve` on scenarios whose drafters' joint choice space is large: each
case must solve within its --time-limit plus a margin or be refused in one line, fast.

Each case runs `python -m specpim_cp.cli solve FILE --time-limit S` in a fresh process; its peak resident
memory is the child's `ru_maxrss` (os.wait4, as /usr/bin/time reports it). The refused cases are
tests/data/bounded_work/*.toml; the solved ones are the largest built-in multi-drafter scenarios.

    python benchmarks/bench_bounded_work.py [--time-limit 20] [--margin 15]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "bounded_work"
SOLVED = ("examples/llama-32.5b-three-drafters", "paper-trees/palm-62b-b1", "paper-full/palm-62b-full-b1",
          "paper-trees-large/opt-13b-b1-pim-n128")


def run_case(target: str, time_limit: float) -> tuple[int, float, float, str]:
    """(exit code, wall s, peak MB, first line of output) of one `solve` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "specpim_cp.cli", "solve", target, "--time-limit",
                             str(time_limit)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    first = next((line for line in out.splitlines() if line.strip()), "")
    return proc.returncode, wall, usage.ru_maxrss / 1024, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--margin", type=float, default=15.0, help="seconds allowed beyond --time-limit")
    args = ap.parse_args()
    targets = [str(p) for p in sorted(CASES.glob("*.toml"))] + list(SOLVED)
    print(f"{'case':40s} {'exit':>4s} {'wall s':>7s} {'peak MB':>8s}  within  outcome")
    for target in targets:
        code, wall, peak, first = run_case(target, args.time_limit)
        ok = wall <= args.time_limit + args.margin
        outcome = "refused" if code == 2 else first.split(":")[1].strip()[:40] if code == 0 else f"exit {code}"
        label = Path(target).stem if target.endswith(".toml") else target
        print(f"{label:40s} {code:4d} {wall:7.1f} {peak:8.0f}  {'yes' if ok else 'NO':6s}  {outcome}",
              flush=True)


if __name__ == "__main__":
    main()
