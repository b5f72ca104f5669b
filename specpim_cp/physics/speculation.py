"""Speculation semantics: expected tokens, continue probability, staged drafting and round time.

Pure functions (standard library only), shared by the evaluator and the exact CP-SAT optimizer. The
model (chains, BONUS-1, staged cycles, token trees) is written out in formulations/speculation_rounds.md.
The optimizer reproduces these *integer* conventions with integer arithmetic, so they are the contract:

* ``expected_tokens_micro(alphas, gammas, pipeline)`` = round(E * TOKENS_SCALE), E computed with
  ``math.fsum`` over the vanilla terms (and, with ``pipeline``, minus the continue terms, E - p_cont).
* ``fail_q`` = round((1 - p_cont) * Q_SCALE); 0 with no drafters (the round time, pipeline only).
* ``drafter_fail_q(.., i)`` = round((1 - P(valid_i)) * Q_SCALE) (drafter i's wasted optimistic drafting).
* ``staged_rounds_int`` / ``draft_outcomes``: probabilities as integers summing to exactly
  OUTCOME_SCALE, by largest-remainder rounding (ties: lexicographically smaller outcome first),
  zero entries dropped.
* ``round_time_ns``: per outcome D_o = max_i r_i * cycle_ns[i]; R_o = D_o + V (vanilla) or
  max(D_o, V) + ceil(q * min(D_o, V) / Q_SCALE) (pipeline); T = ceil(sum_o P_o R_o / OUTCOME_SCALE)
  + sync_ns.
* The ``*_drafts`` functions take chains or ``TreeDraft``s ([TREE]) and follow the same contract; when
  every drafter is a chain they call the chain functions, so their results are bit-identical.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from specpim_cp.problem.trees import TreeDraft

TOKENS_SCALE = 1_000_000
Q_SCALE = 1_000_000
OUTCOME_SCALE = 10_000

RoundsDistInt = tuple[tuple[int, int], ...]
Outcomes = tuple[tuple[tuple[int, ...], int], ...]
Draft = tuple[float, int] | TreeDraft  # a chain (alpha, gamma) or a token tree

__all__ = [
    "OUTCOME_SCALE",
    "Q_SCALE",
    "TOKENS_SCALE",
    "Draft",
    "DraftSpec",
    "continue_probability",
    "continue_probability_drafts",
    "draft_outcomes",
    "draft_spec",
    "drafter_fail_q",
    "drafter_fail_q_drafts",
    "drafter_valid_probability",
    "drafter_valid_probability_drafts",
    "expected_rounds_scaled",
    "expected_tokens",
    "expected_tokens_drafts",
    "expected_tokens_micro",
    "expected_tokens_micro_drafts",
    "fail_q",
    "fail_q_drafts",
    "round_time_expected",
    "round_time_ns",
    "staged_rounds_distribution",
    "staged_rounds_int",
    "unstaged_rounds_distribution",
    "unstaged_rounds_int",
]


# --------------------------------------------------------------------------- validation


def _check_gamma(gamma: int, name: str = "gamma") -> int:
    try:
        g = operator.index(gamma)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {gamma!r}") from None
    if g < 1:
        raise ValueError(f"{name} must be >= 1, got {g}")
    return g


def _check_alpha(alpha: float, name: str = "alpha", allow_one: bool = False) -> float:
    a = float(alpha)
    ok = 0.0 <= a <= 1.0 if allow_one else 0.0 <= a < 1.0
    if not ok:
        rng = "[0, 1]" if allow_one else "[0, 1)"
        raise ValueError(f"{name} must be in {rng}, got {alpha!r}")
    return a


def _check_drafters(alphas: Sequence[float], gammas: Sequence[int]) -> tuple[list[float], list[int]]:
    if len(alphas) != len(gammas):
        raise ValueError(f"alphas and gammas differ in length ({len(alphas)} vs {len(gammas)})")
    a = [_check_alpha(x, f"alphas[{i}]") for i, x in enumerate(alphas)]
    g = [_check_gamma(x, f"gammas[{i}]") for i, x in enumerate(gammas)]
    return a, g


def _check_index(i: int, n: int) -> int:
    try:
        k = operator.index(i)
    except TypeError:
        raise ValueError(f"drafter index must be an integer, got {i!r}") from None
    if not 0 <= k < n:
        raise ValueError(f"drafter index {k} out of range for {n} drafters")
    return k


# --------------------------------------------------------------------------- tokens and continue probability


def _vanilla_terms(a: Sequence[float], g: Sequence[int]) -> list[float]:
    """1 and P(a* >= j) = 1 - prod_i (1 - [j <= gamma_i] alpha_i^j), j = 1..max gamma."""
    terms = [1.0]
    for j in range(1, max(g, default=0) + 1):
        prod_none = 1.0
        for alpha, gamma in zip(a, g):
            if j <= gamma:
                prod_none *= 1.0 - alpha**j
        terms.append(1.0 - prod_none)
    return terms


def _continue_terms(a: Sequence[float], g: Sequence[int]) -> list[float]:
    """P(a* = m and some drafter with gamma_i = m holds a_i = m), one term per distinct m in gammas.

    = [1 - prod_{gamma_i = m} (1 - alpha_i^m)] * prod_{gamma_j > m} (1 - alpha_j^(m+1)): a drafter with
    a longer draft must not accept m + 1 tokens; shorter drafts cannot exceed m. Disjoint in m (a* = m).
    """
    terms = []
    for m in sorted(set(g)):
        prod_none = 1.0
        prod_longer = 1.0
        for alpha, gamma in zip(a, g):
            if gamma == m:
                prod_none *= 1.0 - alpha**m
            elif gamma > m:
                prod_longer *= 1.0 - alpha ** (m + 1)
        terms.append((1.0 - prod_none) * prod_longer)
    return terms


def expected_tokens(alphas: Sequence[float], gammas: Sequence[int], pipeline: bool = False) -> float:
    """Expected committed tokens per round.

    Vanilla: E = E[1 + a*] = 1 + sum_{j=1..max gamma} (1 - prod_i (1 - [j <= gamma_i] alpha_i^j));
    one drafter gives (1 - alpha^(gamma+1)) / (1 - alpha), no drafters give 1.
    Pipeline (BONUS-1): E - p_cont, since a continued round drops the verifier's bonus token.
    """
    a, g = _check_drafters(alphas, gammas)
    terms = _vanilla_terms(a, g)
    if pipeline:
        terms += [-t for t in _continue_terms(a, g)]
    return math.fsum(terms)


def expected_tokens_micro(alphas: Sequence[float], gammas: Sequence[int], pipeline: bool = False) -> int:
    """round(expected_tokens(alphas, gammas, pipeline) * TOKENS_SCALE)."""
    return round(expected_tokens(alphas, gammas, pipeline) * TOKENS_SCALE)


def continue_probability(alphas: Sequence[float], gammas: Sequence[int]) -> float:
    """p_cont = P(exists i: a_i = gamma_i = a*): a pipelined round continues (BONUS-1); 0 with no drafters.

    One drafter: alpha^gamma. Equal draft lengths: 1 - prod_i (1 - alpha_i^gamma) (SpecPIM's p_pass, same
    float operations). Mixed draft lengths: at most that, since a longer draft that accepts more tokens
    leaves the shorter full drafts out of the committed output.
    """
    a, g = _check_drafters(alphas, gammas)
    return math.fsum(_continue_terms(a, g))


def drafter_valid_probability(alphas: Sequence[float], gammas: Sequence[int], i: int) -> float:
    """P(valid_i) = P(a_i = gamma_i = a*) = alpha_i^gamma_i * prod_{gamma_j > gamma_i} (1 - alpha_j^(gamma_i+1)).

    The probability that drafter i's optimistic continuation becomes its next draft (pipeline).
    """
    a, g = _check_drafters(alphas, gammas)
    i = _check_index(i, len(g))
    p = a[i] ** g[i]
    for alpha, gamma in zip(a, g):
        if gamma > g[i]:
            p *= 1.0 - alpha ** (g[i] + 1)
    return p


def fail_q(alphas: Sequence[float], gammas: Sequence[int]) -> int:
    """round((1 - p_cont) * Q_SCALE); 0 when there are no drafters (nothing to idle on)."""
    if len(alphas) == 0 and len(gammas) == 0:
        return 0
    return round((1.0 - continue_probability(alphas, gammas)) * Q_SCALE)


def drafter_fail_q(alphas: Sequence[float], gammas: Sequence[int], i: int) -> int:
    """round((1 - P(valid_i)) * Q_SCALE): how often drafter i's optimistic drafting is wasted (pipeline)."""
    return round((1.0 - drafter_valid_probability(alphas, gammas, i)) * Q_SCALE)


# --------------------------------------------------------------------------- staged drafting


@lru_cache(maxsize=4096)
def _staged_exact(alpha2: float, gamma2: int, gamma: int) -> tuple[tuple[int, Fraction], ...]:
    """Exact distribution of the number of cycles R, as Fractions of the (binary) float alpha2.

    alpha2 = n/d exactly; P(a2 = k) = w_k / d^gamma2 with integer weights w_k = n^k (d-n) d^(gamma2-1-k)
    (k < gamma2) and w_gamma2 = n^gamma2, which sum to d^gamma2. After r cycles all state numerators
    share the denominator d^(gamma2 r), so the DP runs on integers.
    """
    frac = Fraction(alpha2)
    n, d = frac.numerator, frac.denominator
    weights = [n**k * (d - n) * d ** (gamma2 - 1 - k) for k in range(gamma2)] + [n**gamma2]
    step_den = d**gamma2
    # state: tokens held (< gamma) -> numerator over step_den**r
    state: dict[int, int] = {0: 1}
    out: list[tuple[int, Fraction]] = []
    r = 0
    while state:
        r += 1
        done = 0
        nxt: dict[int, int] = {}
        for held, num in state.items():
            for k, w in enumerate(weights):
                if w == 0:
                    continue
                m = held + 1 + k
                if m >= gamma:
                    done += num * w
                else:
                    nxt[m] = nxt.get(m, 0) + num * w
        if done:
            out.append((r, Fraction(done, step_den**r)))
        state = nxt
    return tuple(out)


def staged_rounds_distribution(alpha2: float, gamma2: int, gamma: int) -> dict[int, float]:
    """Exact distribution {R: P(R)} of the number of staged cycles to hold >= gamma tokens.

    alpha2 in [0, 1] (1.0 is the limiting case R = ceil(gamma / (gamma2 + 1))), gamma2 >= 1, gamma >= 1.
    Computed exactly (rational arithmetic) and converted to floats; zero-probability R are omitted.
    """
    a2 = _check_alpha(alpha2, "alpha2", allow_one=True)
    g2 = _check_gamma(gamma2, "gamma2")
    g = _check_gamma(gamma, "gamma")
    return {r: float(p) for r, p in _staged_exact(a2, g2, g)}


def _largest_remainder(items: Sequence[tuple[object, Fraction]], total: int) -> list[tuple[object, int]]:
    """Round exact values (summing to `total`) to integers summing to `total`.

    Floors first; the shortfall goes one unit each to the largest remainders, ties to the earlier item
    (callers pass items sorted by key). Zero results are dropped; order of `items` is kept.
    """
    floors = [math.floor(v) for _, v in items]
    short = total - sum(floors)
    if short < 0 or short > len(items):
        raise ValueError(f"values do not sum to {total}")
    order = sorted(range(len(items)), key=lambda i: (-(items[i][1] - floors[i]), i))
    for i in order[:short]:
        floors[i] += 1
    return [(key, f) for (key, _), f in zip(items, floors) if f != 0]


@lru_cache(maxsize=4096)
def _staged_int(alpha2: float, gamma2: int, gamma: int) -> RoundsDistInt:
    exact = _staged_exact(alpha2, gamma2, gamma)
    rounded = _largest_remainder([(r, p * OUTCOME_SCALE) for r, p in exact], OUTCOME_SCALE)
    return tuple((int(r), p) for r, p in rounded)  # type: ignore[call-overload]


def staged_rounds_int(alpha2: float, gamma2: int, gamma: int) -> RoundsDistInt:
    """Sorted ((R, P_int), ...) with P_int summing to exactly OUTCOME_SCALE (largest remainder on the
    exact distribution, ties to smaller R, zeros dropped)."""
    a2 = _check_alpha(alpha2, "alpha2", allow_one=True)
    g2 = _check_gamma(gamma2, "gamma2")
    g = _check_gamma(gamma, "gamma")
    return _staged_int(a2, g2, g)


def unstaged_rounds_distribution(gamma: int) -> dict[int, float]:
    """An unstaged drafter: gamma steps with probability 1."""
    return {_check_gamma(gamma): 1.0}


def unstaged_rounds_int(gamma: int) -> RoundsDistInt:
    """An unstaged drafter: ((gamma, OUTCOME_SCALE),)."""
    return ((_check_gamma(gamma), OUTCOME_SCALE),)


def expected_rounds_scaled(dist_int: Iterable[tuple[int, int]]) -> int:
    """sum R * P_int: the expected number of cycles (or steps) times OUTCOME_SCALE."""
    return sum(int(r) * int(p) for r, p in dist_int)


# --------------------------------------------------------------------------- joint outcomes


def _check_dist_int(dist: Iterable[tuple[int, int]], name: str) -> list[tuple[int, int]]:
    items = sorted((operator.index(r), operator.index(p)) for r, p in dist)
    if not items:
        raise ValueError(f"{name} is empty")
    if any(p < 0 for _, p in items) or sum(p for _, p in items) != OUTCOME_SCALE:
        raise ValueError(f"{name} probabilities must be >= 0 and sum to {OUTCOME_SCALE}")
    if len({r for r, _ in items}) != len(items):
        raise ValueError(f"{name} repeats an outcome")
    return [(r, p) for r, p in items if p != 0]


def draft_outcomes(per_drafter: Sequence[Iterable[tuple[int, int]]]) -> Outcomes:
    """Joint distribution of independent drafters' cycle counts.

    Each drafter is ((r, P_int), ...) summing to OUTCOME_SCALE (unstaged: ((gamma, OUTCOME_SCALE),)).
    Returns (((r_1, ..., r_n), P_int), ...) in lexicographic order of the r tuples, P_int the exact
    product prod_i P_i / OUTCOME_SCALE^(n-1) re-rounded by largest remainder (ties to the
    lexicographically smaller tuple) to sum to exactly OUTCOME_SCALE, zeros dropped.
    No drafters -> (((), OUTCOME_SCALE),).
    """
    dists = [_check_dist_int(d, f"per_drafter[{i}]") for i, d in enumerate(per_drafter)]
    if not dists:
        return (((), OUTCOME_SCALE),)
    den = OUTCOME_SCALE ** (len(dists) - 1)
    items: list[tuple[object, Fraction]] = []
    for combo in itertools.product(*dists):
        num = math.prod(p for _, p in combo)
        items.append((tuple(r for r, _ in combo), Fraction(num, den)))
    rounded = _largest_remainder(items, OUTCOME_SCALE)
    return tuple((key, p) for key, p in rounded)  # type: ignore[misc]


# --------------------------------------------------------------------------- round time


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_time_ns(
    outcomes: Outcomes,
    cycle_ns: Sequence[int],
    verify_ns: int,
    sync_ns: int,
    pipeline: bool,
    q: int,
) -> int:
    """Expected round time in integer ns (the optimizer's exact convention).

    D_o = max_i r_i * cycle_ns[i] (0 with no drafters); R_o = D_o + V (vanilla) or
    max(D_o, V) + ceil(q * min(D_o, V) / Q_SCALE) (pipeline, q = fail_q);
    T = ceil(sum_o P_o * R_o / OUTCOME_SCALE) + sync_ns. The caller passes sync_ns = 0 with no drafters.
    """
    cyc = [operator.index(c) for c in cycle_ns]
    v = operator.index(verify_ns)
    q = operator.index(q)
    if not 0 <= q <= Q_SCALE:
        raise ValueError(f"q must be in [0, {Q_SCALE}], got {q}")
    for rs, _ in outcomes:
        if len(rs) != len(cyc):
            raise ValueError(f"outcome {rs} has {len(rs)} drafters, cycle_ns has {len(cyc)}")
    psum = sum(p for _, p in outcomes)
    if psum != OUTCOME_SCALE:
        raise ValueError(f"outcome probabilities sum to {psum}, not {OUTCOME_SCALE}")
    return round_time_ns_checked_args(outcomes, cyc, v, operator.index(sync_ns), pipeline, q)


def round_time_ns_checked_args(outcomes: Outcomes, cycle_ns: Sequence[int], verify_ns: int, sync_ns: int,
                               pipeline: bool, q: int) -> int:
    """`round_time_ns` without its argument checks, for callers whose arguments come from checked
    statistics (the heuristic's inner loop): the same integer sum, one definition."""
    total = 0
    v = verify_ns
    if pipeline:
        for rs, p in outcomes:
            d = max(map(operator.mul, rs, cycle_ns), default=0)
            total += p * (max(d, v) + -(-(q * min(d, v)) // Q_SCALE))
    else:
        for rs, p in outcomes:
            total += p * (max(map(operator.mul, rs, cycle_ns), default=0) + v)
    return -(-total // OUTCOME_SCALE) + sync_ns


def _as_pairs(dist: Mapping[int, float] | Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    pairs = list(dist.items()) if isinstance(dist, Mapping) else [(r, p) for r, p in dist]
    return sorted((int(r), float(p)) for r, p in pairs)


def round_time_expected(
    per_drafter_dists_float: Sequence[Mapping[int, float] | Iterable[tuple[int, float]]],
    cycle_ns: Sequence[float],
    verify_ns: float,
    sync_ns: float,
    pipeline: bool,
    p_continue: float,
) -> float:
    """E[T] in floating point from the exact per-drafter distributions of R (no integer rounding).

    vanilla: E[D] + V + sync; pipeline: E[max(D, V)] + (1 - p_continue) E[min(D, V)] + sync,
    with D = max_i R_i * cycle_ns[i] (independent drafters; D independent of the acceptance events).
    The distribution of D comes from the product of per-drafter CDFs.
    """
    dists = [_as_pairs(d) for d in per_drafter_dists_float]
    if len(dists) != len(cycle_ns):
        raise ValueError(f"{len(dists)} distributions but {len(cycle_ns)} cycle times")
    v = float(verify_ns)
    if dists:
        scaled = [[(r * float(c), p) for r, p in dist] for dist, c in zip(dists, cycle_ns)]
        values = sorted({x for dist in scaled for x, _ in dist})
        pmf: list[tuple[float, float]] = []
        prev_cdf = 0.0
        for x in values:
            cdf = math.prod(math.fsum(p for y, p in dist if y <= x) for dist in scaled)
            pmf.append((x, cdf - prev_cdf))
            prev_cdf = cdf
    else:
        pmf = [(0.0, 1.0)]
    if pipeline:
        fail = 1.0 - float(p_continue)
        body = math.fsum(p * (max(x, v) + fail * min(x, v)) for x, p in pmf)
    else:
        body = math.fsum(p * x for x, p in pmf) + v
    return body + float(sync_ns)


# --------------------------------------------------------------------------- token trees [TREE]


@dataclass(frozen=True)
class DraftSpec:
    """What the round formulas need of one drafter (chain or tree)."""

    masses: tuple[float, ...]  # W(d) = P(A >= d), d = 1..depth (a chain: alpha ** d)
    rank1: float  # rho = P(the rank-1 path, the optimistic context, fully accepted) = p_1 ** depth
    chain: tuple[float, int] | None  # (alpha, gamma) when the drafter is a chain, else None

    @property
    def depth(self) -> int:
        return len(self.masses)


def draft_spec(draft: Draft, name: str = "draft") -> DraftSpec:
    """Validate one drafter and reduce it to its depth masses and rank-1 mass.

    A chain is (alpha, gamma) (alpha in [0, 1), gamma >= 1); a `TreeDraft` of width 1 at every depth
    is the chain (p_1, depth).
    """
    if isinstance(draft, TreeDraft):
        if not draft.is_chain:
            return DraftSpec(draft.masses, draft.rank1_mass, None)
        alpha, gamma = draft.p[0], draft.depth
    else:
        try:
            alpha_raw, gamma_raw = draft
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a chain (alpha, gamma) or a TreeDraft, got {draft!r}") from None
        alpha = _check_alpha(alpha_raw, f"{name} alpha")
        gamma = _check_gamma(gamma_raw, f"{name} gamma")
    return DraftSpec(tuple(alpha**j for j in range(1, gamma + 1)), alpha**gamma, (alpha, gamma))


def _draft_specs(drafts: Sequence[Draft]) -> list[DraftSpec]:
    return [draft_spec(d, f"drafts[{i}]") for i, d in enumerate(drafts)]


def _as_chains(specs: Sequence[DraftSpec]) -> tuple[list[float], list[int]] | None:
    """(alphas, gammas) when every drafter is a chain, else None (the tree formulas apply)."""
    if any(s.chain is None for s in specs):
        return None
    return [s.chain[0] for s in specs], [s.chain[1] for s in specs]  # type: ignore[index]


def _vanilla_terms_specs(specs: Sequence[DraftSpec]) -> list[float]:
    """1 and P(A* >= d) = 1 - prod_i (1 - W_i(d)), d = 1..max depth (W_i(d) = 0 beyond D_i)."""
    terms = [1.0]
    for d in range(1, max((s.depth for s in specs), default=0) + 1):
        prod_none = 1.0
        for s in specs:
            if d <= s.depth:
                prod_none *= 1.0 - s.masses[d - 1]
        terms.append(1.0 - prod_none)
    return terms


def _continue_terms_specs(specs: Sequence[DraftSpec]) -> list[float]:
    """P(A* = m and a drafter of depth m has its rank-1 path accepted), one term per distinct depth m.

    = [1 - prod_{D_i = m} (1 - rho_i)] * prod_{D_j > m} (1 - W_j(m + 1)); shallower trees cannot exceed m.
    """
    terms = []
    for m in sorted({s.depth for s in specs}):
        prod_none = 1.0
        prod_deeper = 1.0
        for s in specs:
            if s.depth == m:
                prod_none *= 1.0 - s.rank1
            elif s.depth > m:
                prod_deeper *= 1.0 - s.masses[m]
        terms.append((1.0 - prod_none) * prod_deeper)
    return terms


def expected_tokens_drafts(drafts: Sequence[Draft], pipeline: bool = False) -> float:
    """Expected committed tokens per round of chains and trees ([TREE]).

    E = 1 + sum_d (1 - prod_i (1 - W_i(d))); pipeline (BONUS-1 with rank-1 continuation): E - p_cont.
    All chains: `expected_tokens` (bit-identical).
    """
    specs = _draft_specs(drafts)
    chains = _as_chains(specs)
    if chains is not None:
        return expected_tokens(*chains, pipeline)
    terms = _vanilla_terms_specs(specs)
    if pipeline:
        terms += [-t for t in _continue_terms_specs(specs)]
    return math.fsum(terms)


def expected_tokens_micro_drafts(drafts: Sequence[Draft], pipeline: bool = False) -> int:
    """round(expected_tokens_drafts(drafts, pipeline) * TOKENS_SCALE)."""
    return round(expected_tokens_drafts(drafts, pipeline) * TOKENS_SCALE)


def continue_probability_drafts(drafts: Sequence[Draft]) -> float:
    """p_cont of chains and trees: some drafter's rank-1 path is the whole accepted prefix ([TREE]).

    All chains: `continue_probability` (bit-identical).
    """
    specs = _draft_specs(drafts)
    chains = _as_chains(specs)
    if chains is not None:
        return continue_probability(*chains)
    return math.fsum(_continue_terms_specs(specs))


def drafter_valid_probability_drafts(drafts: Sequence[Draft], i: int) -> float:
    """P(valid_i) = rho_i * prod_{D_j > D_i} (1 - W_j(D_i + 1)): drafter i's continuation is kept.

    All chains: `drafter_valid_probability` (bit-identical).
    """
    specs = _draft_specs(drafts)
    i = _check_index(i, len(specs))
    chains = _as_chains(specs)
    if chains is not None:
        return drafter_valid_probability(*chains, i)
    me = specs[i]
    p = me.rank1
    for s in specs:
        if s.depth > me.depth:
            p *= 1.0 - s.masses[me.depth]
    return p


def fail_q_drafts(drafts: Sequence[Draft]) -> int:
    """round((1 - p_cont) * Q_SCALE) of chains and trees; 0 when there are no drafters."""
    if len(drafts) == 0:
        return 0
    return round((1.0 - continue_probability_drafts(drafts)) * Q_SCALE)


def drafter_fail_q_drafts(drafts: Sequence[Draft], i: int) -> int:
    """round((1 - P(valid_i)) * Q_SCALE) of chains and trees (drafter i's wasted optimistic drafting)."""
    return round((1.0 - drafter_valid_probability_drafts(drafts, i)) * Q_SCALE)
