"""Before/after: this tree against another git revision, interleaved, on the same machine in one run.

    python benchmarks/bench_against.py REV [SET_OR_FILE ...] [--objectives latency,energy,edp]
                                       [--time-limit S] [--rounds N] [--batch] [--batch-args "..."]
                                       [--json OUT] [--cli]

REV is checked out with `git worktree add --detach` into a temporary folder (removed at the end). Every
scenario (default set `paper-full`) is solved under each objective (a scenario's objectives before the next
scenario) once by each tree, in a fresh process (its price tables, kernel fits and imports paid as a CLI
run pays them): the two trees alternate and the one that goes first alternates too, so a change of the
machine's load falls on both; `--json` is rewritten after every scenario. Each process reports the
wall of `solve(...)`, the time inside CP-SAT (`extra.cp_sat_s`; n/a for a revision that does not report
it) and the exact objective and design key, which must agree ("answers differ" counts those that do not).
Per objective it prints median and maximum wall and wall / CP-SAT for both trees. `--batch` also times
`specpim-cp batch` (the main job; `--batch-args` for other options, default: the `paper` set into a fresh
folder each time) `--rounds` times per tree, alternating. `--cli` times each solve as the command
`specpim-cp solve FILE --json --objective O` instead (the whole process; CP-SAT's seconds from its report).
`--bytecode` first compiles both trees' modules (`python -m compileall`), as `pip install` or a package's first
import leaves them: where `PYTHONDONTWRITEBYTECODE` is set (as on the development machine), every fresh process
otherwise compiles the whole package again before it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
nan = float("nan")


def run_one(path: str, objective: str, time_limit: float) -> None:
    """Solve one scenario with whichever `specpim_cp` is importable; print one JSON record."""
    from specpim_cp.problem.builtin_sets import resolve_scenario_path
    from specpim_cp.problem.scenario import load_scenario
    from specpim_cp.solvers.exact import SolverOptions, solve

    sc = load_scenario(resolve_scenario_path(path))
    t0 = time.perf_counter()
    r = solve(sc, objective=objective, options=SolverOptions(time_limit, 1))
    wall = time.perf_counter() - t0
    obj = r.report.objective
    print(json.dumps({"wall_s": wall, "cp_sat_s": r.report.extra.get("cp_sat_s"), "status": r.report.status,
                      "objective": f"{obj.numerator}/{obj.denominator}",
                      "design": repr(r.design.key()) if hasattr(r.design, "key") else None}))


def in_tree(tree: Path, args: list[str], **kw) -> subprocess.CompletedProcess:
    """Run `python ARGS` with `tree` first on the import path, from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, *args], check=False, cwd=tree, env=env, capture_output=True, text=True,
                          **kw)


def solve_in(tree: Path, path: Path, objective: str, time_limit: float, cli: bool = False) -> dict:
    """One solve in a fresh process of `tree`: the exact solver's `solve(...)` (its wall), or with `cli` the
    command `specpim-cp solve PATH --json` as a user runs it (the process's wall: start-up, warm start,
    the "no speculation" note and the output included)."""
    if cli:
        t0 = time.perf_counter()
        done = in_tree(tree, ["-m", "specpim_cp.cli", "solve", str(path), "--json", "--objective", objective,
                              "--time-limit", str(time_limit)])
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
        data = json.loads(done.stdout)
        rep = data["solve"]
        note = rep["extra"].get("no_speculation") or {}  # the note's other side is CP-SAT time of the command too
        cp_sat = rep["extra"].get("cp_sat_s")
        cp_sat = None if cp_sat is None else cp_sat + note.get("cp_sat_s", 0.0)
        return {"wall_s": wall, "cp_sat_s": cp_sat, "status": rep["status"],
                "objective": rep.get("objective_exact"), "design": json.dumps(data["design"], sort_keys=True)}
    done = in_tree(tree, [str(Path(__file__).resolve()), "--run-one", str(path), objective, str(time_limit)])
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def batch_in(tree: Path, extra: str) -> float:
    with tempfile.TemporaryDirectory(prefix="specpim-batch-") as out:
        t0 = time.perf_counter()
        done = in_tree(tree, ["-m", "specpim_cp.cli", "batch", *shlex.split(extra), "--out", out])
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"batch failed in {tree}: {done.stderr.strip()[-300:]}")
    return wall


def summary(records: list[dict]) -> str:
    walls = [r["wall_s"] for r in records if "wall_s" in r]
    ratios = [r["wall_s"] / r["cp_sat_s"] for r in records if r.get("cp_sat_s")]
    if not walls:
        return "no solve"
    ratio = f"{statistics.median(ratios):.2f} / {max(ratios):.2f}" if ratios else "n/a"
    return f"wall median {statistics.median(walls):.2f} s, max {max(walls):.2f} s; wall/CP-SAT median / max {ratio}"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--run-one":
        run_one(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the git revision to compare with (the 'before')")
    ap.add_argument("sets", nargs="*", default=["paper-full"])
    ap.add_argument("--objectives", default="latency,energy,edp")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=1, help="batch runs per tree (with --batch)")
    ap.add_argument("--batch", action="store_true", help="also time `specpim-cp batch`, alternating")
    ap.add_argument("--batch-args", default="paper", help="arguments of the timed batch (default: paper)")
    ap.add_argument("--no-solves", action="store_true", help="only the batch timing")
    ap.add_argument("--json", help="write every record to this file")
    ap.add_argument("--cli", action="store_true", help="time `specpim-cp solve FILE --json` (fresh process each)")
    ap.add_argument("--bytecode", action="store_true",
                    help="compile both trees' modules first (as an install leaves them), so no process compiles them")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_startup import compile_modules

    from specpim_cp.problem.builtin_sets import scenario_files

    sha = subprocess.run(["git", "rev-parse", args.rev], cwd=HERE, capture_output=True, text=True, check=True
                         ).stdout.strip()
    base = Path(tempfile.mkdtemp(prefix=f"specpim-against-{sha[:8]}-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(base), sha], cwd=HERE, check=True,
                   capture_output=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still removes its worktree
    trees = {"before": base, "after": HERE}
    out: dict = {"rev": sha, "bytecode": args.bytecode, "solves": [], "batch": {"before": [], "after": []}}
    for tree in trees.values() if args.bytecode else ():
        compile_modules(tree)
    try:
        k = 0
        objectives = [] if args.no_solves else args.objectives.split(",")
        for path in scenario_files(args.sets):  # every objective of a scenario before the next scenario
            for objective in objectives:
                order = ("before", "after") if k % 2 == 0 else ("after", "before")
                k += 1
                rec = {"scenario": path.stem, "objective": objective}
                for side in order:
                    rec[side] = solve_in(trees[side], path, objective, args.time_limit, args.cli)
                b, a = rec["before"], rec["after"]
                rec["same_answer"] = (b.get("objective"), b.get("design")) == (a.get("objective"), a.get("design"))
                out["solves"].append(rec)
                print(f"{objective} {path.stem}: wall (CP-SAT) before {b.get('wall_s', nan):.2f} s "
                      f"({b.get('cp_sat_s') or nan:.2f} s), after {a.get('wall_s', nan):.2f} s "
                      f"({a.get('cp_sat_s') or nan:.2f} s), same answer {rec['same_answer']}",
                      file=sys.stderr, flush=True)
                if args.json:  # so far, in case the run is stopped
                    Path(args.json).write_text(json.dumps(out, indent=1))
        for r in range(args.rounds if args.batch else 0):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                out["batch"][side].append(batch_in(trees[side], args.batch_args))
                print(f"batch {side}: {out['batch'][side][-1]:.1f} s", file=sys.stderr, flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], check=False, cwd=HERE, capture_output=True)
    print(f"before = {sha[:10]}, after = this tree ({HERE}){', modules compiled first' if args.bytecode else ''}")
    for objective in dict.fromkeys(r["objective"] for r in out["solves"]):
        rows = [r for r in out["solves"] if r["objective"] == objective]
        differ = sum(not r["same_answer"] for r in rows)
        print(f"{objective} ({len(rows)} scenarios, answers differ: {differ})")
        for side in ("before", "after"):
            print(f"  {side:6s} {summary([r[side] for r in rows])}")
    for side in ("before", "after") if args.batch else ():
        walls = out["batch"][side]
        print(f"batch {args.batch_args!r} {side}: {', '.join(f'{w:.1f}' for w in walls)} s "
              f"(median {statistics.median(walls):.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
