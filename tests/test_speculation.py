"""Speculation semantics: closed-form limiting cases, integer conventions, Monte Carlo agreement."""

from __future__ import annotations

import itertools
import math

import pytest

from specpim_cp.simulate import format_simulation, simulate_rounds
from specpim_cp.speculation import (
    OUTCOME_SCALE,
    Q_SCALE,
    TOKENS_SCALE,
    draft_outcomes,
    expected_rounds_scaled,
    expected_tokens,
    expected_tokens_micro,
    fail_q,
    pass_probability,
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


def test_pass_probability_and_q():
    assert pass_probability([], []) == 0.0
    assert fail_q([], []) == 0
    p = pass_probability([0.8, 0.6], [4, 2])
    assert p == pytest.approx(1 - (1 - 0.8**4) * (1 - 0.6**2))
    assert fail_q([0.8, 0.6], [4, 2]) == round((1 - p) * Q_SCALE)
    assert fail_q([0.9999999, 0.9999999], [2, 3]) == 0


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
def test_pipeline_sure_pass_is_max(steps, verify):
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
    t_float = round_time_expected(floats, cycles, verify, sync, pipeline, pass_probability(alphas, gammas))
    assert abs(t_int - t_float) <= len(out)


# --------------------------------------------------------------------------- Monte Carlo


def _mc_check(res):
    assert res.tokens_agree(), format_simulation(res)
    assert res.time_agree(), format_simulation(res)


def test_mc_one_drafter_vanilla():
    res = simulate_rounds([0.8], [5], [None], [40], 500, 10, False, 200_000, seed=11)
    _mc_check(res)
    assert res.closed_form_time_ns == pytest.approx(5 * 40 + 500 + 10)


def test_mc_three_drafters_pipelined():
    res = simulate_rounds(
        [0.7, 0.5, 0.85], [4, 2, 6], [None, None, None], [60, 90, 45], 280, 8, True, 200_000, seed=12
    )
    _mc_check(res)


def test_mc_staged_pipelined_d_close_to_v():
    # E[D] = E[R] * 262 close to V = 1000, and p_pass ~ 0.51: the max/min nonlinearity matters
    dist = staged_rounds_distribution(0.65, 3, 8)
    mean_d = sum(r * p for r, p in dist.items()) * 262
    assert abs(mean_d - 1000) < 5
    res = simulate_rounds([0.92], [8], [(0.65, 3)], [262], 1000, 5, True, 200_000, seed=13)
    _mc_check(res)
    # plugging E[D] into the formula is measurably wrong, so the test exercises the nonlinearity
    naive = max(mean_d, 1000) + (1 - pass_probability([0.92], [8])) * min(mean_d, 1000) + 5
    assert abs(naive - res.closed_form_time_ns) > 10 * res.time_ci95


def test_mc_staged_plus_unstaged_vanilla():
    res = simulate_rounds([0.8, 0.6], [8, 3], [(0.7, 3), None], [250, 110], 700, 12, False, 200_000, seed=14)
    _mc_check(res)


def test_format_simulation():
    res = simulate_rounds([0.8], [3], [None], [40], 300, 0, True, 1000, seed=1)
    text = format_simulation(res)
    assert "tokens/round" in text and "time/round ns" in text and "closed form" in text
