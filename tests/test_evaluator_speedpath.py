"""The evaluator's fast paths against plain reference computations (correctness only, not speed).

- `schedule.layer_schedule` (a chain's sum; a depth-first search over two branches that skips lists
  and stops at a lower bound) returns what `schedule.layer_schedule_reference` (the serial scheme over
  every list, written plainly) returns, start times included: on random layers and on the layers of
  random designs of every example.
- `Evaluator.pass_price` and `Evaluator.capacity` (cost tables) equal the plain computation from the
  cost model (each operator's cost, the reference schedule, each tensor's split), and
  `Evaluator.pass_time_energy` their time and energy, on seeded random designs of `DesignSpace`.
- The heuristic's `Pricer.price` (the round from cached pieces, no `Design`) equals the objective of
  `Evaluator.metrics` of the design on a separate evaluator, for every objective, on random candidates
  of every example and of variants with token-tree drafters (staged drafters: `gpt2-staged`).
"""

from __future__ import annotations

import math
import random
import tomllib
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from specpim_cp.catalog import default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.costs import COMPONENTS
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import draft2_tokens, drafter_cycle_tokens, tree_pass_tokens, verifier_tokens
from specpim_cp.physics.schedule import layer_schedule, layer_schedule_reference
from specpim_cp.problem.design import Design, Placement, SpecChoice
from specpim_cp.problem.operators import LAYER_OPS, PLACEABLE_OPS, layer_order
from specpim_cp.problem.scenario import Scenario, load_scenario, parse_scenario
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.heuristic.genes import SearchSpace
from specpim_cp.solvers.heuristic.pricing import INFEASIBLE, Pricer

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.toml"))
CAT = default_catalog()
DESIGNS = 150  # random designs per scenario
TREE_VARIANTS = ("opt-13b", "llama-32.5b-three-drafters")  # the first drafter also drafts token trees


@cache
def _scenario(name: str) -> Scenario:
    if name.endswith("+trees"):
        data = tomllib.loads((EXAMPLES / f"{name.removesuffix('+trees')}.toml").read_text())
        data["name"] = name.replace("+", "-")
        data["drafters"][0]["tree"] = {"max_nodes": 6, "max_children": 3}
        return parse_scenario(data, CAT)
    return load_scenario(EXAMPLES / f"{name}.toml")


SCENARIOS = NAMES + [f"{n}+trees" for n in TREE_VARIANTS]


def _random_design(ds: DesignSpace, rng: np.random.Generator) -> Design:
    """A design of the space: random architectures, placements from the allowed ones, drafter options
    (chains, staged chains, trees) and pipeline."""
    archs = [m.archs[rng.integers(len(m.archs))] for m in ds.models]
    places = []
    for m, arch in zip(ds.models, archs):
        place = {}
        for op in PLACEABLE_OPS:
            allowed = m.allowed(arch, op)
            place[op] = allowed[rng.integers(len(allowed))]
        places.append(place)
    while True:
        choice = SpecChoice(tuple(opts[rng.integers(len(opts))] for opts in ds.drafter_options),
                            bool(ds.pipeline_options[rng.integers(len(ds.pipeline_options))]))
        if ds.choice_allowed(choice):
            return ds.build(archs, places, choice)


@cache
def _designs(name: str) -> tuple[Design, ...]:
    sc = _scenario(name)
    rng = np.random.default_rng(SCENARIOS.index(name) + 7)
    ds = DesignSpace(sc, CAT)
    return tuple(_random_design(ds, rng) for _ in range(DESIGNS))


# ------------------------------------------------------------------------------------------------
# the layer schedule
# ------------------------------------------------------------------------------------------------
def _random_layer(rng: random.Random, parallel: bool, cap: int, scale: int) -> tuple:
    """A layer's nodes; one in five layers is all on the host (every pair of branches' nodes conflicts)."""
    nodes = []
    host_share = 1.0 if rng.random() < 0.2 else 0.5
    for n in LAYER_OPS + tuple(m for m in layer_order(parallel) if m.startswith("allreduce")):
        if n.startswith("allreduce"):
            nodes.append((n, rng.randint(0, scale // 2), 0, 0, 1))
        elif rng.random() < host_share:  # a host node; a third of them contend with the PIM units
            nodes.append((n, rng.randint(0 if rng.random() < 0.1 else 1, scale), 1,
                          cap if rng.random() < 0.33 else 0, 0))
        else:
            nodes.append((n, rng.randint(0 if rng.random() < 0.1 else 1, scale), 0, rng.randint(1, cap), 0))
    return tuple(nodes)


@pytest.mark.parametrize("parallel", [True, False])
def test_layer_schedule_equals_the_reference_on_random_layers(parallel):
    """Small durations make ties (several best lists) common: the start times must still be the same."""
    rng = random.Random(11 + parallel)
    for _ in range(3000):
        cap = rng.choice((1, 2, 3, 4, 8))
        nodes = _random_layer(rng, parallel, cap, rng.choice((3, 6, 1000)))
        got, want = layer_schedule(parallel, nodes, cap), layer_schedule_reference(parallel, nodes, cap)
        assert got == want and list(got[1]) == list(want[1]), (nodes, cap)


@pytest.mark.parametrize("name", NAMES)
def test_layer_schedule_equals_the_reference_on_designs(name):
    sc = _scenario(name)
    ev = Evaluator(sc, CAT)
    batch = sc.batch_size
    for design in _designs(name)[:60]:
        tokens = verifier_tokens(batch, design.choice)
        for _, md in design.models():
            model = CAT.models[md.model]
            tab = ev.pass_table(md.model, md.arch, tokens)
            keys = tuple(md.placement[op].key for op in PLACEABLE_OPS)
            nodes = tab.layer_nodes(keys)
            got = layer_schedule(model.parallel_block, nodes, tab.levels)
            assert got == layer_schedule_reference(model.parallel_block, nodes, tab.levels), (name, nodes)


# ------------------------------------------------------------------------------------------------
# passes and capacities
# ------------------------------------------------------------------------------------------------
def _reference_pass(ev: Evaluator, model_name: str, arch, places: dict[str, Placement], tokens: int):
    """A pass priced plainly: each operator's cost from the cost model, the reference schedule."""
    c = ev.costs
    model = CAT.models[model_name]
    levels = c.share_levels
    op_cost = {op: c.placement_cost(model, op, places[op], arch, tokens) for op in PLACEABLE_OPS}
    if any(oc is None for oc in op_cost.values()):
        return None
    nodes = []
    for op in LAYER_OPS:
        p = places[op]
        if p.engine == "pim":
            nodes.append((op, op_cost[op].time_ns, 0, p.share, 0))
        else:
            nodes.append((op, op_cost[op].time_ns, 1, levels if c.host_contends_with_pim(arch, p.layout) else 0, 0))
    ar = c.allreduce_cost(model, arch, tokens)
    nodes += [(n, ar.time_ns, 0, 0, 1) for n in layer_order(model.parallel_block) if n.startswith("allreduce")]
    makespan, starts = layer_schedule_reference(model.parallel_block, tuple(nodes), levels)
    n_ar = 1 if model.parallel_block else 2
    emb = c.embedding_cost(model, arch, places["lm_head"].layout, tokens)
    parts = tuple(model.layers * (sum(op_cost[op].parts_nj[k] for op in LAYER_OPS) + n_ar * ar.parts_nj[k])
                  + op_cost["lm_head"].parts_nj[k] + emb.parts_nj[k] for k in range(len(COMPONENTS)))
    time_ns = emb.time_ns + model.layers * makespan + op_cost["lm_head"].time_ns
    return (time_ns, sum(parts), parts, makespan, starts, {op: oc.time_ns for op, oc in op_cost.items()},
            {op: oc.energy_nj for op, oc in op_cost.items()}, ar.time_ns, emb.time_ns)


def _priced(p) -> tuple:
    return (p.time_ns, p.energy_nj, p.parts_nj, p.layer_makespan_ns, p.starts_ns, p.op_time_ns, p.op_energy_nj,
            p.allreduce_ns, p.embedding_ns)


def _reference_capacity(ev: Evaluator, md) -> tuple[int, int, int, int]:
    """Capacity use summed plainly over the tensors, each split by its layout."""
    c = ev.costs
    arch = md.arch
    tb = c.tensor_bytes(CAT.models[md.model], arch.devices)
    tensors = [(kib, md.placement[op].layout) for op, kib in tb.op_kib.items()]
    tensors.append((tb.embedding_kib, md.placement["lm_head"].layout))
    d2 = ev.draft2_model(md)
    if d2 is not None:
        tensors.append((c.tensor_bytes(d2, arch.devices).total_kib(), c.draft2_layout(arch)))
    pim = sum(c.split_kib(arch, lay, kib)[0] for kib, lay in tensors)
    normal = sum(c.split_kib(arch, lay, kib)[1] for kib, lay in tensors)
    return (pim, normal, *c.capacity_kib(arch))


def _passes_of(sc: Scenario, design: Design):
    """(model design, tokens, host_only draft2 name) of every pass pricing the design uses."""
    batch = sc.batch_size
    out = [(design.verifier, verifier_tokens(batch, design.choice), None)]
    for md in design.drafters:
        dc = md.choice
        tokens = tree_pass_tokens(batch, dc) if dc.tree is not None else (drafter_cycle_tokens(batch, dc),)
        out += [(md, t, None) for t in tokens]
        if dc.staging is not None and dc.staging.draft2 in CAT.models:
            out.append((md, draft2_tokens(batch), dc.staging.draft2))
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_pass_prices_and_capacities_equal_the_plain_computation(name):
    sc = _scenario(name)
    ev = Evaluator(sc, CAT)
    checked = 0
    for design in _designs(name):
        for _, md in design.models():
            cap = ev.capacity(md)
            assert (cap.pim_need_kib, cap.normal_need_kib, cap.pim_capacity_kib, cap.normal_capacity_kib) == \
                _reference_capacity(ev, md), (name, design.key())
        for md, tokens, draft2 in _passes_of(sc, design):
            if draft2 is not None:
                layout = ev.costs.draft2_layout(md.arch)
                host = {op: Placement(engine="host", share=0, layout=layout) for op in PLACEABLE_OPS}
                price = ev.pass_price(md, tokens, host_only=True, model_name=draft2)
                assert _priced(price) == _reference_pass(ev, draft2, md.arch, host, tokens)
                continue
            want = _reference_pass(ev, md.model, md.arch, md.placement, tokens)
            assert want is not None  # a design of the space places every operator where it can run
            price = ev.pass_price(md, tokens)
            assert _priced(price) == want, (name, design.key(), tokens)
            tab = ev.pass_table(md.model, md.arch, tokens)
            keys = tuple(md.placement[op].key for op in PLACEABLE_OPS)
            assert Evaluator.pass_time_energy(tab, keys) == (price.time_ns, price.energy_nj)
            assert price.energy_nj == sum(price.parts_nj)
            checked += 1
    assert checked >= DESIGNS


def test_a_placement_the_architecture_lacks_is_rejected_by_name():
    sc = _scenario("opt-13b")
    ev = Evaluator(sc, CAT)
    md = _designs("opt-13b")[0].verifier
    placement = {op: Placement(engine="host", share=0) for op in PLACEABLE_OPS}
    placement["score"] = Placement(engine="pim", share=1)
    no_pim = md.model_copy(update={"pim_units": 0, "placement": placement})
    with pytest.raises(ScenarioError, match="operator score cannot run on pim"):
        ev.pass_price(no_pim, 1)


# ------------------------------------------------------------------------------------------------
# the heuristic's round from pieces
# ------------------------------------------------------------------------------------------------
def _reference_round_time(outcomes, cycles, verify, sync, pipeline, q) -> int:
    """The round time written out from its definition (formulations/speculation_rounds.md, RND-1..3),
    with exact fractions: an independent check of the one integer implementation."""
    total = Fraction(0)
    for rs, p in outcomes:
        d = max([r * c for r, c in zip(rs, cycles)] or [0])
        if pipeline:
            r_o = max(d, verify) + math.ceil(Fraction(q * min(d, verify), spec.Q_SCALE))
        else:
            r_o = d + verify
        total += Fraction(p, spec.OUTCOME_SCALE) * r_o
    return math.ceil(total) + sync


@pytest.mark.parametrize("name", SCENARIOS)
def test_round_time_equals_its_definition(name):
    """The round time the evaluator and the Pricer share (`speculation.round_time_ns`) against its
    definition, on every choice of the space with random cycle and verification times."""
    sc = _scenario(name)
    pricer = Pricer(SearchSpace(sc, CAT), CAT, sc.objective)
    rng = random.Random(SCENARIOS.index(name))
    for cid in range(min(400, _choice_count(pricer.space))):
        rc = pricer.choice_round(cid)
        cycles = [rng.choice((0, 1, rng.randint(1, 10**7))) for _ in rc.plain]
        verify = rng.choice((0, rng.randint(1, 10**8)))
        got = spec.round_time_ns(rc.stats.outcomes, cycles, verify, rc.sync_ns, rc.pipeline, rc.stats.q)
        assert got == _reference_round_time(rc.stats.outcomes, cycles, verify, rc.sync_ns, rc.pipeline,
                                            rc.stats.q), (name, cid)


def _choice_count(space: SearchSpace) -> int:
    count = len(space.pipeline_opts)
    for opts in space.drafter_opts:
        count *= len(opts)
    return count


def _metrics_value(ev: Evaluator, design: Design, objective: str) -> float:
    try:
        return float(ev.metrics(design).objective(objective))
    except ScenarioError:
        return INFEASIBLE


@pytest.mark.parametrize("name", SCENARIOS)
def test_pricer_equals_evaluator_metrics(name):
    """Completed candidates (capacity-repaired), and raw ones that may overflow a side (priced with every
    check), for every objective; `metrics` on a separate evaluator is the reference."""
    sc = _scenario(name)
    space = SearchSpace(sc, CAT)
    reference = Evaluator(sc, CAT)
    rng = np.random.default_rng(SCENARIOS.index(name) + 31)
    for objective in ("latency", "energy", "edp"):
        pricer = Pricer(space, CAT, objective)
        feasible = 0
        for _ in range(DESIGNS // 3):
            genome, archs = space.random_genome(rng), space.random_archs(rng)
            value, key = pricer.complete(genome, archs)
            if key is not None:
                assert value == _metrics_value(reference, pricer.design(key), objective), (name, objective, key)
                feasible += 1
            if not space.design_space.choice_allowed(space.choice(space.choice_id(genome))):
                continue
            raw = (space.choice_id(genome), archs,
                   tuple(space.placement(genome, j, a) for j, a in enumerate(archs)))
            assert pricer.price(raw) == _metrics_value(reference, pricer.design(raw), objective), (name, raw)
        assert feasible, (name, objective)
