"""Lower bounds on a mix cell's metric given some models' architectures (the constants of MIX-10/11).

Per model, architecture and token count, a pass takes at least CUT-1's bound (`SpecModel._bound_cuts`:
the critical path with every operator at its fastest placement, and the PIM area bound). The round
arithmetic (`speculation.round_time_ns`, the evaluator's energy per round) is non-decreasing in every
pass time and energy, so plugging in these bounds, with the models whose architecture is left open at
their best architecture, bounds the cell's round, and the minimum over speculation choices bounds its
latency (energy) per token. Every coefficient (CUT-1's inputs, capacities, draft2 steps, idle power, sync
latency) is read from the cell's `PriceTable` (solvers/exact/prices.py). Arrays over architectures are
numpy integers (time) or floats (energy, scaled down by a relative 1e-9 so float rounding cannot lift a
bound).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from specpim_cp.physics import speculation as spec
from specpim_cp.physics.rounds import pass_tokens, tree_pass_tokens
from specpim_cp.problem.design import ArchConfig, DrafterChoice
from specpim_cp.solvers.exact.model import SpecModel

#: Stand-in pass time (ns) and energy (nJ) of an impossible (architecture, staging) pair: above any real
#: round, small enough that the integer round arithmetic stays inside int64.
IMPOSSIBLE = 10 ** 10
#: Relative margin taken off float (energy) bounds.
FLOAT_MARGIN = 1e-9


class CellBounds:
    """One cell's bounds: separable (one model's architecture fixed) and pairwise (the verifier's and one
    drafter's), as exact round times and tokens (latency) or floats (energy per token)."""

    def __init__(self, sm: SpecModel, kind: str):
        self.sm = sm
        self.kind = kind
        self.archs: list[list[ArchConfig]] = [list(xs) for xs in sm.x]
        self.prices = sm.prices.models
        self.pt, self.pe = [], []
        for j, pm in enumerate(self.prices):
            tokens = pm.tokens  # every pass of model j over every choice (trees' depth passes too)
            t_cut, e_cut = sm._bound_cuts(j, list(tokens))
            # an architecture whose whole memory cannot hold the model's tensors (weights and this cell's KV
            # cache) runs no pass at all (the necessary condition of solve.check_capacity)
            fits = [pm.total_kib[a] <= sum(pm.capacity_kib[a]) for a in self.archs[j]]
            self.pt.append({t: np.array([t_cut[a][t] if ok else IMPOSSIBLE for a, ok in zip(self.archs[j], fits)],
                                        dtype=np.int64) for t in tokens})
            self.pe.append({t: np.array([e_cut[a][t] if ok else IMPOSSIBLE for a, ok in zip(self.archs[j], fits)],
                                        dtype=np.float64) for t in tokens})
        self.idle = [np.array([pm.idle_power_mw[a] for a in archs], dtype=np.float64)
                     for pm, archs in zip(self.prices, self.archs, strict=True)]
        self.sync = sm.prices.round_sync_ns
        self.per_choice = [self._choice_arrays(ch) for ch in sm.choices]

    def _choice_arrays(self, ch) -> tuple:
        """(verifier pass time, energy) arrays and per drafter (cycle time, energy) arrays over architectures."""
        b = self.sm.scenario.batch_size
        t0 = pass_tokens(b, ch, 0)
        cycles = []
        for i, d in enumerate(ch.drafters):
            cycles.append(self._cycle(i, d, b))
        return (self.pt[0][t0], self.pe[0][t0]), cycles

    def _cycle(self, i: int, d: DrafterChoice, b: int) -> tuple[np.ndarray, np.ndarray]:
        j = i + 1
        if d.tree is not None:
            ts = tree_pass_tokens(b, d)
            return sum(self.pt[j][t] for t in ts), sum(self.pe[j][t] for t in ts)
        t = b if d.staging is None else b * (d.staging.draft_length + 1)
        ct, ce = self.pt[j][t].copy(), self.pe[j][t].copy()
        if d.staging is not None:
            for k, a in enumerate(self.archs[j]):
                step = self.prices[j].draft2_step[(a, d.staging.draft2)]
                if step is None:  # CYC-2: this draft2 model cannot run on this architecture
                    ct[k], ce[k] = IMPOSSIBLE, IMPOSSIBLE
                    continue
                ct[k] += d.staging.draft_length * step.time_ns
                ce[k] += d.staging.draft_length * step.energy_nj
        return ct, ce

    def _round(self, k: int, fixed: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Round time (int64) and energy (float) bounds of choice k over the grid of the fixed models'
        architectures (axes in the order of `fixed`'s keys); the other models at their best."""
        (vt, ve), cycles = self.per_choice[k]
        st = self.sm.stats[k]
        axes = list(fixed)

        def spread(j: int, arr: np.ndarray) -> np.ndarray:
            if j not in fixed:
                return np.asarray(arr.min())
            shape = [1] * len(axes)
            shape[axes.index(j)] = arr.shape[0]
            return arr.reshape(shape)

        V, VE = spread(0, vt), spread(0, ve)
        C = [spread(i + 1, c[0]) for i, c in enumerate(cycles)]
        CE = [spread(i + 1, c[1]) for i, c in enumerate(cycles)]
        total = np.zeros(1, dtype=np.int64)
        for rs, p in st.outcomes:
            d = np.zeros(1, dtype=np.int64)
            for r, c in zip(rs, C, strict=True):
                d = np.maximum(d, r * c)
            if self.sm.choices[k].pipeline:
                r_o = np.maximum(d, V) + -(-(st.q * np.minimum(d, V)) // spec.Q_SCALE)
            else:
                r_o = d + V
            total = total + p * r_o
        T = -(-total // spec.OUTCOME_SCALE) + self.sync
        if self.kind == "latency":
            return T, np.zeros(1)
        E = VE + 0.0
        for i, ce in enumerate(CE):
            expected = st.rounds_scaled[i] * ce / spec.OUTCOME_SCALE
            E = E + expected * (spec.Q_SCALE + st.drafter_q[i]) / spec.Q_SCALE
        for j in range(len(self.archs)):
            E = E + spread(j, self.idle[j]) * T / 1000.0
        return T, E

    def bound(self, fixed: tuple[int, ...]) -> np.ndarray:
        """The cell metric's bound over the grid of the models in `fixed` (indices), as an object array
        of Fractions (latency, ns/token) or a float array (energy, nJ/token, margin taken)."""
        best_t = best_tok = best_e = None
        for k, st in enumerate(self.sm.stats):
            T, E = self._round(k, dict.fromkeys(fixed, 0))
            tok = st.tokens_micro
            if self.kind == "latency":
                T = np.broadcast_to(T, T.shape)
                if best_t is None:
                    best_t, best_tok = T.copy(), np.full(T.shape, tok, dtype=np.int64)
                else:
                    T, best_t, best_tok = np.broadcast_arrays(T, best_t, best_tok)
                    better = T * best_tok < best_t * tok  # exact: both sides stay below 2^63
                    best_t = np.where(better, T, best_t)
                    best_tok = np.where(better, tok, best_tok)
            else:
                v = E * spec.TOKENS_SCALE / (tok * self.sm.scenario.batch_size)
                best_e = v if best_e is None else np.minimum(best_e, v)
        if self.kind == "latency":
            out = np.empty(best_t.shape, dtype=object)
            for idx in np.ndindex(best_t.shape):
                out[idx] = Fraction(int(best_t[idx]) * spec.TOKENS_SCALE, int(best_tok[idx]))
            return out
        return best_e * (1 - FLOAT_MARGIN)


def units(value, scale: int) -> int:
    """A bound (Fraction, or float with its margin) in the model's units (ceil(value x S / 10^6); floor
    for floats, which carry their margin)."""
    if isinstance(value, Fraction):
        q = value * scale / 10 ** 6
        return -(-q.numerator // q.denominator)
    return max(0, int(float(value) * scale / 10 ** 6))


class ArchBounds:
    """Per cell, the separable bounds (per model j: an array over its architectures) and the pairwise bounds
    of (verifier, drafter i) (a matrix), computed once per mix model and objective kind."""

    def __init__(self, cells: list[SpecModel], kind: str):
        self.kind = kind
        self.cells = [CellBounds(sm, kind) for sm in cells]
        n = len(cells[0].data)
        self.separable = [[cb.bound((j,)) for j in range(n)] for cb in self.cells]
        self.pairwise = [[cb.bound((0, i)) for i in range(1, n)] for cb in self.cells]

    def tuple_bounds(self, weights: list[Fraction], own: list[Fraction] | None = None) -> np.ndarray:
        """Float lower bound on the weighted mean metric (with `own`, the cells' own optima: on the regret,
        the worst cell's bound over its own optimum) for every architecture tuple (a grid over all models),
        the largest of the separable and pairwise bounds per cell: for ranking candidates."""
        n = len(self.cells[0].archs)
        shape = tuple(len(a) for a in self.cells[0].archs)
        total = np.zeros(shape)
        for c, (w, sep, pair) in enumerate(zip(weights, self.separable, self.pairwise, strict=True)):
            cell = np.zeros(shape)
            for j in range(n):
                s = [1] * n
                s[j] = shape[j]
                cell = np.maximum(cell, np.asarray(sep[j], dtype=np.float64).reshape(s))
            for i in range(1, n):
                s = [1] * n
                s[0], s[i] = shape[0], shape[i]
                cell = np.maximum(cell, np.asarray(pair[i - 1], dtype=np.float64).reshape(s))
            total = total + float(w) * cell if own is None else np.maximum(total, cell / float(own[c]))
        return total / float(sum(weights)) if own is None else total
