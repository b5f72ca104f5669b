"""Start-up times of the command line: `specpim-cp --help`, `specpim-cp solve --help`, and the imports a
`solve` needs (the commands, the scenario loader, the evaluator, the exact solver, the heuristic of the warm
start), each in a fresh interpreter, the median of `--repeat` runs.

    python benchmarks/bench_startup.py [--repeat N]

Run with `PYTHONPATH=<tree>` to time another tree (e.g. the main branch, for a before/after pair).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

#: What a `solve` imports before it solves (with the warm start; --no-warm-start skips the last).
SOLVE_IMPORTS = ("import specpim_cp.cli; from specpim_cp.api import load_scenario, solve; "
                 "import specpim_cp.api.solving, specpim_cp.physics.evaluate, specpim_cp.solvers.exact, "
                 "specpim_cp.solvers.heuristic")

CASES = {
    "specpim-cp --help": ["-m", "specpim_cp.cli", "--help"],
    "specpim-cp solve --help": ["-m", "specpim_cp.cli", "solve", "--help"],
    "import what solve needs": ["-c", SOLVE_IMPORTS],
    "python (no import)": ["-c", "pass"],
}


def wall_s(args: list[str], tree: str) -> float:
    """The wall time of one fresh interpreter running `args` in `tree` (`-m` puts the working directory first
    on the path, so it must be the tree timed)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=os.environ.copy(), cwd=tree)
    return time.perf_counter() - t0


def compile_modules(tree: str | os.PathLike) -> None:
    """Compile `tree`'s package modules (`python -m compileall`), as an install or a package's first import
    leaves them: where `PYTHONDONTWRITEBYTECODE` is set, a fresh process otherwise compiles them all first."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "specpim_cp"], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per case (median shown)")
    args = ap.parse_args()
    import specpim_cp

    tree = os.path.dirname(os.path.dirname(os.path.abspath(specpim_cp.__file__)))
    print(f"tree: {tree}")
    print(f"{'case':<28} {'median s':>9} {'min s':>7}")
    for name, argv in CASES.items():
        times = [wall_s(argv, tree) for _ in range(args.repeat)]
        print(f"{name:<28} {statistics.median(times):>9.3f} {min(times):>7.3f}")


if __name__ == "__main__":
    main()
