"""[CUT-4] the time-priced energy bounds take shortcuts that must not move a single bound: a choice's bound is
priced once per distinct weight of each model (then spread over the grid of round-time combinations), the
per-architecture bound takes the rest's largest per weight before adding the architecture's own, and a chain
pass whose every layout vector fits sums each operator's least instead of every vector's sum. Each is
compared here with the plain computation over the whole grid and every vector: the envelopes double for
double, the bounds (integers) exactly."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from specpim_cp.catalog import load_catalog
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.operators import LAYER_OPS
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact import energy_bounds as eb
from specpim_cp.solvers.exact.guards import build_model

#: Chains and a parallel block (PaLM), one to three drafters, staged drafters, token trees, the pipeline.
SCENARIOS = ["examples/palm-8b", "examples/gpt2-staged", "staged/gpt2-staged-pipeline-on",
             "examples/llama-32.5b-three-drafters", "paper-trees/opt-13b-b1", "paper/opt-13b-b2"]
#: Choices priced per scenario (spread over the choice list): the plain computation is slow.
CHOICES = 12


def built(name: str):
    sc = load_scenario(resolve_scenario_path(name))
    catalog = load_catalog()
    return build_model(sc, catalog, Evaluator(sc, catalog))


def plain_choice(priced: eb.TimePricedEnergy, c, st, entries):
    """`TimePricedEnergy.choice` over the whole (entries x combinations) grid, every architecture's cycle
    priced at every combination, without grouping."""
    nd = len(c.drafters)
    mean_r = np.array([sum(p * rs[i] for rs, p in st.outcomes) / spec.OUTCOME_SCALE for i in range(nd)])
    mult = [1.0] + [st.rounds_scaled[i] * (spec.Q_SCALE + st.drafter_q[i]) / (spec.OUTCOME_SCALE * spec.Q_SCALE)
                    for i in range(nd)]
    qq = st.q / spec.Q_SCALE
    alphas = eb._simplex(nd)
    blocks = []
    for beta in (eb.PIPELINE_WEIGHTS if c.pipeline else (None,)):
        w_d, w_v = (1.0, 1.0) if beta is None else ((1 - qq) * beta + qq, (1 - qq) * (1 - beta) + qq)
        blocks.append(np.hstack([np.full((len(alphas), 1), w_v), w_d * alphas * mean_r[None, :]]))
    weights = np.vstack(blocks)
    devices = np.array([e[0] for e in entries], dtype=np.int64).reshape(len(entries), nd + 1)
    time_lb = np.array([float(e[1]) for e in entries])
    total = sum(np.array([float(priced.least_power[j][n]) for n in devices[:, j]]) for j in range(nd + 1))
    value = np.repeat((total * priced.sync / 1000.0)[:, None], len(weights), axis=1)
    own = []  # (j, rows, architecture, its term over the grid)
    for j in range(nd + 1):
        kappa = (total / 1000.0)[:, None] * weights[None, :, j] / mult[j]
        low = np.full(value.shape, np.inf)
        for n in np.unique(devices[:, j]).tolist():
            rows = np.flatnonzero(devices[:, j] == n)
            for a, extra in priced.candidates(j, n):
                cyc = 0
                for t in priced.cycle_tokens(j, c):
                    env = priced.envelope(j, a, t)
                    cyc = cyc + np.interp(kappa[rows], env.pts, env.vals)
                if j:
                    dc = c.drafters[j - 1]
                    if dc.tree is None and dc.staging is not None:
                        step = priced.sm.prices.models[j].draft2_step[(a, dc.staging.draft2)]
                        if step is None:
                            continue
                        cyc = cyc + dc.staging.draft_length * (float(step.energy_nj)
                                                               + kappa[rows] * float(step.time_ns))
                term = mult[j] * cyc + (extra * time_lb[rows] / 1000.0)[:, None] if extra else mult[j] * cyc
                low[rows] = np.minimum(low[rows], term)
                own.append((j, rows, a, term))
        value = value + low
    lows = {}
    with np.errstate(invalid="ignore"):
        for j, rows, a, term in own:
            key = (j, tuple(rows))
            lows[key] = np.minimum(lows[key], term) if key in lows else term
        per_arch = {}
        for j, rows, a, term in own:
            v = eb._floors(((value[rows] - lows[(j, tuple(rows))]) + term).max(axis=1)[None].min(axis=1))[0]
            if v is not None:
                per_arch[(j, a)] = v if (j, a) not in per_arch else min(per_arch[(j, a)], v)
        return eb._floors(value.max(axis=1)), per_arch


@pytest.mark.parametrize("name", SCENARIOS)
def test_choice_bounds_equal_the_whole_grid(name):
    sm = built(name)
    priced = eb.TimePricedEnergy(sm)
    speculating = [k for k, c in enumerate(sm.choices) if c.speculates and sm.device_bounds[k]]
    picked = speculating[::max(1, len(speculating) // CHOICES)][:CHOICES]
    assert picked
    for k in picked:
        entries = [(devices, t_lb) for devices, t_lb, _ in sm.device_bounds[k]]
        got = priced.choice(sm.choices[k], sm.stats[k], entries)
        assert got == plain_choice(priced, sm.choices[k], sm.stats[k], entries), (name, k)


def test_chain_envelopes_equal_every_vector():
    """A chain pass's envelope: the least over every layout vector that fits of its operators' sum (in operator
    order), whether or not every vector fits (both cases occur among these architectures)."""
    seen = set()
    for name in ("examples/gpt2-staged", "paper/opt-13b-b2"):
        chain_envelopes_equal_every_vector(built(name), seen)
    assert seen == {True, False}


def chain_envelopes_equal_every_vector(sm, seen: set) -> None:
    for j, d in enumerate(sm.data):
        if d.spec.parallel_block:
            continue
        pm = sm.prices.models[j]
        for a in d.archs:
            t = min(sm.kb[j])
            env = eb.PassEnvelope(sm, j, a, t)
            ops = (*LAYER_OPS, "lm_head")
            per_op = []
            for op in ops:
                by_layout: dict = {}
                for p in d.allowed(a, op):
                    o = pm.op_cost[(op, a, p)][t]
                    by_layout.setdefault(p.layout, []).append((float(o.energy_nj), float(o.time_ns)))
                per_op.append([(lay, eb._envelope(ls, env.pts) * (1 if op == "lm_head" else d.spec.layers))
                               for lay, ls in by_layout.items()] or [(None, np.zeros(len(env.pts)))])
            best, fits_all = None, True
            for vector in itertools.product(*per_op):
                kib = [pm.tensor_kib[(a, op, lay)] if lay is not None else (0, 0) for op, (lay, _) in zip(ops, vector)]
                if sum(k[0] for k in kib) > env.caps[0] or sum(k[1] for k in kib) > env.caps[1]:
                    fits_all = False
                    continue
                total = np.zeros(len(env.pts))
                for _, values in vector:
                    total = total + values
                best = total if best is None else np.minimum(best, total)
            seen.add(fits_all)
            if best is None:
                assert np.isinf(env.vals).all()
                continue
            ar = pm.allreduce[a][t]
            embs = [pm.embedding[(a, lay)][t] for lay in {p.layout for p in d.allowed(a, "lm_head")}]
            fixed = eb._envelope([(float(e.energy_nj), float(e.time_ns)) for e in embs], env.pts)
            fixed_ar = eb._envelope([(float(d.spec.layers * 2 * ar.energy_nj), float(d.spec.layers * 2 * ar.time_ns))],
                                    env.pts)
            assert np.array_equal(env.vals, best + fixed + fixed_ar), (sm.scenario.name, j, a.label())


def test_largest_per_group():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(5, 40))
    xs[1, 3] = np.inf
    group = rng.integers(0, 7, size=40)
    group[:7] = np.arange(7)
    got = eb._largest_per_group(xs, group, 7)
    want = np.stack([xs[:, group == g].max(axis=1) for g in range(7)], axis=1)
    assert np.array_equal(got, want)


def test_tighten_energy_raises_the_same_bounds_as_one_choice_at_a_time():
    """`SpecModel.tighten_energy` prices the choices through the shared `TimePricedEnergy`: its bounds are those
    of the plain computation for every choice it prices."""
    sm = built("examples/gpt2-staged")
    limit = Fraction(10 ** 30)
    sm.tighten_energy(limit)
    priced = sm._priced
    for k, c in enumerate(sm.choices):
        if not c.speculates or k not in sm._cut4_done:
            continue
        entries = [(devices, t_lb) for devices, t_lb, e in sm.device_bounds[k]]
        assert priced.choice(c, sm.stats[k], entries) == plain_choice(priced, c, sm.stats[k], entries)
