"""The bound arithmetic behind CUT-1 and CUT-3, read from the price table (no rows: model.py adds them): a
parallel layer's least duration, the least pass bounds and draft2 steps per device count, and a speculation
choice's round bound on given device counts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from specpim_cp.physics import speculation as spec
from specpim_cp.physics.rounds import RoundStats, pass_tokens, tree_pass_tokens
from specpim_cp.problem.design import ArchConfig, SpecChoice, Staging
from specpim_cp.problem.space import ModelOptions
from specpim_cp.solvers.exact.energy_bounds import table_memo
from specpim_cp.solvers.exact.prices import PriceTable


def parallel_layer_bound(prices: PriceTable, mo: ModelOptions, j: int, a: ArchConfig, t: int) -> int:
    """A parallel-block layer (without its all-reduce) is no shorter than the least, over every
    placement of its operators, of the largest of four loads: the attention branch's durations
    (qkv, score, context, o_proj run one after another), the FFN branch's (ffn_up, ffn_down), the
    host's busy time (one operator at a time) and the PIM slots' busy area / S (a PIM operator on s
    of S slots covers s/S of its time, a host operator that contends with PIM all of it, one that does
    not none). Each load bounds every schedule of a fixed placement, so their maximum does, and the
    least over placements bounds the layer on architecture a (`parallel_layer_bounds`: every placement
    enumerated with numpy at every token count of the model at once, kept beside the table)."""
    if mo is not prices.space.models[j]:
        raise ValueError("parallel_layer_bound: the options are not the price table's")
    return parallel_layer_bounds(prices, j, a)[t]


def parallel_layer_bounds(prices: PriceTable, j: int, a: ArchConfig) -> dict[int, int]:
    """`parallel_layer_bound` of model j on architecture a at each of its token counts (`ModelPrices.tokens`),
    computed once per table (`energy_bounds.table_memo`)."""
    memo = table_memo(prices).setdefault("parallel_layer", {})
    bounds = memo.get((j, a))
    if bounds is None:
        bounds = memo[(j, a)] = _parallel_layer_bounds(prices, j, a)
    return bounds


#: At most this many (attention, FFN) placement pairs are compared at once (else token count by count).
_PAIRS_AT_ONCE = 1 << 21


def _parallel_layer_bounds(prices: PriceTable, j: int, a: ArchConfig) -> dict[int, int]:
    pm = prices.models[j]
    mo = prices.space.models[j]
    levels = prices.share_levels
    tokens = pm.tokens

    def options(op: str) -> np.ndarray:
        """(token count, placement, (duration, host time, PIM area)) of every placement of `op`, Pareto-
        minimal per token count (dominated options, which cannot lower the minimum of a nondecreasing
        function of the sums, replaced by a kept one; none: CUT-1's 0)."""
        cols = []
        for p in mo.allowed(a, op):
            d = np.array([pm.op_cost[(op, a, p)][t].time_ns for t in tokens], dtype=np.int64)
            if p.engine == "pim":
                cols.append(np.stack([d, np.zeros_like(d), d * p.share], axis=1))
            else:
                area = d * levels if pm.contends[(a, p.layout)] else np.zeros_like(d)
                cols.append(np.stack([d, d, area], axis=1))
        if not cols:
            return np.zeros((len(tokens), 1, 3), dtype=np.int64)
        opts = np.stack(cols, axis=1)  # (T, P, 3)
        k, i = opts[:, :, None, :], opts[:, None, :, :]  # option k against option i
        weakly = (k <= i).all(axis=3)
        strictly = (k < i).any(axis=3)
        n = opts.shape[1]
        earlier = np.arange(n)[:, None] < np.arange(n)[None, :]  # equal options: the first is kept
        dominated = (weakly & (strictly | earlier[None])).any(axis=1)  # (T, P)
        order = np.argsort(dominated, axis=1, kind="stable")  # kept options first
        kept = (~dominated).sum(axis=1)
        width = int(kept.max())
        take = np.where(np.arange(width)[None, :] < kept[:, None], order[:, :width], order[:, :1])
        return np.take_along_axis(opts, take[:, :, None], axis=1)

    def branch(ops: tuple[str, ...]) -> np.ndarray:
        """(token count, placement of the branch, (branch time, host time, PIM area))."""
        front = np.zeros((len(tokens), 1, 3), dtype=np.int64)
        for op in ops:
            opts = options(op)
            front = (front[:, :, None, :] + opts[:, None, :, :]).reshape(len(tokens), -1, 3)
        return front

    attn = branch(("qkv", "score", "context", "o_proj"))
    ffn = branch(("ffn_up", "ffn_down"))
    step = max(1, _PAIRS_AT_ONCE // (attn.shape[1] * ffn.shape[1]))
    least = []
    for lo in range(0, len(tokens), step):
        at, ff = attn[lo:lo + step], ffn[lo:lo + step]
        loads = np.maximum(np.maximum(at[:, :, None, 0], ff[:, None, :, 0]),
                           np.maximum(at[:, :, None, 1] + ff[:, None, :, 1],
                                      -(-(at[:, :, None, 2] + ff[:, None, :, 2]) // levels)))
        least += loads.reshape(len(at), -1).min(axis=1).tolist()
    return dict(zip(tokens, least))


def min_pass_bounds(prices: PriceTable, d: ModelOptions, j: int, tokens: set[int], pt_cut: dict, pe_cut: dict
                    ) -> dict[int, dict[int, tuple[int, int, int]]]:
    """Per device count n and token count t of model j (of `tokens`): (least CUT-1 time bound, least energy
    bound, least idle power in mW) over its architectures with n devices; `pt_cut`, `pe_cut`: CUT-1's bounds
    per architecture and token count (`SpecModel._bound_cuts`)."""
    out: dict[int, dict[int, tuple[int, int, int]]] = {}
    for a in d.archs:
        row = out.setdefault(a.own_devices, {})  # a head on the verifier's adds none
        power = prices.models[j].idle_power_mw[a]
        for t in tokens:
            cur = row.get(t)
            new = (pt_cut[a][t], pe_cut[a][t], power)
            row[t] = new if cur is None else tuple(min(x, y) for x, y in zip(cur, new))
    return out


def min_draft2_steps(prices: PriceTable, d: ModelOptions, i: int, stagings: Iterable[Staging | None]
                     ) -> dict[tuple[int, Staging], tuple[int, int]]:
    """Per device count and staging of drafter i (model `d`, its stagings, None: unstaged): the least draft2
    step (time, energy) over its architectures with that many devices (a draft2 model that cannot run is
    left out)."""
    out: dict[tuple[int, Staging], tuple[int, int]] = {}
    j = i + 1
    pm = prices.models[j]
    for st in stagings:
        if st is None:
            continue
        for a in d.archs:
            step = pm.draft2_step[(a, st.draft2)]
            if step is None:
                continue
            key = (a.devices, st)
            cur = out.get(key)
            new = (step.time_ns, step.energy_nj)
            out[key] = new if cur is None else (min(cur[0], new[0]), min(cur[1], new[1]))
    return out


def choice_device_bounds(c: SpecChoice, st: RoundStats, tuples: Sequence[tuple[int, ...]], per_n, d2_min, b: int,
                  sync: int, one_pass: Sequence[bool] = ()) -> list[tuple[int, int] | None]:
    """CUT-3's (round time, energy per round) bound of choice c on each tuple of device counts in `tuples`
    (None where a staged drafter's draft2 model runs on none of the counts' architectures). What depends on
    the choice alone (its passes' token counts, the round formula's argument checks) is read once."""
    v_tokens = pass_tokens(b, c, 0)
    drafting = []  # per drafter: (its pass tokens, its tree's depth passes or None, staging)
    for i, dc in enumerate(c.drafters):
        tree = dc.tree is not None and not (one_pass and one_pass[i])  # a one-pass head: its cycle pass
        drafting.append((pass_tokens(b, c, i + 1), tree_pass_tokens(b, dc) if tree else None,
                         dc.staging))
    out: list[tuple[int, int] | None] = []
    checked = False
    for devices in tuples:
        v_t, v_e, power = per_n[0][devices[0]][v_tokens]
        cyc_t, cyc_e = [], []
        for i, (tokens, depths, staging) in enumerate(drafting):
            row = per_n[i + 1][devices[i + 1]]
            if depths is not None:
                parts = [row[t] for t in depths]
                ct, ce = sum(p[0] for p in parts), sum(p[1] for p in parts)
            else:
                ct, ce = row[tokens][:2]
                if staging is not None:
                    step = d2_min[i].get((devices[i + 1], staging))
                    if step is None:
                        break
                    ct += staging.draft_length * step[0]
                    ce += staging.draft_length * step[1]
            cyc_t.append(ct)
            cyc_e.append(ce)
            power += row[tokens][2]
        else:
            if checked:
                t_lb = spec.round_time_ns_checked_args(st.outcomes, cyc_t, v_t, sync, c.pipeline, st.q)
            else:  # the first tuple checks the arguments; the others differ only in the cycle times
                t_lb = spec.round_time_ns(st.outcomes, cyc_t, v_t, sync, c.pipeline, st.q)
                checked = True
            e_lb = v_e + sum(st.rounds_scaled[i] * e * (spec.Q_SCALE + st.drafter_q[i])
                             // (spec.OUTCOME_SCALE * spec.Q_SCALE) for i, e in enumerate(cyc_e))
            out.append((t_lb, e_lb + power * t_lb // 1000))
            continue
        out.append(None)
    return out
