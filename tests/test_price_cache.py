"""The price tables solves of one process share (prices.scenario_prices): keyed by content, bounded, and a
model built from a shared table is the model built from a fresh one."""

from __future__ import annotations

import dataclasses

import pytest
from test_cli_corpus import OPT13
from test_tree_space import tree_scenario

from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem import space as space_module
from specpim_cp.problem.scenario import (
    Scenario,
    load_scenario,
    parse_scenario,
    scenario_catalog,
    with_native_memory,
)
from specpim_cp.problem.space import DesignSpace, TreeMenuTooLarge
from specpim_cp.solvers import shared_evaluator as shared_module
from specpim_cp.solvers.exact import guards
from specpim_cp.solvers.exact import prices as prices_mod
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.prices import PriceTable, scenario_prices
from specpim_cp.solvers.shared_evaluator import shared_evaluator


def _table(sc, cat) -> PriceTable:
    return scenario_prices(Evaluator(sc, cat), sc, cat)


def test_equal_content_shares_a_table_and_other_content_does_not():
    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    first = _table(sc, cat)
    assert _table(load_scenario(OPT13), scenario_catalog(sc)) is first  # reloaded: the same content
    assert _table(sc.model_copy(update={"batch_size": 2}), cat) is not first
    gddr = cat.memories["gddr"]
    cheaper = dataclasses.replace(cat, memories={**cat.memories, "gddr": dataclasses.replace(
        gddr, external_energy_pj_per_bit=gddr.external_energy_pj_per_bit / 2)})
    other = _table(sc, cheaper)
    assert other is not first and other.models != first.models


def test_a_copy_that_sets_a_field_to_the_same_content_shares_the_evaluator_and_the_baselines(monkeypatch):
    """A copy made with `model_copy(update=...)` at equal content (the ladder steps' unrestricted space, the
    note's speculating side's baselines) is the same input: one evaluator, one set of baselines; only a field
    whose being set is read (`SET_FIELDS_READ`: memory_types on a host with a native memory) keys apart."""
    from specpim_cp.solvers import baselines as baselines_mod

    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    copy = sc.model_copy(update={"space": sc.space.model_copy()})
    assert "space" in copy.model_fields_set and copy.content_hash() == sc.content_hash()
    assert shared_module.evaluator_key(copy, cat) == shared_module.evaluator_key(sc, cat)
    assert shared_evaluator(copy, cat) is shared_evaluator(sc, cat)
    runs = []
    real = baselines_mod._all_baselines
    monkeypatch.setattr(baselines_mod, "_all_baselines", lambda s, c: runs.append(s.name) or real(s, c))
    monkeypatch.setattr(baselines_mod, "_BASELINES", baselines_mod.BoundedCache(2))
    first = baselines_mod.run_baselines(sc, cat)
    assert baselines_mod.run_baselines(copy, cat) == first and len(runs) == 1
    data = {"name": "h100-native", "batch_size": 1, "prompt_tokens": 64, "generated_tokens": 32, "host": "h100-sxm",
            "verifier": {"model": "opt-1.3b", "devices": 1}}
    unset = Scenario.model_validate(data)  # before `check_scenario` gives it the host's native memory
    explicit = unset.model_copy(update={"memory_types": list(unset.memory_types)})
    assert explicit.content_hash() == unset.content_hash()
    assert with_native_memory(unset, cat).memory_types != with_native_memory(explicit, cat).memory_types
    assert shared_module.evaluator_key(explicit, cat) != shared_module.evaluator_key(unset, cat)


def test_the_baselines_of_a_whole_benchmark_set_stay_cached(monkeypatch):
    """A batch worker meets each scenario's baselines up to three times with the whole set in between: the
    baselines of more scenarios than the `paper` set holds (12) are all still kept when met again."""
    from specpim_cp.solvers import baselines as baselines_mod

    monkeypatch.setattr(baselines_mod, "_BASELINES", baselines_mod.BoundedCache(baselines_mod.BASELINES_CACHE_SIZE))
    runs = []
    real = baselines_mod._all_baselines
    monkeypatch.setattr(baselines_mod, "_all_baselines", lambda s, c: runs.append(s.batch_size) or real(s, c))
    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    contents = [sc.model_copy(update={"batch_size": b}) for b in range(1, 22)]  # paper-full's 21 scenarios
    for _ in range(2):
        for s in contents:
            baselines_mod.run_baselines(s, cat)
    assert runs == list(range(1, 22))


def test_the_cache_is_bounded():
    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    for length in range(2, 3 + prices_mod.PRICE_CACHE_SIZE):
        _table(sc.model_copy(update={"max_draft_length": length}), cat)
    assert len(prices_mod._PRICE_CACHE) == prices_mod.PRICE_CACHE_SIZE


def test_a_shared_table_builds_the_fresh_tables_model():
    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    ev = Evaluator(sc, cat)
    shared = SpecModel(sc, cat, ev, prices=_table(sc, cat))
    fresh = SpecModel(sc, cat, ev, prices=PriceTable.build(Evaluator(sc, cat), DesignSpace(sc, cat)))
    assert str(shared.m.proto) == str(fresh.m.proto)


def test_a_space_whose_limits_changed_is_priced_again(monkeypatch):
    """A table is reused only for a space with the same options: a limit of the space that refuses them
    (a tree menu too large, [TREE-4]) refuses them as without the cache."""
    sc = parse_scenario(tree_scenario(2, max_draft_length=3))
    cat = scenario_catalog(sc)
    assert _table(sc, cat).space.choice_list
    monkeypatch.setattr(space_module, "MAX_TREE_PROFILES", 0)
    with pytest.raises(TreeMenuTooLarge):
        _table(sc, cat)


def test_evaluators_of_scenarios_that_price_alike_share_operator_prices():
    """Scenario contents that differ only where operator prices do not look (the draft lengths) share one
    memo of each model's prices (shared_evaluator.price_memo); another batch prices apart; a table priced
    through a shared memo is the fresh table."""
    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    longer = sc.model_copy(update={"max_draft_length": sc.max_draft_length + 1})
    first, second = shared_evaluator(sc, cat), shared_evaluator(longer, cat)
    assert first is not second
    model = cat.models[sc.verifier.model]
    arch, placement = _some_placement(first, sc, cat)
    cost = first.costs.placement_cost(model, "qkv", placement, arch, 3)
    assert second.costs.placement_cost(model, "qkv", placement, arch, 3) is cost  # priced once, shared
    other = shared_evaluator(sc.model_copy(update={"batch_size": 2}), cat)
    assert other.costs.placement_cost(model, "qkv", placement, arch, 3) is not cost
    shared = PriceTable.build(second, DesignSpace(longer, cat))
    assert shared.models == PriceTable.build(Evaluator(longer, cat), DesignSpace(longer, cat)).models


def test_the_shared_operator_prices_are_bounded():
    sc = load_scenario(OPT13)
    cat = scenario_catalog(sc)
    for batch in range(1, 3 + shared_module.PRICE_MEMO_SIZE):
        ev = shared_evaluator(sc.model_copy(update={"batch_size": batch}), cat)
        arch, placement = _some_placement(ev, sc, cat)
        ev.costs.placement_cost(cat.models[sc.verifier.model], "qkv", placement, arch, batch)
    assert len(shared_module._PRICE_MEMOS) == shared_module.PRICE_MEMO_SIZE


def _some_placement(ev, sc, cat):
    d = DesignSpace(sc, cat).models[0]
    arch = d.archs[0]
    return arch, d.allowed(arch, "qkv")[0]


def test_the_rows_of_a_table_are_range_checked_once(monkeypatch):
    """Models built from one price table have the same rows: `build_model` checks their integer range once
    per table (a scenario whose rows are out of range is refused every time: the check never passed)."""
    calls = []
    real = guards.check_integer_range
    monkeypatch.setattr(guards, "check_integer_range", lambda sm: calls.append(sm) or real(sm))
    sc = load_scenario(OPT13).model_copy(update={"name": "range-checked-once"})  # a table of its own
    cat = scenario_catalog(sc)
    first = guards.build_model(sc, cat, Evaluator(sc, cat))
    again = guards.build_model(sc, cat, Evaluator(sc, cat))
    assert len(calls) == 1 and str(again.m.proto) == str(first.m.proto)
    monkeypatch.setattr(guards, "check_integer_range", lambda sm: calls.append(sm) or _refuse(sc))
    other = sc.model_copy(update={"name": "range-refused"})
    for _ in range(2):
        with pytest.raises(guards.IntegerRangeError):
            guards.build_model(other, cat, Evaluator(other, cat))
    assert len(calls) == 3


def _refuse(sc):
    raise guards.too_large(sc, "a row")


def test_a_bounded_cache_drops_the_least_recently_used():
    from specpim_cp.solvers.bounded import BoundedCache

    cache: BoundedCache[str] = BoundedCache(2)
    cache.put("a", "A")
    cache.put("b", "B")
    assert cache.get("a") == "A"  # a use: "b" is now the least recently used
    assert cache.get_or_make("c", lambda: "C") == "C"
    assert len(cache) == 2 and cache.get("b") is None and cache.get("a") == "A"
    assert cache.get_or_make("a", lambda: "other") == "A"  # kept: not made again
