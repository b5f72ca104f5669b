"""[TREE-6] Tree spaces beyond the exact menu: tree classes, relaxed columns that dominate every member, the
column solver against the menu, brute force and every profile on the optimum's hardware, Sequoia's dynamic
program on fixed hardware up to 128 nodes and depth 6, honest statuses under a time limit, refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from sequoia_dp import sequoia_table
from test_tree_space import tree_scenario
from test_trees_large import SEQUOIA_16, _flat_drafter, _space

from specpim_cp.catalog import default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import round_stats, verifier_tokens
from specpim_cp.problem import space as space_module
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.design import DrafterChoice, SpecChoice
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.problem.space import DesignSpace
from specpim_cp.problem.tree_classes import (
    TreeClass,
    class_members,
    initial_classes,
    mass_bound,
    relaxed_passes,
    split_class,
)
from specpim_cp.problem.trees import TreeDraft, depth_masses, tree_profiles
from specpim_cp.solvers.baselines import gpu_si
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.exact.tree_column_set import ColumnSearch

VECTORS = [SEQUOIA_16[:4], (0.5, 0.2, 0.2), (0.7, 0.05, 0.0, 0.0), (0.6, 0.15, 0.1, 0.05)]


def _all_classes(cls: TreeClass, r: int):
    """The class and every class its refinement can reach."""
    yield cls
    for sub in split_class(cls, r)[0]:
        yield from _all_classes(sub, r)


# --------------------------------------------------------------------------- classes


@pytest.mark.parametrize("r,max_depth,max_nodes", [(3, 5, 11), (4, 4, 12), (2, 6, 12), (16, 3, 20)])
def test_classes_partition_the_tree_space_and_splits_partition_a_class(r, max_depth, max_nodes):
    classes, profiles = initial_classes(r, range(1, max_depth + 1), max_nodes)
    members = list(profiles) + [ws for c in classes for ws in class_members(c, r)]
    space = [ws for ws in tree_profiles(r, max_depth, max_nodes) if any(w > 1 for w in ws)]
    assert sorted(members) == sorted(space) and len(members) == len(set(members))
    for top in classes:
        for cls in _all_classes(top, r):
            subs, found = split_class(cls, r)
            parts = list(found) + [ws for s in subs for ws in class_members(s, r)]
            assert sorted(parts) == sorted(class_members(cls, r)) and len(parts) == len(set(parts))
            assert all(len(s.prefix) <= s.depth - 2 for s in subs)


@pytest.mark.parametrize("p", VECTORS)
def test_relaxed_passes_and_mass_bound_dominate_every_member(p):
    """Every class reachable from (depth, n) for n <= 10, depth <= 5, R = len(p): the relaxed passes are
    element-wise no wider than every member's sorted passes, and the mass bound is at least every member's E
    (the floats the statistics use), by enumeration."""
    r = len(p)
    checked = 0
    for top in initial_classes(r, range(2, 6), 10)[0]:
        for cls in _all_classes(top, r):
            passes, bound = relaxed_passes(cls, r), mass_bound(p, cls)
            members = list(class_members(cls, r))
            assert members
            for ws in members:
                assert all(a <= b for a, b in zip(passes, sorted(ws[:-1]), strict=True)), (cls, ws)
                assert 1.0 + math.fsum(depth_masses(p, ws)) <= bound, (cls, ws)
            assert passes in {tuple(sorted(ws[:-1])) for ws in members} or len(members) > 1
            checked += 1
    assert checked > 200


def test_the_mass_bound_of_a_whole_class_is_sequoias_best():
    """For (depth D, n nodes) the bound is Sequoia's T[n + 1][D + 1] (the best tree of n nodes and depth <= D),
    at most MASS_SLACK above; at depth 1..6 and n <= 128 with Sequoia's shipped vector, 16 candidates."""
    table, _ = sequoia_table(SEQUOIA_16, 128, 6)
    for depth in (2, 4, 6):
        for n in (depth + 1, 16, 64, 128):
            cls = TreeClass(depth, n)
            assert mass_bound(SEQUOIA_16, cls) == pytest.approx(max(table[n + 1][depth + 1]), abs=2e-9)


def test_relaxed_statistics_dominate_every_member():
    """The relaxed column's integer statistics (vanilla and pipelined) against every member's by enumeration:
    expected tokens at least, q, q_c, outcomes and rounds equal (they depend on the depth only)."""
    data = tree_scenario(4, max_draft_length=4)
    data["drafters"][0]["tree"] = {"max_nodes": 10, "max_children": 3, "acceptance_vector": [0.7, 0.12, 0.05]}
    data["space"]["pipeline"] = "free"
    sc = parse_scenario(data)
    cat = default_catalog()
    ev = Evaluator(sc, cat)
    search = ColumnSearch(sc, cat, ev)
    checked = 0
    for top in sorted(search.classes):
        for cls in _all_classes(top, 3):
            for pipeline in (False, True):
                relaxed = search.relaxed_stats(cls, pipeline)
                choice = search.relaxed_choice(cls, pipeline)
                assert choice.drafters[0].nodes == cls.nodes and choice.drafters[0].draft_length == cls.depth
                for ws in class_members(cls, 3):
                    st = round_stats(SpecChoice((DrafterChoice(len(ws), None, ws),), pipeline), ev.acceptance)
                    assert relaxed.tokens_micro >= st.tokens_micro
                    assert (relaxed.q, relaxed.drafter_q, relaxed.outcomes, relaxed.rounds_scaled) == (
                        st.q, st.drafter_q, st.outcomes, st.rounds_scaled)
                    checked += 1
    assert checked > 500


# --------------------------------------------------------------------------- the column solver


def _columns(monkeypatch) -> None:
    """Every tree menu counts as too large: the solve refines classes ([TREE-6]) instead."""
    monkeypatch.setattr(space_module, "MAX_TREE_PROFILES", 0)


def _small(k: int, nodes: int, depth: int, **space) -> dict:
    data = tree_scenario(k, max_draft_length=depth)
    data["drafters"][0]["tree"] = {**data["drafters"][0]["tree"], "max_nodes": nodes}
    data["space"].update(space)
    data["objective"] = "latency"
    return data


CASES = {  # name: (tree_scenario k, nodes, depth, space updates)
    "host-vanilla": (0, 8, 4, {"pipeline": "off"}),
    "host-pipeline-free": (0, 7, 3, {}),
    "pim-free-mapping": (1, 7, 3, {}),
    "fc-offload-b4": (2, 6, 3, {}),
    "re-ranked-pipelined": (4, 8, 4, {}),
    # the two above whose optimum is the verifier alone ([NOSPEC]), made to speculate: their trees are compared
    "pim-free-mapping-speculating": (1, 7, 3, {"speculation": "on"}),
    "fc-offload-b4-speculating": (2, 6, 3, {"speculation": "on"}),
}


@pytest.mark.parametrize("objective", ["latency", "energy"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_columns_equal_the_menu_and_brute_force(case, objective, monkeypatch):
    """Where the exact menu fits, the column solver's optimum is the menu's (the same canonical design and
    objective, proven), brute force's, and no profile of the whole tree space beats it on its hardware."""
    k, nodes, depth, updates = CASES[case]
    sc = parse_scenario(_small(k, nodes, depth, **updates))
    menu = solve(sc, objective=objective, options=SolverOptions(60, deterministic=True))
    brute = brute_force(sc, objective=objective) if case != "re-ranked-pipelined" else None
    _columns(monkeypatch)
    with pytest.raises(ScenarioError, match="tree.max_nodes"):
        DesignSpace(sc, default_catalog()).tree_options(0)
    cols = solve(sc, objective=objective, options=SolverOptions(60, deterministic=True))
    assert "tree_columns" in cols.report.extra and "tree_columns" not in menu.report.extra
    assert cols.report.status == menu.report.status == "OPTIMAL"
    assert cols.report.objective == menu.report.objective == cols.report.bound
    assert brute is None or brute.report.objective == cols.report.objective
    assert cols.design.key() == menu.design.key()
    assert cols.report.extra["canonical"] == menu.report.extra["canonical"]
    ev = Evaluator(sc)
    best = cols.design
    r = sc.drafters[0].tree.max_children
    for ws in _space(r, depth, nodes) if best.drafters else ():  # the verifier alone drafts no tree
        d = best.model_copy(update={"drafters": [best.drafters[0].model_copy(update={"tree": ws,
                                                                                      "draft_length": len(ws)})]})
        assert ev.metrics(d, check=False).objective(objective) >= cols.report.objective


@pytest.fixture(scope="module")
def deep_gpu_b1():
    """paper-trees-deep's GPU-SI scenario at batch 1 (64 nodes, depth <= 6) and its proven solve."""
    sc = load_scenario(builtin_sets()["paper-trees-deep"] / "opt-13b-b1-gpu-si-n64.toml")
    return sc, solve(sc, options=SolverOptions(60, deterministic=True))


def test_a_deep_large_space_solves_to_a_real_tree(deep_gpu_b1):
    """paper-trees-deep, GPU-SI at batch 1, 64 nodes and depth <= 6: proven optimal with a real profile, priced
    by the evaluator, deeper than the depth <= 2 optimum of paper-trees-large and better."""
    sc, res = deep_gpu_b1
    assert res.report.status == "OPTIMAL" and res.report.bound == res.report.objective
    tree = res.design.drafters[0].tree
    assert tree is not None and len(tree) > 2 and sum(tree) > 16
    assert Evaluator(sc).evaluate(res.design).metrics.objective("latency") == res.report.objective
    assert res.report.extra["tree_columns"]["classes_split"] > 0
    shallow = load_scenario(builtin_sets()["paper-trees-large"] / "opt-13b-b1-gpu-si-n64.toml")
    assert res.report.objective < solve(shallow, options=SolverOptions(60, deterministic=True)).report.objective


def test_a_deep_hint_is_taken_as_a_column(deep_gpu_b1):
    """A hint drafting a deep tree (here the optimum itself) starts the refinement; the optimum is the same."""
    sc, res = deep_gpu_b1
    again = solve(sc, hint=res.design, options=SolverOptions(60, deterministic=True))
    assert again.report.status == "OPTIMAL" and again.report.objective == res.report.objective
    assert again.design.key() == res.design.key()


def test_a_time_limit_gives_feasible_with_a_valid_bound(deep_gpu_b1):
    """Cut short, the column solve returns a real design, FEASIBLE (never a false OPTIMAL), and a bound no
    higher than the proven optimum."""
    sc, full = deep_gpu_b1
    cut = solve(sc, options=SolverOptions(0.02, deterministic=True))
    assert cut.report.status in ("FEASIBLE", "OPTIMAL")
    assert cut.report.bound <= full.report.objective <= cut.report.objective
    if cut.report.status == "FEASIBLE":
        assert cut.report.extra["canonical"] is False
    assert Evaluator(sc).evaluate(cut.design).metrics.objective("latency") == cut.report.objective


def test_the_columns_refuse_what_they_do_not_cover(monkeypatch):
    """Several drafters (W(d) compared depth by depth) and EDP keep the [TREE-4] refusal, with the reason."""
    _columns(monkeypatch)
    two = parse_scenario(tree_scenario(3))
    with pytest.raises(ScenarioError, match=r"tree.max_nodes.*\[TREE-6\] does not apply: it covers one drafter"):
        solve(two, options=SolverOptions(10, deterministic=True))
    one = parse_scenario(_small(0, 6, 3))
    with pytest.raises(ScenarioError, match=r"\[TREE-6\] does not apply: .*not edp"):
        solve(one, objective="edp", options=SolverOptions(10, deterministic=True))


# --------------------------------------------------------------------------- Sequoia, fixed hardware


@pytest.mark.parametrize("draft_ns", [300_000, 2_000_000])
def test_fixed_hardware_refinement_equals_sequoias_choice_up_to_128_nodes_depth_6(draft_ns, monkeypatch):
    """Fixed hardware (GPU-SI of paper-trees-deep at batch 1: its architecture and host mapping), Sequoia's
    width-independent drafting cost: the class refinement on that hardware (`ColumnSearch.dive` over every
    class, exact once its heap empties) finds Sequoia's best objective (D t_draft + V(n + 1) + sync) /
    T[n + 1][D + 1] over budgets n <= 128 and depths D <= 6, and a tree with Sequoia's E."""
    sc = load_scenario(builtin_sets()["paper-trees-deep"] / "opt-13b-b1-gpu-si-n128.toml")
    cat = default_catalog()
    ev = Evaluator(sc, cat)
    monkeypatch.setattr(ev, "pass_price", _flat_drafter(ev, "opt-1.3b", draft_ns))
    search = ColumnSearch(sc, cat, ev)
    base = gpu_si(sc, cat).design
    # the best chain or depth-1 tree on this hardware, then every class refined there
    def priced(ws):
        tree = ws if any(w > 1 for w in ws) else None
        md = base.drafters[0].model_copy(update={"draft_length": len(ws), "tree": tree})
        m = ev.metrics(base.model_copy(update={"drafters": [md]}), check=False)
        return Fraction(m.round_time_ns, m.tokens_per_round_micro), ws, m

    _, ws0, metrics = min(priced(ws) for ws in [(1,) * g for g in range(1, 7)] + sorted(search.profiles))
    found = search.dive(base, min(search.classes), "latency", metrics.round_time_ns, metrics.tokens_per_round_micro,
                        limit=None)
    best = ev.metrics(found, check=False) if found is not None else metrics
    widths = found.drafters[0].tree if found is not None else ws0
    p = ev.acceptance.tree(0)
    table, _ = sequoia_table(p, 128, 6)
    sync = ev.costs.host.sync_latency_ns
    verify = {n: ev.pass_price(base.verifier, verifier_tokens(1, SpecChoice((DrafterChoice(n),), False))).time_ns
              for n in range(1, 129)}
    dp = min(((depth * draft_ns + verify[n] + sync) / max(table[n + 1][depth + 1]), n, depth)
             for n in range(1, 129) for depth in range(1, 7) if max(table[n + 1][depth + 1]) > 0)
    ours = Fraction(best.round_time_ns, best.tokens_per_round_micro)
    assert float(ours) * spec.TOKENS_SCALE == pytest.approx(dp[0], rel=1e-6)
    e = spec.expected_tokens_drafts([TreeDraft(p, widths)])
    assert e == pytest.approx(max(table[sum(widths) + 1][len(widths) + 1]), rel=1e-12)
    assert (sum(widths), len(widths)) == dp[1:]
    assert search.refined > 0


# --------------------------------------------------------------------------- the paper-trees-deep set


def test_paper_trees_deep_set():
    """paper-trees-large's 16 scenarios at depth <= 6: the same scenarios otherwise, and beyond an exact menu."""
    sets = builtin_sets()
    files = sorted(sets["paper-trees-deep"].glob("*.toml"))
    assert [p.name for p in files] == sorted(p.name for p in sets["paper-trees-large"].glob("*.toml"))
    for path in files:
        deep, large = load_scenario(path), load_scenario(sets["paper-trees-large"] / path.name)
        assert deep.max_draft_length == 6 and deep.name == f"{large.name}-d6"
        same = {"max_draft_length": 6, "name": deep.name, "description": deep.description}
        assert large.model_copy(update=same) == deep
    with pytest.raises(ScenarioError, match="tree.max_nodes"):
        DesignSpace(load_scenario(files[0]), default_catalog()).tree_options(0)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in builtin_sets()["paper-trees-deep"].glob("*.toml")))
def test_paper_trees_deep_is_proven_optimal(name):
    """Every scenario of the set, latency (benchmarks/bench_trees_large.py paper-trees-deep prints the times:
    median 7.4 s, max 27 s wall) and energy, priced by the evaluator; proven, except the energy of PIM at
    batch 8, whose last step CP-SAT does not close in 60 deterministic units (a valid bound; batch 4 is
    proven within them since the column steps use CUT-4's energy bounds)."""
    sc = load_scenario(builtin_sets()["paper-trees-deep"] / f"{name}.toml")
    for objective in ("latency", "energy"):
        hard = objective == "energy" and "pim" in name and sc.batch_size >= 8
        res = solve(sc, objective=objective, options=SolverOptions(60 if hard else 600, deterministic=True))
        assert res.report.status == ("FEASIBLE" if hard and res.report.status != "OPTIMAL" else "OPTIMAL")
        assert res.report.bound <= res.report.objective
        assert res.report.status != "OPTIMAL" or res.report.bound == res.report.objective
        assert Evaluator(sc).evaluate(res.design).metrics.objective(objective) == res.report.objective


def test_numeric_check_builds_the_column_model_and_records_the_edp_refusal(monkeypatch):
    """Beyond the menu the range check measures TREE-6's first column model for latency and energy (every
    row within CP-SAT's range) and records, for EDP, the one-line refusal `solve` gives."""
    from specpim_cp.solvers.exact.guards import INT_LIMIT
    from specpim_cp.solvers.exact.numeric import profile_reports

    _columns(monkeypatch)
    reports = {r.objective: r for r in profile_reports(parse_scenario(_small(0, 6, 3)))}
    for objective in ("latency", "energy"):
        r = reports[objective]
        assert not r.refused and not r.solve_refuses and r.rows > 0
        assert r.base_worst.activity <= INT_LIMIT
    assert reports["edp"].solve_refuses and "[TREE-6] does not apply" in reports["edp"].refused
