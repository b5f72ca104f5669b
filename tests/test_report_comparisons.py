"""The exact design against fixed-recipe PIM, both ways (formulations/baselines.md): over the best recipe
per scenario, and the paper's geometric mean over the recipes; the rule for a missing recipe; a PIM
variant that is no recipe; `comparisons.csv`; the plots. Synthetic records, no solver."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from specpim_cp.report.batch import (
    SPEEDUP_HEADERS,
    build_report,
    latency_energy_tables,
    plot_energy,
    plot_speedup,
    speedup_notes,
    speedup_table,
)
from specpim_cp.report.common import PIM_BASELINES, consistency_checks, group
from specpim_cp.report.comparisons import COMPARISONS_CSV, CSV_COLUMNS, compare_all, mean_ratios
from specpim_cp.runs.records import Record, RecordMetrics
from specpim_cp.runs.store import RESULTS_JSONL, ResultStore

BEST = "speedup vs best PIM recipe"
PAPER = "speedup vs PIM (paper: geomean over recipes)"
BEST_E = "energy eff. vs best PIM recipe"
PAPER_E = "energy eff. vs PIM (paper: geomean over recipes)"


def rec(scenario: str, method: str, part: str, latency: float | None, energy: float | None = None,
        objective: str = "latency") -> Record:
    """A record of a scenario; latency None: no design (INFEASIBLE)."""
    m = None if latency is None else RecordMetrics(latency, energy, 1e9 / latency, 2.0, 1, latency * energy)
    status = "INFEASIBLE" if m is None else {"exact": "OPTIMAL", "baselines": "BASELINE"}.get(method, "HEURISTIC")
    return Record(key=f"{scenario}-{method}-{part}", scenario=scenario, scenario_file="", scenario_hash="h",
                  family=scenario.split("-")[0], batch_size=1, scenario_objective=objective,
                  objective_name=objective, method=method, part=part, parts=1, status=status, metrics=m, pim=(),
                  gap=0.0 if method == "exact" else None)


def base(scenario: str, part: str, latency: float | None, energy: float | None = None, **kw) -> Record:
    return rec(scenario, "baselines", part, latency, energy, **kw)


def records() -> list[Record]:
    return [
        # a: both recipes; FC-offload is the better by latency; the fit variant beats both and is no recipe
        rec("a-1", "exact", "exact", 100.0, 50.0), base("a-1", "GPU-SI", 300.0, 200.0),
        base("a-1", "FC-offload", 150.0, 60.0), base("a-1", "attention-offload", 240.0, 100.0),
        base("a-1", "FC-offload (fit)", 120.0, 55.0),
        # b: FC-offload has no design: the paper value is attention-offload's alone, flagged
        rec("b-1", "exact", "exact", 100.0, 100.0), base("b-1", "GPU-SI", 200.0, 200.0),
        base("b-1", "FC-offload", None), base("b-1", "attention-offload", 400.0, 300.0),
        # c: no PIM record at all (a batch run before the recipes, or PaLM-62B where none fits)
        rec("c-1", "exact", "exact", 100.0, 100.0), base("c-1", "GPU-SI", 150.0, 120.0),
        # d: energy objective: the best recipe is the one with less energy, though slower
        rec("d-1", "exact", "exact", 100.0, 100.0, objective="energy"),
        base("d-1", "GPU-SI", 200.0, 400.0, objective="energy"),
        base("d-1", "FC-offload", 150.0, 300.0, objective="energy"),
        base("d-1", "attention-offload", 300.0, 150.0, objective="energy"),
    ]


def by_name(recs: list[Record] | None = None) -> dict:
    return {c.scenario: c for c in compare_all(group(records() if recs is None else recs))}


def row_of(rows: list[list[str]], name: str) -> dict[str, str]:
    return dict(zip(SPEEDUP_HEADERS, next(r for r in rows if r[0] == name), strict=True))


def test_both_ratios_per_scenario():
    c = by_name()
    a = c["a-1"]
    assert PIM_BASELINES == ("FC-offload", "attention-offload")
    assert a.best_pim_recipe == "FC-offload" and a.recipes == PIM_BASELINES and not a.partial
    assert a.speedup.vs_gpu_si == pytest.approx(3.0)
    assert a.speedup.vs_best_pim_recipe == pytest.approx(1.5)
    assert a.speedup.vs_recipe == pytest.approx({"FC-offload": 1.5, "attention-offload": 2.4})
    assert a.speedup.vs_pim_paper == pytest.approx(math.sqrt(1.5 * 2.4))
    assert a.energy_efficiency.vs_gpu_si == pytest.approx(4.0)
    assert a.energy_efficiency.vs_best_pim_recipe == pytest.approx(1.2)
    assert a.energy_efficiency.vs_pim_paper == pytest.approx(math.sqrt(1.2 * 2.0))
    d = c["d-1"]  # best by the scenario's objective (energy); both metrics against that recipe
    assert d.best_pim_recipe == "attention-offload"
    assert d.speedup.vs_best_pim_recipe == pytest.approx(3.0)
    assert d.energy_efficiency.vs_best_pim_recipe == pytest.approx(1.5)
    assert d.speedup.vs_pim_paper == pytest.approx(math.sqrt(1.5 * 3.0))


def test_missing_recipe_rule():
    c = by_name()
    b = c["b-1"]  # one recipe: the paper value is its ratio, flagged
    assert b.recipes == ("attention-offload",) and b.partial
    assert b.speedup.vs_pim_paper == pytest.approx(4.0) == b.speedup.vs_best_pim_recipe
    assert b.energy_efficiency.vs_pim_paper == pytest.approx(3.0)
    none = c["c-1"]  # no recipe: no value, not flagged
    assert none.recipes == () and not none.partial and none.best_pim_recipe is None
    assert none.speedup.vs_pim_paper is None and none.speedup.vs_best_pim_recipe is None
    assert none.speedup.vs_gpu_si == pytest.approx(1.5)
    _, _, rows = speedup_table(group(records()))
    assert row_of(rows, "b-1")[PAPER] == "4 (attention-offload only)"
    assert row_of(rows, "b-1")[PAPER_E] == "3 (attention-offload only)"
    assert row_of(rows, "a-1")[PAPER] == f"{math.sqrt(3.6):.3g}"  # both recipes: no flag
    assert row_of(rows, "c-1")[PAPER] == "-" == row_of(rows, "c-1")[BEST] == row_of(rows, "c-1")["best PIM recipe"]
    notes = speedup_notes(group(records()))
    assert any("over 3 of 4 scenarios" in n and "b-1" in n for n in notes)
    assert any("geometric mean over the recipes that have one" in n for n in notes)


def test_geometric_means():
    comps = compare_all(group(records()))
    speed = mean_ratios(comps, lambda c: c.speedup)
    best = (1.5 * 4.0 * 3.0) ** (1 / 3)
    paper = (math.sqrt(1.5 * 2.4) * 4.0 * math.sqrt(1.5 * 3.0)) ** (1 / 3)  # c-1 has none: left out
    assert speed.vs_best_pim_recipe == pytest.approx(best)
    assert speed.vs_pim_paper == pytest.approx(paper)
    assert speed.vs_gpu_si == pytest.approx((3.0 * 2.0 * 1.5 * 2.0) ** (1 / 4))
    energy = mean_ratios(comps, lambda c: c.energy_efficiency)
    assert energy.vs_pim_paper == pytest.approx((math.sqrt(2.4) * 3.0 * math.sqrt(3.0 * 1.5)) ** (1 / 3))
    title, headers, rows = speedup_table(group(records()))
    assert "comparisons.csv" in title
    assert {BEST, PAPER, BEST_E, PAPER_E, "best PIM recipe", "speedup vs GPU-SI"} <= set(headers)
    mean = row_of(rows, "geometric mean")
    assert mean[BEST] == f"{best:.3g}" and mean[PAPER] == f"{paper:.3g}"
    # with both recipes everywhere, the paper's geometric mean is the mean over every scenario and recipe
    both = [r for r in records() if r.scenario in ("a-1", "d-1")]
    pairs = [1.5, 2.4, 1.5, 3.0]
    assert mean_ratios(compare_all(group(both)), lambda c: c.speedup).vs_pim_paper == pytest.approx(
        math.prod(pairs) ** (1 / len(pairs)))


def test_pim_variant_is_shown_but_no_recipe():
    groups = group(records())
    lat, _ = latency_energy_tables(groups)
    assert "FC-offload (fit)" in lat[1]
    assert lat[1].index("FC-offload (fit)") == lat[1].index("attention-offload") + 1
    a = by_name()["a-1"]  # the variant (120 us) beats FC-offload (150 us) but is neither comparison's
    assert a.best_pim_recipe == "FC-offload" and "FC-offload (fit)" not in a.speedup.vs_recipe
    assert any("FC-offload (fit)" in n and "not a recipe" in n for n in speedup_notes(groups))
    without = group([r for r in records() if r.part != "FC-offload (fit)"])
    assert "FC-offload (fit)" not in latency_energy_tables(without)[0][1]
    assert not any("FC-offload (fit)" in n for n in speedup_notes(without))
    # the variant is cross-checked against the exact optimum like the recipes
    bad = [r for r in records() if r.scenario == "a-1"] + [base("a-1", "FC-offload (fit)", 90.0, 40.0)]
    bad = [r for r in bad if not (r.part == "FC-offload (fit)" and r.metrics.latency_ns_per_token == 120.0)]
    assert any("FC-offload (fit)" in v and "beats" in v for v in consistency_checks(group(bad)))


def test_missing_records_and_no_exact_are_graceful(tmp_path: Path):
    only_si = [rec("e-1", "exact", "exact", 100.0, 100.0), base("e-1", "GPU-SI", 200.0, 100.0)]
    c = by_name(only_si)["e-1"]
    assert c.recipes == () and c.speedup.vs_pim_paper is None and c.energy_efficiency.vs_recipe == {
        "FC-offload": None, "attention-offload": None}
    no_exact = [base("f-1", "GPU-SI", 200.0, 100.0), base("f-1", "FC-offload", 100.0, 50.0)]
    c = by_name(no_exact)["f-1"]
    assert c.exact_status is None and c.speedup.vs_pim_paper is None and c.speedup.vs_best_pim_recipe is None
    assert plot_speedup(group(no_exact), tmp_path / "x.png") is not None  # FC-offload over GPU-SI still plots
    assert plot_speedup(group([base("g-1", "GPU-SI", None)]), tmp_path / "y.png") is None  # nothing to plot
    assert plot_energy(group(only_si), tmp_path / "z.png").stat().st_size > 1000  # one panel: no PIM ratio


def write_results(out: Path, recs: list[Record]) -> None:
    out.mkdir()
    ResultStore(out / RESULTS_JSONL).append(recs)


def test_report_writes_comparisons_csv_table_and_plots(tmp_path: Path):
    out = tmp_path / "out"
    write_results(out, records())
    rep = build_report(out)
    assert out / COMPARISONS_CSV in rep.files
    with open(out / COMPARISONS_CSV, newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames) == CSV_COLUMNS
        rows = {r["scenario"]: r for r in reader}
    assert sorted(rows) == ["a-1", "b-1", "c-1", "d-1"]  # one row per scenario
    a, b, c = rows["a-1"], rows["b-1"], rows["c-1"]
    assert float(a["speedup_vs_gpu_si"]) == pytest.approx(3.0)
    assert float(a["speedup_vs_best_pim_recipe"]) == pytest.approx(1.5)
    assert float(a["speedup_vs_pim_paper"]) == pytest.approx(math.sqrt(3.6))
    assert float(a["energy_eff_vs_best_pim_recipe"]) == pytest.approx(1.2)
    assert float(a["energy_eff_vs_pim_paper"]) == pytest.approx(math.sqrt(2.4))
    assert float(a["speedup_vs_attention-offload"]) == pytest.approx(2.4)
    assert a["best_pim_recipe"] == "FC-offload" and a["pim_paper_recipes"] == "FC-offload attention-offload"
    assert a["pim_paper_partial"] == "False" and a["exact_status"] == "OPTIMAL" and a["objective"] == "latency"
    assert b["pim_paper_partial"] == "True" and b["pim_paper_recipes"] == "attention-offload"
    assert b["speedup_vs_FC-offload"] == "" and float(b["speedup_vs_pim_paper"]) == pytest.approx(4.0)
    assert c["speedup_vs_pim_paper"] == c["best_pim_recipe"] == c["speedup_vs_best_pim_recipe"] == ""
    assert rows["d-1"]["best_pim_recipe"] == "attention-offload"
    md = (out / "summary.md").read_text()
    for text in (f"| {BEST} | {PAPER} |", f"| {BEST_E} | {PAPER_E} |", "comparisons.csv",
                 "SpecPIM's definition", "(attention-offload only)", "| FC-offload (fit) |"):
        assert text in md, text
    table_end = md.index("| geometric mean |")
    assert md.index("vs best PIM recipe: over the better of", table_end) > table_end  # definition under the table
    assert PAPER in rep.text and "Consistency checks" in rep.text and "all passed" in rep.text
    for name in ("speedup.png", "energy_efficiency.png"):
        assert (out / name).stat().st_size > 1000 and out / name in rep.files
    assert "![speedup](speedup.png)" in md


def test_report_without_pim_records_and_without_plots(tmp_path: Path):
    out = tmp_path / "out"
    write_results(out, [rec("e-1", "exact", "exact", 100.0, 100.0), base("e-1", "GPU-SI", 200.0, 100.0)])
    build_report(out, plots=False)
    with open(out / COMPARISONS_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1 and rows[0]["speedup_vs_pim_paper"] == "" and float(rows[0]["speedup_vs_gpu_si"]) == 2.0
    assert "over 0 of 1 scenarios" in (out / "summary.md").read_text()
    assert not (out / "speedup.png").exists()
