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
    least over placements bounds the layer on architecture a (every placement is enumerated, with
    numpy, after dropping options that another option of the same operator beats in all three).
    Computed at every token count of the model at once and kept beside the table (`table_memo`)."""
    if mo is not prices.space.models[j]:  # options other than the table's: not kept
        return _parallel_layer_bounds(prices, mo, j, a)[t]
    memo = table_memo(prices).setdefault("parallel_layer", {})
    bounds = memo.get((j, a))
    if bounds is None:
        bounds = memo[(j, a)] = _parallel_layer_bounds(prices, mo, j, a)
    return bounds[t]


def _parallel_layer_bounds(prices: PriceTable, mo: ModelOptions, j: int, a: ArchConfig) -> dict[int, int]:
    """`parallel_layer_bound` of model j on architecture a at each token count of `ModelPrices.tokens`."""
    pm = prices.models[j]
    levels = prices.share_levels
    tokens = pm.tokens

    def front(op: str) -> tuple[np.ndarray, np.ndarray]:
        """Per token count, (duration, host time, PIM area) of `op`'s placements, the undominated ones first
        (another option that matches or beats one in all three leaves the least unchanged), and how many
        are undominated; none: CUT-1's 0."""
        placements = mo.allowed(a, op)
        if not placements:
            return np.zeros((len(tokens), 1, 3), dtype=np.int64), np.ones(len(tokens), dtype=np.int64)
        d = np.array([[by_tokens[t].time_ns for t in tokens] for by_tokens in
                      (pm.op_cost[(op, a, p)] for p in placements)], dtype=np.int64).T  # (T, P)
        on_host = np.array([p.engine == "host" for p in placements])
        per_slot = np.array([p.share if p.engine == "pim" else levels if pm.contends[(a, p.layout)] else 0
                             for p in placements], dtype=np.int64)
        opts = np.stack([d, d * on_host, d * per_slot], axis=2)  # (T, P, 3)
        n = len(placements)
        k, i = opts[:, :, None, :], opts[:, None, :, :]  # option k against option i
        earlier = np.arange(n)[:, None] < np.arange(n)[None, :]  # of equal options the first is kept
        dominated = ((k <= i).all(axis=3) & ((k < i).any(axis=3) | earlier[None])).any(axis=1)  # (T, P)
        order = np.argsort(dominated, axis=1, kind="stable")
        return np.take_along_axis(opts, order[:, :, None], axis=1), n - dominated.sum(axis=1)

    fronts = {op: front(op) for op in ("qkv", "score", "context", "o_proj", "ffn_up", "ffn_down")}

    def branch(ops: tuple[str, ...], ti: int) -> np.ndarray:
        """(branch time, host time, PIM area) of every placement of the branch from the operators' fronts."""
        out = np.zeros((1, 3), dtype=np.int64)
        for op in ops:
            opts, kept = fronts[op]
            out = (out[:, None, :] + opts[ti, :kept[ti]][None, :, :]).reshape(-1, 3)
        return out

    # max(x, y, ceil(z / S)) = ceil(max(S x, S y, z) / S), and the least ceiling is the ceiling of the least:
    # the pairs are compared without a division
    scale = np.array([levels, levels, 1], dtype=np.int64)
    bounds = {}
    for ti, t in enumerate(tokens):
        attn = branch(("qkv", "score", "context", "o_proj"), ti) * scale
        ffn = branch(("ffn_up", "ffn_down"), ti) * scale
        loads = attn[:, None, 1] + ffn[None, :, 1]  # the host's busy time
        np.maximum(loads, attn[:, None, 0], out=loads)  # the attention branch
        np.maximum(loads, ffn[None, :, 0], out=loads)  # the FFN branch
        np.maximum(loads, attn[:, None, 2] + ffn[None, :, 2], out=loads)  # the PIM slots' area
        bounds[t] = -(-int(loads.min()) // levels)
    return bounds


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
