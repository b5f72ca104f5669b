"""The exact optimizer: optimum = brute force, claim = evaluator, restrictions and baselines never win."""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import pytest

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.ablation_ladder import ladder_scenarios
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.solvers.baselines import run_baselines
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve

EXAMPLES = sorted((Path(__file__).parents[1] / "benchmarks" / "examples").glob("*.toml"))

# (verifier, candidate drafters) per family; small models keep brute force fast
FAMILIES = {
    "gpt2": ("gpt2-large", ["gpt2-small", "opt-125m", "gpt2-medium"]),
    "opt": ("opt-1.3b", ["opt-125m", "gpt2-small", "opt-350m"]),
    "llama": ("llama-2.7b", ["llama-1.3b"]),
    "palm": ("palm-2.7b", ["palm-1.3b"]),
}


def small_scenarios(n: int, seed: int = 7) -> list[dict]:
    """Seeded small scenarios covering every family, 1-3 drafters, pipeline on/off, HBM and GDDR, both
    memory models (time-shared layouts and the partitioned convention) and both energy accountings."""
    rng = random.Random(seed)
    fams = list(FAMILIES)
    out = []
    for k in range(n):
        fam = fams[k % len(fams)]
        verifier, pool = FAMILIES[fam]
        n_drafters = min(1 + k % 3, len(pool))
        mem = ["hbm", "gddr"][(k // 2) % 2]
        drafters = [{"model": pool[i % len(pool)], "devices": 1, "acceptance": round(rng.uniform(0.5, 0.85), 2)}
                    for i in range(n_drafters)]
        space = {"memory_type": mem, "share_levels": 2 if fam == "palm" and n_drafters == 1 else 1,
                 "pipeline": ["free", "on", "off"][k % 3]}
        if n_drafters > 1:
            space["mapping"] = rng.choice(["fc-offload", "attention-offload", "free"])
        if mem == "hbm" or n_drafters > 1:  # fix the PIM units to keep brute force fast
            units = 8 if mem == "hbm" else 4
            lo, hi = (1, units - 1) if space.get("mapping", "free") != "free" else (0, units)
            space["pim_units"] = rng.randint(lo, hi)
        out.append({
            "name": f"small-{k}-{fam}", "batch_size": rng.choice([1, 2, 4]), "prompt_tokens": 128,
            "generated_tokens": 64, "objective": ["latency", "energy", "edp"][k % 3] if n_drafters == 1 else "latency",
            "host": "a100-40gb", "memory_types": ["hbm", "gddr"], "max_draft_length": 3 if n_drafters < 3 else 2,
            "verifier": {"model": verifier, "devices": 1}, "drafters": drafters, "space": space,
            # both memory models and both energy accountings (formulations/physics.md)
            "assumptions": {"memory_model": "partitioned" if k % 4 == 1 else "time-shared",
                            "energy_accounting": "dynamic" if k % 5 == 2 else "total"},
        })
    return out


#: the two largest small spaces (about 12 s each) run with `-m slow` (benchmarks/bench_slow_checks.py)
SLOW_SMALL = ("small-7-palm", "small-11-palm")


@pytest.mark.parametrize("data", [pytest.param(d, id=d["name"], marks=[pytest.mark.slow] if d["name"] in SLOW_SMALL
                                               else []) for d in small_scenarios(12)])
def test_cp_sat_optimum_equals_brute_force(data):
    sc = parse_scenario(data)
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    brute = brute_force(sc)
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute.report.objective
    # the returned design is priced identically by the evaluator
    assert Evaluator(sc).evaluate(exact.design).metrics.objective(sc.objective) == exact.report.objective


def test_staged_space_equals_brute_force():
    sc = parse_scenario({
        "name": "staged-small", "batch_size": 1, "prompt_tokens": 128, "generated_tokens": 64,
        "memory_types": ["gddr"], "max_draft_length": 4,
        "verifier": {"model": "gpt2-medium", "devices": 1},
        "drafters": [{"model": "gpt2-small", "devices": 1, "acceptance": 0.7,
                      "staging": {"draft2": ["ngram"], "max_draft_length": 2, "acceptance": {"ngram": 0.6}}}],
        "space": {"share_levels": 1},
    })
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute_force(sc).report.objective


@pytest.fixture(scope="module")
def example_solutions():
    options = SolverOptions(120, deterministic=True)
    return {p.stem: (load_scenario(p), solve(load_scenario(p), options=options)) for p in EXAMPLES}


def test_examples_solved_and_claim_equals_evaluator(example_solutions):
    for name, (sc, res) in example_solutions.items():
        m = res.evaluation.metrics
        claimed = res.report.extra["claimed"]
        assert claimed == {"round_time_ns": m.round_time_ns, "energy_nj_per_round": m.energy_nj_per_round,
                           "tokens_per_round_micro": m.tokens_per_round_micro}, name
        again = Evaluator(sc).evaluate(res.design).metrics
        assert again.objective(sc.objective) == res.report.objective, name
        assert res.report.status == "OPTIMAL", name
        assert res.report.bound == res.report.objective and res.report.gap == 0.0


def test_baselines_never_beat_the_optimum(example_solutions):
    for name, (sc, res) in example_solutions.items():
        for b in run_baselines(sc):
            if b.evaluation is not None and b.name != "GPU-AR":
                assert b.evaluation.metrics.objective(sc.objective) >= res.report.objective, (name, b.name)


def test_restricted_spaces_never_beat_the_free_space(example_solutions):
    sc, free = example_solutions["opt-13b"]
    for step, restricted in ladder_scenarios(sc):
        r = solve(restricted, options=SolverOptions(60, deterministic=True))
        assert r.report.objective >= free.report.objective, step
    fixed = sc.model_copy(update={"space": sc.space.model_copy(update={"draft_lengths": [5], "pipeline": "off",
                                                                       "speculation": "on"})})
    r = solve(fixed, options=SolverOptions(60, deterministic=True))
    assert r.design.drafters[0].draft_length == 5 and not r.design.pipeline
    assert r.report.objective >= free.report.objective


def test_deterministic_mode_gives_the_same_design_twice():
    sc = load_scenario(next(p for p in EXAMPLES if p.stem == "palm-8b"))
    a = solve(sc, options=SolverOptions(30, seed=3, deterministic=True))
    b = solve(sc, options=SolverOptions(30, seed=3, deterministic=True))
    assert a.design.key() == b.design.key()
    assert a.report.objective == b.report.objective


def test_a_worse_hint_still_reaches_the_optimum(example_solutions):
    sc, best = example_solutions["opt-13b"]
    worst = max((b.evaluation for b in run_baselines(sc) if b.evaluation is not None and b.name != "GPU-AR"),
                key=lambda e: e.metrics.objective(sc.objective))
    r = solve(sc, options=SolverOptions(60, deterministic=True), hint=worst.design)
    assert r.report.objective == best.report.objective


def test_contradictory_space_is_a_clear_error():
    sc = parse_scenario({"name": "no-host", "batch_size": 1, "prompt_tokens": 64, "generated_tokens": 64,
                         "memory_types": ["hbm"], "verifier": {"model": "gpt2-medium", "devices": 1},
                         "drafters": [{"model": "gpt2-small", "devices": 1}],
                         "space": {"pim_units": 0, "mapping": "fc-offload"}})
    with pytest.raises(ScenarioError, match=r"MAP-2"):
        solve(sc, options=SolverOptions(5, deterministic=True))


def test_infeasible_scenario_names_the_capacity_family():
    sc = parse_scenario({"name": "too-big", "batch_size": 1, "prompt_tokens": 256, "generated_tokens": 128,
                         "memory_types": ["gddr"], "verifier": {"model": "opt-66b", "devices": 1},
                         "drafters": [{"model": "opt-1.3b", "devices": 1}]})
    with pytest.raises(ScenarioError, match=r"\[CAP capacity of verifier \(opt-66b\)\].*at most"):
        solve(sc, options=SolverOptions(20, deterministic=True))


def test_latency_per_token_fraction_is_exact(example_solutions):
    _sc, r = example_solutions["llama-13b"]
    m = r.evaluation.metrics
    assert r.report.objective == Fraction(m.round_time_ns * 10**6, m.tokens_per_round_micro)


def test_autoregressive_scenario_without_drafters_equals_brute_force():
    sc = parse_scenario({"name": "ar", "batch_size": 2, "prompt_tokens": 128, "generated_tokens": 64,
                         "memory_types": ["gddr"], "verifier": {"model": "gpt2-medium", "devices": 1},
                         "space": {"share_levels": 1}})
    exact = solve(sc, options=SolverOptions(30, deterministic=True))
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute_force(sc).report.objective
    assert exact.evaluation.metrics.tokens_per_round_micro == 10**6


ODD_VOCAB_CATALOG = '''
[models."odd-llama"]
based_on = "llama-1.3b"
vocab = 32001
source_vocab = "test: an odd vocabulary, so the LM head and the input embedding table are not multiples of U KiB"
'''


def test_capacity_rows_count_the_evaluators_kib_per_tensor(tmp_path):
    """CAP-1/CAP-2 of the exact model and `Evaluator.capacity_of` count the same KiB: the LM head and an
    untied input embedding table are split (and rounded) as two tensors in both. With an odd vocabulary
    one tensor or two differ by a KiB under a `spread` layout, so a model that merged them would fail."""
    from specpim_cp.problem.operators import PLACEABLE_OPS
    from specpim_cp.problem.scenario import scenario_catalog
    from specpim_cp.solvers.exact.model import SpecModel

    (tmp_path / "odd.toml").write_text(ODD_VOCAB_CATALOG)
    (tmp_path / "s.toml").write_text('name = "odd"\ncatalog = "odd.toml"\nbatch_size = 1\nprompt_tokens = 64\n'
                                     'generated_tokens = 64\nmemory_types = ["hbm", "gddr"]\n'
                                     '[verifier]\nmodel = "odd-llama"\ndevices = 1\n')
    sc = load_scenario(tmp_path / "s.toml")
    catalog = scenario_catalog(sc)
    ev = Evaluator(sc, catalog)
    sm = SpecModel(sc, catalog, ev)
    cap_lit = sm.assumption_families["CAP capacity of verifier (odd-llama)"]
    rows: dict[frozenset, list[tuple[dict[int, int], int]]] = {}  # enforcement literals -> [CAP-1, CAP-2]
    for c in sm.m.proto.constraints:
        if c.has_linear() and cap_lit.index in c.enforcement_literal:
            domain = c.linear.domain
            rows.setdefault(frozenset(c.enforcement_literal), []).append(
                (dict(zip(c.linear.vars, c.linear.coeffs, strict=True)), domain[len(domain) - 1]))

    tb = ev.costs.tensor_bytes(catalog.models["odd-llama"], 1)
    lm_head = PLACEABLE_OPS.index("lm_head")
    merged_differs = False
    for a, xa in sm.x[0].items():
        cap1, cap2 = rows[frozenset((xa.index, cap_lit.index))]
        for layout in ("normal", "spread", "pim"):
            lits = []
            for op in PLACEABLE_OPS:
                ps = [p for p in sm.y[0][op] if sm.valid(0, a, op, p) and p.layout == layout]
                if not ps:
                    break
                lits.append(sm.y[0][op][ps[0]].index)
            else:
                use = ev.capacity_of("odd-llama", a, (layout,) * len(PLACEABLE_OPS), None)
                assert [sum(row.get(v, 0) for v in lits) for row, _ in (cap1, cap2)] == \
                    [use.pim_need_kib, use.normal_need_kib], (a.label(), layout)
                assert [cap1[1], cap2[1]] == [use.pim_capacity_kib, use.normal_capacity_kib]
                merged = ev.costs.split_kib(a, layout, tb.op_kib["lm_head"] + tb.embedding_kib)
                merged_differs |= merged != ev.capacity_table("odd-llama", a).tensor_split(lm_head, layout)
    assert merged_differs  # the catalog does exercise the rounding
