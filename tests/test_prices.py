"""The exact model's price table (solvers/exact/prices.py): its entries are the evaluator's answers, the
single-scenario and mix models build from it without asking the evaluator anything, and a model built
from a handed table is the model built from the evaluator."""

from __future__ import annotations

import inspect

import pytest

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.costs import CostModel
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import pass_tokens, round_stats, tree_pass_tokens
from specpim_cp.problem.design import HOST, ModelDesign, Staging
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import parse_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.mix.arch_bounds import ArchBounds
from specpim_cp.solvers.mix.cpsat_model import MixModel

# A staged drafter with a catalog draft2 model and an n-gram one, partitioned memory (an all-PIM
# architecture leaves the host no memory: draft2 entries are None there), idle power counted.
STAGED = {
    "name": "prices-staged", "batch_size": 2, "prompt_tokens": 64, "generated_tokens": 32,
    "memory_types": ["hbm", "gddr"], "max_draft_length": 2,
    "verifier": {"model": "gpt2-large", "devices": 1},
    "drafters": [{"model": "gpt2-medium", "devices": 1, "acceptance": 0.7,
                  "staging": {"draft2": ["gpt2-small", "ngram"], "max_draft_length": 1,
                              "acceptance": {"gpt2-small": 0.6, "ngram": 0.5}}}],
    "space": {"share_levels": 2},
    "assumptions": {"memory_model": "partitioned", "energy_accounting": "total"},
}
# A parallel block on two devices (all-reduces, the exact layer schedule), a token-tree drafter,
# time-shared channels (host layouts that contend with the PIM units on some architectures only).
TREES = {
    "name": "prices-trees", "batch_size": 2, "prompt_tokens": 64, "generated_tokens": 32,
    "memory_types": ["gddr"], "max_draft_length": 2,
    "verifier": {"model": "palm-2.7b", "devices": 2},
    "drafters": [{"model": "palm-1.3b", "devices": 1, "acceptance": 0.7,
                  "tree": {"max_nodes": 3, "max_children": 2}}],
    "space": {"share_levels": 2},
    "assumptions": {"energy_accounting": "dynamic"},
}
SCENARIOS = {"staged": STAGED, "trees": TREES}
MIX_BASE = """
name = "prices-mix-base"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["gddr"]
max_draft_length = 2

[verifier]
model = "gpt2-large"
devices = 1

[[drafters]]
model = "gpt2-medium"
devices = 1
acceptance = 0.7

[drafters.staging]
draft2 = ["gpt2-small", "ngram"]
max_draft_length = 1

[space]
share_levels = 1
pim_units = 2
"""
MIX = """
name = "prices-mix"
scenario = "base.toml"

[[mix.cells]]
batch_size = 1
weight = 2

[[mix.cells]]
batch_size = 8
acceptance = {"gpt2-medium" = 0.55}
weight = 1
"""


def _table(data: dict) -> tuple:
    sc = parse_scenario(data)
    catalog = scenario_catalog(sc)
    ev = Evaluator(sc, catalog)
    return sc, catalog, ev, PriceTable.build(ev, DesignSpace(sc, catalog))


def _text(sm_or_mm) -> str:
    return str(sm_or_mm.m.proto)


@pytest.fixture
def pricing_only_in_build(monkeypatch):
    """Every method of CostModel and Evaluator fails unless it is called from inside `PriceTable.build`."""
    inside = [0]

    def guard(qualname, fn):
        def guarded(*args, **kwargs):
            if not inside[0]:
                raise AssertionError(f"{qualname} called after the price table was built")
            return fn(*args, **kwargs)
        return guarded

    for cls in (CostModel, Evaluator):
        for name, attr in list(vars(cls).items()):
            if name.startswith("__"):
                continue
            if isinstance(attr, staticmethod):
                monkeypatch.setattr(cls, name, staticmethod(guard(f"{cls.__name__}.{name}", attr.__func__)))
            elif inspect.isfunction(attr):
                monkeypatch.setattr(cls, name, guard(f"{cls.__name__}.{name}", attr))
    build = PriceTable.build.__func__

    def counted_build(cls, *args, **kwargs):
        inside[0] += 1
        try:
            return build(cls, *args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(PriceTable, "build", classmethod(counted_build))


# ------------------------------------------------------------------------------------------------
# (a) the entries are the evaluator's answers
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_entries_equal_the_evaluators_answers(name):
    sc, catalog, _, table = _table(SCENARIOS[name])
    fresh = Evaluator(sc, catalog)  # asked again, nothing shared with the evaluator the table came from
    c = fresh.costs
    space = table.space
    b = sc.batch_size
    assert table.choices == space.choice_list
    assert table.stats == tuple(round_stats(ch, fresh.acceptance) for ch in space.choice_list)
    assert table.share_levels == c.share_levels == sc.space.share_levels
    assert table.round_sync_ns == c.host.sync_latency_ns > 0
    for j, (d, pm) in enumerate(zip(space.models, table.models, strict=True)):
        model = d.spec
        needed = {pass_tokens(b, ch, j) for ch in space.choice_list if j == 0 or ch.speculates}  # [NOSPEC]
        if j > 0:
            needed |= {t for ch in space.choice_list if ch.speculates and ch.drafters[j - 1].tree is not None
                       for t in tree_pass_tokens(b, ch.drafters[j - 1])}
        assert pm.tokens == tuple(sorted(needed))
        assert set(pm.op_cost) == {(op, a, p) for a in d.archs for op in PLACEABLE_OPS
                                   for p in d.allowed(a, op)}
        for (op, a, p), by_tokens in pm.op_cost.items():
            assert by_tokens == {t: c.placement_cost(model, op, p, a, t) for t in pm.tokens}
        for a in d.archs:
            assert pm.allreduce[a] == {t: c.allreduce_cost(model, a, t) for t in pm.tokens}
            for lay in {p.layout for p in d.allowed(a, "lm_head")}:
                assert pm.embedding[(a, lay)] == {t: c.embedding_cost(model, a, lay, t) for t in pm.tokens}
            for op in PLACEABLE_OPS:
                for p in d.allowed(a, op):
                    if p.engine == "host":
                        assert pm.contends[(a, p.layout)] == c.host_contends_with_pim(a, p.layout)
            tab = fresh.capacity_table(model.name, a)
            assert pm.capacity_kib[a] == tab.capacity_kib == c.capacity_kib(a)
            for o, op in enumerate(PLACEABLE_OPS):
                for lay in ("normal", "spread", "pim"):
                    assert pm.tensor_kib[(a, op, lay)] == tab.tensor_split(o, lay)
            assert pm.total_kib[a] == c.tensor_bytes(model, a.devices).total_kib()
            assert pm.idle_power_mw[a] == c.idle_power_mw(a)
        for (a, draft2), split in pm.draft2_kib.items():
            probe = ModelDesign(model=model.name, memory_type=a.memory_type, pim_units=a.pim_units,
                                devices=a.devices, placement=dict.fromkeys(PLACEABLE_OPS, HOST),
                                draft_length=1, staging=Staging(draft2=draft2, draft_length=1))
            if draft2 not in catalog.models:
                assert split == (0, 0)
                assert pm.draft2_step[(a, draft2)] == fresh.draft2_step(probe)
                continue
            try:
                assert split == fresh.draft2_split(model.name, a, draft2)
                assert pm.draft2_step[(a, draft2)] == fresh.draft2_step(probe)
            except ScenarioError:
                assert split is None and pm.draft2_step[(a, draft2)] is None
    if name == "staged":  # the cases the scenario is there for
        drafter = table.models[1]
        assert {n for _, n in drafter.draft2_kib} == {"gpt2-small", "ngram"}
        assert None in drafter.draft2_kib.values() and None in drafter.draft2_step.values()
        assert all(v > 0 for v in drafter.idle_power_mw.values())
    else:
        assert any(pm.contends.values()) and not all(pm.contends.values())
        assert all(v == 0 for pm in table.models for v in pm.idle_power_mw.values())
        assert any(ar.time_ns > 0 for ar in table.models[0].allreduce[space.models[0].archs[0]].values())


# ------------------------------------------------------------------------------------------------
# (b) the models read only the table
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_spec_model_builds_without_asking_the_evaluator(name, pricing_only_in_build):
    sc, catalog, ev, table = _table(SCENARIOS[name])
    sm = SpecModel(sc, catalog, ev, prices=table)
    assert sm.prices is table and sm.space is table.space
    with pytest.raises(AssertionError, match="called after the price table was built"):
        ev.costs.idle_power_mw(sm.data[0].archs[0])  # the guard is live
    SpecModel(sc, catalog, ev)  # its own table: the evaluator answers inside `PriceTable.build` only


def test_mix_model_and_its_bounds_read_only_the_tables(tmp_path, pricing_only_in_build):
    (tmp_path / "base.toml").write_text(MIX_BASE)
    (tmp_path / "mix.toml").write_text(MIX)
    mix = load_mix(tmp_path / "mix.toml")
    catalog = scenario_catalog(mix.cells[0].scenario)
    evaluators = [Evaluator(c.scenario, catalog) for c in mix.cells]
    mm = MixModel(mix, catalog, evaluators)
    assert [sm.prices for sm in mm.cells] == mm.prices and len(mm.prices) == 2
    for kind in ("latency", "energy"):
        ArchBounds(mm.cells, kind)


# ------------------------------------------------------------------------------------------------
# (c) a handed table builds the same model
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_model_from_a_handed_table_equals_the_model_from_the_evaluator(name):
    sc, catalog, _, table = _table(SCENARIOS[name])
    own = SpecModel(sc, catalog, Evaluator(sc, catalog))
    handed = SpecModel(sc, catalog, Evaluator(sc, catalog), prices=table)
    assert _text(handed) == _text(own)
    assert handed.choice_bounds == own.choice_bounds and handed.energy_rows == own.energy_rows
    capped = SpecModel(sc, catalog, Evaluator(sc, catalog), prices=table, capacity=False)
    assert len(capped.m.proto.constraints) < len(own.m.proto.constraints)


def test_a_table_of_another_scenario_is_refused():
    _, _, _, table = _table(STAGED)
    sc = parse_scenario({**STAGED, "batch_size": 4})
    with pytest.raises(ValueError, match="another scenario"):
        SpecModel(sc, scenario_catalog(sc), prices=table)
