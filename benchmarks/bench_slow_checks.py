"""The correctness checks kept out of the default test run for their time: runs every test marked `slow`
(brute force == CP-SAT on the larger small spaces, the mix decomposition against brute force, determinism
across workers on PaLM-62B, whole built-in sets proven optimal) and prints each one's time and outcome.

    python benchmarks/bench_slow_checks.py [PYTEST_ARGS ...]      # e.g. tests/test_exact.py, or -k palm

Exit code: pytest's (0 when every slow check passes). The default run (`python -m pytest -q`) deselects
them (pyproject.toml: `-m 'not slow'`); CI runs the default, so run this before a release.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    args = sys.argv[1:]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow", "--durations=0",
           "-o", "addopts=", *args]
    print("running:", " ".join(cmd[1:]))
    t0 = time.perf_counter()
    code = subprocess.call(cmd, cwd=ROOT)
    print(f"slow checks: exit {code}, wall {time.perf_counter() - t0:.1f} s on {os.cpu_count()} cores, "
          f"1-min load {os.getloadavg()[0]:.2f}")
    return code


if __name__ == "__main__":
    sys.exit(main())
