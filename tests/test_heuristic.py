"""The paper's explorer (GA over dataflow + per-model MCTS over architecture): reproducible, exact
claims, restricted spaces respected, never worse than GPU-SI, infeasible candidates repaired."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from helpers import build_design

from specpim_cp.catalog import default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.operators import ATTENTION_OPS, FC_OPS, PLACEABLE_OPS
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.solvers.baselines import gpu_si
from specpim_cp.solvers.heuristic import BUDGETS, Budget, run_heuristic
from specpim_cp.solvers.heuristic.fill import Filler, SerialFiller
from specpim_cp.solvers.heuristic.ga import GeneticExplorer
from specpim_cp.solvers.heuristic.genes import SearchSpace
from specpim_cp.solvers.heuristic.pricing import INFEASIBLE, Pricer
from specpim_cp.solvers.heuristic.run import _warm_starts

EXAMPLES = sorted((Path(__file__).parents[1] / "benchmarks" / "examples").glob("*.toml"))
TINY = Budget(generations=4, population=12, mcts_leaves_per_model=3)


def example(name: str):
    return load_scenario(Path(__file__).parents[1] / "benchmarks" / "examples" / f"{name}.toml")


def with_space(name: str, **space):
    sc = example(name)
    return sc.model_copy(update={"space": sc.space.model_copy(update=space)})


# -- reproducibility ---------------------------------------------------------------------------
def test_same_seed_gives_the_same_design_and_objective():
    sc = example("gpt2-staged")
    a = run_heuristic(sc, budget=TINY, seed=11)
    b = run_heuristic(sc, budget=TINY, seed=11)
    assert a.design.key() == b.design.key()
    assert a.report.objective == b.report.objective
    assert a.report.extra["visited_hash"] == b.report.extra["visited_hash"]
    assert a.report.extra["evaluations"] == b.report.extra["evaluations"]
    assert a.report.inputs_hash == b.report.inputs_hash


def test_different_seeds_visit_different_designs():
    sc = example("opt-13b")
    a = run_heuristic(sc, budget=TINY, seed=0)
    b = run_heuristic(sc, budget=TINY, seed=1)
    assert a.report.extra["visited_hash"] != b.report.extra["visited_hash"]
    assert a.report.inputs_hash != b.report.inputs_hash


def test_worker_processes_do_not_change_the_result():
    sc = example("llama-13b")
    one = run_heuristic(sc, budget=TINY, seed=5, workers=1)
    two = run_heuristic(sc, budget=TINY, seed=5, workers=2)
    assert one.design.key() == two.design.key() and one.report.objective == two.report.objective
    for field in ("visited_hash", "evaluations", "history", "mcts_leaves_priced"):
        assert one.report.extra[field] == two.report.extra[field], field


def test_paper_explorer_without_polish_is_reproducible_and_in_space():
    sc = with_space("palm-8b", mapping="attention-offload")
    a = run_heuristic(sc, budget=TINY, seed=8, polish=False)
    b = run_heuristic(sc, budget=TINY, seed=8, polish=False)
    assert a.design.key() == b.design.key() and a.report.extra["polish"] is False
    assert {op for _, op in _pim_ops(a.design)} == set(ATTENTION_OPS)


# -- the claim is the evaluator's price ---------------------------------------------------------
@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_returned_design_reevaluates_to_the_reported_objective(objective):
    sc = example("llama-13b").model_copy(update={"objective": objective})
    res = run_heuristic(sc, budget=TINY, seed=2)
    again = Evaluator(sc).evaluate(res.design)  # validates the design too
    assert again.metrics.objective(objective) == res.report.objective
    rep = res.report
    assert (rep.method, rep.status, rep.objective_name, rep.bound) == ("heuristic", "HEURISTIC", objective, None)
    assert rep.iterations == TINY.generations and rep.seed == 2
    assert rep.solver_version.startswith("specpim-cp ") and rep.solver_version.endswith(" heuristic")
    assert rep.extra["search_objective"] == rep.extra["select_objective"] == objective
    assert rep.extra["unique_designs"] <= rep.extra["evaluations"]
    assert not {"pricing", "pricing_note", "archive_mismatches"} & set(rep.extra)  # no second pricer to guard
    history = rep.extra["history"]
    assert 1 <= len(history) <= 200
    assert all(later[1] <= earlier[1] for earlier, later in itertools.pairwise(history))


def _plain_objective(sc, design, objective: str) -> float:
    """The search value of a design as a plain Evaluator prices it (fresh caches, validation)."""
    try:
        return float(Evaluator(sc).evaluate(design).metrics.objective(objective))
    except ScenarioError:
        return INFEASIBLE


def test_search_prices_equal_the_evaluator_on_random_designs():
    """The Pricer prices through Evaluator.metrics; every value it ranks by (feasible or not) equals
    Evaluator.evaluate's objective of the design."""
    catalog = default_catalog()
    rng = np.random.default_rng(5)
    for path in EXAMPLES:
        sc = load_scenario(path)
        space = SearchSpace(sc, catalog)
        pricer = Pricer(space, catalog, sc.objective)
        feasible = 0
        for _ in range(40):
            genome, archs = space.random_genome(rng), space.random_archs(rng)
            value, key = pricer.complete(genome, archs)
            if key is not None:
                assert value < INFEASIBLE
                feasible += 1
        assert feasible, path.name
        sample = list(pricer.values.items())
        for i in rng.choice(len(sample), size=min(30, len(sample)), replace=False):
            key, value = sample[i]
            assert value == _plain_objective(sc, pricer.design(key), sc.objective), (path.name, key)
        archive = pricer.metrics(k for k, v in sample[:10] if v < INFEASIBLE)
        for key, metrics in archive.items():
            assert metrics == Evaluator(sc).evaluate(pricer.design(key)).metrics


@pytest.mark.parametrize("name", ["gpt2-staged", "llama-32.5b-three-drafters"])
def test_archive_objectives_equal_the_evaluator(name):
    """A short run's archive of best designs (what the final selection ranks) holds the evaluator's prices."""
    sc = example(name)
    catalog = default_catalog()
    space = SearchSpace(sc, catalog)
    pricer = Pricer(space, catalog, sc.objective)
    explorer = GeneticExplorer(space, SerialFiller(Filler(space, pricer, TINY.mcts_leaves_per_model)),
                               np.random.default_rng(3), 3, generations=2, population=TINY.population)
    explorer.run(_warm_starts(sc, catalog, space))
    assert explorer.archive
    rng = np.random.default_rng(0)
    keys = list(explorer.archive)
    for i in rng.choice(len(keys), size=min(12, len(keys)), replace=False):
        key = keys[i]
        assert explorer.archive[key][0] == _plain_objective(sc, pricer.design(key), sc.objective)


def test_paper_selection_by_edp_stays_near_the_best_latency():
    sc = example("palm-8b")
    res = run_heuristic(sc, budget=TINY, seed=4, search_objective="latency", select_objective="edp")
    best_latency = res.report.extra["best_search_value"]
    assert float(res.report.objective) <= best_latency * 1.05 + 1e-6
    assert res.report.extra["select_objective"] == "edp"


# -- restricted spaces ---------------------------------------------------------------------------
def _pim_ops(design):
    return {(label, op) for label, md in design.models() for op in PLACEABLE_OPS if md.placement[op].engine == "pim"}


def test_host_only_mapping_gives_no_pim_operators():
    res = run_heuristic(with_space("opt-13b", mapping="host-only"), budget=TINY, seed=0)
    assert _pim_ops(res.design) == set()


def test_fixed_draft_lengths_pipeline_off_and_fixed_architecture_are_kept():
    sc = with_space("llama-32.5b-three-drafters", draft_lengths=[2, 3, 1], pipeline="off",
                    memory_type="gddr", pim_units=2)
    res = run_heuristic(sc, budget=Budget(3, 10, 2), seed=0)
    d = res.design
    assert [m.draft_length for m in d.drafters] == [2, 3, 1]
    assert d.pipeline is False
    assert {(md.memory_type, md.pim_units) for _, md in d.models()} == {("gddr", 2)}


def test_fc_offload_mapping_and_staging_off():
    sc = with_space("gpt2-staged", mapping="fc-offload", staging="off", pipeline="on")
    res = run_heuristic(sc, budget=TINY, seed=3)
    d = res.design
    assert d.pipeline is True and d.drafters[0].staging is None
    for _, md in d.models():
        assert md.pim_units > 0
        assert all(md.placement[op].engine == "pim" for op in FC_OPS)
        assert all(md.placement[op].engine == "host" for op in ATTENTION_OPS)


def test_device_budget_is_respected():
    data = example("opt-13b").model_dump(mode="json")
    data["device_budget"] = 3
    data["verifier"]["devices"] = None
    data["drafters"][0]["devices"] = None
    sc = parse_scenario(data)
    res = run_heuristic(sc, budget=TINY, seed=0)
    assert sum(md.devices for _, md in res.design.models()) <= 3


# -- the search itself (no warm start: GPU-SI is not in its initial population) ---------------------
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_search_without_warm_start_beats_gpu_si(path):
    sc = load_scenario(path)
    res = run_heuristic(sc, budget="quick", seed=0, warm_start=False)
    assert res.report.objective < gpu_si(sc).metrics.objective(sc.objective)


# -- capacity checker ----------------------------------------------------------------------------
def _crowded_scenario():
    """LLaMA-13B on one device with a long context and batch 8: most architectures cannot hold it."""
    return parse_scenario({
        "name": "crowded", "batch_size": 8, "prompt_tokens": 1536, "generated_tokens": 512,
        "objective": "latency", "memory_types": ["hbm", "gddr"], "max_draft_length": 6,
        "verifier": {"model": "llama-13b", "devices": 1},
        "drafters": [{"model": "llama-1.3b", "devices": 1, "acceptance": 0.7}],
    })


def test_infeasible_candidates_are_repaired():
    sc = _crowded_scenario()
    catalog = default_catalog()
    space = SearchSpace(sc, catalog)
    pricer = Pricer(space, catalog, "latency")
    rng = np.random.default_rng(0)
    outcomes = [pricer.complete(space.random_genome(rng), space.random_archs(rng))[0] for _ in range(200)]
    assert sum(v == INFEASIBLE for v in outcomes) > 0.5 * len(outcomes)  # most random designs overflow
    res = run_heuristic(sc, budget=TINY, seed=0)
    Evaluator(sc).evaluate(res.design)  # feasible: would raise ScenarioError otherwise


def test_capacity_checker_replaces_operators_so_each_side_fits():
    """All of OPT-13B's weights on the PIM units of HBM k=4 x 2 overflow the PIM dies (20 GiB): the checker
    moves operators to the host (fewest bytes first) until both sides hold, and the re-placement fits."""
    sc = example("opt-13b")
    catalog = default_catalog()
    space = SearchSpace(sc, catalog)
    pricer = Pricer(space, catalog, "latency")
    arch = space.arch_id(ArchConfig("hbm", 4, 2))
    design = build_design(sc, [ArchConfig("hbm", 4, 2), ArchConfig("hbm", 4, 1)],
                          [rule_placement("all-pim", space.levels)] * 2, [4], [None], False)
    genome, _ = space.project(design)
    place = space.placement(genome, 0, arch)
    cap = pricer.capacity(0, arch, place, 0)
    assert cap.pim_need_kib > cap.pim_capacity_kib and not pricer.holds(cap)
    fitted = pricer.fit(0, arch, place, 0, genome.shares[0])
    assert fitted is not None and pricer.holds(pricer.capacity(0, arch, fitted, 0))
    moved = [o for o, (a, b) in enumerate(zip(place, fitted, strict=True)) if a != b]
    assert moved and all(fitted[o] <= 0 for o in moved)  # operators moved to the host
    value, key = pricer.complete(genome, (arch, space.arch_id(ArchConfig("hbm", 4, 1))))
    assert key is not None and key[2][0] == fitted  # a candidate that overflows is completed with the re-placement
    assert value == float(Evaluator(sc).evaluate(pricer.design(key)).metrics.objective("latency"))


# -- budgets and options -------------------------------------------------------------------------
def test_budgets_and_bad_options():
    assert BUDGETS["paper"] == Budget(generations=50, population=1000, mcts_leaves_per_model=10_000)
    sc = example("opt-13b")
    with pytest.raises(ScenarioError, match="unknown budget"):
        run_heuristic(sc, budget="huge")
    with pytest.raises(ScenarioError, match="search_objective"):
        run_heuristic(sc, budget=TINY, search_objective="speed")
    with pytest.raises(ScenarioError, match="population"):
        Budget(generations=1, population=1, mcts_leaves_per_model=1)


def test_time_limit_stops_early_with_a_valid_design():
    """A deterministic clock that advances 1 ms per reading: the 0.5 s limit passes after 500 readings,
    whatever the machine's speed."""
    sc = example("opt-13b")
    ticks = iter(range(10**9))
    res = run_heuristic(sc, budget=BUDGETS["paper"], seed=0, time_limit_s=0.5, clock=lambda: next(ticks) / 1000)
    assert res.report.extra["stopped_by"] == "time_limit"
    assert res.report.iterations < BUDGETS["paper"].generations
    assert res.report.objective <= gpu_si(sc).metrics.objective("latency")
