"""[CUT-4] per-choice energy bounds that price the round time (formulations/placement_schedule.md).

CUT-3 bounds a choice's energy per round by the least pass energies plus the least idle power times the
least round time. Each least is taken over its own placements, so on energy objectives the bound pairs the
PIM placements' small energies with the host placements' short passes, well below the best design's
energy. CUT-4 keeps the two together. For device counts ν, the idle
power is at least Π = Σ_j P̲_j(ν_j), and the round time is at least a nonnegative combination of the pass
times (RND-3 is a mean over outcomes of max(D, V) + q min(D, V), convex in (D, V), and D = max_i r_i C_i);
so the energy is at least Σ_p [m_p e_p + κ_p t_p] over the passes p, and every pass's least e + κ t over
its placements (a piecewise-linear, concave function of κ, `PassEnvelope`) is a valid bound. The best of a
grid of combinations is kept, and the least over device counts and architectures.
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref
from collections.abc import Sequence

import numpy as np

from specpim_cp.physics import speculation as spec
from specpim_cp.physics.rounds import RoundStats, pass_tokens, tree_pass_tokens
from specpim_cp.problem.design import ArchConfig, SpecChoice
from specpim_cp.problem.operators import LAYER_OPS

#: Extra breakpoints of every envelope (nJ per ns): a pass's least value over layouts is concave between
#: breakpoints, and a dense geometric grid keeps the linear interpolation close to it.
KAPPA_GRID = tuple(float(10 ** (k / 20)) for k in range(-60, 121))
ATTENTION = ("qkv", "score", "context", "o_proj")
#: Grid of the round-time combination: the pipeline's weight between drafting and verification, and the
#: drafters' shares of the drafting maximum (`_simplex`).
PIPELINE_WEIGHTS = tuple(k / 4 for k in range(5))


def _envelope(lines: Sequence[tuple[float, float]], points: np.ndarray) -> np.ndarray:
    """min over lines (e, s) of e + κ s at every κ in `points`."""
    arr = np.asarray(lines, dtype=float).reshape(-1, 2)
    return (arr[:, 0:1] + arr[:, 1:2] * points[None, :]).min(axis=0)


def _crossings(lines: Sequence[tuple[float, float]]) -> list[float]:
    out = []
    for (e1, s1), (e2, s2) in itertools.combinations(lines, 2):
        if s1 != s2:
            k = (e2 - e1) / (s1 - s2)
            if k > 0:
                out.append(k)
    return out


def dominance_front(points) -> list[tuple]:
    """The points no other point matches or beats in every coordinate (sorted, no duplicates)."""
    front: list[tuple] = []
    for p in sorted(set(points)):  # a dominating point sorts first
        if not any(all(x <= y for x, y in zip(q[1:], p[1:])) for q in front):
            front.append(p)
    return front


#: Slopes (relative to the points' energy span over their time span) of the lines whose least points
#: `_undominated` uses as pivots.
PIVOT_SLOPES = tuple(2.0 ** k for k in range(-12, 13, 2))


def _undominated(times: np.ndarray, energies: np.ndarray) -> np.ndarray:
    """A mask that drops only points another point beats or matches in both coordinates (with a different
    value): they are never on the staircase of `_hull_lines`, and without them it is the same staircase.
    The pivots are points of the front: the least e + κ t for a few κ, the fastest and the cheapest."""
    span = (energies.max() - energies.min()) / max(times.max() - times.min(), 1.0)
    pivots = {int(np.argmin(times)), int(np.argmin(energies))}
    pivots.update(int(np.argmin(energies + (span * k) * times)) for k in PIVOT_SLOPES)
    keep = np.ones(len(times), dtype=bool)
    for i in pivots:
        t, e = times[i], energies[i]
        keep &= ~((t <= times) & (e <= energies) & ((t < times) | (e < energies)))
    return keep


def _hull_lines(times: np.ndarray, energies: np.ndarray) -> list[tuple[float, float]]:
    """The (energy, time) points on the lower-left convex hull: min over all points of e + κ t, κ >= 0, is the
    min over these."""
    if len(times) > 64:  # most points are dominated: drop them before the sort
        near = _undominated(times, energies)
        times, energies = times[near], energies[near]
    order = np.lexsort((energies, times))
    times, energies = times[order], energies[order]
    keep = np.ones(len(times), dtype=bool)  # the staircase: cheaper than every faster point
    keep[1:] = energies[1:] < np.minimum.accumulate(energies)[:-1]
    hull: list[tuple[float, float]] = []
    for t, e in zip(times[keep].tolist(), energies[keep].tolist()):
        while len(hull) >= 2:
            (e1, t1), (e2, t2) = hull[-2], hull[-1]
            if (e2 - e1) * (t - t1) >= (e - e1) * (t2 - t1):  # hull[-1] on or above the chord: never the least
                hull.pop()
            else:
                break
        hull.append((e, t))
    return hull


class PassEnvelope:
    """min over placements of (pass energy + κ × pass time bound) of one model on one architecture at one
    token count, for every κ ≥ 0, over the placements whose weight layouts fit the architecture's PIM and
    normal memory (CAP-1/2 without a draft2 model's share). The pass time bound is CUT-1's for the placement:
    a chain layer's sum of durations, a parallel-block layer's largest of its four loads
    (`choice_bounds.parallel_layer_bound`), every placement of the layer enumerated. Kept at breakpoints κ_k
    and interpolated linearly (np.interp): between two of them each layout's value is linear in κ and the
    least over layouts concave, so the interpolation is at most the true value; beyond the last one it is
    held constant, also below the true value (which is nondecreasing in κ)."""

    def __init__(self, sm, j: int, a: ArchConfig, t: int):
        d = sm.data[j]
        model = d.spec
        pm = sm.prices.models[j]
        ar = pm.allreduce[a][t]
        n_ar = 1 if model.parallel_block else 2
        self.caps = pm.capacity_kib[a]
        embs = [pm.embedding[(a, lay)][t] for lay in {p.layout for p in d.allowed(a, "lm_head")}]
        fixed = [(float(e.energy_nj), float(e.time_ns)) for e in embs]
        fixed_ar = [(float(model.layers * n_ar * ar.energy_nj), float(model.layers * n_ar * ar.time_ns))]

        def lines(op: str) -> dict[str, list[tuple[float, float]]]:
            """Per weight layout: the (energy, time) of each of the operator's placements with it."""
            out: dict[str, list[tuple[float, float]]] = {}
            for p in d.allowed(a, op):
                o = pm.op_cost[(op, a, p)][t]
                out.setdefault(p.layout, []).append((float(o.energy_nj), float(o.time_ns)))
            return out
        head = lines("lm_head")
        by_op = {op: lines(op) for op in (*LAYER_OPS, "lm_head")}
        sets = [ls for layouts in by_op.values() for ls in layouts.values()]
        alternatives = self._parallel(sm, j, a, t, head) if model.parallel_block else []
        sets += [ls for alt in alternatives for ls, _ in alt]
        ks = {0.0, *(k for ls in (*sets, fixed) for k in _crossings(ls)), *KAPPA_GRID}
        top = max(ks)
        pts = np.array(sorted(ks) + [top * 2 + 1e6])
        self.pts = pts
        if model.parallel_block:
            values = [sum(w * _envelope(ls, pts) for ls, w in alt) for alt in alternatives]
        else:
            values = self._chain(pm, a, by_op, model.layers, pts)
        if not len(values):  # no placement fits: every design on this architecture is infeasible
            self.vals = np.full(len(pts), np.inf)
            return
        self.vals = np.min(values, axis=0) + _envelope(fixed, pts) + _envelope(fixed_ar, pts)

    def _fits(self, pim_kib, normal_kib):
        return (pim_kib <= self.caps[0]) & (normal_kib <= self.caps[1])

    def _chain(self, pm, a: ArchConfig, by_op: dict, layers: int, pts: np.ndarray) -> np.ndarray:
        """Per layout vector of the operators that fits: the sum of its operators' least e + κ t at `pts`
        (summed in operator order). When every vector fits, one row: the least of those sums at each point,
        which is the sum of each operator's least there (a double sum never falls when a term grows)."""
        ops = list(by_op)
        choices = [list(by_op[op].items()) or [(None, [(0.0, 0.0)])] for op in ops]
        kib = [[pm.tensor_kib[(a, op, lay)] if lay is not None else (0, 0) for lay, _ in ch]
               for op, ch in zip(ops, choices)]
        idx = _layout_vectors(tuple(len(ch) for ch in choices))
        pim = sum(np.array([k[0] for k in kib[i]], dtype=np.int64)[idx[:, i]] for i in range(len(ops)))
        normal = sum(np.array([k[1] for k in kib[i]], dtype=np.int64)[idx[:, i]] for i in range(len(ops)))
        fits = self._fits(pim, normal)
        every = bool(fits.all())
        idx = idx[fits]
        total = np.zeros((1 if every else len(idx), len(pts)))
        for i, (op, ch) in enumerate(zip(ops, choices)):
            per_layout = np.array([_envelope(ls, pts) for _, ls in ch]) * (1 if op == "lm_head" else layers)
            total += per_layout.min(axis=0) if every else per_layout[idx[:, i]]
        return total

    def _parallel(self, sm, j: int, a: ArchConfig, t: int, head: dict) -> list[list[tuple[list, int]]]:
        """Per LM-head layout: its lines, and the (energy, time bound) hull of the layer's placements that fit
        beside it (weight: layers)."""
        d = sm.data[j]
        pm = sm.prices.models[j]
        levels = sm.prices.share_levels

        def options(op: str) -> list[tuple[int, ...]]:
            out = []
            for p in d.allowed(a, op):
                o = pm.op_cost[(op, a, p)][t]
                pk, nk = pm.tensor_kib[(a, op, p.layout)]
                if p.engine == "pim":
                    out.append((o.time_ns, 0, o.time_ns * p.share, o.energy_nj, pk, nk))
                else:
                    out.append((o.time_ns, o.time_ns, o.time_ns * levels if pm.contends[(a, p.layout)] else 0,
                                o.energy_nj, pk, nk))
            return dominance_front(out) or [(0, 0, 0, 0, 0, 0)]

        def branch(ops: tuple[str, ...]) -> np.ndarray:
            front = np.zeros((1, 6), dtype=np.int64)
            for op in ops:
                opts = np.array(options(op), dtype=np.int64)
                front = _unique_rows((front[:, None, :] + opts[None, :, :]).reshape(-1, 6))
            return front

        attn = branch(ATTENTION)
        ffn = branch(("ffn_up", "ffn_down"))
        times = np.maximum(np.maximum(attn[:, None, 0], ffn[None, :, 0]),
                           np.maximum(attn[:, None, 1] + ffn[None, :, 1],
                                      -(-(attn[:, None, 2] + ffn[None, :, 2]) // levels))).ravel()
        energies = (attn[:, None, 3] + ffn[None, :, 3]).ravel()
        pim = (attn[:, None, 4] + ffn[None, :, 4]).ravel()
        normal = (attn[:, None, 5] + ffn[None, :, 5]).ravel()
        out = []
        for lay, ls in (head.items() or [(None, [(0.0, 0.0)])]):
            pk, nk = pm.tensor_kib[(a, "lm_head", lay)] if lay is not None else (0, 0)
            ok = self._fits(pim + pk, normal + nk)
            if ok.any():
                out.append([(ls, 1), (_hull_lines(times[ok].astype(float), energies[ok].astype(float)), d.spec.layers)])
        return out

    def __call__(self, kappa: np.ndarray) -> np.ndarray:
        return np.interp(kappa, self.pts, self.vals)


def _unique_rows(rows: np.ndarray) -> np.ndarray:
    """`np.unique(rows, axis=0)` (the distinct rows in lexicographic order) by one lexsort, without the
    structured view np.unique sorts by."""
    ordered = rows[np.lexsort(rows.T[::-1])]
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return ordered[keep]


#: Per price table (by id, dropped with the table): what `TimePricedEnergy` derives from the table alone.
_TABLE_MEMOS: dict[int, dict] = {}


def table_memo(prices) -> dict:
    """A dict kept beside the price table `prices` while it lives: the pass envelopes (`PassEnvelope`) and
    fit tests depend on the table's prices and options only, so the models built from one table (a solve's,
    then its ranges' or front's) share them instead of each deriving them again."""
    key = id(prices)
    memo = _TABLE_MEMOS.get(key)
    if memo is None or memo["table"]() is not prices:
        memo = _TABLE_MEMOS[key] = {"table": weakref.ref(prices)}
        weakref.finalize(prices, _TABLE_MEMOS.pop, key, None)
    return memo


@functools.cache
def _layout_vectors(sizes: tuple[int, ...]) -> np.ndarray:
    """Every vector of choice indices (one per operator, operator i in range(sizes[i])), a row each."""
    return np.array(list(itertools.product(*[range(n) for n in sizes])), dtype=np.int64).reshape(-1, len(sizes))


@functools.cache
def _simplex(n: int) -> np.ndarray:
    """The drafters' shares of the drafting maximum: the simplex in steps of 1/8 (1/2 beyond three drafters)."""
    if n == 0:
        return np.zeros((1, 0))
    step = 8 if n <= 3 else 2
    return np.array([ks for ks in itertools.product(range(step + 1), repeat=n) if sum(ks) == step],
                    dtype=float) / step


class TimePricedEnergy:
    """[CUT-4] per (choice, device counts) bounds of the energy per round, for `SpecModel.tighten_energy`."""

    def __init__(self, sm):
        self.sm = sm
        self.b = sm.scenario.batch_size
        self.sync = sm.prices.round_sync_ns
        memo = table_memo(sm.prices)  # shared by every model of the table: a range's, a front's, a mix cell's
        self._env: dict[tuple[int, ArchConfig, int], PassEnvelope] = memo.setdefault("envelopes", {})
        self._fits: dict[tuple[int, ArchConfig], bool] = memo.setdefault("fits", {})
        self._choices: dict[tuple, tuple[list, dict]] = memo.setdefault("choices", {})
        self.least_power = [{} for _ in sm.data]  # j -> devices -> least idle mW
        self.by_devices = [{} for _ in sm.data]  # j -> devices -> architectures
        for j, d in enumerate(sm.data):
            pw = sm.prices.models[j].idle_power_mw
            for a in d.archs:
                self.by_devices[j].setdefault(a.devices, []).append(a)
                cur = self.least_power[j].get(a.devices)
                self.least_power[j][a.devices] = pw[a] if cur is None else min(cur, pw[a])
        self._candidates: dict[tuple[int, int], list[tuple[ArchConfig, int]]] = {}

    def candidates(self, j: int, n: int) -> list[tuple[ArchConfig, int]]:
        """Model j's architectures on n devices that some layout fits, each with its idle power above the
        least on n devices (mW), in `by_devices` order (memoised: `choice` asks for them per choice)."""
        key = (j, n)
        out = self._candidates.get(key)
        if out is None:
            pw = self.sm.prices.models[j].idle_power_mw
            out = self._candidates[key] = [(a, pw[a] - self.least_power[j][n]) for a in self.by_devices[j][n]
                                           if self.fits(j, a)]
        return out

    def cycle_tokens(self, j: int, c: SpecChoice) -> tuple[int, ...]:
        """Token counts of model j's passes in one cycle of choice c (the verifier's pass, a drafter's
        chain pass or its tree's depth passes)."""
        if j == 0:
            return (pass_tokens(self.b, c, 0),)
        dc = c.drafters[j - 1]
        if dc.tree is not None:
            return tuple(tree_pass_tokens(self.b, dc))
        return (pass_tokens(self.b, c, j),)

    def fits(self, j: int, a: ArchConfig) -> bool:
        """Whether some layout of model j's operators fits architecture a (CAP-1/2 without a draft2 model):
        where none does, no design uses a, and its passes need no envelope."""
        key = (j, a)
        if key not in self._fits:
            d = self.sm.data[j]
            pm = self.sm.prices.models[j]
            pim_cap, normal_cap = pm.capacity_kib[a]
            pim, normal = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
            for op in (*LAYER_OPS, "lm_head"):
                kib = np.array([pm.tensor_kib[(a, op, lay)] for lay in {p.layout for p in d.allowed(a, op)}]
                               or [(0, 0)], dtype=np.int64)
                pim = (pim[:, None] + kib[None, :, 0]).ravel()
                normal = (normal[:, None] + kib[None, :, 1]).ravel()
            self._fits[key] = bool(((pim <= pim_cap) & (normal <= normal_cap)).any())
        return self._fits[key]

    def envelope(self, j: int, a: ArchConfig, t: int) -> PassEnvelope:
        key = (j, a, t)
        if key not in self._env:
            self._env[key] = PassEnvelope(self.sm, j, a, t)
        return self._env[key]

    def _cycle(self, j: int, a: ArchConfig, c: SpecChoice, kappa: np.ndarray,
               tokens: tuple[int, ...] | None = None) -> np.ndarray | None:
        """min over placements of (cycle energy + κ cycle time) of model j in choice c (0: the verifier's
        pass), or None where the architecture cannot hold the model or run its draft2 model. `tokens`:
        `cycle_tokens(j, c)`, when the caller has it."""
        if not self.fits(j, a):
            return None
        if tokens is None:
            tokens = self.cycle_tokens(j, c)
        env = self._env
        if len(tokens) == 1:
            e = env.get((j, a, tokens[0])) or self.envelope(j, a, tokens[0])
            out = np.interp(kappa, e.pts, e.vals)
        else:  # a token tree's depth passes
            out = 0
            for t in tokens:
                e = env.get((j, a, t)) or self.envelope(j, a, t)
                out = out + np.interp(kappa, e.pts, e.vals)
        if j == 0:
            return out
        dc = c.drafters[j - 1]
        if dc.tree is None and dc.staging is not None:
            step = self.sm.prices.models[j].draft2_step[(a, dc.staging.draft2)]
            if step is None:
                return None
            out = out + dc.staging.draft_length * (float(step.energy_nj) + kappa * float(step.time_ns))
        return out

    def choice(self, c: SpecChoice, st: RoundStats, entries: Sequence[tuple[tuple[int, ...], int]]
               ) -> tuple[list[int | None], dict[tuple[int, ArchConfig], int]]:
        """For choice c and each (device counts, CUT-3 round-time bound of c on them) in `entries`: a lower
        bound of the energy per round (nJ) of every design with c on those counts (None if no architecture
        tuple runs c there); and per (model, architecture) the least over the entries of the bound of the
        designs that use it (left out where none can). Kept per price table (both read-only): another model
        of the table asking again (a range's, a front's, another objective's) gets the same answer."""
        key = (c, tuple(entries))
        hit = self._choices.get(key)
        if hit is None:
            hit = self._choices[key] = self._choice(c, st, entries)
        return hit

    def _choice(self, c: SpecChoice, st: RoundStats, entries: Sequence[tuple[tuple[int, ...], int]]
                ) -> tuple[list[int | None], dict[tuple[int, ArchConfig], int]]:
        nd = len(c.drafters)
        mean_r = np.array([sum(p * rs[i] for rs, p in st.outcomes) / spec.OUTCOME_SCALE for i in range(nd)])
        mult = [1.0] + [st.rounds_scaled[i] * (spec.Q_SCALE + st.drafter_q[i]) / (spec.OUTCOME_SCALE * spec.Q_SCALE)
                        for i in range(nd)]
        # round time >= sync + w_V V + w_D sum_i alpha_i E[r_i] C_i, over the grid of (beta, alpha); in doubles,
        # whose error the final margin covers
        qq = st.q / spec.Q_SCALE
        alphas = _simplex(nd)  # (A, nd)
        rows = []
        for beta in (PIPELINE_WEIGHTS if c.pipeline else (None,)):
            w_d, w_v = (1.0, 1.0) if beta is None else ((1 - qq) * beta + qq, (1 - qq) * (1 - beta) + qq)
            rows.append(np.hstack([np.full((len(alphas), 1), w_v), w_d * alphas * mean_r[None, :]]))
        weights = np.vstack(rows)  # (W, models)
        devices = np.array([e[0] for e in entries], dtype=np.int64).reshape(len(entries), nd + 1)
        time_lb = np.array([float(e[1]) for e in entries])
        least = [np.array([float(self.least_power[j][n]) for n in devices[:, j]]) for j in range(nd + 1)]
        total = sum(least)  # idle mW of each entry's counts, at least
        value = np.repeat((total * self.sync / 1000.0)[:, None], len(weights), axis=1)
        groups = []
        for j in range(nd + 1):
            m_j = mult[j]
            # model j's distinct weights over the grid (the verifier's: one per pipeline weight): κ and its cycle
            # are priced once per distinct weight and spread over the grid, each element as if priced there
            w_j, spread = np.unique(weights[:, j], return_inverse=True)
            kappa = (total / 1000.0)[:, None] * w_j[None, :] / m_j  # (entries, distinct weights)
            low = np.full(kappa.shape, np.inf)
            tokens = self.cycle_tokens(j, c)
            col = devices[:, j]
            for n in np.unique(col).tolist():
                rows = np.flatnonzero(col == n)
                k_rows = kappa[rows]
                archs, stack = [], []
                for a, extra in self.candidates(j, n):
                    cyc = self._cycle(j, a, c, k_rows, tokens)
                    if cyc is None:
                        continue
                    archs.append(a)
                    stack.append(m_j * cyc + (extra * time_lb[rows] / 1000.0)[:, None] if extra else m_j * cyc)
                if archs:
                    cur = np.array(stack)  # (archs, rows, distinct weights)
                    low[rows] = least = cur.min(axis=0)
                    groups.append((j, rows, archs, cur, least[:, spread], spread))
            value = value + low[:, spread]
        with np.errstate(invalid="ignore"):
            bounds = _floors(value.max(axis=1))
            per_arch = {}
            for j, rows, archs, cur, least, spread in groups:
                # the bound with model j on architecture a: the others' least plus a's own, the largest over the
                # grid. a's own is one value per distinct weight of j, and adding a value keeps the order of
                # doubles, so the largest sum over that weight's columns is a's own plus the rest's largest there
                rest = value[rows] - least
                top = _largest_per_group(rest, spread, cur.shape[2])
                for a, v in zip(archs, _floors((top[None] + cur).max(axis=2).min(axis=1))):
                    if v is not None:
                        per_arch[(j, a)] = v
        return bounds, per_arch


def _largest_per_group(xs: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Per row of `xs` and group g in range(n), the largest of the row's columns c with group[c] == g (every
    group has one)."""
    order = np.argsort(group, kind="stable")
    return np.maximum.reduceat(xs[:, order], np.searchsorted(group[order], np.arange(n)), axis=1)


def _floors(xs: np.ndarray) -> list[int | None]:
    """Per entry of `xs`, an integer below that bound computed in doubles, by a margin far above their
    error; None where the entry is not finite."""
    with np.errstate(invalid="ignore"):
        low = np.floor(xs - np.abs(xs) * 1e-9)
    return [max(int(f) - 2, 0) if math.isfinite(f) else None for f in low.tolist()]
