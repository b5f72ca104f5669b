"""Large token trees: the exact menu of width profiles ([TREE-4]) against brute force, against the round
formulas and against every hardware point of a small space; Sequoia's dynamic program up to 128 nodes;
measured acceptance vectors taken as measured ([TREE-5]); the `paper-trees-large` set; limits and errors."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from sequoia_dp import sequoia_table
from test_tree_space import _toml, tree_scenario

from specpim_cp.catalog import default_catalog
from specpim_cp.cli import main
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.costs import CostModel
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import Acceptance, falling_prices, round_stats, verifier_tokens
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.design import ArchConfig, DrafterChoice, SpecChoice
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.problem.space import DesignSpace, tree_options
from specpim_cp.problem.trees import (
    Dominance,
    MenuTooLarge,
    TreeDraft,
    count_profiles,
    depth_masses,
    dominant_profiles,
    draft_pass_tokens,
    rank_by_probability,
    render_tree,
    tree_profiles,
)
from specpim_cp.solvers.baselines import gpu_si
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve

# Sequoia's shipped acceptance-rate-vector.pt (Infini-AI-Lab/Sequoia@0ff3ff7): float32(count / 667), 32 ranks
SEQUOIA_COUNTS = (423, 72, 38, 15, 13, 10, 3, 2, 8, 3, 5, 3, 4, 2, 1, 2, 1, 2, 0, 2, 2, 2, 0, 1, 0, 1, 0, 0, 0,
                  1, 1, 1)
SEQUOIA_SHIPPED = tuple(float(np.float32(c) / np.float32(667)) for c in SEQUOIA_COUNTS)
SEQUOIA_16 = rank_by_probability(SEQUOIA_SHIPPED, 16, "acceptance_vector")


# --------------------------------------------------------------------------- the rule, by brute force


def _key(ws):
    return sum(ws), tuple(sorted(ws[:-1]))


def _dominates(a, b, p, rule: Dominance) -> bool:
    """[TREE-4] as written in formulations/speculation_rounds.md, in exact rational arithmetic."""
    if a == b or len(a) != len(b):
        return False
    (na, pa), (nb, pb) = _key(a), _key(b)
    if (na != nb) if rule.exact_verify else (na > nb):
        return False
    if (pa != pb) if rule.exact_passes else any(x > y for x, y in zip(pa, pb)):
        return False
    wa, wb = depth_masses(p, a), depth_masses(p, b)
    if all(x >= y for x, y in zip(wa, wb)):
        return True
    return not rule.joint and sum(map(Fraction, wa)) - sum(map(Fraction, wb)) >= Fraction(len(a), 2**53)


def _space(r, max_depth, max_nodes):
    return [ws for ws in tree_profiles(r, max_depth, max_nodes) if any(w > 1 for w in ws)]


RULES = {"one drafter": Dominance(), "several drafters": Dominance(joint=True),
         "exact verify": Dominance(exact_verify=True), "exact passes": Dominance(exact_passes=True)}


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("r,max_depth,max_nodes", [(3, 4, 9), (5, 3, 10), (2, 5, 10)])
def test_menu_is_the_pareto_set_of_the_rule(rule, r, max_depth, max_nodes):
    """Random vectors (no ties): the menu is exactly the profiles no other profile dominates."""
    rng = random.Random(r * 100 + max_nodes)
    for _ in range(2):
        raw = sorted((rng.random() for _ in range(r)), reverse=True)
        scale = rng.uniform(0.5, 0.95) / sum(raw)
        p = tuple(x * scale for x in raw)
        menu = set(dominant_profiles(p, r, range(1, max_depth + 1), max_nodes, RULES[rule]))
        space = _space(r, max_depth, max_nodes)
        assert menu <= set(space)
        undominated = {b for b in space if not any(_dominates(a, b, p, RULES[rule]) for a in space)}
        assert menu == undominated
        if rule == "several drafters":  # W(d) depth by depth: only equal keys can be compared
            assert len(menu) > 0.5 * len(space)


@pytest.mark.parametrize("p", [SEQUOIA_16[:4], (0.5, 0.2, 0.2), (0.7, 0.05, 0.0, 0.0)])
def test_every_left_out_profile_has_a_dominator_in_the_menu(p):
    """Vectors with ties and zero ranks: the menu keeps one of each tie, and every other profile is
    dominated by a profile of the menu."""
    r = len(p)
    for rule in RULES.values():
        menu = dominant_profiles(p, r, range(1, 5), 9, rule)
        assert list(menu) == sorted(menu, key=lambda ws: (sum(ws), len(ws), ws)) and len(set(menu)) == len(menu)
        for b in set(_space(r, 4, 9)) - set(menu):
            assert any(_dominates(a, b, p, rule) for a in menu), b


def _stats(p, ws, pipeline, others=()):
    tree = TreeDraft(p, ws)
    drafts = [tree, *others]
    return (spec.expected_tokens_micro_drafts(drafts, pipeline),
            spec.fail_q_drafts(drafts) if pipeline else 0,
            spec.drafter_fail_q_drafts(drafts, 0) if pipeline else 0)


def test_a_dominator_has_every_round_statistic_at_least_as_good():
    """[TREE-4] (c) on the round formulas themselves (the integer statistics the evaluator and the model
    read): one drafter, vanilla and pipelined; several drafters, vanilla, next to chains."""
    for p in (SEQUOIA_16[:5], (0.78, 0.065, 0.034, 0.0135)):
        r = len(p)
        for joint in (False, True):
            rule = Dominance(joint=joint)
            menu = dominant_profiles(p, r, range(1, 5), 10, rule)
            for b in set(_space(r, 4, 10)) - set(menu):
                a = next(a for a in menu if _dominates(a, b, p, rule))
                if joint:
                    others = ((0.6, 2), (0.8, 5))
                    assert _stats(p, a, False, others)[0] >= _stats(p, b, False, others)[0]
                    continue
                for pipeline in (False, True):
                    (ta, qa, da), (tb, qb, db) = _stats(p, a, pipeline), _stats(p, b, pipeline)
                    assert ta >= tb and qa == qb and da == db, (a, b)
                assert sum(a) <= sum(b)
                assert sorted(draft_pass_tokens(a)) <= sorted(draft_pass_tokens(b)) or all(
                    x <= y for x, y in zip(sorted(draft_pass_tokens(a)), sorted(draft_pass_tokens(b))))


# --------------------------------------------------------------------------- exact on every hardware point


def _hardware_points(sc, space: DesignSpace):
    """Every architecture of each model with every mapping rule it allows (layouts fitted)."""
    out = []
    for m in space.models:
        pts = []
        for a in m.archs:
            for rule in ("host-only", "fc-offload", "attention-offload", "all-pim"):
                place = rule_placement(rule, sc.space.share_levels)
                if all(place[op] in m.allowed(a, op) for op in place):
                    pts.append((a, place))
        out.append(pts)
    return out


def test_the_menu_loses_nothing_on_any_hardware_point():
    """The evaluator over every profile of a small tree space and over its menu, on every architecture
    and mapping of verifier and drafter, vanilla and pipelined: the same best latency and the same best
    energy per token, and every profile's (latency, energy) is matched or beaten by a profile of the menu."""
    data = tree_scenario(1, max_draft_length=3)
    data["drafters"][0]["tree"] = {"max_nodes": 6, "max_children": 3}
    data["space"] = {"memory_type": "gddr", "share_levels": 1}
    sc = parse_scenario(data)
    cat = default_catalog()
    space = DesignSpace(sc, cat)
    ev = Evaluator(sc, cat)
    menu = space.tree_options(0)
    full = _space(3, 3, 6)
    assert set(menu) < set(full) and len(menu) < len(full)
    checked = 0
    for (va, vp), (da, dp) in itertools.product(*_hardware_points(sc, space)):
        for pipeline in (False, True):
            def point(ws, va=va, vp=vp, da=da, dp=dp, pipeline=pipeline):
                design = space.build([va, da], [vp, dp], SpecChoice((DrafterChoice(len(ws), None, ws),), pipeline))
                m = ev.metrics(design, check=False)
                return m.latency_fraction(), m.energy_fraction()
            ours = [point(ws) for ws in menu]
            for ws in full:
                lat, en = point(ws)
                assert any(a <= lat and b <= en for a, b in ours), (va, vp, da, dp, pipeline, ws)
            checked += 1
    assert checked >= 20


def test_cp_sat_equals_brute_force_with_a_re_ranked_vector():
    """A measured vector out of rank order and longer than max_children, on a small space: CP-SAT's optimum
    over the menu is brute force's, and no tree outside the menu beats it (evaluator, on the optimum's
    hardware)."""
    data = tree_scenario(0, max_draft_length=3)
    del data["drafters"][0]["acceptance"]
    data["drafters"][0]["tree"] = {"max_nodes": 7, "max_children": 4,
                                   "acceptance_vector": [0.7, 0.05, 0.12, 0.01, 0.03, 0.02]}
    sc = parse_scenario(data)
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    brute = brute_force(sc)
    assert exact.report.status == "OPTIMAL" and exact.report.objective == brute.report.objective
    ev = Evaluator(sc)
    assert ev.acceptance.tree(0) == (0.7, 0.12, 0.05, 0.03)
    assert "re-ranked by probability" in ev.acceptance.notes[0] and "beyond max_children 4" in ev.acceptance.notes[0]
    best = exact.design
    for ws in _space(4, 3, 7):
        d = best.model_copy(update={"drafters": [best.drafters[0].model_copy(update={"tree": ws,
                                                                                      "draft_length": len(ws)})]})
        for pipeline in (False, True):
            m = ev.metrics(d.model_copy(update={"pipeline": pipeline}), check=False)
            assert m.objective(sc.objective) >= exact.report.objective


# --------------------------------------------------------------------------- Sequoia's dynamic program


@pytest.mark.parametrize("max_nodes,max_depth", [(128, 2), (16, 8)])
def test_menu_reaches_sequoias_best_expected_tokens(max_nodes, max_depth):
    """For every budget n <= max_nodes and depth bound D, the menu's best E over its profiles of at most n
    nodes and depth at most D is Sequoia's T[n + 1][D + 1] (Sequoia counts the root in the budget and the
    levels; T counts it as the verifier's token, as our E = 1 + sum W(d) does), with Sequoia's shipped
    vector re-ranked by probability and cut to 16 candidates per node as its DP's ranks."""
    menu = dominant_profiles(SEQUOIA_16, 16, range(1, max_depth + 1), max_nodes)
    chains = [(1,) * g for g in range(1, max_depth + 1)]  # the chain options beside the menu
    table, _ = sequoia_table(SEQUOIA_16, max_nodes, max_depth)
    best = {}
    for ws in (*menu, *chains):
        e = spec.expected_tokens_drafts([TreeDraft(SEQUOIA_16, ws)])
        best[(sum(ws), len(ws))] = max(best.get((sum(ws), len(ws)), 0.0), e)
    for n in range(1, max_nodes + 1):
        for depth in range(1, max_depth + 1):
            ours = max(e for (k, d), e in best.items() if k <= n and d <= depth)
            # T[m][l] holds exactly m nodes (-inf where impossible: 17+ nodes in one level of 16 candidates)
            dp = max(max(table[m][depth + 1]) for m in range(2, n + 2))
            assert ours == pytest.approx(dp, rel=1e-12), (n, depth)
            if max(table[n + 1][depth + 1]) > 0:  # and T grows with the budget: the budget's own value
                assert ours == pytest.approx(max(table[n + 1][depth + 1]), rel=1e-12), (n, depth)


def _flat_drafter(ev: Evaluator, drafter: str, time_ns: int):
    """Evaluator.pass_price with the drafter's passes at one price whatever their tokens (Sequoia's cost
    model: a drafting step costs the same at every width)."""
    real = ev.pass_price

    def price(md, tokens, *args, **kwargs):
        p = real(md, tokens, *args, **kwargs)
        return p if md.model != drafter else replace(p, time_ns=time_ns)

    return price


@pytest.mark.parametrize("draft_ns", [300_000, 2_000_000])
def test_fixed_hardware_tree_equals_sequoias_choice_up_to_128_nodes(draft_ns, monkeypatch):
    """Fixed hardware (GPU-SI of a paper-trees-large scenario: its architecture and host mapping), Sequoia's
    width-independent drafting cost: the evaluator's best design over the menu (trees up to 128 nodes,
    depth <= 2, chains) has Sequoia's best objective, (D x t_draft + V(n + 1) + sync) / T[n + 1][D + 1] over
    budgets n <= 128 and depths D (our pass count: D drafting passes), and its tree has Sequoia's E."""
    sc = load_scenario(builtin_sets()["paper-trees-large"] / "opt-13b-b1-gpu-si-n128.toml")
    cat = default_catalog()
    ev = Evaluator(sc, cat)
    monkeypatch.setattr(ev, "pass_price", _flat_drafter(ev, "opt-1.3b", draft_ns))
    space = DesignSpace(sc, cat)
    base = gpu_si(sc, cat).design
    archs, places = [md.arch for _, md in base.models()], [md.placement for _, md in base.models()]
    best = min((Fraction(m.round_time_ns) / m.tokens_per_round_micro, c.drafters[0])
               for c in space.choice_list if c.speculates  # Sequoia's program compares drafts
               for m in [ev.metrics(space.build(archs, places, c), check=False)])
    p = ev.acceptance.tree(0)
    table, _ = sequoia_table(p, 128, 2)
    sync = ev.costs.host.sync_latency_ns
    verify = {n: ev.pass_price(base.verifier, verifier_tokens(1, SpecChoice((DrafterChoice(n),), False))).time_ns
              for n in range(1, 129)}
    dp = min(((depth * draft_ns + verify[n] + sync) / max(table[n + 1][depth + 1]), n, depth)
             for n in range(1, 129) for depth in (1, 2) if max(table[n + 1][depth + 1]) > 0)
    assert float(best[0]) * spec.TOKENS_SCALE == pytest.approx(dp[0], rel=1e-6)  # E_micro: E to 1e-6
    choice = best[1]
    widths = choice.tree if choice.tree is not None else (1,) * choice.draft_length
    e = spec.expected_tokens_drafts([TreeDraft(p, widths)])
    assert e == pytest.approx(max(table[sum(widths) + 1][len(widths) + 1]), rel=1e-12)
    assert (sum(widths), len(widths)) == dp[1:]


# --------------------------------------------------------------------------- limits, vectors, the set


def test_count_profiles_counts_the_tree_space():
    for r, depth, nodes in [(1, 4, 10), (2, 3, 4), (3, 4, 9), (16, 3, 40), (4, 6, 12)]:
        by_depth = [count_profiles(r, d, nodes) for d in range(1, depth + 1)]
        profiles = tree_profiles(r, depth, nodes)
        assert by_depth == [sum(len(ws) == d for ws in profiles) for d in range(1, depth + 1)]
    assert count_profiles(16, 0, 5) == 0


def test_limits_refuse_with_the_count():
    with pytest.raises(MenuTooLarge, match="in the tree space"):
        dominant_profiles(SEQUOIA_16, 16, range(1, 9), 64, work_limit=1_000_000)
    with pytest.raises(MenuTooLarge, match="left after dominance") as exc:
        dominant_profiles(SEQUOIA_16, 16, range(1, 9), 16, limit=1000)
    assert exc.value.count > 1000 and exc.value.limit == 1000
    assert len(dominant_profiles(SEQUOIA_16, 16, range(1, 9), 16, limit=2000)) == 1670
    with pytest.raises(ValueError, match="more than max_children"):
        dominant_profiles((0.5, 0.2, 0.1), 2, (1, 2), 4)


def test_tree_options_without_a_catalog_and_with_several_drafters():
    sc = parse_scenario(tree_scenario(3))
    assert tree_options(sc, 0) == DesignSpace(sc, default_catalog()).tree_options(0)
    one = parse_scenario(tree_scenario(0))
    # several drafters compare W(d) depth by depth: a larger menu than one drafter's for the same tree space
    assert len(tree_options(sc, 0)) >= len(tree_options(one, 0))


def test_the_menu_is_built_from_the_ranked_vector():
    data = tree_scenario(0, max_draft_length=3)
    del data["drafters"][0]["acceptance"]
    data["drafters"][0]["tree"] = {"max_nodes": 7, "max_children": 3, "acceptance_vector": [0.6, 0.05, 0.2]}
    sc = parse_scenario(data)
    ranked = rank_by_probability((0.6, 0.05, 0.2), 3)
    assert tree_options(sc, 0) == dominant_profiles(ranked, 3, (1, 2, 3), 7)
    acc = Acceptance.of(sc, default_catalog())
    assert acc.drafters == (0.6,) and acc.tree(0) == (0.6, 0.2, 0.05)
    stats = round_stats(SpecChoice((DrafterChoice(2, None, (2, 3)),), False), acc)
    assert stats.tokens_micro == spec.expected_tokens_micro_drafts([TreeDraft((0.6, 0.2, 0.05), (2, 3))])


def test_paper_trees_large_set():
    files = sorted(builtin_sets()["paper-trees-large"].glob("*.toml"))
    assert len(files) == 16
    cat = default_catalog()
    for path in files:
        sc = load_scenario(path)
        t = sc.drafters[0].tree
        assert t.max_nodes in (64, 128) and t.max_children == 16 and sc.max_draft_length == 2
        gpu = sc.space.pim_units == 0
        assert gpu == ("gpu-si" in path.stem) and (sc.space.pipeline == "off") == gpu
        assert len(DesignSpace(sc, cat).tree_options(0)) == {64: 610, 128: 1304}[t.max_nodes]
        assert "re-ranked by probability" in Acceptance.of(sc, cat).notes[0]


def test_a_gpu_si_large_scenario_solves_to_a_large_tree():
    sc = load_scenario(builtin_sets()["paper-trees-large"] / "opt-13b-b1-gpu-si-n64.toml")
    res = solve(sc, options=SolverOptions(60, deterministic=True))
    assert res.report.status == "OPTIMAL"
    assert res.design.drafters[0].tree is not None and sum(res.design.drafters[0].tree) > 16


def test_evaluate_text_states_the_convention_and_the_re_ranking(tmp_path):
    sc = load_scenario(builtin_sets()["paper-trees-large"] / "opt-13b-b1-gpu-si-n128.toml")
    base = gpu_si(sc).design
    tree = (16, 37)
    design = base.model_copy(update={"drafters": [base.drafters[0].model_copy(update={"tree": tree,
                                                                                       "draft_length": 2})]})
    out = tmp_path / "d.json"
    out.write_text(json.dumps(design.model_dump(mode="json")))
    path = builtin_sets()["paper-trees-large"] / "opt-13b-b1-gpu-si-n128.toml"
    r = CliRunner().invoke(main, ["evaluate", str(path), "--design", str(out)])
    assert r.exit_code == 0, r.output
    assert "tree 16-37: 53 nodes, depth 2" in r.output and "is not a node" in r.output and "bonus" in r.output
    assert "re-ranked by probability" in r.output
    text = render_tree(Evaluator(sc).acceptance.tree(0), tree)
    assert text.splitlines()[2].startswith("(note: drafters[0].tree.acceptance_vector is not non-increasing")
    # 129 nodes: outside the space (tree.max_nodes 128)
    big = design.model_copy(update={"drafters": [design.drafters[0].model_copy(update={"tree": (16, 113)})]})
    out.write_text(json.dumps(big.model_dump(mode="json")))
    r = CliRunner().invoke(main, ["evaluate", str(path), "--design", str(out)])
    assert r.exit_code == 2 and "129 nodes, more than the 128" in r.output and "tree.max_nodes" in r.output


def test_scenario_errors_for_trees_are_one_line(tmp_path):
    def run(tree):
        data = tree_scenario(0)
        del data["drafters"][0]["acceptance"]
        data["drafters"][0]["tree"] = tree
        path = tmp_path / "s.toml"
        path.write_text(_toml(data))
        return CliRunner().invoke(main, ["solve", str(path), "--deterministic"])

    for tree, needles in [({"max_nodes": 129}, ["max_nodes", "128"]),
                          ({"max_children": 17}, ["max_children", "16"]),
                          ({"acceptance_vector": [0.6, -0.01]}, ["acceptance_vector[rank 2] must be in [0, 1]"]),
                          ({"acceptance_vector": [0.6, 0.5]}, ["sum to at most 1"]),
                          ({"acceptance_vector": [0.2, 1.0]}, ["acceptance_vector[rank 2] must be < 1"])]:
        r = run(tree)
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
        assert "Traceback" not in r.output and all(n in r.output for n in needles), r.output


def test_prices_are_non_decreasing_in_tokens():
    """The [TREE-4] premise on the shipped catalog, for the large set's models on every architecture and
    mapping of its PIM space (benchmarks/bench_trees_large.py --prices checks every scenario)."""
    sc = load_scenario(builtin_sets()["paper-trees-large"] / "opt-13b-b1-pim-n64.toml")
    cat = default_catalog()
    costs, space = CostModel(sc, cat), DesignSpace(sc, cat)
    for m in space.models:
        assert falling_prices(costs, m, list(range(1, 66))) == []
    # and the check finds a falling price
    fake = replace(space.models[1], archs=(ArchConfig("hbm", 0, 1),))
    assert falling_prices(costs, fake, [64, 1]) and not falling_prices(costs, fake, [1, 64])



@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in builtin_sets()["paper-trees-large"].glob("*.toml")))
def test_paper_trees_large_is_proven_optimal(name):
    """Every scenario of the set (benchmarks/bench_trees_large.py prints the times: median 2.6 s, max 7.9 s)."""
    sc = load_scenario(builtin_sets()["paper-trees-large"] / f"{name}.toml")
    res = solve(sc, options=SolverOptions(600, deterministic=True))
    assert res.report.status == "OPTIMAL"
    assert Evaluator(sc).evaluate(res.design).metrics.objective(sc.objective) == res.report.objective
