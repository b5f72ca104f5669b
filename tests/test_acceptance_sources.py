"""Acceptance rates carry sources and ranges (catalog/acceptance.toml, formulations/acceptance.md [ACC-1..4]):
every built-in rate has its own `source_KEY` and `range_KEY`, a rate without a source is an error, ranges
are read and checked, and `sensitivity` moves a drafter's rate over the range of the entry it comes from."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest
from oracles.acceptance_ranges import acceptance_range

from specpim_cp.catalog import default_catalog, load_catalog
from specpim_cp.check.sensitivity import acceptance_span, selected_constants, sensitivity
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact import SolverOptions


def _shipped() -> dict:
    return tomllib.loads(resources.files("specpim_cp.catalog").joinpath("acceptance.toml").read_text())


def _user(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "acc.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("section", ["pairs", "families"])
def test_every_built_in_rate_has_its_own_source_and_range(section):
    table = _shipped()[section]
    rates = {k: v for k, v in table.items() if not k.startswith(("source", "range_"))}
    assert rates and f"source_{section}" not in table  # no table-wide source hides a missing one
    cat = default_catalog()
    for k, v in rates.items():
        source = table[f"source_{k}"]
        # a named assumption or a measurement (a paper's or model card's table, or a report's numbered section)
        assert "ASSUMPTION" in source or "Table" in source or "section" in source, k
        lo, hi = table[f"range_{k}"]
        assert lo <= v <= hi and (lo, hi) != (v, v), k
        assert cat.acceptance_ranges[f"{section}.{k}"] == (lo, hi)
        assert cat.acceptance_sources[f"{section}.{k}"] == source


def test_the_default_has_a_source_and_a_range():
    cat = default_catalog()
    lo, hi = cat.acceptance_ranges["default"]
    assert lo <= cat.acceptance_default <= hi
    assert cat.acceptance_sources["default"].startswith("ASSUMPTION")


def test_lookup_names_the_entry_it_uses():
    cat = default_catalog()
    assert cat.acceptance_entry("opt-1.3b", "opt-13b") == "pairs.opt-1.3b>opt-13b"
    assert cat.acceptance_entry("opt-2.7b", "opt-13b") == "families.opt>opt"
    assert cat.default_acceptance("opt-2.7b", "opt-13b") == cat.acceptance_families["opt>opt"]
    assert acceptance_range(cat, "opt-1.3b", "opt-13b") == (0.56, 0.82)


BAD = {
    "no-source": ('[pairs]\n"a>b" = 0.7\n', ['"a>b"', "no source", "source_pairs"]),
    "range-outside": ('[pairs]\n"a>b" = 0.7\n"source_a>b" = "x"\n"range_a>b" = [0.5, 1.0]\n',
                      ["range_a>b", "high end", "[0, 1)"]),
    "range-not-around": ('[pairs]\n"a>b" = 0.7\n"source_a>b" = "x"\n"range_a>b" = [0.75, 0.9]\n',
                         ["range_a>b", "around 0.7"]),
    "range-shape": ('[pairs]\n"a>b" = 0.7\n"source_a>b" = "x"\n"range_a>b" = 0.8\n', ["range_a>b", "[low, high]"]),
    "range-names-nothing": ('[pairs]\n"a>b" = 0.7\nsource_pairs = "x"\n"range_c>d" = [0.5, 0.8]\n',
                            ["range_c>d", "names no rate"]),
    "source-names-nothing": ('[families]\n"a>b" = 0.7\nsource_families = "x"\n"source_c>d" = "y"\n',
                             ["source_c>d", "names no rate"]),
    "range-default-alone": ('range_default = [0.5, 0.9]\n', ["range_default", "needs default"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_acceptance_entries_name_file_and_key(tmp_path, case):
    text, needles = BAD[case]
    path = _user(tmp_path, text)
    with pytest.raises(ScenarioError) as err:
        load_catalog([path])
    msg = str(err.value)
    assert str(path) in msg and all(n in msg for n in needles), msg


def test_a_rate_with_its_own_source_needs_no_table_source(tmp_path):
    cat = load_catalog([_user(tmp_path, '[pairs]\n"opt-125m>opt-13b" = 0.6\n"source_opt-125m>opt-13b" = "measured"\n'
                                        '"range_opt-125m>opt-13b" = [0.5, 0.7]\n')])
    assert cat.default_acceptance("opt-125m", "opt-13b") == 0.6
    assert acceptance_range(cat, "opt-125m", "opt-13b") == (0.5, 0.7)
    assert cat.acceptance_sources["pairs.opt-125m>opt-13b"].endswith(": measured")  # the file named first


def test_a_replaced_rate_drops_the_built_in_source_and_range(tmp_path):
    cat = load_catalog([_user(tmp_path, '[pairs]\n"opt-1.3b>opt-13b" = 0.6\nsource_pairs = "my measurement"\n')])
    assert cat.default_acceptance("opt-1.3b", "opt-13b") == 0.6
    assert acceptance_range(cat, "opt-1.3b", "opt-13b") is None  # sensitivity falls back to +- sensitivity_delta
    assert "my measurement" in cat.acceptance_sources["pairs.opt-1.3b>opt-13b"]
    assert acceptance_range(cat, "opt-1.3b", "opt-66b") == acceptance_range(default_catalog(), "opt-1.3b", "opt-66b")
    cat = load_catalog([_user(tmp_path, 'default = 0.65\nsource_default = "mine"\n')])
    assert cat.acceptance_default == 0.65 and "default" not in cat.acceptance_ranges


def test_sensitivity_moves_acceptance_over_its_catalog_range():
    sc = load_scenario(resolve_scenario_path("paper/opt-13b-b1"))
    cat = default_catalog()
    alpha, lo, hi, label = acceptance_span(sc, cat, 0)
    assert (alpha, lo, hi) == (0.78, 0.56, 0.82) and "pairs.opt-1.3b>opt-13b range" in label
    own = sc.model_copy(update={"drafters": [sc.drafters[0].model_copy(update={"acceptance": 0.7})]})
    alpha, lo, hi, label = acceptance_span(own, cat, 0)
    delta = cat.acceptance_sensitivity_delta
    assert (alpha, lo, hi) == (0.7, pytest.approx(0.7 - delta), pytest.approx(0.7 + delta)) and "scenario" in label
    assert [c.name for c in selected_constants(sc, cat, "acceptance")] == [
        "acceptance of drafters[0] (opt-1.3b, catalog pairs.opt-1.3b>opt-13b range)"]
    with pytest.raises(ScenarioError, match="--only nothing"):
        selected_constants(sc, cat, "nothing")


def test_gpu_si_gain_follows_the_acceptance_range():
    """The measured table of formulations/acceptance.md: GPU-SI's speedup over GPU-AR rises with alpha."""
    sc = load_scenario(resolve_scenario_path("paper/opt-13b-b1"))
    res = sensitivity(sc, default_catalog(), options=SolverOptions(60.0, deterministic=True), only="acceptance")
    (row,) = res.rows
    assert row.low.gpu_si_speedup < res.nominal_gpu_si_speedup < row.high.gpu_si_speedup
    # never slower at the low end, never faster at the high end: here the verifier alone ([NOSPEC]) is the
    # optimum over the whole range (no drafter's acceptance changes its latency), so both are 0
    assert row.low.relative >= 0 >= row.high.relative
