"""Not speculating is a design ([NOSPEC], formulations/speculation_rounds.md): the verifier decoding alone is
in every space with drafters, as a choice of the exact model, the brute force and the heuristic; the optimum
is never worse than it; a design file expresses it; `solve` says when it wins. Fair GPU-AR: the verifier
alone takes the whole device budget, and reports print each baseline's devices."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import one_line_error
from test_inputs_as_meant import LLAMA31_8B, LLAMA32_1B, MISTRAL_7B, _catalog

from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import NO_SPEC
from specpim_cp.problem.scenario import load_scenario, parse_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.alone import alone_scenario, speculating_scenario
from specpim_cp.solvers.baselines import gpu_ar, run_baselines
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.heuristic.run import run_heuristic

OPTS = SolverOptions(60, deterministic=True)


def small(verifier: str, drafter: str, acceptance: float, *, memory: str = "gddr", objective: str = "latency",
          budget: int | None = None, pim_units: int | None = None, batch: int = 1) -> dict:
    """One verifier and one drafter, share levels 1, draft lengths 1..3: brute force enumerates it."""
    data = {"name": f"ns-{verifier}-{drafter}-{acceptance}-{objective}-{budget}", "batch_size": batch,
            "prompt_tokens": 128, "generated_tokens": 64, "objective": objective, "memory_types": [memory],
            "max_draft_length": 3, "space": {"share_levels": 1},
            "verifier": {"model": verifier, "devices": 1},
            "drafters": [{"model": drafter, "devices": 1, "acceptance": acceptance}]}
    if pim_units is not None:
        data["space"]["pim_units"] = pim_units
    if budget is not None:
        data["device_budget"] = budget
        data["verifier"] = {"model": verifier}
        data["drafters"][0] = {"model": drafter, "acceptance": acceptance, "max_devices": 1}
    return data


# (scenario, whether the optimum speculates): both sides, every objective, a device budget the verifier
# alone takes whole (opt-30b on 8 devices, which a speculating design cannot give it)
CASES = [
    (small("gpt2-medium", "gpt2-small", 0.9), False),
    (small("opt-6.7b", "opt-125m", 0.8, budget=4, pim_units=4), True),
    (small("opt-6.7b", "opt-125m", 0.3, budget=4, pim_units=4), False),
    (small("opt-30b", "opt-1.3b", 0.5, budget=8, pim_units=4), False),
    (small("opt-1.3b", "opt-125m", 0.85, memory="hbm", pim_units=4, objective="energy", batch=2), None),
    (small("gpt2-large", "gpt2-small", 0.8, objective="edp"), None),
]


@pytest.mark.parametrize("data,speculates", CASES, ids=[c[0]["name"] for c in CASES])
def test_brute_force_equals_cp_sat_with_the_verifier_alone_in_the_space(data, speculates):
    sc = parse_scenario(data)
    exact = solve(sc, options=OPTS)
    brute = brute_force(sc)
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute.report.objective
    assert Evaluator(sc).evaluate(exact.design).metrics.objective(sc.objective) == exact.report.objective
    alone = solve(alone_scenario(sc), options=OPTS).report.objective
    spec = solve(speculating_scenario(sc), options=OPTS).report.objective
    assert exact.report.objective == min(alone, spec)  # never worse than not speculating, nor than speculating
    assert brute_force(alone_scenario(sc)).report.objective == alone
    if speculates is not None:  # the case is on the side it was chosen for, and both solvers say so
        assert (spec < alone) == speculates
        assert bool(exact.design.drafters) == speculates == bool(brute.design.drafters)
    if not exact.design.drafters and sc.device_budget:
        assert exact.design.verifier.devices <= sc.device_budget


def test_the_verifier_alone_takes_the_drafters_devices():
    sc = parse_scenario(CASES[3][0])
    res = solve(sc, options=OPTS)
    assert not res.design.drafters and res.design.verifier.devices == 8  # more than 8 - 1 drafter
    space = DesignSpace(sc, scenario_catalog(sc))
    assert space.alone_only(0, res.design.verifier.arch) and NO_SPEC in space.choice_list
    with_drafter = res.design.model_copy(update={"drafters": [res.design.verifier.model_copy(update={
        "model": "opt-1.3b", "devices": 1, "draft_length": 1})]})
    assert any("device_budget" in v for v in space.violations(with_drafter))


def test_a_design_without_drafters_is_a_design_of_every_space_with_drafters(tmp_path):
    sc = parse_scenario(CASES[0][0])
    catalog = scenario_catalog(sc)
    design = solve(sc, options=OPTS).design
    assert design.drafters == [] and design.choice == NO_SPEC
    space = DesignSpace(sc, catalog)
    assert space.violations(design) == []
    assert space.violations(design.model_copy(update={"pipeline": True}))[0].startswith("design.pipeline")
    on = speculating_scenario(sc)
    assert DesignSpace(on, catalog).violations(design)[0].startswith("design.drafters: the scenario has 1 drafters, ")
    assert NO_SPEC not in DesignSpace(on, catalog).choice_list
    # a design file round-trips and every command that reads designs takes it (export-tree: no tree)
    (tmp_path / "s.json").write_text(json.dumps(CASES[0][0]))
    path = tmp_path / "d.json"
    path.write_text(design.to_json())
    runner = CliRunner()
    out = runner.invoke(main, ["evaluate", str(tmp_path / "s.json"), "--design", str(path), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["tokens_per_round_micro"] == 10**6
    out = runner.invoke(main, ["simulate", str(tmp_path / "s.json"), "--design", str(path)])
    assert out.exit_code == 0, out.output
    out = runner.invoke(main, ["export-tree", str(path), "--format", "json"])
    assert out.exit_code == 2 and "no token tree" in one_line_error(out)


def test_solve_says_when_the_verifier_alone_wins_and_when_it_loses(tmp_path):
    runner = CliRunner()
    for data, speculates in CASES[1:3]:
        (tmp_path / "s.json").write_text(json.dumps(data))
        out = runner.invoke(main, ["solve", str(tmp_path / "s.json"), "--time-limit", "60", "--no-warm-start"])
        assert out.exit_code == 0, out.output
        if speculates:
            assert "% faster than the verifier alone" in out.output
        else:
            assert "no speculation: the verifier alone beats every drafter here by" in out.output
        out = runner.invoke(main, ["solve", str(tmp_path / "s.json"), "--json", "--no-warm-start"])
        note = json.loads(out.output)["solve"]["extra"]["no_speculation"]
        assert note["optimum_speculates"] == speculates and note["margin_pct"] > 0
        assert note["cp_sat_s"] >= 0  # the other side's seconds inside CP-SAT, counted with the command's


def test_mixtral_with_a_mistral_7b_drafter_on_pim_does_not_speculate(tmp_path):
    """The Mixtral-8x7B (built in) + Mistral-7B (imported from its config) pair at batch 1 on HBM3-PIM: the
    drafter costs about a sixth of the verifier's active parameters' reads per token, so Mixtral alone on the
    same devices is faster, and `solve` reports not speculating as the optimum."""
    cat = _catalog(tmp_path, MISTRAL_7B)
    (tmp_path / "s.toml").write_text(
        f'name = "mixtral-mistral-pim"\ncatalog = ["{cat.name}"]\nbatch_size = 1\nprompt_tokens = 256\n'
        'generated_tokens = 128\nhost = "h100-sxm"\nmemory_types = ["hbm3-pim"]\n'
        '[verifier]\nmodel = "mixtral-8x7b"\ndevices = 4\n[[drafters]]\nmodel = "mistral-7b-v0.1"\ndevices = 1\n')
    out = CliRunner().invoke(main, ["solve", str(tmp_path / "s.toml"), "--json", "--no-warm-start"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    extra = data["solve"]["extra"]
    assert data["design"]["drafters"] == [] and data["solve"]["status"] == "OPTIMAL"
    assert extra["no_speculation"]["best_speculating"] > data["solve"]["objective"]
    assert extra["acceptance"][0]["origin"] == "default" and extra["acceptance"][0]["acceptance"] == 0.6
    sc = load_scenario(tmp_path / "s.toml")
    alone = solve(alone_scenario(sc), options=OPTS)  # Mixtral alone on the same hardware choices
    assert float(alone.report.objective) == data["solve"]["objective"]


def test_the_heuristic_returns_the_verifier_alone_when_it_wins():
    for data, speculates in CASES[:3]:
        sc = parse_scenario(data)
        res = run_heuristic(sc, seed=1)
        assert bool(res.design.drafters) == speculates
        assert res.report.objective == brute_force(sc).report.objective  # these spaces are small
        assert res.report.extra["verifier_alone"]["chosen"] == (not speculates)


def test_ranges_list_not_speculating_as_a_decision():
    from specpim_cp.solvers.exact.ranges import decision_ranges

    sc = parse_scenario(CASES[1][0])  # speculating wins by 9.2%
    near = decision_ranges(sc, within_pct=10, options=OPTS)
    spec = next(r for r in near.ranges if r.decision == "speculation")
    assert spec.at_optimum is True and set(spec.reached) == {False, True} and spec.forced is False
    drafter = next(r for r in near.ranges if r.model == "drafters[0]" and r.decision == "draft_length")
    assert isinstance(drafter.at_optimum, int) and "none" in drafter.reached
    tight = decision_ranges(sc, within_pct=5, options=OPTS)
    spec = next(r for r in tight.ranges if r.decision == "speculation")
    assert spec.reached == [True] and spec.excluded == [False] and spec.forced is True


# ------------------------------------------------------------------------------------------- fair baselines
LLAMA31_70B = {**LLAMA31_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
               "num_attention_heads": 64, "_name_or_path": "meta-llama/Llama-3.1-70B"}


def test_gpu_ar_takes_the_whole_device_budget(tmp_path):
    """Llama-3.1-70B + Llama-3.2-1B, budget 8 on H100: GPU-AR (no drafter) is priced on 8 devices, GPU-SI on
    4 + 1; the baselines table and JSON give each baseline's devices."""
    cat = _catalog(tmp_path, LLAMA31_70B, LLAMA32_1B)
    (tmp_path / "s.toml").write_text(
        f'name = "llama-70b-budget-8"\ncatalog = ["{cat.name}"]\nbatch_size = 1\nprompt_tokens = 256\n'
        'generated_tokens = 128\nhost = "h100-sxm"\ndevice_budget = 8\n'
        '[verifier]\nmodel = "llama-3.1-70b"\n[[drafters]]\nmodel = "llama-3.2-1b"\n')
    sc = load_scenario(tmp_path / "s.toml")
    results = {b.name: b for b in run_baselines(sc)}
    assert results["GPU-AR"].devices == 8 and results["GPU-AR"].evaluation.design.verifier.devices == 8
    assert results["GPU-SI"].devices == 5  # one device for the drafter, the most the rest allows (4)
    on_four = gpu_ar(sc.model_copy(update={"device_budget": 5}))  # what the handicapped baseline priced
    assert on_four.design.verifier.devices == 4
    assert results["GPU-AR"].evaluation.metrics.latency_ns_per_token < on_four.metrics.latency_ns_per_token
    runner = CliRunner()
    out = runner.invoke(main, ["baselines", str(tmp_path / "s.toml")])
    assert out.exit_code == 0, out.output
    header = next(line for line in out.output.splitlines() if line.startswith("baseline"))
    assert header.split()[:2] == ["baseline", "devices"]
    row = next(line for line in out.output.splitlines() if line.startswith("GPU-AR"))
    assert row.split()[1] == "8"
    out = runner.invoke(main, ["baselines", str(tmp_path / "s.toml"), "--json"])
    assert {b["name"]: b["devices"] for b in json.loads(out.output)}["GPU-AR"] == 8


def test_baseline_devices_respect_the_verifiers_max_devices():
    from specpim_cp.solvers.baselines import baseline_devices

    sc = parse_scenario(small("opt-6.7b", "opt-125m", 0.8, budget=8, pim_units=4))
    assert baseline_devices(sc) == [4, 1] and baseline_devices(alone_scenario(sc)) == [8]
    capped = sc.model_copy(update={"verifier": sc.verifier.model_copy(update={"max_devices": 2})})
    assert baseline_devices(capped) == [2, 1] and baseline_devices(alone_scenario(capped)) == [2]


def test_a_design_with_some_of_the_drafters_is_refused_naming_the_alone_option():
    data = {**CASES[0][0], "drafters": [*CASES[0][0]["drafters"], {"model": "opt-125m", "devices": 1}]}
    sc = parse_scenario(data)
    design = solve(parse_scenario(CASES[0][0]), options=OPTS).design
    one = design.model_copy(update={"drafters": [design.verifier.model_copy(update={
        "model": "gpt2-small", "draft_length": 1})]})
    with pytest.raises(ScenarioError, match=r"has 2 drafters \(or none: the verifier alone, no speculation\), the "
                       "design 1"):
        DesignSpace(sc, scenario_catalog(sc)).check(one)
    assert DesignSpace(sc, scenario_catalog(sc)).violations(design) == []


@pytest.mark.parametrize("case", [1, 2], ids=["speculating-wins", "alone-wins"])
def test_the_notes_other_side_is_its_proven_optimum_without_a_tie_break(case):
    """The note solves the other side for its value only (no canonical tie-break): the value is the other
    side's canonical optimum, and its design one of that side's optima."""
    from specpim_cp.api.options import SolveOptions
    from specpim_cp.api.solving import solve as api_solve

    sc = parse_scenario(CASES[case][0])
    res = api_solve(sc, SolveOptions(deterministic=True))
    note = res.report.extra["no_speculation"]
    other = alone_scenario(sc) if res.design.drafters else speculating_scenario(sc)
    canonical = solve(other, options=OPTS)
    lean = solve(other, options=OPTS, canonical=False)
    assert note["other_status"] == "OPTIMAL" and note["other"] == float(canonical.report.objective)
    assert lean.report.objective == canonical.report.objective and lean.report.status == "OPTIMAL"
    assert Evaluator(other).evaluate(lean.design).metrics.objective(sc.objective) == canonical.report.objective
    extra = lean.report.extra
    assert extra["tie_break"] == [] and extra["canonical"] is False and extra["tie_break_note"].startswith("not asked")
    assert not any(s["stage"].startswith("tie-break") for s in extra["solves"])
    # every CP-SAT second is counted, the evaluator's re-check of the claim too
    assert extra["cp_sat_s"] >= sum(s["wall_s"] for s in extra["solves"]) - 0.01


def test_a_latency_solve_settles_the_round_time_and_a_later_energy_search_the_energy():
    """NOSPEC-6 per level: a latency solve settles the verifier alone's round time only; a search of the same
    model that minimises energy settles the energy then (one solve), to the bounds a model settled at once has."""
    from specpim_cp.solvers.exact.guards import build_model
    from specpim_cp.solvers.exact.no_spec import ENERGY, ROUND_TIME, settle
    from specpim_cp.solvers.exact.session import SolveSession
    from specpim_cp.solvers.exact.settled import settled_model

    sc = parse_scenario(CASES[1][0])
    catalog = scenario_catalog(sc)
    res = solve(sc, options=OPTS, catalog=catalog)
    assert [s["stage"] for s in res.report.extra["solves"] if s["stage"].startswith("no speculation")] == [
        "no speculation: least round time"]
    sm = settled_model(sc, catalog)
    assert sm is not None and sm.settled_levels == {ROUND_TIME}
    run = SolveSession(sm, OPTS)
    settle(sm, run, (ROUND_TIME, ENERGY))
    assert [s["stage"] for s in run.solve_log] == ["no speculation: least energy"]
    assert sm.settled_levels == {ROUND_TIME, ENERGY}
    settle(sm, run, (ROUND_TIME, ENERGY))  # settled: nothing is solved again
    assert len(run.solve_log) == 1
    fresh = build_model(sc, catalog, Evaluator(sc, catalog))
    settle(fresh, SolveSession(fresh, OPTS))
    assert fresh.choice_bounds == sm.choice_bounds
    assert solve(sc, objective="energy", options=OPTS, catalog=catalog).report.objective == \
        brute_force(sc, objective="energy").report.objective


def test_the_heuristic_keeps_its_best_speculating_design_when_the_verifier_alone_wins():
    """When the verifier alone wins, the heuristic's result keeps its best speculating design (`speculating`,
    what the heuristic alone on the speculating side returns with the same seed and budget); when a
    speculating design wins there is none to keep."""
    for data, speculates in CASES[:3]:
        sc = parse_scenario(data)
        res = run_heuristic(sc, seed=1)
        if speculates:
            assert res.speculating is None
            continue
        kept = res.speculating
        assert kept is not None and kept.design.drafters
        assert kept.metrics.objective(sc.objective) > res.report.objective
        assert DesignSpace(speculating_scenario(sc), scenario_catalog(sc)).violations(kept.design) == []
        assert kept.design == run_heuristic(speculating_scenario(sc), seed=1).design


@pytest.mark.parametrize("case", [0, 2])
def test_the_notes_speculating_side_starts_from_the_commands_own_heuristic_run(case, monkeypatch):
    """When the verifier alone wins, the note's speculating side starts from the heuristic's best speculating
    design of the command's warm start: one heuristic run per `solve`, and the note's value is the speculating
    side's proven optimum all the same."""
    from specpim_cp.api.options import SolveOptions
    from specpim_cp.api.solving import solve as api_solve
    from specpim_cp.solvers import heuristic

    runs = []

    def counted(*args, **kw):
        runs.append(args[0].name)
        return run_heuristic(*args, **kw)

    monkeypatch.setattr(heuristic, "run_heuristic", counted)
    sc = parse_scenario(CASES[case][0])
    res = api_solve(sc, SolveOptions(deterministic=True, note_process=False))  # every heuristic run counted here
    note = res.report.extra["no_speculation"]
    assert not res.design.drafters and note["optimum_speculates"] is False
    assert len(runs) == 1  # the warm start's run only (its own verifier-alone search is inside it)
    best = solve(speculating_scenario(sc), options=OPTS)
    assert note["other_status"] == "OPTIMAL" and note["best_speculating"] == float(best.report.objective)
