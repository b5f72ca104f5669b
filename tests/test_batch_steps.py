"""Steps after a batch's solve (decision ranges, schedule pictures, plots, Pareto fronts) that fail or are
refused never change the solve's record: it keeps its status, objective and design, and names the step that
failed and why (`step_failed`, `step_error`, a column of results.csv and a line of the report). And a batch
with default options records the same status and objective as `solve` for its exact instances.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.report import batch as report_batch
from specpim_cp.report.batch import build_report
from specpim_cp.runs import methods as methods_mod
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.instances import BatchOptions
from specpim_cp.runs.records import Record
from specpim_cp.runs.store import read_records

pytest.importorskip("specpim_cp.solvers.exact")

TINY = """
name = "tiny"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["hbm"]
max_draft_length = 2

[verifier]
model = "opt-1.3b"
devices = 1

[[drafters]]
model = "opt-125m"
devices = 1
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def _by_method(out: Path) -> dict[str, Record]:
    return {r.method: r for r in read_records(out)}


def _csv_rows(out: Path) -> dict[str, dict]:
    with (out / "results.csv").open() as f:
        return {row["method"]: row for row in csv.DictReader(f)}


def _solo(tiny: Path, tmp_path: Path, **options) -> Record:
    """The exact record of `tiny` batched without later steps (the reference)."""
    run_batch([tiny], tmp_path / "solo", BatchOptions(methods=("exact",), jobs=1, pareto=False,
                                                      ranges_within=None, time_limit_s=30, **options))
    return _by_method(tmp_path / "solo")["exact"]


def test_refused_ranges_keep_the_proven_optimum(tmp_path):
    """The deep-tree built-in: the ranges step refuses the tree space, the record stays OPTIMAL."""
    src = builtin_sets()["paper-trees-deep"] / "opt-13b-b1-pim-n128.toml"
    scenario = tmp_path / src.name
    shutil.copy(src, scenario)
    out = tmp_path / "out"
    s = run_batch([scenario], out, BatchOptions(methods=("exact",), jobs=1, pareto=False, time_limit_s=20))
    assert s.failed == []
    rec = _by_method(out)["exact"]
    assert rec.status == "OPTIMAL" and rec.design is not None and rec.metrics is not None
    assert rec.ranges is None and rec.step_failed == "ranges"
    assert rec.step_error.startswith("refused: drafters[0].tree.max_nodes")
    row = _csv_rows(out)["exact"]
    assert row["status"] == "OPTIMAL" and row["step_failed"] == "ranges" and "tree.max_nodes" in row["step_error"]
    summary = build_report(out, plots=False).text
    assert "Steps after the solve that failed" in summary and "ranges refused: drafters[0]" in summary


def test_crashing_ranges_keep_the_solve(tiny, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("ranges went wrong")

    reference = _solo(tiny, tmp_path)
    monkeypatch.setattr(methods_mod, "decision_ranges", broken)
    out = tmp_path / "out"
    s = run_batch([tiny], out, BatchOptions(methods=("exact",), jobs=1, pareto=False, time_limit_s=30))
    assert s.failed == []
    rec = _by_method(out)["exact"]
    assert (rec.status, rec.objective_exact, rec.design) == (reference.status, reference.objective_exact,
                                                             reference.design)
    assert rec.step_failed == "ranges" and rec.step_error == "RuntimeError: ranges went wrong"
    assert Record.from_json(rec.to_json()) == rec  # the new fields round-trip through results.jsonl


def test_failing_front_names_its_step_and_keeps_the_solve(tiny, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("front went wrong")

    reference = _solo(tiny, tmp_path)
    monkeypatch.setattr(methods_mod.exact, "pareto", broken)
    out = tmp_path / "out"
    run_batch([tiny], out, BatchOptions(methods=("exact",), jobs=1, ranges_within=None, time_limit_s=30))
    recs = _by_method(out)
    assert (recs["exact"].status, recs["exact"].objective_exact) == (reference.status, reference.objective_exact)
    assert recs["exact"].step_failed is None
    front = recs["pareto"]
    assert front.step_failed == "front" and front.step_error == "RuntimeError: front went wrong"
    assert _csv_rows(out)["pareto"]["step_failed"] == "front"
    summary = build_report(out, plots=False).text
    assert "tiny:pareto pareto: front RuntimeError: front went wrong" in summary


def test_failing_pictures_and_plots_keep_records_and_report(tiny, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_batch([tiny], out, BatchOptions(methods=("exact",), jobs=1, ranges_within=None, time_limit_s=30))
    before = (out / "results.jsonl").read_text()

    def broken(*args, **kwargs):
        raise RuntimeError("no picture")

    monkeypatch.setattr(report_batch, "schedule_figure", broken)
    monkeypatch.setattr(report_batch, "plot_pareto", broken)
    report = build_report(out)
    assert (out / "results.jsonl").read_text() == before
    assert "schedule of tiny: failed (RuntimeError: no picture)" in report.text
    assert "pareto.png: failed (RuntimeError: no picture)" in report.text
    assert _by_method(out)["exact"].status == "OPTIMAL"


def test_default_batch_records_what_solve_proves(tmp_path):
    """A sample of the built-in sets under `batch`'s default exact options (ranges, a front per family) records
    the status and objective `solve` gives on its own (`benchmarks/bench_batch_vs_solve.py`: every set)."""
    from specpim_cp.solvers import exact
    from specpim_cp.solvers.exact.session import SolverOptions

    sets = builtin_sets()
    sample = [sets["paper"] / "opt-13b-b1.toml", sets["paper-trees-deep"] / "opt-13b-b1-pim-n128.toml"]
    for src in sample:
        out = tmp_path / src.stem
        options = BatchOptions(methods=("exact",), jobs=1, time_limit_s=20)
        run_batch([src], out, options)
        rec = _by_method(out)["exact"]
        alone = exact.solve(load_scenario(src), options=SolverOptions(20.0, 1, 0, True))
        assert rec.status == alone.report.status == "OPTIMAL", src
        assert rec.objective_exact == f"{alone.report.objective.numerator}/{alone.report.objective.denominator}"
