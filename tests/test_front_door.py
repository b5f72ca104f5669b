"""The front door and the CLI behave the same: `specpim-cp solve NAME --json --deterministic` and
`specpim_cp.solve(load_scenario(NAME), SolveOptions(deterministic=True))` give the same design, objective,
status and tie-break levels (a sample here; benchmarks/bench_front_door.py runs paper and paper-full); the
front door's hint policy and options refuse in one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import specpim_cp as sp
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError

SAMPLE = ("paper/opt-13b-b1", "paper/llama-32.5b-b1")


def _fields(data: dict) -> dict:
    return {"design": data["design"], "objective_exact": data["solve"]["objective_exact"],
            "status": data["solve"]["status"], "tie_break": data["solve"]["extra"].get("tie_break")}


@pytest.mark.parametrize("name", SAMPLE)
def test_cli_and_api_solve_alike(name):
    res = CliRunner().invoke(main, ["solve", name, "--json", "--deterministic"])
    assert res.exit_code == 0, res.output
    cli = _fields(json.loads(res.stdout))
    api = _fields(json.loads(sp.solve(sp.load_scenario(name), sp.SolveOptions(deterministic=True)).to_json()))
    assert cli == api
    assert cli["status"] == "OPTIMAL" and cli["tie_break"]


def test_hint_must_belong_to_the_scenario():
    opt = sp.load_scenario("paper/opt-13b-b1")
    design = sp.solve(opt, sp.SolveOptions(deterministic=True, warm_start=False, time_limit_s=20)).design
    hinted = sp.solve(opt, sp.SolveOptions(deterministic=True, hint=design, time_limit_s=20))
    assert hinted.report.objective == sp.evaluate(opt, design).metrics.objective("latency")
    with pytest.raises(ScenarioError, match="^hint: not a design of scenario"):
        sp.solve(sp.load_scenario("paper/llama-32.5b-b1"), sp.SolveOptions(deterministic=True, hint=design))
    with pytest.raises(ScenarioError, match="brute force"):
        sp.solve(opt, sp.SolveOptions(method="brute-force", hint=design))


def test_options_are_checked_before_any_work():
    sc = sp.load_scenario("paper/opt-13b-b1")
    with pytest.raises(ScenarioError, match="--deterministic solves with one worker"):
        sp.solve(sc, sp.SolveOptions(workers=2, deterministic=True))
    with pytest.raises(ScenarioError, match="within: must be in"):
        sp.ranges(sc, sp.RangesOptions(within_pct=1000))
    with pytest.raises(ScenarioError, match="resolution: a percentage"):
        sp.pareto(sc, sp.ParetoOptions(resolution_pct="1e-99999999"))


def test_baselines_by_the_names_reports_print():
    sc = sp.load_scenario("paper/opt-13b-b1")
    base = sp.baselines(sc)
    assert {"GPU-AR", "GPU-SI"} <= set(base)
    assert base["GPU-SI"].metrics == sp.evaluate(sc, base["GPU-SI"].design).metrics


@pytest.mark.parametrize("objective,priced", [("latency", False), ("energy", True)])
def test_a_latency_solve_from_the_heuristics_design_prices_no_baselines(objective, priced, monkeypatch):
    """Under latency, the heuristic's own search objective, a warm-started solve starts from the heuristic's
    design without pricing the baselines (`api.solving.baselines_start`); under energy, where a baseline is
    often the better start, it prices them. The optimum is the one a start from the baselines proves."""
    from specpim_cp.solvers import baselines as baselines_mod
    from specpim_cp.solvers.exact import SolverOptions
    from specpim_cp.solvers.exact import solve as exact_solve

    sc = sp.load_scenario("paper/opt-13b-b4")
    monkeypatch.setattr(baselines_mod, "_BASELINES", baselines_mod.BoundedCache(2))  # nothing priced before
    calls = []
    real = baselines_mod._all_baselines
    monkeypatch.setattr(baselines_mod, "_all_baselines", lambda s, c: calls.append(bool(s.drafters)) or real(s, c))
    res = sp.solve(sc, sp.SolveOptions(deterministic=True, objective=objective))
    assert (True in calls) == priced  # the scenario's baselines (the note's verifier alone prices GPU-AR)
    cold = exact_solve(sc, objective=objective, options=SolverOptions(60, deterministic=True))
    assert (res.report.objective, res.design) == (cold.report.objective, cold.design)
    assert res.report.status == "OPTIMAL"


@pytest.mark.parametrize("gives", [None, "design"])
def test_a_hint_asked_for_later_prices_the_baselines_only_when_it_gives_none(gives, monkeypatch):
    """`exact.solve` takes the hint as a function it asks for at its first incumbent (the warm start searched
    beside the model build); when the function gives no design the baselines are priced after all, whatever
    `start_baselines` says, and the optimum is the same."""
    from specpim_cp.solvers import baselines as baselines_mod
    from specpim_cp.solvers.exact import SolverOptions
    from specpim_cp.solvers.exact import solve as exact_solve

    sc = sp.load_scenario("paper/opt-13b-b4")
    opts = SolverOptions(60, deterministic=True)
    cold = exact_solve(sc, options=opts)
    monkeypatch.setattr(baselines_mod, "_BASELINES", baselines_mod.BoundedCache(2))  # nothing priced before
    calls, asked = [], []
    real = baselines_mod._all_baselines
    monkeypatch.setattr(baselines_mod, "_all_baselines", lambda s, c: calls.append(bool(s.drafters)) or real(s, c))
    hint = None if gives is None else cold.design
    res = exact_solve(sc, options=opts, hint=lambda: asked.append(1) or hint, start_baselines=False)
    assert asked == [1] and (True in calls) == (gives is None)
    assert (res.report.objective, res.design) == (cold.report.objective, cold.design)


def test_the_heuristic_keeps_its_best_verifier_alone_design_when_a_speculating_design_wins():
    """`SolveResult.alone`: the verifier alone's best design when the heuristic returns a speculating one (the
    design its own search of the scenario without drafters returns), None when the verifier alone wins."""
    from specpim_cp.solvers.alone import alone_scenario
    from specpim_cp.solvers.heuristic import run_heuristic

    sc = sp.load_scenario("paper/opt-13b-b4")
    res = run_heuristic(sc, seed=1)
    assert res.design.drafters and res.speculating is None
    assert res.alone is not None and not res.alone.design.drafters
    assert res.alone.design == run_heuristic(alone_scenario(sc), seed=1).design
    assert res.alone.metrics.objective(sc.objective) >= res.report.objective
    alone_wins = run_heuristic(sp.load_scenario("paper/opt-13b-b1"), seed=1)
    assert not alone_wins.design.drafters and alone_wins.alone is None
