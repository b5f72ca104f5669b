"""Grids, executors, the output-folder lock and batch robustness (atlases at scale; one-line errors).

Grid cells are tiny GPT-2 scenarios (sub-second exact solves). Ray's own tests are in test_ray.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.report.batch import build_report
from specpim_cp.report.grid import PLOTS as GRID_PLOTS
from specpim_cp.runs import instances as instances_mod
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.folder_lock import FolderLock
from specpim_cp.runs.grid import load_grid, run_grid
from specpim_cp.runs.instances import BatchOptions
from specpim_cp.runs.records import GridCell, Record
from specpim_cp.runs.store import ResultStore, read_records

BASE = """
name = "tiny"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["hbm"]
max_draft_length = 2

[verifier]
model = "gpt2-large"
devices = 1

[[drafters]]
model = "gpt2-small"
devices = 1
"""

GRID = """
name = "tiny-grid"
base = "base.toml"

[axes]
batch_size = [1, 2, 4]
acceptance = [0.6, 0.8]
"""

TIMING = ("wall_s", "finished_at", "attempt")
WHERE = ("scenario_file",)  # the grid file's path (tests write copies of it in different folders)


def write_grid(folder: Path, grid: str = GRID, base: str = BASE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.toml").write_text(base)
    path = folder / "grid.toml"
    path.write_text(grid)
    return path


def comparable(out: Path) -> dict:
    """The records of a folder by (key, part), without the fields that depend on timing or on where the
    grid file is."""
    recs = {}
    for r in read_records(out):
        data = r.to_json()
        for k in (*TIMING, *WHERE):
            data.pop(k)
        recs[(r.key, r.part)] = data
    return recs


@pytest.fixture(scope="module")
def finished_grid(tmp_path_factory) -> tuple[Path, Path]:
    """(grid file, folder of its finished in-process run); tests that change the folder copy it."""
    root = tmp_path_factory.mktemp("finished")
    path = write_grid(root / "g")
    s = run_grid(load_grid(path), root / "out", BatchOptions(jobs=1, time_limit_s=20))
    assert (s.total, s.ran, s.failed) == (12, 12, [])
    return path, root / "out"


def copy_of(folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(folder, out)
    return out


def one_error_line(res) -> str:
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


# ------------------------------------------------------------------------------------------------
# Expansion and validation
# ------------------------------------------------------------------------------------------------
def test_grid_expansion_names_values_and_parents(tmp_path):
    grid = load_grid(write_grid(tmp_path))
    assert grid.name == "tiny-grid" and [a.name for a in grid.axes] == ["batch_size", "acceptance"]
    assert len(grid.cells) == 6
    assert [c.name for c in grid.cells] == [f"tiny_b={b}_a={a}" for b in (1, 2, 4) for a in (0.6, 0.8)]
    for c in grid.cells:
        b, a = (grid.axes[k].values[i] for k, i in enumerate(c.index))
        assert c.scenario.batch_size == b and c.scenario.drafters[0].acceptance == a
        info = grid.cell_info(c)
        assert info.values == (b, a) and info.sizes == (3, 2) and info.grid == "tiny-grid"
    # warm starts: odd positions along the first axis wait for the cell one step back
    parents = {c.name: c.parent for c in grid.cells}
    assert parents["tiny_b=2_a=0.8"] == "tiny_b=1_a=0.8"
    assert parents["tiny_b=1_a=0.6"] is None and parents["tiny_b=4_a=0.6"] is None


def test_grid_axes_of_every_kind(tmp_path):
    grid_text = """
base = "base.toml"
[axes]
models = [{verifier = "gpt2-large", drafters = ["gpt2-small"]}, {verifier = "gpt2-xl", drafters = ["gpt2-medium"]}]
acceptance = {"0" = [0.5, 0.7]}
memory_types = [["hbm"], ["hbm", "gddr"]]
prompt_tokens = [64]
generated_tokens = [32]
host = ["a100-40gb"]
"""
    grid = load_grid(write_grid(tmp_path, grid_text))
    assert len(grid.cells) == 8
    last = grid.cells[-1].scenario
    assert (last.verifier.model, last.drafters[0].model, last.drafters[0].acceptance) == ("gpt2-xl", "gpt2-medium",
                                                                                         0.7)
    assert last.memory_types == ["hbm", "gddr"] and last.verifier.devices == 1  # device fields of the base kept
    assert grid.cells[-1].name == "tiny_models=gpt2-xl+gpt2-medium_a@0=0.7_mem=hbm+gddr_p=64_g=32_host=a100-40gb"


@pytest.mark.parametrize(("grid_text", "message"), [
    ('base = "base.toml"\n[axes]\nbatch_size = []\n', "axes.batch_size: no values"),
    ('base = "base.toml"\n[axes]\nbatchsize = [1, 2]\n', "axes.batchsize: unknown axis"),
    ('base = "base.toml"\n[axes]\nbatch_size = [1, 0]\n', "cell tiny_b=0 (batch_size=0): batch_size"),
    ('base = "base.toml"\n[axes]\nacceptance = [0.5, 1.5]\n', "cell tiny_a=1.5 (acceptance=1.5): drafters[0].acceptance"),
    ('base = "base.toml"\n[axes]\nacceptance = {"opt-125m" = [0.5]}\n', "'opt-125m' is not a drafter"),
    ('base = "base.toml"\n[axes]\nbatch_size = [1, 1]\n', "the value 1 appears twice"),
    ('base = "base.toml"\n[axes]\nmemory_types = ["hbm"]\n', "each value is a list of memory types"),
    ('base = "no-such.toml"\n[axes]\nbatch_size = [1]\n', "base: 'no-such.toml' is no scenario file"),
    ('base = "base.toml"\n', "axes: expected an [axes] table"),
    ('[axes]\nbatch_size = [1]\n', "base: required"),
    ('base = "base.toml"\n[axes]\nbatch_size = [1\n', "not valid TOML"),
])
def test_grid_errors_name_the_axis_or_cell(tmp_path, grid_text, message):
    path = write_grid(tmp_path, grid_text)
    with pytest.raises(ScenarioError, match=None) as err:
        load_grid(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    # the command: one line, exit 2, nothing written
    res = CliRunner().invoke(main, ["grid", str(path), "--out", str(tmp_path / "out")])
    assert message in one_error_line(res)
    assert not (tmp_path / "out").exists()


def test_builtin_base_and_inline_base_with_from(tmp_path):
    text = ('[base]\nfrom = "examples/opt-13b"\nverifier = {model = "opt-13b"}\ndrafters = [{model = "opt-1.3b"}]\n'
            'device_budget = 3\n[axes]\ndevice_budget = [3, 4]\n')
    grid = load_grid(write_grid(tmp_path, text))
    assert [c.scenario.device_budget for c in grid.cells] == [3, 4]
    assert grid.cells[0].scenario.verifier.devices is None and grid.cells[0].name == "opt-13b_dev=3"
    grid = load_grid(write_grid(tmp_path, 'base = "examples/opt-13b"\n[axes]\nbatch_size = [2]\n'))
    assert grid.cells[0].scenario.verifier.devices == 2


# ------------------------------------------------------------------------------------------------
# Running, executors, report
# ------------------------------------------------------------------------------------------------
def test_grid_runs_resumes_and_executors_agree(tmp_path, finished_grid):
    """In-process and the local pool give identical records; a re-run does nothing; warm starts recorded."""
    path, a = finished_grid
    grid = load_grid(path)
    b = tmp_path / "pool"
    run_grid(grid, b, BatchOptions(jobs=2, time_limit_s=20))
    assert comparable(a) == comparable(b)
    exact = {r.scenario: r for r in read_records(a) if r.method == "exact"}
    assert all(r.status == "OPTIMAL" and r.cell is not None and r.batch == "tiny-grid" for r in exact.values())
    assert exact["tiny_b=2_a=0.6"].hint_from == "tiny_b=1_a=0.6" and exact["tiny_b=4_a=0.6"].hint_from is None
    again = run_grid(grid, b, BatchOptions(jobs=2, time_limit_s=20))
    assert (again.ran, again.skipped) == (0, 12)


def test_grid_report_heatmaps_table_and_title(tmp_path, finished_grid):
    out = copy_of(finished_grid[1], tmp_path)  # the folder's name is not the title
    rep = build_report(out)
    for name in (*GRID_PLOTS, "summary.md", "grid.csv", "results.csv"):
        path = out / name
        assert path.exists() and path.stat().st_size > 500, name
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, name
    md = (out / "summary.md").read_text()
    assert md.startswith("# Grid report: tiny-grid")
    assert "proven optimal" in md and "speedup vs GPU-SI" in md and "![grid_speedup](grid_speedup.png)" in md
    assert len((out / "grid.csv").read_text().splitlines()) == 7
    assert "tiny_b=4_a=0.8" in rep.text and "all passed" in rep.text


def test_grid_report_with_missing_cells_and_an_unfinished_run(tmp_path, finished_grid):
    """Only some cells have records (a killed run): the heatmaps mark the rest 'not run'."""
    out = copy_of(finished_grid[1], tmp_path)
    path = out / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if "tiny_b=4" not in line))
    rep = build_report(out, plots=False)
    assert "6 cells" in rep.text and "2 not run" in rep.text
    from specpim_cp.report.grid import grid_cells, plot_speedup
    from specpim_cp.runs.store import read_records as read

    cells, _ = grid_cells(read(out))
    assert plot_speedup(cells, out / "speedup.png").stat().st_size > 1000


# ------------------------------------------------------------------------------------------------
# One writer per folder
# ------------------------------------------------------------------------------------------------
HOLD_LOCK = ("import sys, time\nfrom specpim_cp.runs.folder_lock import FolderLock\n"
             "FolderLock(sys.argv[1]).acquire()\nprint('locked', flush=True)\ntime.sleep(120)\n")


def test_second_run_on_a_folder_is_refused_and_a_killed_holder_does_not_block(tmp_path):
    path = write_grid(tmp_path / "g", 'base = "base.toml"\n[axes]\nbatch_size = [1, 2]\n')
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        res = CliRunner().invoke(main, ["grid", str(path), "--out", str(out), "--jobs", "1"])
        line = one_error_line(res)
        assert str(out) in line and f"pid {holder.pid}" in line
        res = CliRunner().invoke(main, ["batch", str(tmp_path / "g" / "base.toml"), "--out", str(out),
                                        "--methods", "baselines"])
        assert f"pid {holder.pid}" in one_error_line(res)
        assert not (out / "results.jsonl").exists()
    finally:
        holder.kill()  # SIGKILL: no cleanup in the holder; the kernel drops its lock
        holder.wait()
    res = CliRunner().invoke(main, ["grid", str(path), "--out", str(out), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    with FolderLock(out):  # released after the run
        pass


# ------------------------------------------------------------------------------------------------
# Batch robustness (bad input: one line, exit code 2, nothing written)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "message"), [
    (["--heuristic-budget", "banana"], "--heuristic-budget: 'banana'"),
    (["--time-limit", "inf"], "--time-limit"),
    (["--time-limit", "nan"], "--time-limit"),
    (["--time-limit", "0"], "--time-limit"),
    (["--methods", "exact,simplex"], "unknown method(s) simplex"),
    (["--methods", ","], "--methods: name at least one method"),
    (["--jobs", "0"], "--jobs"),
    (["--workers", "2"], "--workers 2: deterministic solving uses one CP-SAT worker"),
    (["--ray-address", "127.0.0.1:1"], "--ray-address: only with --executor ray"),
])
def test_batch_options_fail_before_any_work(tmp_path, args, message):
    (tmp_path / "base.toml").write_text(BASE)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["batch", str(tmp_path / "base.toml"), "--out", str(out), *args])
    assert message in one_error_line(res)
    assert not out.exists()


def test_executor_ray_without_ray_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(instances_mod, "ray_available", lambda: False)
    path = write_grid(tmp_path / "g")
    res = CliRunner().invoke(main, ["grid", str(path), "--out", str(tmp_path / "out"), "--executor", "ray"])
    assert "Ray is not installed" in one_error_line(res)


def test_progress_in_a_log_is_one_line_per_instance(tmp_path):
    """stderr is not a terminal: no tqdm bar (no carriage returns), one line per finished instance."""
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "tiny.toml").write_text(BASE)
    res = CliRunner().invoke(main, ["batch", str(tmp_path / "set"), "--out", str(tmp_path / "out"),
                                    "--methods", "baselines,ladder", "--jobs", "1", "--time-limit", "20"])
    assert res.exit_code == 0, res.output
    assert "\r" not in res.output
    progress = [line for line in res.output.splitlines() if line.startswith("batch set: ")]
    assert len(progress) == 6  # baselines + 5 ladder steps
    # a ladder-only batch (no exact, no baselines in the plots) reports without dividing by zero
    res = CliRunner().invoke(main, ["batch", str(tmp_path / "set"), "--out", str(tmp_path / "ladder"),
                                    "--methods", "ladder", "--jobs", "1", "--time-limit", "20"])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "ladder" / "summary.md").read_text()
    assert md.startswith("# Batch report: set")  # the set's name, not the output folder's


BAD_TYPES = (b'{"key": "k", "scenario": "s", "scenario_file": "f", "scenario_hash": "h", "family": "f", '
             b'"batch_size": "one", "scenario_objective": "latency", "objective_name": "latency", "method": "exact", '
             b'"part": "exact", "parts": 1}\n')


@pytest.mark.parametrize("content", [b"garbage\n", b"\x00\xff\xfe binary", b"{}\n[1, 2]\n",
                                     b'{"key": 1, "scenario": "s", "method": "m", "part": "p"}\n',
                                     BAD_TYPES, b""])
def test_report_on_garbage_is_one_line_and_reads_only(tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_bytes(content)
    res = CliRunner().invoke(main, ["report", str(out)])
    assert "no readable result records" in one_error_line(res)
    assert (out / "results.jsonl").read_bytes() == content  # a report never repairs (truncates) the file


def test_report_without_results_or_folder(tmp_path):
    res = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert "no results" in one_error_line(res)
    res = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert "no such directory" in one_error_line(res)


def test_report_tolerates_missing_and_zero_values():
    from specpim_cp.report.batch import geomean, group, ladder_table, speedup_table
    from specpim_cp.runs.records import RecordMetrics

    def rec(method, part, latency):
        m = None if latency is None else RecordMetrics(latency, 0.0, 0.0, 0.0, 0, 0.0)
        return Record(key=f"{method}-{part}", scenario="s", scenario_file="s.toml", scenario_hash="h", family="f",
                      batch_size=1, scenario_objective="latency", objective_name="latency", method=method,
                      part=part, parts=1, status="OPTIMAL" if m else "INFEASIBLE", metrics=m)

    assert geomean([]) is None and geomean([0.0, None]) is None and geomean([4.0, 0.0, 1.0]) == 2.0
    groups = group([rec("exact", "exact", 0.0), rec("baselines", "GPU-SI", 10.0),
                    rec("ladder", "GPU-SI", 0.0), rec("ladder", "+pipeline", None)])
    speedup_table(groups)
    ladder_table(groups)


def test_records_keep_old_lines_readable_and_round_trip_cells():
    old = {"key": "k", "scenario": "s", "scenario_file": "f", "scenario_hash": "h", "family": "f", "batch_size": 1,
           "scenario_objective": "latency", "objective_name": "latency", "method": "exact", "part": "exact",
           "parts": 1, "a_field_from_the_future": 3}
    r = Record.from_json(old)
    assert r.cell is None and r.batch is None and r.hint_from is None
    cell = GridCell("g", ("batch_size", "memory_types"), (0, 1), (2, 2), ("1", "hbm+gddr"), (1, ["hbm", "gddr"]))
    r2 = Record.from_json(json.loads(json.dumps(r.with_(cell=cell, batch="g").to_json(), sort_keys=True)))
    assert r2.cell == cell and r2.batch == "g"
    with pytest.raises(ValueError):
        Record.from_json({**old, "cell": {"grid": "g"}})


def test_killed_run_leaves_the_store_readable(tmp_path, finished_grid):
    """A torn last line is ignored by a reader and cut off by the next writer only."""
    grid = load_grid(finished_grid[0])
    out = copy_of(finished_grid[1], tmp_path)
    path = out / "results.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-40])
    assert len(read_records(out)) > 0 and path.read_bytes() == data[:-40]
    s = run_grid(grid, out, BatchOptions(jobs=1, time_limit_s=20))
    assert s.ran == 1 and ResultStore(path).unreadable == 0
    assert os.path.getsize(path) > len(data) - 40


def test_run_batch_api_records_the_set_name(tmp_path):
    (tmp_path / "myset").mkdir()
    (tmp_path / "myset" / "tiny.toml").write_text(BASE)
    run_batch([tmp_path / "myset" / "tiny.toml"], tmp_path / "out", BatchOptions(methods=("baselines",), jobs=1),
              name="myset")
    assert {r.batch for r in read_records(tmp_path / "out")} == {"myset"}
