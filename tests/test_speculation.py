"""Speculation semantics: closed forms against enumeration, limiting cases, integer conventions, and
Monte Carlo agreement on token identities (BONUS-1), including the naive-policy detector."""

from __future__ import annotations

import itertools
import math

import pytest

from specpim_cp.check.simulate import SimDrafter, format_simulation, simulate_rounds
from specpim_cp.physics.speculation import (
    OUTCOME_SCALE,
    Q_SCALE,
    TOKENS_SCALE,
    continue_probability,
    draft_outcomes,
    drafter_fail_q,
    drafter_valid_probability,
    expected_rounds_scaled,
    expected_tokens,
    expected_tokens_micro,
    fail_q,
    round_time_expected,
    round_time_ns,
    staged_rounds_distribution,
    staged_rounds_int,
    unstaged_rounds_int,
)


def _pmf_accepted(alpha: float, gamma: int) -> list[float]:
    """P(a = k), k = 0..gamma, for the truncated geometric."""
    return [alpha**k * (1 - alpha) for k in range(gamma)] + [alpha**gamma]


def _brute_tokens(alphas, gammas) -> float:
    pmfs = [_pmf_accepted(a, g) for a, g in zip(alphas, gammas)]
    total = 0.0
    for ks in itertools.product(*(range(g + 1) for g in gammas)):
        p = math.prod(pmf[k] for pmf, k in zip(pmfs, ks))
        total += p * (1 + max(ks))
    return total


def _specpim_pass(alphas, gammas) -> float:
    """SpecPIM's superseded p_pass = 1 - prod_i (1 - alpha_i^gamma_i)."""
    return 1 - math.prod(1 - a**g for a, g in zip(alphas, gammas))


def _brute_bonus1(alphas, gammas) -> tuple[float, list[float], float]:
    """Enumerate every acceptance-count vector: (p_cont, [P(valid_i)], E_pipe) under BONUS-1."""
    pmfs = [_pmf_accepted(a, g) for a, g in zip(alphas, gammas)]
    p_cont, e_pipe = 0.0, 0.0
    valid = [0.0] * len(gammas)
    for ks in itertools.product(*(range(g + 1) for g in gammas)):
        p = math.prod(pmf[k] for pmf, k in zip(pmfs, ks))
        best = max(ks)
        val = [k == g == best for k, g in zip(ks, gammas)]
        cont = any(val)
        p_cont += p * cont
        e_pipe += p * (1 + best - cont)  # a continued round drops the bonus token
        for i, ok in enumerate(val):
            valid[i] += p * ok
    return p_cont, valid, e_pipe


def _brute_staged(alpha2: float, gamma2: int, gamma: int) -> dict[int, float]:
    """Enumerate every sequence of per-cycle gains until >= gamma tokens are held."""
    pmf = _pmf_accepted(alpha2, gamma2)
    out: dict[int, float] = {}

    def walk(held: int, r: int, p: float) -> None:
        for k, pk in enumerate(pmf):
            if pk == 0:
                continue
            m = held + 1 + k
            if m >= gamma:
                out[r + 1] = out.get(r + 1, 0.0) + p * pk
            else:
                walk(m, r + 1, p * pk)

    walk(0, 0, 1.0)
    return out


# --------------------------------------------------------------------------- expected tokens


@pytest.mark.parametrize("alpha,gamma", [(0.0, 1), (0.3, 1), (0.5, 3), (0.8, 4), (0.9, 8), (0.65, 16)])
def test_one_drafter_matches_chain_formula(alpha, gamma):
    chain = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    assert expected_tokens([alpha], [gamma]) == pytest.approx(chain, rel=1e-12)
    assert expected_tokens_micro([alpha], [gamma]) == round(expected_tokens([alpha], [gamma]) * TOKENS_SCALE)


@pytest.mark.parametrize("gamma", [1, 3, 7])
def test_alpha_limits(gamma):
    assert expected_tokens([0.999999], [gamma]) == pytest.approx(gamma + 1, abs=1e-3)
    assert expected_tokens([0.0], [gamma]) == 1.0
    assert expected_tokens([], []) == 1.0
    assert expected_tokens_micro([], []) == TOKENS_SCALE


@pytest.mark.parametrize(
    "alphas,gammas",
    [([0.6, 0.7], [3, 2]), ([0.8, 0.5], [4, 4]), ([0.3, 0.9], [1, 5]), ([0.5, 0.6, 0.7], [2, 3, 1])],
)
def test_multi_drafter_bounds_and_brute_force(alphas, gammas):
    e = expected_tokens(alphas, gammas)
    singles = [expected_tokens([a], [g]) for a, g in zip(alphas, gammas)]
    assert e >= max(singles) - 1e-12
    assert e <= 1 + max(gammas) + 1e-12
    assert e == pytest.approx(_brute_tokens(alphas, gammas), rel=1e-12)


BONUS1_CASES = [
    ([0.7], [3]),
    ([0.0], [2]),
    ([0.6, 0.8], [2, 4]),
    ([0.9, 0.5], [3, 3]),
    ([0.3, 0.9], [1, 5]),
    ([0.5, 0.6, 0.7], [2, 3, 1]),
    ([0.8, 0.3, 0.9], [4, 4, 2]),
    ([0.65, 0.85, 0.75], [1, 5, 3]),
    ([0.95, 0.9, 0.99], [6, 6, 6]),
]


@pytest.mark.parametrize("alphas,gammas", BONUS1_CASES)
def test_bonus1_closed_forms_match_enumeration(alphas, gammas):
    p_cont, valid, e_pipe = _brute_bonus1(alphas, gammas)
    assert continue_probability(alphas, gammas) == pytest.approx(p_cont, rel=1e-12, abs=1e-15)
    for i, v in enumerate(valid):
        assert drafter_valid_probability(alphas, gammas, i) == pytest.approx(v, rel=1e-12, abs=1e-15)
    assert expected_tokens(alphas, gammas, pipeline=True) == pytest.approx(e_pipe, rel=1e-12)
    assert expected_tokens(alphas, gammas, True) == pytest.approx(expected_tokens(alphas, gammas) - p_cont)
    # the events: some valid drafter <=> continue, so max_i P(valid_i) <= p_cont <= sum_i P(valid_i)
    assert max(valid) <= p_cont + 1e-15 and p_cont <= sum(valid) + 1e-15
    assert p_cont <= _specpim_pass(alphas, gammas) + 1e-15


def test_continue_one_drafter_is_alpha_to_gamma():
    for alpha, gamma in [(0.3, 1), (0.8, 4), (0.9, 8), (0.65, 16)]:
        assert continue_probability([alpha], [gamma]) == pytest.approx(alpha**gamma, rel=1e-12)
        assert drafter_valid_probability([alpha], [gamma], 0) == pytest.approx(alpha**gamma, rel=1e-12)
        chain = (1 - alpha ** (gamma + 1)) / (1 - alpha)
        assert expected_tokens([alpha], [gamma], pipeline=True) == pytest.approx(chain - alpha**gamma, rel=1e-12)


def test_continue_alpha_limits():
    gammas = [2, 5, 5, 3]
    assert continue_probability([0.0] * 4, gammas) == 0.0
    assert all(drafter_valid_probability([0.0] * 4, gammas, i) == 0.0 for i in range(4))
    assert expected_tokens([0.0] * 4, gammas, pipeline=True) == 1.0
    # every draft accepted: only the longest drafts are the committed output, which has max gamma tokens
    near = [0.9999999] * 4
    assert continue_probability(near, gammas) == pytest.approx(1.0, abs=1e-5)
    valid = [drafter_valid_probability(near, gammas, i) for i in range(4)]
    assert valid == pytest.approx([0.0, 1.0, 1.0, 0.0], abs=1e-5)
    assert expected_tokens(near, gammas, pipeline=True) == pytest.approx(max(gammas), abs=1e-4)
    assert continue_probability([], []) == 0.0
    assert expected_tokens([], [], pipeline=True) == 1.0


def test_equal_gammas_continue_is_specpim_pass_and_mixed_is_smaller():
    alphas = [0.7, 0.55, 0.9]
    p = continue_probability(alphas, [4, 4, 4])
    assert p == 1 - math.prod(1 - a**4 for a in alphas)  # same float operations
    assert [drafter_valid_probability(alphas, [4, 4, 4], i) for i in range(3)] == [a**4 for a in alphas]
    # a longer draft that accepts one more token leaves the short drafts out of the committed output
    mixed = [3, 4, 6]
    assert continue_probability(alphas, mixed) < _specpim_pass(alphas, mixed) - 0.04
    assert drafter_valid_probability(alphas, mixed, 0) == pytest.approx(
        0.7**3 * (1 - 0.55**4) * (1 - 0.9**4), rel=1e-12
    )


def test_integer_conventions():
    alphas, gammas = [0.8, 0.6, 0.75], [4, 2, 4]
    e_van, e_pipe = expected_tokens(alphas, gammas), expected_tokens(alphas, gammas, pipeline=True)
    assert expected_tokens_micro(alphas, gammas) == round(e_van * TOKENS_SCALE)  # the old call form
    assert expected_tokens_micro(alphas, gammas, pipeline=False) == round(e_van * TOKENS_SCALE)
    assert expected_tokens_micro(alphas, gammas, True) == round(e_pipe * TOKENS_SCALE)
    p = continue_probability(alphas, gammas)
    assert fail_q(alphas, gammas) == round((1 - p) * Q_SCALE)
    for i in range(3):
        v = drafter_valid_probability(alphas, gammas, i)
        assert drafter_fail_q(alphas, gammas, i) == round((1 - v) * Q_SCALE)
    assert fail_q([], []) == 0
    assert expected_tokens_micro([], [], pipeline=True) == TOKENS_SCALE
    assert fail_q([0.9999999, 0.9999999], [2, 3]) == 0  # the longer draft always continues
    assert drafter_fail_q([0.9999999, 0.9999999], [2, 3], 0) == Q_SCALE
    assert drafter_fail_q([0.9999999, 0.9999999], [2, 3], 1) == 0
    # equal draft lengths (one drafter included): the integer of the superseded formula, unchanged
    for al, ga in [([0.8], [4]), ([0.8, 0.6], [3, 3])]:
        prod_fail = 1.0
        for a, g in zip(al, ga):
            prod_fail *= 1.0 - a**g
        assert fail_q(al, ga) == round((1.0 - (1.0 - prod_fail)) * Q_SCALE)
    with pytest.raises(ValueError):
        drafter_valid_probability([0.5], [2], 1)
    with pytest.raises(ValueError):
        drafter_fail_q([0.5], [2], -1)


def test_invalid_inputs_rejected():
    with pytest.raises(ValueError):
        expected_tokens([1.0], [3])
    with pytest.raises(ValueError):
        expected_tokens([0.5], [0])
    with pytest.raises(ValueError):
        expected_tokens([0.5, 0.4], [3])
    with pytest.raises(ValueError):
        staged_rounds_distribution(1.1, 2, 4)
    with pytest.raises(ValueError):
        draft_outcomes([((3, 9999),)])


# --------------------------------------------------------------------------- staged drafting


@pytest.mark.parametrize("gamma2,gamma", [(1, 4), (3, 8), (2, 9), (3, 7), (4, 1), (2, 2)])
def test_staged_alpha2_one_is_deterministic(gamma2, gamma):
    r = math.ceil(gamma / (gamma2 + 1))
    assert staged_rounds_distribution(1.0, gamma2, gamma) == {r: 1.0}
    assert staged_rounds_int(1.0, gamma2, gamma) == ((r, OUTCOME_SCALE),)


def test_staged_alpha2_one_costs_one_pass_per_block():
    gamma2, cycle, verify = 3, 250, 900
    for blocks in (1, 2, 4):
        gamma = blocks * (gamma2 + 1)
        out = draft_outcomes([staged_rounds_int(1.0, gamma2, gamma)])
        assert out == (((blocks,), OUTCOME_SCALE),)
        assert round_time_ns(out, [cycle], verify, 0, False, 0) == blocks * cycle + verify


def test_staged_alpha2_zero_is_unstaged():
    assert staged_rounds_int(0.0, 3, 6) == unstaged_rounds_int(6)


@pytest.mark.parametrize("alpha2,gamma2,gamma", [(0.7, 3, 8), (0.5, 2, 5), (0.9, 4, 16), (0.3, 1, 6)])
def test_staged_distribution_sums_and_matches_enumeration(alpha2, gamma2, gamma):
    dist = staged_rounds_distribution(alpha2, gamma2, gamma)
    assert math.fsum(dist.values()) == pytest.approx(1.0, abs=1e-12)
    brute = _brute_staged(alpha2, gamma2, gamma)
    assert set(dist) == set(brute)
    for r in dist:
        assert dist[r] == pytest.approx(brute[r], rel=1e-9, abs=1e-15)
    dint = staged_rounds_int(alpha2, gamma2, gamma)
    assert sum(p for _, p in dint) == OUTCOME_SCALE
    assert [r for r, _ in dint] == sorted(r for r, _ in dint)
    assert all(p > 0 for _, p in dint)
    for r, p in dint:  # largest remainder: never off by a whole unit
        assert abs(p - dist[r] * OUTCOME_SCALE) < 1.0


def test_staged_expected_rounds_decrease_with_alpha2():
    values = [
        expected_rounds_scaled(staged_rounds_int(a2, 3, 12)) for a2 in (0.0, 0.2, 0.4, 0.6, 0.8, 0.95, 1.0)
    ]
    assert values[0] == 12 * OUTCOME_SCALE
    assert values[-1] == 3 * OUTCOME_SCALE
    assert all(a > b for a, b in itertools.pairwise(values))


def test_largest_remainder_tie_breaks_to_smaller_r():
    # exact products need no rounding
    out = draft_outcomes([((1, 5000), (2, 5000)), ((1, 5000), (2, 5000))])
    assert [p for _, p in out] == [2500] * 4
    out3 = draft_outcomes([((1, 3333), (2, 3333), (3, 3334)), ((1, 5000), (2, 5000))])
    assert sum(p for _, p in out3) == OUTCOME_SCALE
    assert [k for k, _ in out3] == sorted(k for k, _ in out3)
    # exact values 1666.5, 1666.5, 1666.5, 1666.5, 1667, 1667: the two spare units go to (1,1), (1,2)
    assert [p for _, p in out3] == [1667, 1667, 1666, 1666, 1667, 1667]


def test_draft_outcomes_shapes():
    assert draft_outcomes([]) == (((), OUTCOME_SCALE),)
    single = staged_rounds_int(0.6, 2, 6)
    assert draft_outcomes([single]) == tuple(((r,), p) for r, p in single)
    joint = draft_outcomes([single, unstaged_rounds_int(4), staged_rounds_int(0.8, 3, 8)])
    assert sum(p for _, p in joint) == OUTCOME_SCALE
    assert [k for k, _ in joint] == sorted(k for k, _ in joint)


# --------------------------------------------------------------------------- round time


def test_vanilla_unstaged_round_time():
    gammas, steps, verify, sync = [4, 2], [30, 55], 400, 12
    out = draft_outcomes([unstaged_rounds_int(g) for g in gammas])
    d = max(g * s for g, s in zip(gammas, steps))
    assert round_time_ns(out, steps, verify, sync, False, fail_q([0.7, 0.5], gammas)) == d + verify + sync
    assert round_time_ns(draft_outcomes([]), [], verify, 0, False, 0) == verify
    assert round_time_ns(draft_outcomes([]), [], verify, 0, True, 0) == verify


@pytest.mark.parametrize("steps,verify", [([30, 55], 400), ([200, 90], 300)])
def test_pipeline_sure_continue_is_max(steps, verify):
    alphas, gammas, sync = [0.9999999, 0.9999999], [4, 2], 7
    q = fail_q(alphas, gammas)
    assert q == 0
    out = draft_outcomes([unstaged_rounds_int(g) for g in gammas])
    d = max(g * s for g, s in zip(gammas, steps))
    assert round_time_ns(out, steps, verify, sync, True, q) == max(d, verify) + sync
    # a sure failure adds the shorter phase
    assert round_time_ns(out, steps, verify, sync, True, Q_SCALE) == max(d, verify) + min(d, verify) + sync


@pytest.mark.parametrize(
    "alphas,gammas,staging,cycles,verify,sync",
    [
        ([0.8], [8], [(0.7, 3)], [310], 1200, 15),
        ([0.7, 0.6], [6, 4], [(0.5, 2), None], [420, 160], 900, 20),
        ([0.6, 0.75, 0.5], [5, 8, 3], [(0.6, 2), (0.8, 3), None], [300, 250, 210], 1000, 30),
    ],
)
@pytest.mark.parametrize("pipeline", [False, True])
def test_integer_round_time_close_to_float(alphas, gammas, staging, cycles, verify, sync, pipeline):
    ints = [
        unstaged_rounds_int(g) if s is None else staged_rounds_int(s[0], s[1], g)
        for g, s in zip(gammas, staging)
    ]
    floats = [
        {g: 1.0} if s is None else staged_rounds_distribution(s[0], s[1], g) for g, s in zip(gammas, staging)
    ]
    out = draft_outcomes(ints)
    t_int = round_time_ns(out, cycles, verify, sync, pipeline, fail_q(alphas, gammas))
    t_float = round_time_expected(floats, cycles, verify, sync, pipeline, continue_probability(alphas, gammas))
    assert abs(t_int - t_float) <= len(out)


# --------------------------------------------------------------------------- Monte Carlo

MC_ROUNDS = 100_000
MC_CASES = {
    "one": ([0.8], [5], [None], [40], 500, 10),
    "two-staged-mixed": ([0.8, 0.6], [8, 3], [(0.7, 3), None], [250, 110], 700, 12),
    "three-mixed": ([0.7, 0.5, 0.85], [4, 2, 6], [None, None, None], [60, 90, 45], 280, 8),
    "three-staged-tie": ([0.6, 0.75, 0.5], [5, 8, 5], [(0.6, 2), (0.8, 3), None], [300, 250, 210], 1000, 30),
}


def _drafters(alphas, gammas, staging, cycles):
    return [SimDrafter(a, g, c, staging=st) for a, g, st, c in zip(alphas, gammas, staging, cycles, strict=True)]


def _mc_check(res):
    text = format_simulation(res)
    assert res.tokens_agree(), text
    assert res.time_agree(), text
    assert res.continue_agree(), text
    assert res.waste_agree(), text
    assert res.stream_verified and res.diverged_rounds == 0, text


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("case", sorted(MC_CASES))
def test_mc_agrees_on_token_identities(case, pipeline):
    alphas, gammas, staging, cycles, verify, sync = MC_CASES[case]
    drafters = _drafters(alphas, gammas, staging, cycles)
    res = simulate_rounds(drafters, verify, sync, pipeline, MC_ROUNDS, seed=11)
    _mc_check(res)
    assert res.closed_form_tokens == expected_tokens(alphas, gammas, pipeline=pipeline)
    p = continue_probability(alphas, gammas) if pipeline else 0.0
    assert res.closed_form_continue == p
    if pipeline and case in ("two-staged-mixed", "three-mixed"):
        # mixed draft lengths, p_cont well below SpecPIM's p_pass: the simulation tells them apart ...
        p_pass = _specpim_pass(alphas, gammas)
        assert abs(p - p_pass) > 15 * res.continue_ci95
        assert abs(res.continue_rate - p_pass) > 8 * res.continue_ci95
    if pipeline:
        # ... and the dropped bonus token from a count that keeps it
        assert abs(res.mean_tokens - expected_tokens(alphas, gammas)) > 10 * res.tokens_ci95


def test_mc_one_drafter_vanilla_time_is_exact():
    res = simulate_rounds([SimDrafter(0.8, 5, 40)], 500, 10, False, 20_000, seed=11)
    assert res.mean_time_ns == res.closed_form_time_ns == pytest.approx(5 * 40 + 500 + 10)
    assert res.continue_rate == 0.0 and res.waste_rates == (0.0,)


def test_mc_staged_pipelined_d_close_to_v():
    # E[D] = E[R] * 262 close to V = 1000, and p_cont ~ 0.51: the max/min nonlinearity matters
    dist = staged_rounds_distribution(0.65, 3, 8)
    mean_d = sum(r * p for r, p in dist.items()) * 262
    assert abs(mean_d - 1000) < 5
    res = simulate_rounds([SimDrafter(0.92, 8, 262, staging=(0.65, 3))], 1000, 5, True, MC_ROUNDS, seed=13)
    _mc_check(res)
    # plugging E[D] into the formula is measurably wrong, so the test exercises the nonlinearity
    naive = max(mean_d, 1000) + (1 - continue_probability([0.92], [8])) * min(mean_d, 1000) + 5
    assert abs(naive - res.closed_form_time_ns) > 10 * res.time_ci95


def test_mc_no_drafters():
    for pipeline in (False, True):
        res = simulate_rounds([], 300, 0, pipeline, 1000, seed=3)
        assert res.mean_tokens == 1.0 and res.mean_time_ns == 300.0 and res.stream_verified
        _mc_check(res)


@pytest.mark.parametrize("case", ["one", "three-mixed"])
def test_naive_policy_breaks_the_stream_and_the_detector_sees_it(case):
    """Keeping the bonus token and continuing anyway (SpecPIM) commits tokens that the verifier
    produced for another context: the committed stream leaves the verifier's greedy sequence."""
    alphas, gammas, staging, cycles, verify, sync = MC_CASES[case]
    drafters = _drafters(alphas, gammas, staging, cycles)
    naive = simulate_rounds(drafters, verify, sync, True, 20_000, seed=5, policy="naive")
    assert not naive.stream_verified
    assert naive.diverged_rounds > 0.05 * naive.rounds, format_simulation(naive)
    assert "NO" in format_simulation(naive)
    assert naive.closed_form_continue == pytest.approx(_specpim_pass(alphas, gammas))
    if case == "one":
        # every continued round is followed by a diverged one (ids collide with probability 1/32000)
        assert naive.diverged_rounds >= 0.95 * naive.continue_rate * naive.rounds
    rule = simulate_rounds(drafters, verify, sync, True, 20_000, seed=5)
    assert rule.stream_verified and rule.diverged_rounds == 0


def test_mc_depends_only_on_the_seed():
    args = ([SimDrafter(0.7, 4, 60, staging=(0.6, 2)), SimDrafter(0.5, 2, 90)], 280, 8, True, 5000)
    a, b = simulate_rounds(*args, seed=7), simulate_rounds(*args, seed=7)
    assert a == b
    assert simulate_rounds(*args, seed=8) != a


def test_mc_rejects_bad_arguments():
    one = [SimDrafter(0.5, 2, 10)]
    with pytest.raises(ValueError, match="policy"):
        simulate_rounds(one, 100, 0, True, 100, seed=1, policy="specpim")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rounds"):
        simulate_rounds(one, 100, 0, True, 1, seed=1)
    with pytest.raises(TypeError, match=r"drafters\[0\]"):
        simulate_rounds([(0.5, 2)], 100, 0, True, 100, seed=1)  # type: ignore[list-item]


@pytest.mark.parametrize(
    "alpha,draft_length,cycle_ns,staging,needle",
    [
        (1.0, 2, 10, None, "alpha"),
        (-0.1, 2, 10, None, "alpha"),
        ("high", 2, 10, None, "alpha must be a number"),
        (0.5, 0, 10, None, "draft lengths must be >= 1"),
        (0.5, 2.5, 10, None, "draft_length must be an integer"),
        (0.5, 2, -1, None, "cycle_ns"),
        (0.5, 2, math.inf, None, "cycle_ns"),
        (0.5, 2, 10, (0.6, 0), "gamma2 must be >= 1"),
        (0.5, 2, 10, (1.5, 2), "alpha2"),
        (0.5, 2, 10, (0.6,), "staging must be"),
    ],
)
def test_sim_drafter_rejects_bad_fields(alpha, draft_length, cycle_ns, staging, needle):
    with pytest.raises(ValueError, match=needle):
        SimDrafter(alpha, draft_length, cycle_ns, staging=staging)


def test_sim_drafter_normalizes_its_fields():
    d = SimDrafter(0.5, 2, 10, staging=(1, 3))
    assert d == SimDrafter(0.5, 2, 10.0, staging=(1.0, 3))
    assert type(d.cycle_ns) is float and d.staging == (1.0, 3) and type(d.staging[0]) is float


def test_format_simulation():
    res = simulate_rounds([SimDrafter(0.8, 3, 40), SimDrafter(0.6, 2, 30)], 300, 0, True, 1000, seed=1)
    text = format_simulation(res)
    for row in ("tokens/round", "time/round ns", "continue rate", "waste[0]", "waste[1]", "closed form",
                "committed stream = verifier's greedy sequence: yes", "policy bonus1"):
        assert row in text
