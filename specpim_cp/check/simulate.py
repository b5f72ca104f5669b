"""Monte Carlo check of the speculation semantics in `specpim_cp.physics.speculation`, on token identities.

The simulator keeps what a speculative decoder keeps: the committed output stream and every drafter's
context, as token ids, round after round. The verifier's greedy token at each output position is an id
drawn once per position from a VOCAB_SIZE vocabulary (the *reference*, seeded). A drafter (`SimDrafter`)
whose context is a prefix of the reference proposes the verifier's token with probability alpha, else a
different id; once its context is wrong it proposes arbitrary ids. The verifier takes the longest
accepted prefix and commits per the policy: ``"bonus1"`` (rule BONUS-1) or ``"naive"`` (tests only,
SpecPIM's abstraction, which keeps the bonus token and a continuation drafted without it). Every committed
token is compared with the reference, so a stream that leaves the verifier's greedy sequence is counted
as diverged. Token trees ([TREE], `SimDrafter.tree`) are walked node by node against the verifier's
tokens. Round times follow the closed forms' rules, and agreement with them is judged in units of the 95%
confidence half-width (z = 3.0 by default).

formulations/speculation_rounds.md ("What the simulator checks", "How the simulator works") states the
policies, the round time, the agreement rule, the memory bound and the random streams.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

import numpy as np

from specpim_cp.physics.speculation import (
    Draft,
    continue_probability_drafts,
    drafter_valid_probability_drafts,
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
_TRIM = 1 << 16  # drop this many or more tokens from the front of the reference and the stream at a time
MIN_ROUNDS = 2
MAX_ROUNDS = 5_000_000  # 80 MB of tallies, and the token lists stay bounded (speculation_rounds.md)

Policy = Literal["bonus1", "naive"]

__all__ = ["MAX_ROUNDS", "MIN_ROUNDS", "VOCAB_SIZE", "Policy", "SimDrafter", "SimulationResult", "format_simulation",
           "simulate_rounds"]


@dataclass(frozen=True)
class SimDrafter:
    """One simulated drafter: a chain (alpha, draft_length) or a token tree, its staging, its drafting time.

    staging None: unstaged, cycle_ns is the per-token step time and a drafting phase takes draft_length
    steps; staging (alpha2, gamma2): staged, cycle_ns is the staged cycle time and the cycle count is
    random. tree ([TREE]): the drafter drafts that top-ranked tree; alpha must be its p[0], draft_length
    its depth, staging None, and cycle_ns is its whole drafting time per round.
    """

    alpha: float
    draft_length: int
    cycle_ns: float
    staging: tuple[float, int] | None = None  # (alpha2, gamma2)
    tree: TreeDraft | None = None

    def __post_init__(self) -> None:
        alpha = _number(self.alpha, "alpha")
        if not 0.0 <= alpha < 1.0:  # also rejects NaN
            raise ValueError(f"alpha must be in [0, 1), got {self.alpha!r}")
        try:
            gamma = operator.index(self.draft_length)
        except TypeError:
            raise ValueError(f"draft_length must be an integer, got {self.draft_length!r}") from None
        if gamma < 1:
            raise ValueError(f"draft lengths must be >= 1, got {gamma}")
        cycle_ns = _number(self.cycle_ns, "cycle_ns")
        if not 0.0 <= cycle_ns < math.inf:
            raise ValueError(f"cycle_ns must be a finite time >= 0, got {self.cycle_ns!r}")
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "draft_length", gamma)
        object.__setattr__(self, "cycle_ns", cycle_ns)
        if self.staging is not None:
            object.__setattr__(self, "staging", _check_staging(self.staging))
        if self.tree is None:
            return
        if not isinstance(self.tree, TreeDraft):
            raise TypeError(f"tree must be a TreeDraft (p, widths) or None, got {self.tree!r}")
        if self.staging is not None:
            raise ValueError("staging: staged drafting applies to chains only, this drafter is a tree")
        if alpha != self.tree.p[0] or gamma != self.tree.depth:
            raise ValueError(
                f"a tree drafter's alpha must be its p[0] ({self.tree.p[0]}) and its draft_length its depth "
                f"({self.tree.depth}), got {self.alpha} and {self.draft_length}"
            )


def _check_staging(staging: tuple[float, int]) -> tuple[float, int]:
    """(alpha2, gamma2) with alpha2 in [0, 1] and gamma2 >= 1, as (float, int)."""
    try:
        alpha2_raw, gamma2_raw = staging
        alpha2, gamma2 = float(alpha2_raw), operator.index(gamma2_raw)
    except (TypeError, ValueError):
        raise ValueError(f"staging must be (alpha2, gamma2) or None, got {staging!r}") from None
    if not 0.0 <= alpha2 <= 1.0:
        raise ValueError(f"staging: alpha2 must be in [0, 1], got {alpha2_raw!r}")
    if gamma2 < 1:
        raise ValueError(f"staging: gamma2 must be >= 1, got {gamma2}")
    return alpha2, gamma2


def _number(value: float, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


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


def _specpim_pass_probability(drafters: Sequence[SimDrafter]) -> float:
    """Superseded (SpecPIM): P(some drafter's whole draft accepted) = 1 - prod_i (1 - alpha_i^gamma_i).

    The closed form the naive policy claims; kept here only to report it next to that policy.
    """
    return 1.0 - math.prod(1.0 - d.alpha**d.draft_length for d in drafters)


def simulate_rounds(
    drafters: Sequence[SimDrafter],
    verify_ns: float,
    sync_ns: float,
    pipeline: bool,
    rounds: int,
    seed: int,
    policy: Policy = "bonus1",
) -> SimulationResult:
    """Simulate `rounds` speculation rounds on token identities and compare with the closed forms.

    The closed forms are `expected_tokens_drafts(.., pipeline)`, `round_time_expected(.., p_cont)`,
    p_cont and 1 - P(valid_i) for "bonus1"; SpecPIM's (vanilla E, p_pass, 1 - alpha_i^gamma_i) for
    "naive" (pipeline only). Token trees need policy "bonus1"; a run with a tree walks every drafter
    as a tree (a chain as the tree p = (alpha,), widths = (1,) * draft_length).
    """
    drafters = tuple(drafters)
    for i, d in enumerate(drafters):
        if not isinstance(d, SimDrafter):
            raise TypeError(f"drafters[{i}] must be a SimDrafter, got {d!r}")
    if not MIN_ROUNDS <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds must be from {MIN_ROUNDS} to {MAX_ROUNDS:,}, got {rounds}")
    if policy not in ("bonus1", "naive"):
        raise ValueError(f"policy must be 'bonus1' or 'naive', got {policy!r}")
    trees = any(d.tree is not None for d in drafters)
    if trees and policy != "bonus1":
        raise ValueError("token trees are simulated under policy 'bonus1' only")

    tape = _Tape(seed, drafters)
    drafting: _Drafting = (
        _TreeDrafting(drafters, tape, pipeline) if trees
        else _ChainDrafting(drafters, tape, pipeline, bonus1=policy == "bonus1")
    )
    tally = _play(drafting, tape, len(drafters), rounds, pipeline, verify_ns, sync_ns)
    closed = _closed_forms(drafters, verify_ns, sync_ns, pipeline, policy)
    return _result(rounds, seed, policy, tally, closed)


# --------------------------------------------------------------------------- the round loop


class _Tape:
    """The run's token state (reference, committed output, arbitrary-id pool) and random streams."""

    def __init__(self, seed: int, drafters: Sequence[SimDrafter]) -> None:
        ref_seq, pool_seq, misc_seq, *drafter_seqs = np.random.SeedSequence(seed).spawn(3 + len(drafters))
        self.ref_rng = np.random.default_rng(ref_seq)
        self.misc_rng = np.random.default_rng(misc_seq)  # the naive policy's off-reference verifications
        dmax = max((d.draft_length for d in drafters), default=0)
        pool_rng = np.random.default_rng(pool_seq)
        self.pool: list[int] = pool_rng.integers(0, VOCAB_SIZE, _POOL + dmax + 1).tolist()
        self.drafter_rngs = [np.random.default_rng(s) for s in drafter_seqs]
        self.ref: list[int] = []  # the verifier's greedy token at each output position
        self.stream: list[int] = []  # the committed output
        self.extend_ref()

    def extend_ref(self) -> None:
        self.ref.extend(self.ref_rng.integers(0, VOCAB_SIZE, _REF_BLOCK).tolist())


class _Verdict(NamedTuple):
    """One round's verification: its drafting time D_r, the tokens it commits, which drafters continue."""

    drafting_ns: float
    commit: list[int]
    valid: list[bool]


class _Drafting(Protocol):
    """What the round loop asks of the drafters (chains, or trees): they supply the round's draws."""

    def ref_needed(self, committed: int) -> int:
        """Reference ids needed before the round that starts after `committed` tokens."""
        ...

    def verify(self, committed: int) -> _Verdict:
        """Verify this round's drafts against the reference after `committed` tokens."""
        ...

    def advance(self) -> None:
        """Prepare the next round's drafts, once the verdict's tokens are committed."""
        ...

    def oldest(self, committed: int) -> int:
        """The first position of the reference and the stream that a drafter can still read."""
        ...

    def shift(self, k: int) -> None:
        """The first k positions were dropped: positions held move down by k."""
        ...


@dataclass
class _Tally:
    """Per-round statistics of the counted rounds (the warm-up round excluded), 16 bytes a round."""

    wasted: list[int]  # per drafter: rounds whose optimistic drafting was wasted (pipeline)
    tokens: np.ndarray  # int64, one per round: tokens committed
    times: np.ndarray  # float64, one per round: round time in ns
    continued_rounds: int = 0
    diverged: int = 0


def _trim(drafting: _Drafting, tape: _Tape) -> None:
    """Drop the tokens no drafter can read any more (a block of _TRIM or more at a time), so memory does
    not grow with the rounds. Positions are relative to the first kept token; the results do not change."""
    k = drafting.oldest(len(tape.stream))
    if k >= _TRIM:
        del tape.ref[:k]
        del tape.stream[:k]
        drafting.shift(k)


def _play(
    drafting: _Drafting, tape: _Tape, n: int, rounds: int, pipeline: bool, verify_ns: float, sync_ns: float
) -> _Tally:
    """The round loop, shared by chains and trees: verify, commit (checked against the reference), count.

    Round 0 is the warm-up; T_r = max(D_r, V) after a continued round (pipeline), else D_r + V; plus sync.
    """
    v, sync = float(verify_ns), float(sync_ns)
    ref, stream = tape.ref, tape.stream
    tally = _Tally([0] * n, np.zeros(rounds, dtype=np.int64), np.zeros(rounds, dtype=np.float64))
    prev_continued = False
    for rnd in range(rounds + 1):
        if len(stream) >= _TRIM:
            _trim(drafting, tape)
        c = len(stream)
        while drafting.ref_needed(c) > len(ref):
            tape.extend_ref()
        d, commit, valid = drafting.verify(c)
        continued = any(valid)
        if commit != ref[c : c + len(commit)]:
            tally.diverged += 1
            ref[c : c + len(commit)] = commit  # re-anchor on what was emitted
        stream.extend(commit)
        drafting.advance()
        if rnd:
            tally.tokens[rnd - 1] = len(commit)
            if pipeline:
                tally.times[rnd - 1] = (max(d, v) if prev_continued else d + v) + sync
                tally.continued_rounds += continued
                for i in range(n):
                    tally.wasted[i] += not valid[i]
            else:
                tally.times[rnd - 1] = d + v + sync
        prev_continued = continued
    return tally


# --------------------------------------------------------------------------- chains


class _ChainDrafting:
    """Chain drafters under either policy. Each keeps its own context, which the naive policy can lead
    off the reference; its drafting phases (`_phases`) supply its draws."""

    def __init__(self, drafters: Sequence[SimDrafter], tape: _Tape, pipeline: bool, bonus1: bool) -> None:
        self.tape, self.pipeline, self.bonus1 = tape, pipeline, bonus1
        self.gam = [d.draft_length for d in drafters]
        self.cyc_ns = [d.cycle_ns for d in drafters]
        self.take = [
            _phases(rng, d.alpha, d.draft_length, d.staging).__next__
            for d, rng in zip(drafters, tape.drafter_rngs, strict=True)
        ]
        n = len(drafters)
        # reference ids needed beyond a context: a draft, its continuation, one more
        self.margin = 2 * max(self.gam, default=0) + 2
        # drafter i's context is stream[:base[i]] + tail[i], of length ctx[i]; ok[i]: it is a prefix of
        # the reference. draft[i] was drafted after it in dtime[i] ns.
        self.base, self.ctx, self.ok = [0] * n, [0] * n, [True] * n
        self.tail: list[list[int]] = [[] for _ in range(n)]
        self.draft: list[list[int]] = []
        self.dtime: list[float] = []
        for i in range(n):
            ph = self.take[i]()
            self.draft.append(self._draft_from(0, True, ph, self.gam[i]))
            self.dtime.append(ph[3] * self.cyc_ns[i])
        # this round's optimistic continuations (drafted when the whole draft matched) and verdict
        self.cont: list[list[int]] = [[] for _ in range(n)]
        self.cont_time = [0.0] * n
        self.valid = [False] * n

    def _draft_from(self, p: int, ok: bool, phase: tuple[int, int, int, int], g: int) -> list[int]:
        """g ids drafted after a context of length p (ok: the context is a prefix of the reference)."""
        ref, pool = self.tape.ref, self.tape.pool
        lead, shift, off, _ = phase
        if not ok:
            return pool[off : off + g]
        if lead >= g:
            return ref[p : p + g]
        return ref[p : p + lead] + [(ref[p + lead] + shift) % VOCAB_SIZE] + pool[off : off + g - lead - 1]

    def ref_needed(self, committed: int) -> int:
        return max(committed, max(self.ctx, default=0)) + self.margin  # a context may lead the stream (naive)

    def oldest(self, committed: int) -> int:
        return min(committed, min(self.base, default=committed))  # a context reads the stream from its base

    def shift(self, k: int) -> None:
        self.base = [b - k for b in self.base]
        self.ctx = [p - k for p in self.ctx]

    def verify(self, committed: int) -> _Verdict:
        """Each draft against the verifier's tokens after the draft's own context; meanwhile (pipeline)
        every drafter drafts on from the end of its own draft."""
        c, ref, gam, n = committed, self.tape.ref, self.gam, len(self.gam)
        d = max(self.dtime, default=0.0)
        a_star, ver = 0, ref[c : c + 1]
        acc = [0] * n
        for i in range(n):
            p, g, dr = self.ctx[i], gam[i], self.draft[i]
            if self.ok[i]:
                vi = ref[p : p + g + 1]
            else:
                off = int(self.tape.misc_rng.integers(0, _POOL))
                vi = self.tape.pool[off : off + g + 1]
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
            if self.pipeline and a == g:
                ph = self.take[i]()
                self.cont[i] = self._draft_from(p + g, self.ok[i], ph, g)
                self.cont_time[i] = ph[3] * self.cyc_ns[i]
            else:
                self.cont[i] = []

        accepted = ver[:a_star]
        valid = [False] * n
        if self.pipeline and self.bonus1:
            # BONUS-1: a drafter's optimistic context must be the committed output, id by id
            end, stream = c + a_star, self.tape.stream
            for i in range(n):
                if self.ctx[i] + gam[i] == end:
                    valid[i] = stream[self.base[i] :] + accepted == self.tail[i] + self.draft[i]
        elif self.pipeline:
            valid = [acc[i] == gam[i] for i in range(n)]
        commit = accepted if any(valid) and self.bonus1 else ver[: a_star + 1]
        self.valid = valid
        return _Verdict(d, commit, valid)

    def advance(self) -> None:
        """Next drafts: a valid continuation, or a resync to the committed output."""
        stream, ref = self.tape.stream, self.tape.ref
        length = len(stream)
        for i in range(len(self.gam)):
            if self.valid[i]:
                if not self.cont[i]:
                    raise AssertionError(f"drafter {i}: kept a continuation that was not drafted")
                b, t = self.base[i], self.tail[i] + self.draft[i]
                if b + len(t) == length and stream[b:] == t:  # it is the committed output
                    self.base[i], self.ctx[i], self.tail[i], self.ok[i] = length, length, [], True
                else:
                    self.ctx[i], self.tail[i], self.ok[i] = b + len(t), t, t == ref[b : b + len(t)]
                self.draft[i], self.dtime[i] = self.cont[i], self.cont_time[i]
            else:
                ph = self.take[i]()
                self.base[i], self.ctx[i], self.tail[i], self.ok[i] = length, length, [], True
                self.draft[i] = self._draft_from(length, True, ph, self.gam[i])
                self.dtime[i] = ph[3] * self.cyc_ns[i]


# --------------------------------------------------------------------------- trees


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


class _TreeDrafting:
    """Every drafter walked as a tree (a chain: p = (alpha,)), policy "bonus1". Every draft verified in a
    round was drafted from the committed output (a kept continuation was drafted from a context found
    equal to it), so it is walked against the reference there; the walkers supply the draws."""

    def __init__(self, drafters: Sequence[SimDrafter], tape: _Tape, pipeline: bool) -> None:
        self.tape, self.pipeline = tape, pipeline
        self.gam = [d.draft_length for d in drafters]
        self.cyc_ns = [d.cycle_ns for d in drafters]
        self.walkers = [
            _TreeWalker((d.alpha,), (1,) * d.draft_length) if d.tree is None
            else _TreeWalker(d.tree.p, d.tree.widths)
            for d in drafters
        ]
        self.take = [
            self._draws(d, w, rng).__next__
            for d, w, rng in zip(drafters, self.walkers, tape.drafter_rngs, strict=True)
        ]
        self.dmax = max(self.gam, default=0)

    @staticmethod
    def _draws(
        drafter: SimDrafter, walker: _TreeWalker, rng: np.random.Generator
    ) -> Iterator[tuple[tuple[int, int, int, int], int]]:
        """The drafter's verifications, each with the cycle count of the drafting before it."""
        while True:
            walk = walker.block(rng, _BLOCK)
            if drafter.tree is not None:
                cycles = [1] * _BLOCK
            else:
                cycles = _cycles(rng, drafter.draft_length, drafter.staging, _BLOCK).tolist()
            yield from zip(walk, cycles)

    def ref_needed(self, committed: int) -> int:
        return committed + self.dmax + 2

    def oldest(self, committed: int) -> int:
        return committed  # every draft starts at the committed output

    def shift(self, k: int) -> None:
        """Nothing held: the walkers read the reference after the committed output only."""

    def verify(self, committed: int) -> _Verdict:
        c, ref = committed, self.tape.ref
        d = 0.0
        outcome = []
        for i in range(len(self.gam)):
            draw, cycles = self.take[i]()
            d = max(d, cycles * self.cyc_ns[i])
            outcome.append(draw)
        a_star = max((o[0] for o in outcome), default=0)
        accepted = ref[c : c + a_star]  # the deepest accepted path's ids: the verifier's tokens
        # BONUS-1: drafter i continues iff its optimistic context (committed output + rank-1 path)
        # is the committed output after this round, compared id by id
        valid = [
            self.pipeline
            and self.gam[i] == a_star
            and self.walkers[i].rank1_ids(ref, c, o[1], o[2], o[3], self.tape.pool) == accepted
            for i, o in enumerate(outcome)
        ]
        commit = accepted if any(valid) else [*accepted, ref[c + len(accepted)]]
        return _Verdict(d, commit, valid)

    def advance(self) -> None:
        """Nothing is kept between rounds: every drafter drafts afresh from the committed output."""


# --------------------------------------------------------------------------- closed forms and results


class _ClosedForms(NamedTuple):
    tokens: float
    time_ns: float
    p_cont: float
    waste: tuple[float, ...]


def _closed_forms(
    drafters: Sequence[SimDrafter], verify_ns: float, sync_ns: float, pipeline: bool, policy: Policy
) -> _ClosedForms:
    """The closed forms of the simulated policy: BONUS-1's (chains and trees), or SpecPIM's ("naive")."""
    n = len(drafters)
    bonus1 = policy == "bonus1"
    drafts: list[Draft] = [(d.alpha, d.draft_length) if d.tree is None else d.tree for d in drafters]
    if pipeline and bonus1:
        p_cont = continue_probability_drafts(drafts)
        waste = tuple(1.0 - drafter_valid_probability_drafts(drafts, i) for i in range(n))
    elif pipeline:
        p_cont = _specpim_pass_probability(drafters)
        waste = tuple(1.0 - d.alpha**d.draft_length for d in drafters)
    else:
        p_cont, waste = 0.0, (0.0,) * n
    dists = [
        {1: 1.0} if d.tree is not None  # a tree drafts in one cycle of cycle_ns
        else unstaged_rounds_distribution(d.draft_length) if d.staging is None
        else staged_rounds_distribution(d.staging[0], d.staging[1], d.draft_length)
        for d in drafters
    ]
    time_ns = round_time_expected(dists, [d.cycle_ns for d in drafters], verify_ns, sync_ns, pipeline, p_cont)
    return _ClosedForms(expected_tokens_drafts(drafts, pipeline and bonus1), time_ns, p_cont, waste)


def _result(rounds: int, seed: int, policy: str, tally: _Tally, closed: _ClosedForms) -> SimulationResult:
    tok = tally.tokens.astype(np.float64)
    tim = tally.times
    sq = math.sqrt(rounds)

    def rate(count: int) -> tuple[float, float]:
        r = count / rounds
        return r, 1.96 * math.sqrt(r * (1.0 - r) / (rounds - 1))

    cont_rate, cont_ci = rate(tally.continued_rounds)
    waste = [rate(w) for w in tally.wasted]
    return SimulationResult(
        rounds=rounds,
        seed=seed,
        policy=policy,
        mean_tokens=float(tok.mean()),
        tokens_ci95=float(1.96 * tok.std(ddof=1) / sq),
        mean_time_ns=float(tim.mean()),
        time_ci95=float(1.96 * tim.std(ddof=1) / sq),
        closed_form_tokens=closed.tokens,
        closed_form_time_ns=closed.time_ns,
        continue_rate=cont_rate,
        continue_ci95=cont_ci,
        closed_form_continue=closed.p_cont,
        waste_rates=tuple(r for r, _ in waste),
        waste_ci95=tuple(ci for _, ci in waste),
        closed_form_waste=closed.waste,
        diverged_rounds=tally.diverged,
        stream_verified=tally.diverged == 0,
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
