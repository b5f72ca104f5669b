"""The Ray executor on a real local Ray runtime (`ray.init(num_cpus=2)`; skipped without Ray).

- a tiny grid through Ray gives the same records as the local executor (timing fields aside);
- a `specpim-cp grid --executor ray` process killed with SIGKILL mid-way is resumed with the local
  executor: no finished cell is lost or re-run, and the final records equal a clean local run's;
- a task whose worker dies is an ERROR record; an unreachable --ray-address is one line and exit 2.

The runtime belongs to this test process (the killed driver only joins it), so `ray.shutdown()` ends
every Ray process the tests started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_grid import comparable, one_error_line, write_grid

from specpim_cp.cli import main
from specpim_cp.runs.executors import RayExecutor, WorkerLost
from specpim_cp.runs.grid import load_grid, run_grid
from specpim_cp.runs.instances import BatchOptions
from specpim_cp.runs.store import ResultStore, read_records

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

GRID = """
name = "ray-grid"
base = "base.toml"

[axes]
batch_size = [1, 2, 4]
acceptance = [0.5, 0.7, 0.9]
"""


def test_unreachable_ray_address_is_one_line(tmp_path):
    path = write_grid(tmp_path / "g", GRID)
    out = tmp_path / "out"
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["grid", str(path), "--out", str(out), "--executor", "ray",
                                    "--ray-address", "127.0.0.1:9"])
    assert "--ray-address 127.0.0.1:9: cannot connect" in one_error_line(res)
    assert time.monotonic() - t0 < 30 and not Path(out).exists()


@pytest.fixture(scope="module")
def ray_runtime():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def clean_local(tmp_path_factory) -> Path:
    """A clean run of GRID with the local executor (2 worker processes)."""
    root = tmp_path_factory.mktemp("clean")
    run_grid(load_grid(write_grid(root / "g", GRID)), root / "out", BatchOptions(jobs=2, time_limit_s=20))
    return root / "out"


def test_ray_and_local_executors_agree(tmp_path, ray_runtime, clean_local):
    grid = load_grid(write_grid(tmp_path / "g", GRID))
    s = run_grid(grid, tmp_path / "ray", BatchOptions(executor="ray", jobs=0, time_limit_s=20))
    errors = [r.error for r in read_records(tmp_path / "ray") if r.status == "ERROR"]
    assert (s.total, s.ran, errors) == (18, 18, [])
    assert comparable(tmp_path / "ray") == comparable(clean_local)


def test_killed_ray_run_resumes_locally(tmp_path, ray_runtime, clean_local):
    path = write_grid(tmp_path / "g", GRID)
    out = tmp_path / "out"
    jsonl = out / "results.jsonl"
    driver = subprocess.Popen(
        [sys.executable, "-m", "specpim_cp.cli", "grid", str(path), "--out", str(out), "--executor", "ray",
         "--ray-address", ray_runtime, "--jobs", "1", "--time-limit", "20"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and driver.poll() is None:
            if jsonl.exists() and jsonl.read_text().count('"method": "exact"') >= 2:
                break
            time.sleep(0.01)
        assert driver.poll() is None, f"the Ray run ended (rc {driver.returncode}) before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        driver.kill()
        driver.wait()
    before = ResultStore(jsonl, repair=False)
    done_before = before.done_keys()
    attempts = {r.key: r.attempt for r in before.records() if r.key in done_before}
    assert 9 < len(done_before) < 18, len(done_before)  # every baseline and some exact cells finished

    s = run_grid(load_grid(path), out, BatchOptions(jobs=2, time_limit_s=20))  # the lock was not left behind
    assert (s.failed, s.skipped, s.ran) == ([], len(done_before), 18 - len(done_before))
    after = read_records(out)
    assert {r.key: r.attempt for r in after if r.key in done_before} == attempts  # nothing finished was re-run
    assert comparable(out) == comparable(clean_local)


def _dies(task: int) -> int:
    if task == 1:
        os._exit(3)
    return task


def test_a_dying_ray_worker_is_a_lost_task(ray_runtime):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this module
    ex = RayExecutor(_dies, workers=1, jobs=2)
    for t in (0, 1):
        ex.submit(t)
    results = {}
    while len(results) < 2:
        results.update(dict(ex.wait()))
    ex.close()
    assert results[0] == 0 and isinstance(results[1], WorkerLost) and "Ray task failed" in results[1].reason
