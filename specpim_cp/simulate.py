"""Monte Carlo check of the speculation semantics in `specpim_cp.speculation`.

Simulates rounds token by token: every drafted position is a Bernoulli(alpha) draw, a drafter's
accepted prefix is its number of leading successes, and a staged drafter's cycles are drawn the same
way (gamma2 Bernoulli(alpha2) draws per cycle) until it holds >= gamma tokens. The simulation is
vectorised over rounds (in fixed-size chunks, so results depend only on the seed).

Agreement with the closed forms is judged in units of the 95% confidence half-width
(1.96 standard errors): |simulated - closed form| <= z * ci95 with z = 3.0 by default, i.e. about
5.9 standard errors -- generous enough that a correct model never fails on a fixed seed, tight enough
to catch a wrong formula at the sample sizes used in the tests. A tiny relative epsilon covers
quantities with zero variance (e.g. the time of a vanilla unstaged round).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specpim_cp.speculation import (
    expected_tokens,
    pass_probability,
    round_time_expected,
    staged_rounds_distribution,
    unstaged_rounds_distribution,
)

_CHUNK = 65_536
_REL_EPS = 1e-9

__all__ = ["SimulationResult", "format_simulation", "simulate_rounds"]


@dataclass(frozen=True)
class SimulationResult:
    rounds: int
    seed: int
    mean_tokens: float
    tokens_ci95: float
    mean_time_ns: float
    time_ci95: float
    closed_form_tokens: float
    closed_form_time_ns: float

    @staticmethod
    def _agree(mean: float, closed: float, ci95: float, z: float) -> bool:
        tol = z * max(ci95, 1e-9) + _REL_EPS * max(1.0, abs(closed))
        return abs(mean - closed) <= tol

    def tokens_agree(self, z: float = 3.0) -> bool:
        """|mean_tokens - closed_form_tokens| <= z 95%-half-widths (z=3: ~5.9 standard errors)."""
        return self._agree(self.mean_tokens, self.closed_form_tokens, self.tokens_ci95, z)

    def time_agree(self, z: float = 3.0) -> bool:
        """|mean_time_ns - closed_form_time_ns| <= z 95%-half-widths (z=3: ~5.9 standard errors)."""
        return self._agree(self.mean_time_ns, self.closed_form_time_ns, self.time_ci95, z)


def _leading_successes(draws: np.ndarray) -> np.ndarray:
    """Number of leading True values along the last axis."""
    return np.cumprod(draws, axis=-1, dtype=np.int64).sum(axis=-1)


def simulate_rounds(
    alphas: Sequence[float],
    gammas: Sequence[int],
    staging: Sequence[tuple[float, int] | None],
    cycle_ns: Sequence[float],
    verify_ns: float,
    sync_ns: float,
    pipeline: bool,
    rounds: int,
    seed: int,
) -> SimulationResult:
    """Simulate `rounds` speculation rounds and compare with the closed forms.

    staging[i] is None (unstaged: cycle_ns[i] is the per-token step time, R_i = gamma_i) or
    (alpha2, gamma2) (cycle_ns[i] is the staged cycle time, R_i random). Per round:
    tokens = 1 + max_i a_i; passed = any(a_i == gamma_i); D = max_i R_i * cycle_ns[i];
    time = D + V (vanilla) or max(D, V) + (0 if passed else min(D, V)) (pipeline), plus sync_ns.
    """
    n = len(alphas)
    if not (len(gammas) == len(staging) == len(cycle_ns) == n):
        raise ValueError("alphas, gammas, staging and cycle_ns must have the same length")
    if rounds < 2:
        raise ValueError(f"rounds must be >= 2, got {rounds}")
    gam = [int(g) for g in gammas]
    if any(g < 1 for g in gam):
        raise ValueError("draft lengths must be >= 1")
    for i, st in enumerate(staging):
        if st is not None and int(st[1]) < 1:
            raise ValueError(f"staging[{i}]: gamma2 must be >= 1")

    rng = np.random.default_rng(seed)
    v = float(verify_ns)
    tokens_all = np.empty(rounds, dtype=np.int64)
    time_all = np.empty(rounds, dtype=np.float64)
    start = 0
    while start < rounds:
        m = min(_CHUNK, rounds - start)
        best = np.zeros(m, dtype=np.int64)
        passed = np.zeros(m, dtype=bool)
        d = np.zeros(m, dtype=np.float64)
        for i in range(n):
            a = _leading_successes(rng.random((m, gam[i])) < float(alphas[i]))
            best = np.maximum(best, a)
            passed |= a == gam[i]
            if staging[i] is None:
                r = np.full(m, gam[i], dtype=np.int64)
            else:
                alpha2, gamma2 = float(staging[i][0]), int(staging[i][1])
                # at most gamma cycles (each gains >= 1 token); gains per cycle = 1 + leading successes
                gains = 1 + _leading_successes(rng.random((m, gam[i], gamma2)) < alpha2)
                held = np.cumsum(gains, axis=1)
                r = (held < gam[i]).sum(axis=1) + 1
            d = np.maximum(d, r * float(cycle_ns[i]))
        if pipeline:
            t = np.maximum(d, v) + np.where(passed, 0.0, np.minimum(d, v))
        else:
            t = d + v
        tokens_all[start : start + m] = 1 + best
        time_all[start : start + m] = t + float(sync_ns)
        start += m

    dists = [
        unstaged_rounds_distribution(g) if st is None else staged_rounds_distribution(st[0], st[1], g)
        for g, st in zip(gam, staging)
    ]
    p_pass = pass_probability(alphas, gam)
    closed_time = round_time_expected(dists, cycle_ns, verify_ns, sync_ns, pipeline, p_pass)
    sq = math.sqrt(rounds)
    return SimulationResult(
        rounds=rounds,
        seed=seed,
        mean_tokens=float(tokens_all.mean()),
        tokens_ci95=float(1.96 * tokens_all.std(ddof=1) / sq),
        mean_time_ns=float(time_all.mean()),
        time_ci95=float(1.96 * time_all.std(ddof=1) / sq),
        closed_form_tokens=expected_tokens(alphas, gam),
        closed_form_time_ns=closed_time,
    )


def format_simulation(result: SimulationResult) -> str:
    """A short table: simulated mean +- 95% CI vs the closed form, with agreement flags."""
    rows = [
        (
            "tokens/round",
            result.mean_tokens,
            result.tokens_ci95,
            result.closed_form_tokens,
            result.tokens_agree(),
        ),
        (
            "time/round ns",
            result.mean_time_ns,
            result.time_ci95,
            result.closed_form_time_ns,
            result.time_agree(),
        ),
    ]
    lines = [
        f"Monte Carlo: {result.rounds} rounds, seed {result.seed}",
        f"{'quantity':<14} {'simulated':>14} {'ci95 +-':>12} {'closed form':>14} {'agree':>6}",
    ]
    for name, mean, ci, closed, ok in rows:
        lines.append(f"{name:<14} {mean:>14.6f} {ci:>12.6f} {closed:>14.6f} {'yes' if ok else 'NO':>6}")
    return "\n".join(lines)
