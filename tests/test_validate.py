"""`specpim-cp validate`: every row of the model-vs-measurement table holds its stated tolerance
in the default test run, so a change that moves the model away from a measurement fails here."""

from __future__ import annotations

import json

from click.testing import CliRunner

from specpim_cp.check.validate import format_validation, validation_rows
from specpim_cp.cli import main


def test_every_validation_row_holds_its_tolerance():
    rows = validation_rows()
    areas = {r.area for r in rows}
    assert len(rows) >= 10
    # the areas validated: host kernels, all-reduce, GPU decode latency and power, PIM GEMV, Monte Carlo
    for needle in ("kernel", "all-reduce", "latency", "power", "PIM", "speculation"):
        assert any(needle.lower() in (r.area + " " + r.quantity).lower() for r in rows), (needle, areas)
    # a row outside its tolerance says why (a published figure the catalog cannot reproduce), else it fails
    failing = [(r.area, r.quantity, r.model, r.measured, r.tolerance) for r in rows if not r.ok and not r.miss]
    assert failing == []
    assert all(r.source for r in rows)  # every row names its source


def test_validate_command_prints_the_table_and_json():
    res = CliRunner().invoke(main, ["validate"])
    assert res.exit_code == 0 and "FAIL" not in res.output and "pass" in res.output
    res = CliRunner().invoke(main, ["validate", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.output)
    rows = data["rows"] if isinstance(data, dict) else data
    assert rows and all(r["ok"] or r["miss"] for r in rows)
    assert format_validation(validation_rows()).count("pass") >= len(rows)
