"""The CLI and the Python front door give the same answer: `specpim-cp solve NAME --json --deterministic` (a
process) against `specpim_cp.solve(specpim_cp.load_scenario(NAME), SolveOptions(deterministic=True))` (in
this process), on every scenario of the built-in sets named (default: paper and paper-full).

    python benchmarks/bench_front_door.py [SET ...] [--only TEXT] [--json OUT]

Compared per scenario: the design (its JSON), `objective_exact`, the status and the tie-break levels
(`report.extra["tie_break"]`); printed as a table with both wall times. Exit code 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_answer(name: str) -> dict:
    """What `solve NAME --json --deterministic` prints, in a process running this tree."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-m", "specpim_cp.cli", "solve", name, "--json", "--deterministic"],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip()}
    data = json.loads(out.stdout)
    return {"design": data["design"], "objective_exact": data["solve"]["objective_exact"],
            "status": data["solve"]["status"], "tie_break": data["solve"]["extra"].get("tie_break")}


def api_answer(name: str) -> dict:
    """The same fields from the front door, in this process."""
    import specpim_cp as sp
    from specpim_cp.errors import ScenarioError

    try:
        res = sp.solve(sp.load_scenario(name), sp.SolveOptions(deterministic=True))
    except ScenarioError as exc:
        return {"error": f"error: {exc}"}
    data = json.loads(res.to_json())
    return {"design": data["design"], "objective_exact": data["solve"]["objective_exact"],
            "status": data["solve"]["status"], "tie_break": data["solve"]["extra"].get("tie_break")}


def differences(cli: dict, api: dict) -> list[str]:
    """The compared fields on which the two answers differ."""
    keys = ("error",) if "error" in cli or "error" in api else ("design", "objective_exact", "status", "tie_break")
    return [k for k in keys if cli.get(k) != api.get(k)]


def scenario_names(sets: list[str], only: str | None) -> list[str]:
    from specpim_cp.problem.builtin_sets import builtin_sets

    folders = builtin_sets()
    return [f"{s}/{p.stem}" for s in sets for p in sorted(folders[s].glob("*.toml"))
            if only is None or only in p.stem]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=["paper", "paper-full"])
    ap.add_argument("--only", help="only scenarios whose name contains TEXT")
    ap.add_argument("--json", dest="json_out", help="write the rows as JSON here")
    args = ap.parse_args()
    rows = []
    print(f"{'scenario':<34} {'status':<10} {'objective (exact)':<26} {'tie levels':>10} {'CLI s':>7} "
          f"{'API s':>7}  same")
    for name in scenario_names(args.sets, args.only):
        t0 = time.perf_counter()
        cli = cli_answer(name)
        t1 = time.perf_counter()
        api = api_answer(name)
        t2 = time.perf_counter()
        diff = differences(cli, api)
        levels = len(cli.get("tie_break") or [])
        rows.append({"scenario": name, "status": cli.get("status", "ERROR"), "objective_exact":
                     cli.get("objective_exact"), "tie_levels": levels, "cli_s": t1 - t0, "api_s": t2 - t1,
                     "differs_on": diff})
        print(f"{name:<34} {cli.get('status', 'ERROR'):<10} {str(cli.get('objective_exact', '-'))[:26]:<26} "
              f"{levels:>10} {t1 - t0:>7.1f} {t2 - t1:>7.1f}  {'yes' if not diff else 'NO: ' + ', '.join(diff)}",
              flush=True)
    same = sum(not r["differs_on"] for r in rows)
    print(f"\n{same}/{len(rows)} scenarios: the same design, objective, status and tie-break levels")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2))
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
