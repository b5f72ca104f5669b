"""The evaluator on every shipped example scenario: baselines, JSON round trips, Monte Carlo agreement
of the priced round structure, and limiting cases of the round-time formulas through the evaluator."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from helpers import build_design

from specpim_cp.catalog import default_catalog
from specpim_cp.check.simulate import format_simulation
from specpim_cp.check.simulate_design import simulate_design
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.speculation import Q_SCALE, expected_tokens, staged_rounds_distribution
from specpim_cp.problem.design import ArchConfig, Design, Staging, parse_design
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.solvers.baselines import run_baselines

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.toml"))
CAT = default_catalog()
ROUNDS = 100_000


def test_examples_present():
    assert {"gpt2-staged", "llama-13b", "llama-32.5b-three-drafters", "opt-13b", "palm-8b"} <= set(NAMES)


@cache
def _scenario(name: str):
    return load_scenario(EXAMPLES / f"{name}.toml")


@cache
def _baselines(name: str):
    return {r.name: r for r in run_baselines(_scenario(name))}


def _alphas(sc) -> list[float]:
    ev = Evaluator(sc)
    return [ev.alpha(i) for i in range(len(sc.drafters))]


# ------------------------------------------------------------------------------------------------
# Baselines
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_baselines_run_and_gpu_si_beats_gpu_ar(name):
    sc = _scenario(name)
    res = _baselines(name)
    assert {"GPU-AR", "GPU-SI"} <= set(res)
    ar, si = res["GPU-AR"].evaluation, res["GPU-SI"].evaluation
    assert ar is not None and si is not None, (res["GPU-AR"].error, res["GPU-SI"].error)
    # GPU baselines use plain memory and keep every operator on the host
    for ev in (ar, si):
        for _, md in ev.design.models():
            assert md.pim_units == 0
            assert all(p.engine == "host" for p in md.placement.values())
    assert ar.design.drafters == [] and ar.metrics.tokens_per_round == 1.0
    assert not si.design.pipeline
    assert si.metrics.tokens_per_round == pytest.approx(
        expected_tokens(_alphas(sc), [d.draft_length for d in si.design.drafters]), abs=1e-6
    )
    if all(a >= 0.6 for a in _alphas(sc)):
        assert si.metrics.latency_ns_per_token <= ar.metrics.latency_ns_per_token
    for r in res.values():  # a failed baseline says why
        assert (r.evaluation is None) == (r.error is not None)


def _round_trip(sc, evaluation) -> None:
    design = evaluation.design
    again = parse_design(json.loads(design.to_json()))
    assert again == design
    assert again.key() == design.key()
    e2 = Evaluator(sc).evaluate(again)
    assert e2.metrics == evaluation.metrics
    assert e2.breakdown.as_dict() == evaluation.breakdown.as_dict()
    assert json.loads(json.dumps(e2.as_dict())) == json.loads(json.dumps(evaluation.as_dict()))


@pytest.mark.parametrize("name", NAMES)
def test_baseline_designs_round_trip_through_json(name):
    sc = _scenario(name)
    checked = 0
    for r in _baselines(name).values():
        if r.evaluation is None or r.name == "GPU-AR":
            continue
        _round_trip(sc, r.evaluation)
        checked += 1
    assert checked >= 2
    # GPU-AR is priced on the scenario without its drafters
    _round_trip(sc.model_copy(update={"drafters": []}), _baselines(name)["GPU-AR"].evaluation)


@pytest.mark.parametrize("name", ["opt-13b"])
def test_gpu_ar_design_re_evaluates_on_its_own_scenario(name):
    _round_trip(_scenario(name), _baselines(name)["GPU-AR"].evaluation)


# ------------------------------------------------------------------------------------------------
# Monte Carlo agreement of priced designs
# ------------------------------------------------------------------------------------------------
def _closest_pipelined(sc, archs, placements) -> Design:
    """The pipelined design (common draft length) whose drafting time is closest to verification."""
    ev = Evaluator(sc)
    n = len(sc.drafters)
    best = None
    for g in range(1, sc.max_draft_length + 1):
        d = build_design(sc, archs, placements, [g] * n, [None] * n, True)
        b = ev.evaluate(d).breakdown.as_dict()
        draft = max(x["cycle_ns"] * x["draft_length"] for x in b["drafters"])
        gap = abs(draft / b["round"]["verify_ns"] - 1)
        if best is None or gap < best[0]:
            best = (gap, d)
    assert best is not None and best[0] < 0.5
    return best[1]


def _staged_expected_drafting(ev: Evaluator, design: Design) -> tuple[float, int, int]:
    """(E[D], number of possible cycle counts, V) of a one-drafter staged design."""
    b = ev.evaluate(design).breakdown.as_dict()
    d = b["drafters"][0]
    dist = staged_rounds_distribution(d["staging"]["alpha2"], d["staging"]["draft_length"], d["draft_length"])
    return sum(r * p for r, p in dist.items()) * d["cycle_ns"], len(dist), b["round"]["verify_ns"]


def _staged_d_close_to_v(sc, archs, place) -> Design:
    """The staged pipelined design (draft and draft2 lengths) whose expected drafting time is closest
    to verification, among those with a random number of cycles."""
    ev = Evaluator(sc)
    best = None
    for gamma in range(2, sc.max_draft_length + 1):
        for g2 in range(1, sc.drafters[0].staging.max_draft_length + 1):
            d = build_design(sc, archs, place, [gamma], [Staging(draft2="ngram", draft_length=g2)], True)
            mean_d, outcomes, verify = _staged_expected_drafting(ev, d)
            if outcomes >= 2 and (best is None or abs(mean_d / verify - 1) < best[0]):
                best = (abs(mean_d / verify - 1), d)
    assert best is not None
    return best[1]


def _mc_designs(name: str) -> list[tuple[str, Design]]:
    sc = _scenario(name)
    res = _baselines(name)
    si = res["GPU-SI"].evaluation.design
    out = [("GPU-SI vanilla", si), ("GPU-SI pipelined", si.model_copy(update={"pipeline": True}))]
    for pim in ("FC-offload", "AiM as sold"):
        if res[pim].evaluation is not None:
            out.append((f"{pim} pipelined", res[pim].evaluation.design.model_copy(update={"pipeline": True})))
    archs = [ArchConfig(md.memory_type, md.pim_units, md.devices) for _, md in si.models()]
    out.append(
        ("GPU-SI pipelined D~V", _closest_pipelined(sc, archs, [md.placement for _, md in si.models()]))
    )
    if name == "gpt2-staged":
        share = sc.space.share_levels
        archs = [ArchConfig("hbm", 8, 1), ArchConfig("hbm", 0, 1)]
        place = [rule_placement("all-pim", share), rule_placement("host-only", share)]
        for gamma, g2, pipe in ((3, 1, True), (4, 4, True), (8, 3, False), (6, 2, True)):
            d = build_design(sc, archs, place, [gamma], [Staging(draft2="ngram", draft_length=g2)], pipe)
            out.append((f"staged g={gamma} g2={g2} pipeline={pipe}", d))
        out.append(("staged D~V", _staged_d_close_to_v(sc, archs, place)))
        archs = [ArchConfig("gddr", 2, 1), ArchConfig("hbm", 4, 1)]
        place = [rule_placement("fc-offload", share), rule_placement("fc-offload", share)]
        out.append(
            (
                "staged PIM drafter",
                build_design(sc, archs, place, [7], [Staging(draft2="ngram", draft_length=2)], True),
            )
        )
    return out


MC_CASES = [(name, label) for name in NAMES for label, _ in _mc_designs(name)]


@pytest.mark.parametrize("name,label", MC_CASES)
def test_monte_carlo_agrees_with_evaluator(name, label):
    sc = _scenario(name)
    design = dict(_mc_designs(name))[label]
    sim = simulate_design(sc, design, ROUNDS, seed=2024)
    s = sim.simulation
    assert s.tokens_agree(), format_simulation(s)
    assert s.time_agree(), format_simulation(s)
    # the evaluator's integer round time is the closed form up to rounding of the outcome probabilities
    ev = Evaluator(sc).evaluate(design)
    assert sim.evaluator_round_ns == ev.metrics.round_time_ns
    assert abs(sim.evaluator_round_ns - s.closed_form_time_ns) <= 2 + 1e-4 * s.closed_form_time_ns
    assert sim.evaluator_tokens == pytest.approx(s.closed_form_tokens, abs=2e-6)
    # ... and directly within the simulated mean's confidence band
    assert abs(sim.evaluator_round_ns - s.mean_time_ns) <= 3 * s.time_ci95 + 2 + 1e-4 * s.mean_time_ns


def test_staged_d_close_to_v_design_exercises_the_nonlinearity():
    """The chosen staged pipelined design has E[D] within 10% of V and a random drafting time."""
    sc = _scenario("gpt2-staged")
    ev = Evaluator(sc)
    design = dict(_mc_designs("gpt2-staged"))["staged D~V"]
    mean_d, outcomes, verify = _staged_expected_drafting(ev, design)
    assert outcomes >= 2
    assert abs(mean_d / verify - 1) < 0.1
    assert 0.2 < ev.evaluate(design).breakdown.round.fail_probability < 0.9


# ------------------------------------------------------------------------------------------------
# Limiting cases through the evaluator
# ------------------------------------------------------------------------------------------------
def _opt_scenario(acceptance: float | None = None, drafters: int = 1, **extra):
    data = {
        "name": "limits",
        "batch_size": 2,
        "prompt_tokens": 256,
        "generated_tokens": 128,
        "verifier": {"model": "opt-13b", "devices": 2},
        "drafters": [{"model": "opt-1.3b", "devices": 1, "acceptance": acceptance}] * drafters,
    }
    data.update(extra)
    return parse_scenario(data)


def _host_design(sc, gammas, pipeline, staging=None):
    n = len(sc.drafters)
    archs = [ArchConfig("hbm", 0, 2)] + [ArchConfig("hbm", 0, 1)] * n
    place = [rule_placement("host-only", sc.space.share_levels)] * (n + 1)
    return build_design(sc, archs, place, gammas, staging or [None] * n, pipeline)


def _step_and_verify(ev, design):
    sc = ev.scenario
    gammas = [d.draft_length for d in design.drafters]
    step = ev.pass_price(design.drafters[0], sc.batch_size).time_ns
    verify = ev.pass_price(design.verifier, sc.batch_size * (sum(gammas) + 1)).time_ns
    return step, verify


@pytest.mark.parametrize("gamma", [1, 2, 8])
def test_pipeline_with_drafts_that_always_pass_costs_max_of_phases(gamma):
    sc = _opt_scenario(acceptance=0.999999999)
    ev = Evaluator(sc)
    design = _host_design(sc, [gamma], True)
    step, verify = _step_and_verify(ev, design)
    sync = CAT.host(sc.host).sync_latency_ns
    m = ev.evaluate(design).metrics
    assert m.round_time_ns == max(gamma * step, verify) + sync
    # every round continues, so the verifier's bonus token is dropped (BONUS-1): gamma tokens, not gamma + 1
    assert m.tokens_per_round == pytest.approx(gamma, abs=1e-4)
    vanilla = ev.evaluate(design.model_copy(update={"pipeline": False})).metrics
    assert vanilla.round_time_ns == gamma * step + verify + sync


def test_pipeline_limit_covers_both_orderings_of_d_and_v():
    sc = _opt_scenario(acceptance=0.999999999)
    ev = Evaluator(sc)
    short = _step_and_verify(ev, _host_design(sc, [1], True))
    long = _step_and_verify(ev, _host_design(sc, [8], True))
    assert 1 * short[0] < short[1] and 8 * long[0] > long[1]


@pytest.mark.parametrize("gamma", [1, 4])
def test_pipeline_with_drafts_that_never_pass_equals_vanilla(gamma):
    sc = _opt_scenario(acceptance=0.0)
    ev = Evaluator(sc)
    design = _host_design(sc, [gamma], True)
    pipe = ev.evaluate(design).metrics
    vanilla = ev.evaluate(design.model_copy(update={"pipeline": False})).metrics
    assert pipe.round_time_ns == vanilla.round_time_ns
    assert pipe.tokens_per_round == 1.0
    # every optimistic draft is wasted: the pipeline pays the drafting energy twice
    b = ev.evaluate(design).breakdown.as_dict()["drafters"][0]
    bv = ev.evaluate(design.model_copy(update={"pipeline": False})).breakdown.as_dict()["drafters"][0]
    assert b["drafting_energy_nj_per_round"] == 2 * bv["drafting_energy_nj_per_round"]


@pytest.mark.parametrize("acceptance", [0.3, 0.78, 0.95])
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_pipeline_never_slower_than_vanilla(acceptance, gamma):
    sc = _opt_scenario(acceptance=acceptance)
    ev = Evaluator(sc)
    design = _host_design(sc, [gamma], True)
    step, verify = _step_and_verify(ev, design)
    pipe = ev.evaluate(design).metrics.round_time_ns
    van = ev.evaluate(design.model_copy(update={"pipeline": False})).metrics.round_time_ns
    d = gamma * step
    sync = CAT.host(sc.host).sync_latency_ns
    assert max(d, verify) + sync <= pipe <= van == d + verify + sync
    fail = 1 - acceptance**gamma
    # q is fail_q rounded to 1e-6, so the formula holds to min(D, V) / Q_SCALE plus the final ceil
    assert pipe == pytest.approx(
        max(d, verify) + fail * min(d, verify) + sync, abs=min(d, verify) / Q_SCALE + 2
    )


def test_no_drafters_round_is_one_verification_pass():
    sc = parse_scenario(
        {
            "name": "ar",
            "batch_size": 3,
            "prompt_tokens": 256,
            "generated_tokens": 128,
            "verifier": {"model": "opt-13b", "devices": 2},
        }
    )
    ev = Evaluator(sc)
    design = _host_design(sc, [], False)
    m = ev.evaluate(design).metrics
    assert m.round_time_ns == ev.pass_price(design.verifier, 3).time_ns
    assert m.tokens_per_round == 1.0
    assert m.throughput_tokens_per_s == pytest.approx(3 * 1e9 / m.round_time_ns)


def test_staged_with_useless_draft2_takes_gamma_cycles():
    """alpha2 = 0, gamma2 = 1: every cycle gains exactly one token, so R = gamma cycles of
    one draft2 step plus one drafter pass over 2 tokens per sequence."""
    sc = _scenario("gpt2-staged")
    data = sc.model_dump(mode="json")
    data["drafters"][0]["staging"]["acceptance"] = {"ngram": 0.0}
    sc0 = parse_scenario(data)
    ev = Evaluator(sc0)
    share = sc0.space.share_levels
    archs = [ArchConfig("hbm", 0, 1), ArchConfig("hbm", 0, 1)]
    place = [rule_placement("host-only", share)] * 2
    for gamma in (1, 3, 5):
        design = build_design(sc0, archs, place, [gamma], [Staging(draft2="ngram", draft_length=1)], False)
        m = ev.evaluate(design).metrics
        cycle = CAT.ngrams["ngram"].step_ns + ev.pass_price(design.drafters[0], 2 * sc0.batch_size).time_ns
        verify = ev.pass_price(design.verifier, sc0.batch_size * (gamma + 1)).time_ns
        assert m.round_time_ns == gamma * cycle + verify + CAT.host(sc0.host).sync_latency_ns
        unstaged = ev.evaluate(
            design.model_copy(update={"drafters": [design.drafters[0].model_copy(update={"staging": None})]})
        ).metrics
        assert m.tokens_per_round_micro == unstaged.tokens_per_round_micro


def test_staging_with_good_draft2_reduces_expected_drafting_cycles():
    sc = _scenario("gpt2-staged")
    ev = Evaluator(sc)
    share = sc.space.share_levels
    archs = [ArchConfig("hbm", 0, 1), ArchConfig("hbm", 0, 1)]
    place = [rule_placement("host-only", share)] * 2
    gamma = 8
    unstaged = ev.evaluate(build_design(sc, archs, place, [gamma], [None], False)).breakdown.as_dict()["drafters"][0]
    staged = ev.evaluate(
        build_design(sc, archs, place, [gamma], [Staging(draft2="ngram", draft_length=3)], False)
    ).breakdown.as_dict()["drafters"][0]
    alpha2 = staged["staging"]["alpha2"]
    assert alpha2 == CAT.acceptance_pairs["ngram>gpt2-small"]
    dist = staged_rounds_distribution(alpha2, 3, gamma)
    expected_cycles = sum(r * p for r, p in dist.items())
    assert expected_cycles < gamma
    assert staged["cycle_ns"] == 3 * CAT.ngrams["ngram"].step_ns + staged["pass_time_ns"]
    assert staged["pass_tokens"] == 4 * sc.batch_size and unstaged["pass_tokens"] == sc.batch_size
