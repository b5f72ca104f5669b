"""The decomposition of latency and regret mixes (formulations/mix.md, MIX-14..19).

- Pass tables [MIX-14]: every class's least time equals the evaluator's price of the placements it names,
  and no placement of the class is faster (enumerated), for chains and for a parallel block (PaLM), whose
  bound never exceeds the exact value.
- The decomposition and the mix model (`--method cp-sat`) agree exactly on the optimum and return the same
  canonical design, on mixes with a parallel block, a staged drafter and a token-tree drafter; brute force
  agrees where it is small enough (test_mix.py covers the tensor-copy-bound mixes).
- A search stopped early reports FEASIBLE with a bound, no tie-break; the CLI's --method.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from click.testing import CliRunner
from oracles.mix_brute import MixEnumeration
from test_mix import COUPLED  # one verifier on one GDDR device: the tensor-copy rule binds

from specpim_cp.cli import main
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.mix import check_mix_capacity
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.operators import LAYER_OPS, PLACEABLE_OPS
from specpim_cp.problem.scenario import scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.exact import SolverOptions
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.mix import decomposition, solve_mix
from specpim_cp.solvers.mix.pass_tables import LAYOUTS, MixTables
from specpim_cp.solvers.mix.records import MixOptions

OPTIONS = MixOptions(SolverOptions(60, deterministic=True), cell_time_limit_s=60, method="decomposition")
CP_SAT = MixOptions(SolverOptions(60, deterministic=True), cell_time_limit_s=60, method="cp-sat")

#: PaLM's parallel block: a 1.3B verifier alone on one device, two PIM share levels (concurrent PIM
#: operators on disjoint shares), a small and a large batch.
PARALLEL = """
name = "parallel"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["gddr"]

[verifier]
model = "palm-1.3b"
devices = 1

[space]
share_levels = 2

[[mix.cells]]
batch_size = 1
weight = 2

[[mix.cells]]
batch_size = 32
weight = 1
"""
#: A staged drafter (n-gram draft2 on the host) and a pipeline, two tasks.
STAGED = """
name = "staged"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["hbm"]
max_draft_length = 2

[verifier]
model = "gpt2-large"
devices = 1

[[drafters]]
model = "gpt2-small"
devices = 1
acceptance = 0.7

[drafters.staging]
draft2 = ["ngram"]
max_draft_length = 2

[space]
share_levels = 1
staging = "free"

[mix.tasks.easy]
"gpt2-small" = 0.85

[[mix.cells]]
batch_size = 1
task = "easy"
weight = 1

[[mix.cells]]
batch_size = 8
weight = 1
"""
#: Token trees for the drafter (its depth passes share one placement).
TREES = """
name = "trees"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["gddr"]
max_draft_length = 2

[verifier]
model = "gpt2-large"
devices = 1

[[drafters]]
model = "gpt2-small"
devices = 1
acceptance = 0.7

[drafters.tree]
max_nodes = 3

[space]
share_levels = 1

[[mix.cells]]
batch_size = 1
weight = 3

[[mix.cells]]
batch_size = 16
weight = 1
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("decomposed-mixes")
    for name, text in (("parallel", PARALLEL), ("staged", STAGED), ("trees", TREES)):
        (d / f"{name}.toml").write_text(text)
    return d


def _tables(mix):
    catalog = scenario_catalog(mix.base)
    evaluators = [Evaluator(c.scenario, catalog) for c in mix.cells]
    prices = [PriceTable.build(ev, DesignSpace(c.scenario, catalog)) for ev, c in zip(evaluators, mix.cells,
                                                                                          strict=True)]
    return MixTables(mix, prices, evaluators), evaluators


def _profile_ns(ev: Evaluator, tab, prof, placements) -> int:
    """The evaluator's time of a profile for these placements (passes summed, draft2 steps added)."""
    keys = tuple(placements[op].key for op in PLACEABLE_OPS)
    total = 0
    for t in prof.tokens:
        total += Evaluator.pass_time_energy(ev.pass_table(tab.model.name, tab.arch, t), keys)[0]
    if prof.draft2 is not None:
        step = tab.prices[0].models[tab.j].draft2_step[(tab.arch, prof.draft2)]
        total += prof.gamma2 * step.time_ns
    return total


@pytest.mark.parametrize("stem", ["parallel", "staged", "trees"])
def test_pass_tables_are_the_least_evaluator_times_of_each_class(folder, stem):
    tables, evaluators = _tables(load_mix(folder / f"{stem}.toml"))
    checked = 0
    for per_arch in tables.tables:
        for tab in per_arch.values():
            for c, profiles in enumerate(tab.profiles):
                for p, prof in enumerate(profiles):
                    for cls in range(0, len(tab.layouts), max(1, len(tab.layouts) // 7)):
                        bound = int(tab.times[c, p, cls])
                        exact = tab.exactify(c, p, cls)
                        assert bound <= exact
                        places = tab.placements(c, p, cls)
                        assert [LAYOUTS.index(places[op].layout) for op in PLACEABLE_OPS] == list(tab.layouts[cls])
                        assert _profile_ns(evaluators[c], tab, prof, places) == exact
                        # no placement of the class is faster (every placement with these layouts)
                        options = [tab.places[o][int(tab.layouts[cls][o])] for o in range(len(PLACEABLE_OPS))]
                        for combo in itertools.islice(itertools.product(*options), 4096):
                            assert _profile_ns(evaluators[c], tab, prof, dict(zip(PLACEABLE_OPS, combo,
                                                                                  strict=True))) >= exact
                        checked += 1
    assert checked > 20
    if stem == "parallel":
        assert not next(iter(tables.tables[0].values())).chain


def test_parallel_block_bounds_are_often_exact_and_never_above(folder):
    """The parallel block's class bound is a true lower bound of its exact least makespan, on every class of
    every architecture (and the bound is not vacuous: it meets the exact value on many classes)."""
    tables, _ = _tables(load_mix(folder / "parallel.toml"))
    equal = total = 0
    for tab in tables.tables[0].values():
        if len(tab.places[PLACEABLE_OPS.index("qkv")]) < 2:
            continue
        for c in range(tables.n_cells):
            for cls in range(len(tab.layouts)):
                bound = int(tab.times[c, 0, cls])
                exact = tab.exactify(c, 0, cls)
                assert bound <= exact
                equal += bound == exact
                total += 1
    assert total > 50 and equal > total // 4, (equal, total)


@pytest.mark.parametrize("stem", ["parallel", "staged", "trees"])
@pytest.mark.parametrize("objective", ["latency", "regret"])
def test_decomposition_equals_the_mix_model(folder, stem, objective):
    mix = load_mix(folder / f"{stem}.toml")
    res = solve_mix(mix, objective, OPTIONS)
    ref = solve_mix(mix, objective, CP_SAT)
    assert res.report.extra["method"] == "mix decomposition" and "method" not in ref.report.extra
    assert res.report.status == ref.report.status == "OPTIMAL"
    assert res.report.objective == ref.report.objective
    assert res.report.bound <= res.report.objective
    assert [r.report.objective for r in res.optima] == [r.report.objective for r in ref.optima]
    assert res.report.extra["canonical"] and ref.report.extra["canonical"]
    assert [d.key() for d in res.designs] == [d.key() for d in ref.designs]
    assert _levels(res) == _levels(ref)  # every level's value and tie, whichever way the tie-break went
    check_mix_capacity(mix, [Evaluator(c.scenario) for c in mix.cells], list(res.designs))
    if objective == "latency":  # these mixes' copies never bind: the tie-break goes cell by cell
        assert any("per cell" in st["stage"] for st in res.report.extra["stages"])


def _levels(res) -> list[tuple]:
    return [(lv["level"], lv["ties"], lv["value"]) for lv in res.report.extra["tie_break"]]


@pytest.mark.slow  # 14 s: benchmarks/bench_slow_checks.py runs it
def test_decomposition_equals_brute_force_on_a_parallel_block(folder):
    mix = load_mix(folder / "parallel.toml")
    brute = MixEnumeration(mix).optimum("latency")
    res = solve_mix(mix, "latency", OPTIONS)
    assert res.report.objective == brute.value
    assert tuple(r.report.objective for r in res.optima) == brute.own


def test_a_search_stopped_early_is_feasible_with_a_bound(tmp_path, monkeypatch):
    """The tensor-copy-bound mix of test_mix needs about 90 nodes; three leave it unproven."""
    (tmp_path / "coupled.toml").write_text(COUPLED)
    mix = load_mix(tmp_path / "coupled.toml")
    full = solve_mix(mix, "latency", OPTIONS)
    assert full.report.extra["decomposition"]["exact"]["nodes"] > 3
    monkeypatch.setattr(decomposition, "DETERMINISTIC_MAX_NODES", 3)
    res = solve_mix(mix, "latency", OPTIONS)
    assert res.report.status == "FEASIBLE"
    assert res.report.bound is not None and res.report.bound <= full.report.objective <= res.report.objective
    assert res.report.extra["canonical"] is False and res.report.extra["tie_break"] == []


def test_the_search_is_deterministic_and_its_report_names_it(folder):
    mix = load_mix(folder / "trees.toml")
    one = solve_mix(mix, "latency", OPTIONS)
    two = solve_mix(mix, "latency", MixOptions(SolverOptions(60, workers=2, seed=5), cell_time_limit_s=60))
    assert [d.key() for d in one.designs] == [d.key() for d in two.designs]
    search = one.report.extra["decomposition"]
    assert search["exact"]["nodes"] >= 1 and search["units"]["tied_leaves"] >= 1
    assert one.report.extra["phases_s"]["search_s"] >= 0


def test_cli_method_option_and_its_errors(folder):
    path = str(folder / "staged.toml")
    res = CliRunner().invoke(main, ["solve-mix", path, "--method", "cp-sat", "--deterministic", "--time-limit", "30",
                                    "--cell-time-limit", "30", "--json"])
    assert res.exit_code == 0, res.output
    bad = CliRunner().invoke(main, ["solve-mix", path, "--method", "decomposition", "--objective", "energy"])
    assert bad.exit_code == 2
    assert bad.output.count("\n") == 1 and "method" in bad.output and "energy" in bad.output
    assert "Traceback" not in bad.output


def test_layer_ops_lead_the_placeable_ops():
    """The tables index a placement's layer operators as the first len(LAYER_OPS) of PLACEABLE_OPS."""
    assert PLACEABLE_OPS[:len(LAYER_OPS)] == LAYER_OPS and PLACEABLE_OPS[-1] == "lm_head"


#: Random small mixes where the tensor-copy rule may bind: one model alone (autoregressive) on one device,
#: cells of random batch and weight (seeds 2, 4 and 6 need 127, 47 and 13 nodes: their copies couple).
RANDOM_MIX = """
name = "random-{seed}"
batch_size = 1
prompt_tokens = {prompt}
generated_tokens = 32
memory_types = ["{memory}"]

[verifier]
model = "{model}"
devices = 1

[space]
share_levels = 1
"""


def _random_mix(tmp_path, seed: int):
    import random

    rng = random.Random(seed)
    text = RANDOM_MIX.format(seed=seed, prompt=rng.choice([64, 256, 512]), memory=rng.choice(["gddr", "hbm"]),
                             model=rng.choice(["opt-6.7b", "opt-2.7b", "gpt2-xl"]))
    for _ in range(rng.randint(2, 4)):
        text += f"\n[[mix.cells]]\nbatch_size = {rng.choice([1, 2, 8, 32, 64])}\nweight = {rng.randint(1, 3)}\n"
    path = tmp_path / f"random-{seed}.toml"
    path.write_text(text)
    return load_mix(path)


@pytest.mark.parametrize("seed", range(10))
def test_random_small_mixes_equal_the_mix_model(tmp_path, seed):
    """Objective and canonical design equal the mix model's (proven there: these mixes are small)."""
    mix = _random_mix(tmp_path, seed)
    res = solve_mix(mix, "latency", OPTIONS)
    ref = solve_mix(mix, "latency", CP_SAT)
    assert res.report.status == ref.report.status == "OPTIMAL"
    assert res.report.objective == ref.report.objective
    assert [d.key() for d in res.designs] == [d.key() for d in ref.designs]
    assert _levels(res) == _levels(ref)
    # seeds 1, 3, 5, 7-9 take the cell-by-cell tie-break, the others (copies can bind) the whole mix model
    cellwise = any("per cell" in st["stage"] for st in res.report.extra["stages"])
    assert cellwise == (seed in (1, 3, 5, 7, 8, 9))


@pytest.mark.slow  # 17 s: benchmarks/bench_slow_checks.py runs it
def test_a_coupled_random_mix_equals_brute_force(tmp_path):
    mix = _random_mix(tmp_path, 6)
    brute = MixEnumeration(mix)
    for objective in ("latency", "regret"):
        res = solve_mix(mix, objective, OPTIONS)
        assert res.report.extra["decomposition"]["exact"]["nodes"] > 1
        assert res.report.status == "OPTIMAL"
        assert res.report.objective == brute.optimum(objective).value, objective
