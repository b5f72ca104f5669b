"""The solves the driver skips [OBJ-1s, OBJ-2s, EDP-3] change no answer: with each shortcut switched off the
objective, the canonical design, its tie levels and the fronts are the same (and brute force's), and with
them on the driver solves less."""

from __future__ import annotations

from fractions import Fraction

import pytest
from test_canonical import TINY, tiny
from test_exact import small_scenarios

from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, fronts, pareto, ratio, solve

OPTS = SolverOptions(60, deterministic=True)
#: The module that holds each shortcut's test (Dinkelbach's settled step; the sweep's stopping rules).
HOME = {"settled": ratio, "last_point": fronts, "slower_than": fronts}


def _without_shortcuts(monkeypatch) -> None:
    monkeypatch.setattr(ratio, "settled", lambda *a, **k: False)
    monkeypatch.setattr(fronts, "last_point", lambda *a, **k: False)
    monkeypatch.setattr(fronts, "slower_than", lambda *a, **k: None)


def _cases() -> list[dict]:
    dynamic = tiny("dyn-devices", "gpt2-large", "gpt2-small", ["gddr"], "fc-offload", verifier_devices=None, budget=3)
    dynamic["assumptions"]["energy_accounting"] = "dynamic"
    cases = [{**dynamic, "name": f"dyn-devices-{o}", "objective": o} for o in ("latency", "energy", "edp")]
    cases += [d for d in TINY if d["objective"] != "latency"]
    cases += [{**d, "objective": o} for d in small_scenarios(6, seed=11)[:3] for o in ("energy", "edp")]
    return cases


CASES = _cases()


def _answer(res) -> tuple:
    extra = res.report.extra
    return res.report.status, res.report.objective, res.design.key(), extra["canonical"], extra["tie_break"]


@pytest.fixture(scope="module")
def solved():
    return {d["name"] + d["objective"]: solve(parse_scenario(d), options=OPTS) for d in CASES}


@pytest.mark.parametrize("data", CASES, ids=lambda d: f"{d['name']}-{d['objective']}")
def test_same_answer_without_the_shortcuts(solved, monkeypatch, data):
    sc = parse_scenario(data)
    with_them = solved[data["name"] + data["objective"]]
    _without_shortcuts(monkeypatch)
    without = solve(sc, options=OPTS)
    assert _answer(with_them) == _answer(without)
    assert with_them.report.status == "OPTIMAL"
    assert with_them.report.objective == brute_force(sc).report.objective
    assert with_them.report.iterations <= without.report.iterations


def test_the_shortcuts_skip_solves(solved, monkeypatch):
    """Each shortcut fires somewhere on these spaces: switched off one at a time, the solves go up."""
    base = sum(r.report.iterations for r in solved.values())
    for name, off in (("settled", lambda *a, **k: False), ("last_point", lambda *a, **k: False)):
        with monkeypatch.context() as m:
            m.setattr(HOME[name], name, off)
            more = sum(solve(parse_scenario(d), options=OPTS).report.iterations for d in CASES)
        assert more > base, name


@pytest.mark.parametrize(("pct", "points"), [("0", None), ("1", None), ("0.1", 32)])
def test_fronts_unchanged_without_the_shortcuts(monkeypatch, pct, points):
    data = tiny("dyn-front", "gpt2-large", "gpt2-small", ["gddr"], "fc-offload", verifier_devices=None, budget=3)
    data["assumptions"]["energy_accounting"] = "dynamic"
    sc = parse_scenario(data)
    with_them = pareto(sc, options=OPTS, resolution=Fraction(pct) / 100, max_points=points)
    _without_shortcuts(monkeypatch)
    without = pareto(sc, options=OPTS, resolution=Fraction(pct) / 100, max_points=points)
    values = [[(e.metrics.latency_fraction(), e.metrics.energy_fraction()) for e in f.points]
              for f in (with_them, without)]
    assert values[0] == values[1] and len(values[0]) > 1
    assert with_them.status == without.status == "OPTIMAL"
    assert with_them.solves <= without.solves
