"""Monte Carlo check of the speculation semantics in `specpim_cp.physics.speculation`, on token identities.

The simulator keeps what a speculative decoder keeps: the committed output stream and every
drafter's context, as token ids, round after round. The verifier's greedy token at each output
position is an id drawn once per position from a VOCAB_SIZE vocabulary (the *reference*, seeded).
A drafter whose context is a prefix of the reference proposes the verifier's token with probability
alpha_i, else a different id; once its context is wrong it proposes arbitrary ids. (The run of
leading matches is drawn at once, a truncated geometric: the law of per-position draws up to the
first miss, after which the context is wrong.) The verifier compares each draft with its own tokens
after the draft's context, position by position, takes the longest accepted prefix a* and commits
per the policy:

* ``"bonus1"`` (rule BONUS-1, formulations/speculation_rounds.md): vanilla rounds commit the a*
  accepted tokens and the verifier's next token. Pipelined rounds first let every drafter draft
  optimistically from the end of its own draft; the round continues iff some drafter's optimistic
  context equals the accepted output (compared id by id). Then the bonus token is dropped, a*
  tokens are committed, and those drafters keep their continuations as their next drafts; the other
  drafters resync to the committed output and redraft (their optimistic drafting is wasted).
* ``"naive"`` (tests only; SpecPIM's abstraction): the bonus token is always committed, and a drafter
  whose whole draft was accepted keeps its continuation, which was drafted for a context without the
  bonus token; the verifier checks it in that context.

Every committed token is compared with the reference at its stream position. A mismatch means the
output is not the verifier's greedy sequence (speculation was not lossless): the round is counted
as diverged and the reference is re-anchored on the committed output (the verifier's greedy
continuation of what was actually emitted), so later rounds are checked again. Only the naive
policy ever verifies a draft whose context is not a prefix of the reference; the verifier's tokens
after such a context are arbitrary ids.

Round time: D_r = max_i R_i * cycle_ns[i] for the drafts verified in round r (R_i = gamma_i steps, or
the staged drafter's random cycle count, drawn per drafting phase as the exact law in
`speculation.staged_rounds_distribution`). Vanilla: D_r + V. Pipeline: drafting of round r's drafts
overlapped verification r - 1 iff round r - 1 continued, so T_r = max(D_r, V) if it did, else
D_r + V; plus sync_ns. The continue event of r - 1 is independent of D_r, so
E[T] = E[max(D, V)] + (1 - p_cont) E[min(D, V)] + sync, the closed form. A drafter that resyncs
while the round continues is assumed ready in time, as in the closed form. One warm-up round (not
counted in the statistics) starts the chain from a synced state.

Agreement with the closed forms is judged in units of the 95% confidence half-width
(1.96 standard errors): |simulated - closed form| <= z * ci95 with z = 3.0 by default, i.e. about
5.9 standard errors -- generous enough that a correct model never fails on a fixed seed, tight enough
to catch a wrong formula at the sample sizes used in the tests. A tiny relative epsilon covers
quantities with zero variance (e.g. the time of a vanilla unstaged round); rates use the larger of
the sample and the closed-form binomial standard error. Results depend only on the seed.

Token trees ([TREE], ``trees=``): a tree drafter (p, widths) drafts the top-ranked tree of its profile
from the committed output. At each accepted node the verifier's next token is the drafter's rank-r
candidate with probability p_r (mutually exclusive), else a token none of its candidates has (drawn
per node, a block of rounds at a time); the verifier walks the tree, moving to the child that holds
its token if the tree has that rank, else stopping. The accepted ids are the verifier's tokens. A
drafter's optimistic context is its rank-1 path, whose ids are the verifier's tokens while it is
accepted, then a candidate that is not the verifier's token, then arbitrary ids (its context is
wrong). The round continues iff some drafter's rank-1 path equals the accepted output id by id
(BONUS-1). Chains in a run with trees are the trees p = (alpha,), widths = (1,)*gamma, walked the
same way (and may be staged). A tree's drafting time is one cycle, cycle_ns[i], per round. The closed
forms are the tree-aware `speculation.*_drafts` functions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specpim_cp.physics.speculation import (
    Draft,
    continue_probability,
    continue_probability_drafts,
    drafter_valid_probability,
    drafter_valid_probability_drafts,
    expected_tokens,
    expected_tokens_drafts,
    round_time_expected,
    staged_rounds_distribution,
    unstaged_rounds_distribution,
)
from specpim_cp.problem.trees import TreeDraft, top_ranked_tree

VOCAB_SIZE = 32_000
_POOL = 1 << 16  # arbitrary ids, read at random offsets
_REF_BLOCK = 1 << 16  # reference ids drawn at a time
_BLOCK = 16_384  # drafting phases drawn at a time, per drafter
_REL_EPS = 1e-9

Policy = Literal["bonus1", "naive"]

__all__ = ["VOCAB_SIZE", "Policy", "SimulationResult", "format_simulation", "simulate_rounds"]


@dataclass(frozen=True)
class SimulationResult:
    """Simulated means with 95% half-widths, and the closed forms of the simulated policy."""

    rounds: int
    seed: int
    policy: str
    mean_tokens: float
    tokens_ci95: float
    mean_time_ns: float
    time_ci95: float
    closed_form_tokens: float
    closed_form_time_ns: float
    continue_rate: float  # rounds that continued (pipeline); 0 for vanilla
    continue_ci95: float
    closed_form_continue: float
    waste_rates: tuple[float, ...]  # per drafter: rounds whose optimistic drafting was wasted
    waste_ci95: tuple[float, ...]
    closed_form_waste: tuple[float, ...]
    diverged_rounds: int  # rounds that committed a token off the verifier's greedy sequence
    stream_verified: bool  # the whole committed stream is the verifier's greedy sequence

    @staticmethod
    def _agree(mean: float, closed: float, ci95: float, z: float) -> bool:
        tol = z * max(ci95, 1e-9) + _REL_EPS * max(1.0, abs(closed))
        return abs(mean - closed) <= tol

    def _rate_agree(self, rate: float, closed: float, ci95: float, z: float) -> bool:
        null_ci = 1.96 * math.sqrt(max(closed * (1.0 - closed), 0.0) / self.rounds)
        return self._agree(rate, closed, max(ci95, null_ci), z)

    def tokens_agree(self, z: float = 3.0) -> bool:
        """|mean_tokens - closed_form_tokens| <= z 95%-half-widths (z=3: ~5.9 standard errors)."""
        return self._agree(self.mean_tokens, self.closed_form_tokens, self.tokens_ci95, z)

    def time_agree(self, z: float = 3.0) -> bool:
        """|mean_time_ns - closed_form_time_ns| <= z 95%-half-widths (z=3: ~5.9 standard errors)."""
        return self._agree(self.mean_time_ns, self.closed_form_time_ns, self.time_ci95, z)

    def continue_agree(self, z: float = 3.0) -> bool:
        """|continue_rate - closed_form_continue| <= z 95%-half-widths."""
        return self._rate_agree(self.continue_rate, self.closed_form_continue, self.continue_ci95, z)

    def waste_agree(self, z: float = 3.0) -> bool:
        """Every drafter's wasted-drafting rate within z 95%-half-widths of its closed form."""
        return all(
            self._rate_agree(r, c, ci, z)
            for r, c, ci in zip(self.waste_rates, self.closed_form_waste, self.waste_ci95)
        )


def _truncated_geometric(rng: np.random.Generator, alpha: float, cap: int, shape: tuple[int, ...]) -> np.ndarray:
    """min(K, cap) with P(K >= j) = alpha^j: leading successes of independent Bernoulli(alpha) draws."""
    if alpha <= 0.0:
        return np.zeros(shape, dtype=np.int64)
    if alpha >= 1.0:
        return np.full(shape, cap, dtype=np.int64)
    u = 1.0 - rng.random(shape)  # (0, 1]: P(u <= alpha^j) = alpha^j
    return np.minimum(np.floor(np.log(u) / math.log(alpha)), cap).astype(np.int64)


def _cycles(rng: np.random.Generator, gamma: int, staging: tuple[float, int] | None, m: int) -> np.ndarray:
    """m drafting phases' cycle counts: gamma steps (unstaged) or the staged cycle count R."""
    if staging is None:
        return np.full(m, gamma, dtype=np.int64)
    alpha2, gamma2 = staging
    # at most gamma cycles (each gains >= 1 token); a cycle gains 1 + leading successes
    held = np.cumsum(1 + _truncated_geometric(rng, alpha2, gamma2, (m, gamma)), axis=1)
    return (held < gamma).sum(axis=1) + 1


def _phases(
    rng: np.random.Generator, alpha: float, gamma: int, staging: tuple[float, int] | None
) -> Iterator[tuple[int, int, int, int]]:
    """Seeded random draws for one drafter's drafting phases, drawn a block at a time.

    Per phase: the leading matches L (capped at gamma), the shift of the first wrong id from the
    verifier's (1..VOCAB_SIZE-1), a pool offset for the arbitrary ids after it, and the cycle count R.
    """

    def block() -> list[tuple[int, int, int, int]]:
        m = _BLOCK
        lead = _truncated_geometric(rng, alpha, gamma, (m,))
        shift = rng.integers(1, VOCAB_SIZE, m)
        offset = rng.integers(0, _POOL, m)
        cycles = _cycles(rng, gamma, staging, m)
        return list(zip(lead.tolist(), shift.tolist(), offset.tolist(), cycles.tolist()))

    return itertools.chain.from_iterable(block() for _ in itertools.count())


def _specpim_pass_probability(alphas: Sequence[float], gammas: Sequence[int]) -> float:
    """Superseded (SpecPIM): P(some drafter's whole draft accepted) = 1 - prod_i (1 - alpha_i^gamma_i).

    The closed form the naive policy claims; kept here only to report it next to that policy.
    """
    return 1.0 - math.prod(1.0 - float(a) ** int(g) for a, g in zip(alphas, gammas))


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
    policy: Policy = "bonus1",
    *,
    trees: Sequence[tuple[Sequence[float], Sequence[int]] | None] | None = None,
) -> SimulationResult:
    """Simulate `rounds` speculation rounds on token identities and compare with the closed forms.

    staging[i] is None (unstaged: cycle_ns[i] is the per-token step time, R_i = gamma_i) or
    (alpha2, gamma2) (cycle_ns[i] is the staged cycle time, R_i random). The closed forms are
    `expected_tokens(.., pipeline)`, `round_time_expected(.., p_cont)`, p_cont and 1 - P(valid_i)
    for "bonus1"; SpecPIM's (vanilla E, p_pass, 1 - alpha_i^gamma_i) for "naive" (pipeline only).

    trees[i] = (p, widths) makes drafter i a token tree ([TREE]; None: the chain (alphas[i],
    gammas[i])). For a tree drafter alphas[i] must be p[0], gammas[i] the depth len(widths),
    staging[i] None, and cycle_ns[i] is its whole drafting time per round. Trees need policy
    "bonus1"; the closed forms are then the tree-aware `*_drafts` functions.
    """
    n = len(alphas)
    if not (len(gammas) == len(staging) == len(cycle_ns) == n):
        raise ValueError("alphas, gammas, staging and cycle_ns must have the same length")
    if rounds < 2:
        raise ValueError(f"rounds must be >= 2, got {rounds}")
    if policy not in ("bonus1", "naive"):
        raise ValueError(f"policy must be 'bonus1' or 'naive', got {policy!r}")
    gam = [int(g) for g in gammas]
    if any(g < 1 for g in gam):
        raise ValueError("draft lengths must be >= 1")
    for i, st in enumerate(staging):
        if st is not None and int(st[1]) < 1:
            raise ValueError(f"staging[{i}]: gamma2 must be >= 1")
    if trees is not None:
        if len(trees) != n:
            raise ValueError(f"trees has {len(trees)} entries for {n} drafters")
        if any(t is not None for t in trees):
            if policy != "bonus1":
                raise ValueError("token trees are simulated under policy 'bonus1' only")
            return _simulate_with_trees(
                alphas, gam, staging, trees, cycle_ns, verify_ns, sync_ns, pipeline, rounds, seed
            )

    ref_seq, pool_seq, misc_seq, *drafter_seqs = np.random.SeedSequence(seed).spawn(3 + n)
    ref_rng = np.random.default_rng(ref_seq)
    misc_rng = np.random.default_rng(misc_seq)
    gmax = max(gam, default=0)
    pool: list[int] = np.random.default_rng(pool_seq).integers(0, VOCAB_SIZE, _POOL + gmax + 1).tolist()
    phases = [
        _phases(np.random.default_rng(s), float(alphas[i]), gam[i],
                None if staging[i] is None else (float(staging[i][0]), int(staging[i][1])))
        for i, s in enumerate(drafter_seqs)
    ]
    take = [ph.__next__ for ph in phases]
    cyc_ns = [float(c) for c in cycle_ns]
    v, sync = float(verify_ns), float(sync_ns)
    bonus1 = policy == "bonus1"
    drafters = range(n)

    ref: list[int] = []  # the verifier's greedy token at each output position
    stream: list[int] = []  # the committed output
    margin = 2 * gmax + 2  # reference ids needed beyond a context: a draft, its continuation, one more

    def draft_from(p: int, ok: bool, phase: tuple[int, int, int, int], g: int) -> list[int]:
        """g ids drafted after a context of length p (ok: the context is a prefix of the reference)."""
        lead, shift, off, _ = phase
        if not ok:
            return pool[off : off + g]
        if lead >= g:
            return ref[p : p + g]
        return ref[p : p + lead] + [(ref[p + lead] + shift) % VOCAB_SIZE] + pool[off : off + g - lead - 1]

    # drafter i's context is stream[:base[i]] + tail[i], of length ctx[i]; ok[i]: it is a prefix of
    # the reference. draft[i] was drafted after it in dtime[i] ns.
    ref.extend(ref_rng.integers(0, VOCAB_SIZE, _REF_BLOCK).tolist())
    base, ctx, ok = [0] * n, [0] * n, [True] * n
    tail: list[list[int]] = [[] for _ in drafters]
    draft: list[list[int]] = []
    dtime: list[float] = []
    for i in drafters:
        ph = take[i]()
        draft.append(draft_from(0, True, ph, gam[i]))
        dtime.append(ph[3] * cyc_ns[i])
    acc = [0] * n
    cont: list[list[int]] = [[] for _ in drafters]
    cont_time = [0.0] * n

    tokens: list[int] = []
    times: list[float] = []
    continued_rounds = 0
    wasted = [0] * n
    diverged = 0
    prev_continued = False
    for rnd in range(rounds + 1):  # round 0 is the warm-up
        c = len(stream)
        while max(c, max(ctx, default=0)) + margin > len(ref):  # a context may lead the stream (naive)
            ref.extend(ref_rng.integers(0, VOCAB_SIZE, _REF_BLOCK).tolist())
        d = max(dtime, default=0.0)

        # verification: each draft against the verifier's tokens after the draft's own context;
        # meanwhile (pipeline) every drafter drafts on from the end of its own draft
        a_star, ver = 0, ref[c : c + 1]
        for i in drafters:
            p, g, dr = ctx[i], gam[i], draft[i]
            if ok[i]:
                vi = ref[p : p + g + 1]
            else:
                off = int(misc_rng.integers(0, _POOL))
                vi = pool[off : off + g + 1]
            a = 0
            for x, y in zip(dr, vi):
                if x != y:
                    break
                a += 1
            acc[i] = a
            if a > a_star or i == 0:
                a_star, ver = a, vi
            # only a draft that matched the verifier all the way can be kept (by either policy);
            # the other continuations are discarded unseen, so their ids are not drawn
            if pipeline and a == g:
                ph = take[i]()
                cont[i] = draft_from(p + g, ok[i], ph, g)
                cont_time[i] = ph[3] * cyc_ns[i]
            else:
                cont[i] = []

        # commit
        accepted = ver[:a_star]
        valid = [False] * n
        if pipeline and bonus1:
            # BONUS-1: a drafter's optimistic context must be the committed output, id by id
            end = c + a_star
            for i in drafters:
                if ctx[i] + gam[i] == end:
                    valid[i] = stream[base[i] :] + accepted == tail[i] + draft[i]
        elif pipeline:
            valid = [acc[i] == gam[i] for i in drafters]
        continued = any(valid)
        commit = accepted if continued and bonus1 else ver[: a_star + 1]
        if commit != ref[c : c + len(commit)]:
            diverged += 1
            ref[c : c + len(commit)] = commit  # re-anchor on what was emitted
        stream.extend(commit)

        # next drafts: a valid continuation, or a resync to the committed output
        length = len(stream)
        for i in drafters:
            if valid[i]:
                if not cont[i]:
                    raise AssertionError(f"drafter {i}: kept a continuation that was not drafted")
                b, t = base[i], tail[i] + draft[i]
                if b + len(t) == length and stream[b:] == t:  # it is the committed output
                    base[i], ctx[i], tail[i], ok[i] = length, length, [], True
                else:
                    ctx[i], tail[i], ok[i] = b + len(t), t, t == ref[b : b + len(t)]
                draft[i], dtime[i] = cont[i], cont_time[i]
            else:
                ph = take[i]()
                base[i], ctx[i], tail[i], ok[i] = length, length, [], True
                draft[i], dtime[i] = draft_from(length, True, ph, gam[i]), ph[3] * cyc_ns[i]

        if rnd:
            tokens.append(len(commit))
            if pipeline:
                times.append((max(d, v) if prev_continued else d + v) + sync)
                continued_rounds += continued
                for i in drafters:
                    wasted[i] += not valid[i]
            else:
                times.append(d + v + sync)
        prev_continued = continued

    dists = [
        unstaged_rounds_distribution(g) if st is None else staged_rounds_distribution(st[0], st[1], g)
        for g, st in zip(gam, staging)
    ]
    if pipeline and bonus1:
        p_cont = continue_probability(alphas, gam)
        closed_waste = tuple(1.0 - drafter_valid_probability(alphas, gam, i) for i in drafters)
    elif pipeline:
        p_cont = _specpim_pass_probability(alphas, gam)
        closed_waste = tuple(1.0 - float(alphas[i]) ** gam[i] for i in drafters)
    else:
        p_cont, closed_waste = 0.0, (0.0,) * n
    closed_tokens = expected_tokens(alphas, gam, pipeline and bonus1)
    closed_time = round_time_expected(dists, cycle_ns, verify_ns, sync_ns, pipeline, p_cont)
    return _result(rounds, seed, policy, tokens, times, continued_rounds, wasted, diverged,
                   closed_tokens, closed_time, p_cont, closed_waste)


class _TreeWalker:
    """One drafter's top-ranked tree (a chain: p = (alpha,)), walked on the verifier's tokens."""

    def __init__(self, p: tuple[float, ...], widths: tuple[int, ...]) -> None:
        nodes = top_ranked_tree(p, widths)
        # child[k, r]: the rank-r child of node k (0: the root, node j of the tree is j + 1), -1 if absent;
        # column 0 (the verifier's token is none of the candidates) is always -1
        self.child = np.full((len(nodes) + 1, len(p) + 1), -1, dtype=np.int64)
        for k, node in enumerate(nodes):
            self.child[node.parent + 1, node.rank] = k + 1
        self.depth = len(widths)
        self.cum = np.cumsum(np.asarray(p, dtype=np.float64))
        self.max_rank = len(p)

    def block(self, rng: np.random.Generator, m: int) -> list[tuple[int, int, int, int]]:
        """m verifications: (accepted depth A, accepted length L1 of the rank-1 path, id shift, pool offset).

        At every accepted node the verifier's token is the rank-r candidate with probability p_r, or
        none of them; the walk moves to that child if the tree holds it, else stops.
        """
        u = rng.random((m, self.depth))
        idx = np.searchsorted(self.cum, u, side="right")  # P(idx = r - 1) = p_r; idx = R: none
        hit = np.where(idx < self.max_rank, idx + 1, 0)
        node = np.zeros(m, dtype=np.int64)
        alive = np.ones(m, dtype=bool)
        accepted = np.zeros(m, dtype=np.int64)
        for k in range(self.depth):
            nxt = self.child[node, hit[:, k]]
            alive &= nxt >= 0
            accepted += alive
            node = np.where(alive, nxt, node)
        lead1 = np.cumprod(hit == 1, axis=1).sum(axis=1)  # the rank-1 path runs to full depth
        shift = rng.integers(1, VOCAB_SIZE, m)
        offset = rng.integers(0, _POOL, m)
        return list(zip(accepted.tolist(), lead1.tolist(), shift.tolist(), offset.tolist()))

    def rank1_ids(
        self, ref: list[int], pos: int, lead1: int, shift: int, off: int, pool: list[int]
    ) -> list[int]:
        """The ids of the rank-1 path drafted after ref[:pos]: the verifier's tokens while accepted,
        then a candidate that is not the verifier's token, then arbitrary ids (its context is wrong)."""
        d = self.depth
        if lead1 >= d:
            return ref[pos : pos + d]
        miss = (ref[pos + lead1] + shift) % VOCAB_SIZE
        return [*ref[pos : pos + lead1], miss, *pool[off : off + d - lead1 - 1]]


def _simulate_with_trees(
    alphas: Sequence[float],
    gam: list[int],
    staging: Sequence[tuple[float, int] | None],
    trees: Sequence[tuple[Sequence[float], Sequence[int]] | None],
    cycle_ns: Sequence[float],
    verify_ns: float,
    sync_ns: float,
    pipeline: bool,
    rounds: int,
    seed: int,
) -> SimulationResult:
    """`simulate_rounds` with token trees (policy "bonus1"): every drafter is walked as a tree."""
    n = len(gam)
    drafts: list[Draft] = []
    walkers: list[_TreeWalker] = []
    for i in range(n):
        tr = trees[i]
        if tr is None:
            drafts.append((float(alphas[i]), gam[i]))
            walkers.append(_TreeWalker((float(alphas[i]),), (1,) * gam[i]))
            continue
        tree = TreeDraft(tuple(tr[0]), tuple(tr[1]))
        if staging[i] is not None:
            raise ValueError(f"staging[{i}]: staged drafting applies to chains only, drafter {i} is a tree")
        if float(alphas[i]) != tree.p[0] or gam[i] != tree.depth:
            raise ValueError(
                f"drafter {i} is a tree: alphas[{i}] must be its p[0] ({tree.p[0]}) and gammas[{i}] "
                f"its depth ({tree.depth}), got {alphas[i]} and {gam[i]}"
            )
        drafts.append(tree)
        walkers.append(_TreeWalker(tree.p, tree.widths))

    ref_seq, pool_seq, _, *drafter_seqs = np.random.SeedSequence(seed).spawn(3 + n)  # as the chains'
    ref_rng = np.random.default_rng(ref_seq)
    dmax = max(gam, default=0)
    pool: list[int] = np.random.default_rng(pool_seq).integers(0, VOCAB_SIZE, _POOL + dmax + 1).tolist()
    rngs = [np.random.default_rng(s) for s in drafter_seqs]
    is_tree = [t is not None for t in trees]
    stage = [None if staging[i] is None else (float(staging[i][0]), int(staging[i][1])) for i in range(n)]

    def draws(i: int) -> Iterator[tuple[tuple[int, int, int, int], int]]:
        """Drafter i's verifications, each with the cycle count of the drafting before it."""
        while True:
            walk = walkers[i].block(rngs[i], _BLOCK)
            cycles = [1] * _BLOCK if is_tree[i] else _cycles(rngs[i], gam[i], stage[i], _BLOCK).tolist()
            yield from zip(walk, cycles)

    take = [draws(i).__next__ for i in range(n)]
    cyc_ns = [float(c) for c in cycle_ns]
    v, sync = float(verify_ns), float(sync_ns)
    ref: list[int] = ref_rng.integers(0, VOCAB_SIZE, _REF_BLOCK).tolist()
    stream: list[int] = []
    tokens: list[int] = []
    times: list[float] = []
    continued_rounds = 0
    wasted = [0] * n
    diverged = 0
    prev_continued = False
    for rnd in range(rounds + 1):  # round 0 is the warm-up
        c = len(stream)
        while c + dmax + 2 > len(ref):
            ref.extend(ref_rng.integers(0, VOCAB_SIZE, _REF_BLOCK).tolist())
        # every draft verified this round was drafted from the committed output (a kept continuation
        # was drafted from a context found equal to it), so it is walked against ref[c:]
        d = 0.0
        outcome = []
        for i in range(n):
            draw, cycles = take[i]()
            d = max(d, cycles * cyc_ns[i])
            outcome.append(draw)
        a_star = max((o[0] for o in outcome), default=0)
        accepted = ref[c : c + a_star]  # the deepest accepted path's ids: the verifier's tokens
        # BONUS-1: drafter i continues iff its optimistic context (committed output + rank-1 path)
        # is the committed output after this round, compared id by id
        valid = [
            pipeline
            and gam[i] == a_star
            and walkers[i].rank1_ids(ref, c, o[1], o[2], o[3], pool) == accepted
            for i, o in enumerate(outcome)
        ]
        continued = any(valid)
        commit = accepted if continued else [*accepted, ref[c + len(accepted)]]
        if commit != ref[c : c + len(commit)]:
            diverged += 1
            ref[c : c + len(commit)] = commit
        stream.extend(commit)
        if rnd:
            tokens.append(len(commit))
            if pipeline:
                times.append((max(d, v) if prev_continued else d + v) + sync)
                continued_rounds += continued
                for i in range(n):
                    wasted[i] += not valid[i]
            else:
                times.append(d + v + sync)
        prev_continued = continued

    dists = [
        {1: 1.0} if is_tree[i]
        else unstaged_rounds_distribution(gam[i]) if stage[i] is None
        else staged_rounds_distribution(stage[i][0], stage[i][1], gam[i])  # type: ignore[index]
        for i in range(n)
    ]
    if pipeline:
        p_cont = continue_probability_drafts(drafts)
        closed_waste = tuple(1.0 - drafter_valid_probability_drafts(drafts, i) for i in range(n))
    else:
        p_cont, closed_waste = 0.0, (0.0,) * n
    closed_tokens = expected_tokens_drafts(drafts, pipeline)
    closed_time = round_time_expected(dists, cycle_ns, verify_ns, sync_ns, pipeline, p_cont)
    return _result(rounds, seed, "bonus1", tokens, times, continued_rounds, wasted, diverged,
                   closed_tokens, closed_time, p_cont, closed_waste)


def _result(
    rounds: int,
    seed: int,
    policy: str,
    tokens: list[int],
    times: list[float],
    continued_rounds: int,
    wasted: list[int],
    diverged: int,
    closed_tokens: float,
    closed_time: float,
    p_cont: float,
    closed_waste: tuple[float, ...],
) -> SimulationResult:
    tok = np.asarray(tokens, dtype=np.float64)
    tim = np.asarray(times, dtype=np.float64)
    sq = math.sqrt(rounds)

    def rate(count: int) -> tuple[float, float]:
        r = count / rounds
        return r, 1.96 * math.sqrt(r * (1.0 - r) / (rounds - 1))

    cont_rate, cont_ci = rate(continued_rounds)
    waste = [rate(w) for w in wasted]
    return SimulationResult(
        rounds=rounds,
        seed=seed,
        policy=policy,
        mean_tokens=float(tok.mean()),
        tokens_ci95=float(1.96 * tok.std(ddof=1) / sq),
        mean_time_ns=float(tim.mean()),
        time_ci95=float(1.96 * tim.std(ddof=1) / sq),
        closed_form_tokens=closed_tokens,
        closed_form_time_ns=closed_time,
        continue_rate=cont_rate,
        continue_ci95=cont_ci,
        closed_form_continue=p_cont,
        waste_rates=tuple(r for r, _ in waste),
        waste_ci95=tuple(ci for _, ci in waste),
        closed_form_waste=closed_waste,
        diverged_rounds=diverged,
        stream_verified=diverged == 0,
    )


def format_simulation(result: SimulationResult) -> str:
    """A short table: simulated mean +- 95% CI vs the closed form, with agreement flags."""
    rows = [
        ("tokens/round", result.mean_tokens, result.tokens_ci95, result.closed_form_tokens,
         result.tokens_agree()),
        ("time/round ns", result.mean_time_ns, result.time_ci95, result.closed_form_time_ns,
         result.time_agree()),
        ("continue rate", result.continue_rate, result.continue_ci95, result.closed_form_continue,
         result.continue_agree()),
    ]
    for i, (r, ci, closed) in enumerate(zip(result.waste_rates, result.waste_ci95, result.closed_form_waste)):
        rows.append((f"waste[{i}]", r, ci, closed, result._rate_agree(r, closed, ci, 3.0)))
    lines = [
        f"Monte Carlo: {result.rounds} rounds, seed {result.seed}, policy {result.policy}",
        f"{'quantity':<14} {'simulated':>14} {'ci95 +-':>12} {'closed form':>14} {'agree':>6}",
    ]
    for name, mean, ci, closed, ok in rows:
        lines.append(f"{name:<14} {mean:>14.6f} {ci:>12.6f} {closed:>14.6f} {'yes' if ok else 'NO':>6}")
    verdict = "yes" if result.stream_verified else f"NO ({result.diverged_rounds} rounds diverged)"
    lines.append(f"committed stream = verifier's greedy sequence: {verdict}")
    return "\n".join(lines)
