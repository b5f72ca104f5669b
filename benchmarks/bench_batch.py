"""Wall time of `specpim-cp batch` on a benchmark set (default: `paper` with exact, baselines and ladder).

    python benchmarks/bench_batch.py                  # fresh run into results/bench/paper, prints wall time
    python benchmarks/bench_batch.py --write-golden   # ... and pins the exact objectives in tests/golden/

The golden file records, per scenario, the exact objective as a fraction with its status and gap, plus
the solver version, the git commit and the solve options, so `tests/test_batch.py` can recompute a
fast subset and require agreement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from specpim_cp.files import write_atomic
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.report.batch import build_report
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.instances import BatchOptions, resolve_inputs
from specpim_cp.runs.store import read_records
from specpim_cp.solvers.result import solver_version

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "paper.json"


def git_commit() -> str:
    try:
        def git(*args: str) -> str:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
            return done.stdout.strip()

        dirty = git("status", "--porcelain", "--untracked-files=no")
        return git("rev-parse", "HEAD") + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def golden(records: list[dict], options: BatchOptions) -> dict:
    exact = sorted((r for r in records if r.method == "exact"), key=lambda r: r.scenario)
    return {
        "set": "paper",
        "solver_version": solver_version(),
        "git_commit": git_commit(),
        "options": options.method_options("exact"),
        "note": "exact objectives (latency, ns per token) of the paper set; OPTIMAL ones are proven optima",
        "scenarios": {r.scenario: {"status": r.status, "objective_exact": r.objective_exact,
                                      "objective": r.objective, "gap": r.gap,
                                      "wall_s": round(r.wall_s, 3), "scenario_hash": r.scenario_hash}
                      for r in exact},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="paper")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench"))
    ap.add_argument("--methods", default="exact,baselines,ladder")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-pareto", action="store_true")
    ap.add_argument("--resume", action="store_true", help="keep earlier results (default: a fresh run)")
    ap.add_argument("--write-golden", action="store_true", help=f"write {GOLDEN.relative_to(ROOT)}")
    args = ap.parse_args()

    name, files = resolve_inputs(args.set, builtin_sets())
    out = Path(args.out) / name
    options = BatchOptions(methods=tuple(args.methods.split(",")), time_limit_s=args.time_limit,
                           seed=args.seed, jobs=args.jobs, pareto=not args.no_pareto, resume=args.resume)
    t0 = time.perf_counter()
    summary = run_batch(files, out, options)
    batch_s = time.perf_counter() - t0
    report = build_report(out)
    for note in summary.notes:
        print(note, file=sys.stderr)
    print(report.text)
    print(f"\nbatch {name}: {summary.total} instances ({summary.ran} run, {summary.skipped} already done, "
          f"{len(summary.failed)} failed) with --jobs {args.jobs} --time-limit {args.time_limit}: "
          f"wall {batch_s:.1f} s; results in {out}")
    if args.write_golden:
        if args.set != "paper":
            print("--write-golden pins the paper set only", file=sys.stderr)
            return 2
        write_atomic(GOLDEN, json.dumps(golden(read_records(out), options), indent=2) + "\n")
        print(f"wrote {GOLDEN}")
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
