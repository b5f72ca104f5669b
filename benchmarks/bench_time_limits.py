"""Wall time of every CLI command that takes a time limit against that limit, on the hardest scenario of
each built-in set and on large mixes: the time limit is a promise for the whole command, so the overrun
(wall minus limit) must stay within `solvers/deadline.py: MARGIN_S` (docs/limits.md, "Time limits").

Each case runs `python -m specpim_cp.cli COMMAND TARGET --time-limit S ...` in a fresh process; its peak
resident memory is the child's `ru_maxrss` (os.wait4). Wall-clock limits (`--no-deterministic` where a command
is deterministic by default), then the deterministic commands (`compare`, `sensitivity`, `sweep det.`, `batch
det.`): each solve keeps its deterministic budget, the limit in seconds is the command's deadline. `batch` and
`grid` hold each instance to the limit (a Pareto front to PARETO_BUDGET limits): their overrun is the largest
of an instance's (`results.jsonl`). `cpu s` is the child's user + system time, which other jobs on the
machine do not inflate.

    python benchmarks/bench_time_limits.py [--time-limit 5] [--only SUBSTRING] [--wall-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specpim_cp.runs.instances import PARETO_BUDGET
from specpim_cp.solvers.deadline import MARGIN_S

#: The hardest scenario of each built-in set (the most speculation choices and devices).
SCENARIOS = ("paper-full/palm-62b-full-b1", "paper-trees-large/opt-13b-b1-pim-n128",
             "paper-trees-deep/opt-13b-b1-pim-n128", "paper-trees/palm-62b-b1", "staged/gpt2-staged-pipeline-on")
#: Commands run on every scenario ({t}: the target, {d}: a scratch folder), the limit appended.
SCENARIO_COMMANDS = {
    "solve": ["solve", "{t}", "--no-warm-start"],
    "ranges": ["ranges", "{t}"],
    "pareto": ["pareto", "{t}", "-o", "{d}/front.csv"],
    "sweep": ["sweep", "{t}", "--acceptance", "0.5:0.9:0.1", "--no-deterministic", "--out", "{d}/sweep"],
    "heuristic": ["heuristic", "{t}", "--budget", "paper"],
    "batch": ["batch", "{f}", "--no-deterministic", "--out", "{d}/batch"],
}
#: Deterministic commands: each solve keeps its deterministic budget, the command its wall-clock deadline.
DETERMINISTIC = {
    "compare": ["compare", "{t}"],
    "sensitivity": ["sensitivity", "{t}"],
    "sweep det.": ["sweep", "{t}", "--acceptance", "0.5:0.9:0.1", "--out", "{d}/sweep"],
    "batch det.": ["batch", "{f}", "--out", "{d}/batch"],
}
MIXES = ("mix/opt-13b", "mix/palm-62b")


def mix_file(folder: Path, cells: int) -> str:
    """A latency mix of `cells` cells (batch 1..cells, one task) on the 128-node tree base."""
    lines = [f'name = "trees-{cells}"', 'scenario = "paper-trees-large/opt-13b-b1-pim-n128"', "",
             "[mix.tasks.t]", '"opt-1.3b" = 0.78', ""]
    for b in range(1, cells + 1):
        lines += ["[[mix.cells]]", f"batch_size = {b}", 'task = "t"', "weight = 1", ""]
    path = folder / f"trees-{cells}.toml"
    path.write_text("\n".join(lines))
    return str(path)


def run(args: list[str], folder: Path) -> tuple[int, float, float, float, str]:
    """(exit code, wall s, cpu s, peak MB, the first line of stdout, else of stderr) of one CLI run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out_path, err_path = folder / "stdout.txt", folder / "stderr.txt"
    t0 = time.perf_counter()
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "specpim_cp.cli", *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    text = out_path.read_text() + "\n" + err_path.read_text()
    first = next((line for line in text.splitlines() if line.strip()), "")
    cpu = usage.ru_utime + usage.ru_stime
    return os.waitstatus_to_exitcode(status), wall, cpu, usage.ru_maxrss / 1024, first


def instance_overrun(folder: Path, limit: float) -> float | None:
    """The largest overrun of one instance of a batch or grid in `folder` (None: no results.jsonl)."""
    found = list(folder.rglob("results.jsonl"))
    if not found:
        return None
    over = []
    for line in found[0].read_text().splitlines():
        rec = json.loads(line)
        budget = PARETO_BUDGET * limit if rec.get("method") == "pareto" else limit
        over.append(float(rec.get("wall_s") or 0.0) - budget)
    return max(over, default=None)


def cases(scratch: Path) -> list[tuple[str, str, list[str], bool]]:
    """(command, target, argv without the limit ({t}: the target, {f}: its file, {d}: a scratch folder), held
    to the promise) of every case."""
    out = []
    for target in SCENARIOS:
        for name, argv in SCENARIO_COMMANDS.items():
            out.append((name, target, argv, True))
        for name, argv in DETERMINISTIC.items():
            out.append((name, target, argv, True))
    grid = scratch / "grid.toml"
    grid.write_text(f'base = "{ROOT / "specpim_cp" / "benchmarks" / SCENARIOS[0]}.toml"\n[axes]\nbatch_size = [1, 2, 4, 8]\n')
    out.append(("grid", str(grid), ["grid", "{t}", "--no-deterministic", "--out", "{d}/grid"], True))
    for target in (*MIXES, mix_file(scratch, 16), mix_file(scratch, 64)):
        out.append(("solve-mix", target, ["solve-mix", "{t}", "--cell-time-limit", "5"], True))
        out.append(("solve-mix cp-sat", target, ["solve-mix", "{t}", "--method", "cp-sat", "--cell-time-limit", "5"],
                    True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--only", default="", help="run only the cases whose command or target contains it")
    ap.add_argument("--wall-only", action="store_true", help="skip the deterministic commands")
    a = ap.parse_args()
    print(f"margin: {MARGIN_S:g} s beyond --time-limit {a.time_limit:g}")
    print(f"{'command':18s} {'target':42s} {'exit':>4s} {'wall s':>7s} {'cpu s':>6s} {'over s':>7s} {'peak MB':>8s}  "
          "within  first line")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for i, (name, target, argv, held) in enumerate(cases(scratch)):
            if (a.only and a.only not in name and a.only not in target) or (a.wall_only and name in DETERMINISTIC):
                continue
            d = scratch / f"case{i}"
            d.mkdir()
            file = ROOT / "specpim_cp" / "benchmarks" / f"{target}.toml"  # batch takes files and folders
            args = [x.format(t=target, d=d, f=file if file.exists() else target) for x in argv] + ["--time-limit", f"{a.time_limit:g}"]
            code, wall, cpu, peak, first = run(args, d)
            over = wall - a.time_limit
            if name.split()[0] in ("batch", "grid"):  # the limit is each instance's
                per = instance_overrun(d, a.time_limit)
                over = over if per is None else per
            if held:
                worst = max(worst, over)
            within = ("yes" if over <= MARGIN_S else "NO") if held else "(det.)"
            label = Path(target).stem if target.endswith(".toml") else target
            print(f"{name:18s} {label:42s} {code:4d} {wall:7.1f} {cpu:6.1f} {over:7.1f} {peak:8.0f}  {within:6s}  "
                  f"{first[:80]}", flush=True)
    print(f"largest overrun of a case: {worst:.1f} s (margin {MARGIN_S:g} s)")


if __name__ == "__main__":
    main()
