"""Token trees [TREE]: positional vectors, top-ranked trees and their optimality (brute force over all
trees), closed forms against enumeration of acceptance outcomes (chains and trees, vanilla and
pipeline), bit-identity with the chain functions, profile enumeration, Sequoia's dynamic program as an
independent reference, and Monte Carlo agreement on token identities."""

from __future__ import annotations

import itertools
import math
import pickle
import random

import numpy as np
import pytest
from sequoia_dp import sequoia_best_tree, sequoia_table, sequoia_values, sequoia_widths

from specpim_cp.check.simulate import SimDrafter, format_simulation, simulate_rounds
from specpim_cp.physics.speculation import (
    Q_SCALE,
    TOKENS_SCALE,
    continue_probability,
    continue_probability_drafts,
    draft_spec,
    drafter_fail_q,
    drafter_fail_q_drafts,
    drafter_valid_probability,
    drafter_valid_probability_drafts,
    expected_tokens,
    expected_tokens_drafts,
    expected_tokens_micro,
    expected_tokens_micro_drafts,
    fail_q,
    fail_q_drafts,
)
from specpim_cp.problem.trees import (
    TOKEN_CONVENTION,
    RankedVector,
    TreeDraft,
    check_widths,
    conditional_rates,
    depth_masses,
    draft_pass_tokens,
    positional_vector,
    rank_by_probability,
    render_tree,
    top_ranked_tree,
    tree_profiles,
)

# Sequoia's shipped acceptance-rate-vector.pt (Infini-AI-Lab/Sequoia @ 0ff3ff7), ranks 1..6, float32
SEQUOIA_MARGINALS = (0.6341829299926758, 0.10794602334499359, 0.056971512734889984, 0.022488756105303764,
                     0.019490255042910576, 0.014992503449320793)
# ... and all its 32 ranks: float32(count / 667), the counts of formulations/physics_sources.md section 10
SEQUOIA_COUNTS = (423, 72, 38, 15, 13, 10, 3, 2, 8, 3, 5, 3, 4, 2, 1, 2, 1, 2, 0, 2, 2, 2, 0, 1, 0, 1, 0, 0, 0,
                  1, 1, 1)
SEQUOIA_SHIPPED = tuple(float(np.float32(c) / np.float32(667)) for c in SEQUOIA_COUNTS)
TAIL = (0.294, 0.221, 0.112, 0.109, 0.094)  # the conditional tail the lead ships
P4 = positional_vector(0.634, TAIL, 4)
P3 = positional_vector(0.75, TAIL, 3)
P4_75 = positional_vector(0.75, TAIL, 4)


# --------------------------------------------------------------------------- positional vectors


def test_conditionals_of_sequoias_marginals():
    assert SEQUOIA_SHIPPED[:6] == SEQUOIA_MARGINALS and sum(SEQUOIA_COUNTS) == 667 - 49  # 49: none accepted
    cond = conditional_rates(SEQUOIA_MARGINALS)
    assert cond[0] == SEQUOIA_MARGINALS[0]
    # c_r = p_r / (1 - sum_{i<r} p_i): 0.2951, 0.2209, 0.1119, 0.1092, 0.0943
    assert cond[1:] == pytest.approx(TAIL, abs=1.5e-3)
    # and back
    back = positional_vector(cond[0], cond[1:], 6)
    assert back == pytest.approx(SEQUOIA_MARGINALS, rel=1e-12)


def test_positional_vector_formula_and_validation():
    p = positional_vector(0.6, (0.3, 0.2), 3)
    assert p == pytest.approx((0.6, 0.3 * 0.4, 0.2 * 0.4 * 0.7), rel=1e-15)
    assert positional_vector(0.6, (), 1) == (0.6,)
    assert conditional_rates(p) == pytest.approx((0.6, 0.3, 0.2), rel=1e-12)
    with pytest.raises(ValueError, match="non-increasing"):
        positional_vector(0.2, TAIL, 2)  # 0.294 * 0.8 > 0.2: needs alpha >= c_2 / (1 + c_2)
    assert positional_vector(0.23, TAIL, 2)[1] < 0.23
    with pytest.raises(ValueError, match="needed"):
        positional_vector(0.6, (0.3,), 3)
    with pytest.raises(ValueError):
        positional_vector(1.0, (), 1)


def test_tree_validation():
    for bad in [(), (0.3, 0.4), (1.0,), (0.6, 0.5), (-0.1,), (float("nan"),)]:
        with pytest.raises(ValueError):
            TreeDraft(bad, (1,))
    for bad_w in [(), (0,), (3,), (1, 3), (2, 5, 1), (2, 4, 9)]:
        with pytest.raises(ValueError):
            TreeDraft((0.6, 0.3), bad_w)
    assert check_widths((2, 4, 8), 2) == (2, 4, 8)
    t = TreeDraft([0.6, 0.3], [2, 3])
    assert t.p == (0.6, 0.3) and t.widths == (2, 3) and t.nodes == 5 and t.depth == 2
    assert not t.is_chain and TreeDraft((0.6, 0.3), (1, 1)).is_chain
    with pytest.raises(ValueError):
        draft_spec((0.5,))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        expected_tokens_drafts([(1.0, 3)])


# --------------------------------------------------------------------------- top-ranked trees


def test_top_ranked_tree_by_hand():
    nodes = top_ranked_tree((0.6, 0.3), (2, 2))
    # depth 2 candidates: 0.36 (1,1), 0.18 (1,2), 0.18 (2,1), 0.09 (2,2); the tie goes to the earlier parent
    assert [n.ranks for n in nodes] == [(1,), (2,), (1, 1), (1, 2)]
    assert [n.parent for n in nodes] == [-1, -1, 0, 0]
    assert depth_masses((0.6, 0.3), (2, 2)) == pytest.approx((0.9, 0.54), rel=1e-15)
    assert TreeDraft((0.6, 0.3), (2, 2)).rank1_mass == 0.6**2
    # a tie between ranks keeps rank 1, so width 1 is the rank-1 chain
    assert [n.ranks for n in top_ranked_tree((0.5, 0.5), (1, 1, 1))] == [(1,), (1, 1), (1, 1, 1)]
    # (0.5, 0.2, 0.2): depth 2 of (2, 3): 0.25, 0.1 (1,2), 0.1 (1,3), 0.1 (2,1): parent order, then rank
    assert [n.ranks for n in top_ranked_tree((0.5, 0.2, 0.2), (2, 3))][2:] == [(1, 1), (1, 2), (1, 3)]


def test_rank1_path_is_node_0_of_every_depth():
    rng = random.Random(3)
    for _ in range(200):
        r = rng.randint(1, 4)
        p = tuple(sorted((rng.random() / r for _ in range(r)), reverse=True))
        widths = rng.choice(tree_profiles(r, 5, 12))
        nodes = top_ranked_tree(p, widths)
        start = 0
        for d, w in enumerate(widths, 1):
            assert nodes[start].ranks == (1,) * d
            assert all(n.depth == d for n in nodes[start : start + w])
            start += w


def _all_trees(r: int, widths: tuple[int, ...]):
    """Every tree with the profile: each depth any w_d distinct extensions (rank paths) of the last."""
    def grow(level: list[tuple[int, ...]], rest: tuple[int, ...]):
        if not rest:
            yield ()
            return
        ext = [(*path, k) for path in level for k in range(1, r + 1)]
        for chosen in itertools.combinations(ext, rest[0]):
            for deeper in grow(list(chosen), rest[1:]):
                yield (chosen, *deeper)

    yield from grow([()], widths)


def _masses_of(p, levels) -> list[float]:
    return [math.fsum(math.prod(p[k - 1] for k in path) for path in level) for level in levels]


@pytest.mark.parametrize("p", [(0.6, 0.25, 0.1), (0.5, 0.2, 0.2), (0.4, 0.4, 0.1), (0.7, 0.05, 0.0)])
def test_top_ranked_tree_maximises_every_depth_mass(p):
    """Theorem [TREE-1], by brute force over all trees of every profile with <= 7 nodes, depth <= 4."""
    checked = 0
    for widths in tree_profiles(len(p), 4, 7):
        top = depth_masses(p, widths)
        best = [0.0] * len(widths)
        for levels in _all_trees(len(p), widths):
            for d, w in enumerate(_masses_of(p, levels)):
                assert w <= top[d] + 1e-12, (widths, levels)
                best[d] = max(best[d], w)
            checked += 1
        assert best == pytest.approx(top, rel=1e-12, abs=1e-15)  # attained, by the top-ranked tree itself
    assert checked == 25_489


# --------------------------------------------------------------------------- closed forms


def _outcomes(draft):
    """Terminal outcomes of one drafter: [(probability, accepted depth, rank-1 path fully accepted)]."""
    if isinstance(draft, TreeDraft):
        nodes = top_ranked_tree(draft.p, draft.widths)
        child_mass = [0.0] * (len(nodes) + 1)  # 0: the root
        for n in nodes:
            child_mass[n.parent + 1] += draft.p[n.rank - 1]
        out = [(1.0 - child_mass[0], 0, False)]
        for k, n in enumerate(nodes):
            full_rank1 = n.depth == draft.depth and n.ranks == (1,) * n.depth
            out.append((n.path_probability * (1.0 - child_mass[k + 1]), n.depth, full_rank1))
        return out
    alpha, gamma = draft
    return [(alpha**k * (1 - alpha), k, False) for k in range(gamma)] + [(alpha**gamma, gamma, True)]


def _brute(drafts):
    """(E, E_pipe, p_cont, [P(valid_i)]) by enumeration of every drafter's accepted node."""
    per = [_outcomes(d) for d in drafts]
    for outs in per:
        assert math.fsum(o[0] for o in outs) == pytest.approx(1.0, abs=1e-12)
    e = e_pipe = p_cont = 0.0
    valid = [0.0] * len(drafts)
    for combo in itertools.product(*per):
        prob = math.prod(o[0] for o in combo)
        a_star = max(o[1] for o in combo)
        val = [o[2] and o[1] == a_star for o in combo]
        cont = any(val)
        e += prob * (1 + a_star)
        e_pipe += prob * (1 + a_star - cont)
        p_cont += prob * cont
        for i, v in enumerate(val):
            valid[i] += prob * v
    return e, e_pipe, p_cont, valid


def _brief_p_cont(drafts) -> float:
    """The generalised BONUS-1 formula as stated, with F_i(m) = P(A_i <= m) kept for i in G(m)."""
    specs = [draft_spec(d) for d in drafts]

    def f(s, m):
        return 1.0 - (s.masses[m] if m < s.depth else 0.0)

    total = 0.0
    for m in sorted({s.depth for s in specs}):
        group = [s for s in specs if s.depth == m]
        others = math.prod(f(s, m) for s in specs if s.depth != m)
        total += others * (math.prod(f(s, m) for s in group) - math.prod(f(s, m) - s.rank1 for s in group))
    return total


CLOSED_CASES = {
    "tree": [TreeDraft(P3, (2, 3, 2))],
    "wide-tree": [TreeDraft(P4, (4, 6, 3, 1))],
    "chain+tree": [(0.7, 3), TreeDraft(P3, (3, 2))],
    "tree+deeper-chain": [TreeDraft(P4, (2, 3)), (0.8, 4)],
    "two-trees-same-depth": [TreeDraft(P3, (2, 2, 2)), TreeDraft(P4, (1, 3, 2)), (0.6, 2)],
    "three-mixed": [(0.65, 1), TreeDraft(P4, (3, 4)), TreeDraft(P3, (1, 2, 3, 3))],
    "width-1-tree": [TreeDraft(P4, (1, 1, 1)), TreeDraft(P3, (3,))],
}


@pytest.mark.parametrize("case", sorted(CLOSED_CASES))
def test_closed_forms_match_enumeration(case):
    drafts = CLOSED_CASES[case]
    e, e_pipe, p_cont, valid = _brute(drafts)
    assert expected_tokens_drafts(drafts) == pytest.approx(e, rel=1e-12)
    assert expected_tokens_drafts(drafts, pipeline=True) == pytest.approx(e_pipe, rel=1e-12)
    assert continue_probability_drafts(drafts) == pytest.approx(p_cont, rel=1e-12, abs=1e-15)
    assert _brief_p_cont(drafts) == pytest.approx(p_cont, rel=1e-12, abs=1e-15)
    for i, v in enumerate(valid):
        assert drafter_valid_probability_drafts(drafts, i) == pytest.approx(v, rel=1e-12, abs=1e-15)
    assert max(valid) <= p_cont + 1e-15 <= sum(valid) + 2e-15
    # integer contract
    e_pipe_float = expected_tokens_drafts(drafts, True)
    assert expected_tokens_micro_drafts(drafts, True) == round(e_pipe_float * TOKENS_SCALE)
    assert fail_q_drafts(drafts) == round((1 - continue_probability_drafts(drafts)) * Q_SCALE)
    for i in range(len(drafts)):
        v = drafter_valid_probability_drafts(drafts, i)
        assert drafter_fail_q_drafts(drafts, i) == round((1 - v) * Q_SCALE)


def test_one_tree_closed_forms():
    t = TreeDraft(P4, (3, 5, 4))
    assert expected_tokens_drafts([t]) == pytest.approx(1 + sum(t.masses), rel=1e-15)
    assert continue_probability_drafts([t]) == t.rank1_mass == P4[0] ** 3
    assert expected_tokens_drafts([t], True) == pytest.approx(1 + sum(t.masses) - P4[0] ** 3, rel=1e-15)
    # a tree beats the chain of its depth, and the chain is its rank-1 path
    assert expected_tokens_drafts([t]) > expected_tokens([P4[0]], [3])
    assert TreeDraft(P4, (1, 1, 1)).masses == pytest.approx([P4[0] ** d for d in (1, 2, 3)], rel=1e-15)


def test_chain_functions_are_reproduced_bit_for_bit():
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(1, 4)
        alphas = [rng.choice([0.0, round(rng.random() * 0.95, rng.randint(1, 6))]) for _ in range(n)]
        gammas = [rng.randint(1, 8) for _ in range(n)]
        chains = list(zip(alphas, gammas))
        # a tree of width 1 is the same chain, whatever its other ranks
        as_trees = [
            TreeDraft((a, a * (1 - a) / 2), (1,) * g) if k % 2 else (a, g) for k, (a, g) in enumerate(chains)
        ]
        for drafts in (chains, as_trees):
            for pipeline in (False, True):
                assert expected_tokens_drafts(drafts, pipeline) == expected_tokens(alphas, gammas, pipeline)
                micro = expected_tokens_micro(alphas, gammas, pipeline)
                assert expected_tokens_micro_drafts(drafts, pipeline) == micro
            assert continue_probability_drafts(drafts) == continue_probability(alphas, gammas)
            assert fail_q_drafts(drafts) == fail_q(alphas, gammas)
            for i in range(n):
                valid = drafter_valid_probability(alphas, gammas, i)
                assert drafter_valid_probability_drafts(drafts, i) == valid
                assert drafter_fail_q_drafts(drafts, i) == drafter_fail_q(alphas, gammas, i)
    assert expected_tokens_drafts([]) == 1.0 and expected_tokens_micro_drafts([], True) == TOKENS_SCALE
    assert fail_q_drafts([]) == 0 and continue_probability_drafts([]) == 0.0
    with pytest.raises(ValueError):
        drafter_valid_probability_drafts([(0.5, 2)], 1)


def test_wider_tree_raises_tokens_and_lowers_others_continuation():
    """The [TREE] remark on shape menus with several pipelined drafters, on numbers."""
    chain = (0.8, 2)
    narrow, wide = TreeDraft(P4, (1, 1, 1)), TreeDraft(P4, (4, 4, 4))
    assert expected_tokens_drafts([chain, wide]) > expected_tokens_drafts([chain, narrow])
    valid_narrow = drafter_valid_probability_drafts([chain, narrow], 0)
    assert drafter_valid_probability_drafts([chain, wide], 0) < valid_narrow
    assert continue_probability_drafts([chain, wide]) < continue_probability_drafts([chain, narrow])
    # with a strong shallow chain, latency T / E_pipe (same D and V for both shapes) prefers the wider
    # tree, then the narrower one, then the wider again as D / V grows: not monotone in D / V
    chain = (0.95, 2)
    narrow, wide = TreeDraft(P4_75, (1, 1, 1)), TreeDraft(P4_75, (1, 1, 4))

    def latency(tree, d_over_v):
        drafts = [chain, tree]
        p_cont = continue_probability_drafts(drafts)
        t = max(d_over_v, 1.0) + (1 - p_cont) * min(d_over_v, 1.0)
        return t / expected_tokens_drafts(drafts, pipeline=True)

    assert [latency(wide, r) < latency(narrow, r) for r in (0.5, 0.9, 1.0, 1.1, 2.0)] == [
        True, True, False, True, True,
    ]


# --------------------------------------------------------------------------- profiles, drawing, pass counts


def test_profile_enumeration_counts():
    assert tree_profiles(1, 4, 10) == [(1,), (1, 1), (1, 1, 1), (1, 1, 1, 1)]
    assert tree_profiles(2, 2, 3) == [(1,), (2,), (1, 1), (1, 2), (2, 1)]
    assert tree_profiles(2, 3, 4) == [
        (1,), (2,), (1, 1), (1, 2), (2, 1), (1, 1, 1), (2, 2), (1, 1, 2), (1, 2, 1), (2, 1, 1),
    ]
    # R >= N: compositions of 1..4 into <= 3 parts: 1 + 2 + 4 + 7
    assert len(tree_profiles(10, 3, 4)) == 14
    assert tree_profiles(3, 0, 5) == [] and tree_profiles(3, 4, 0) == []
    # against a filter over all tuples
    for r, d, n in [(2, 4, 8), (3, 3, 9), (4, 5, 7)]:
        brute = []
        for depth in range(1, d + 1):
            for ws in itertools.product(range(1, n + 1), repeat=depth):
                if sum(ws) <= n and all(1 <= w <= r * prev for w, prev in zip(ws, (1, *ws))):
                    brute.append(ws)
        got = tree_profiles(r, d, n)
        assert sorted(got) == sorted(brute) and len(set(got)) == len(got)
        assert got == sorted(got, key=lambda ws: (sum(ws), len(ws), ws))
        assert [(1,) * g for g in range(1, min(d, n) + 1)] == [ws for ws in got if set(ws) == {1}]


def test_render_tree():
    assert render_tree((0.6, 0.3), (2, 2)).splitlines() == [
        "tree 2-2: 4 nodes, depth 2, ranks 0-based (as export-tree), W(d) = 0.900, 0.540, E = 2.440",
        f"({TOKEN_CONVENTION})",
        "r0 0.600",
        "  r0 0.360",
        "  r1 0.180",
        "r1 0.300",
    ]
    assert render_tree((0.7,), (1, 1)).splitlines()[2:] == ["r0 0.700", "  r0 0.490"]
    assert "root" in TOKEN_CONVENTION and "not a node" in TOKEN_CONVENTION and "bonus" in TOKEN_CONVENTION
    # a re-ranked vector says so
    ranked = rank_by_probability((0.6, 0.1, 0.3), 3, "acceptance_vector")
    assert render_tree(ranked, (2,)).splitlines()[2] == f"(note: {ranked.note})"
    assert "re-ranked by probability" in ranked.note


def test_rank_by_probability():
    ranked = rank_by_probability((0.5, 0.1, 0.2, 0.0), 3, "v")
    assert ranked == (0.5, 0.2, 0.1) and isinstance(ranked, RankedVector)
    assert "measured rank 3 0.2 > rank 2 0.1" in ranked.note and "1 least likely of its 4 ranks" in ranked.note
    # as measured: no note; shorter than max_children: zero ranks
    assert rank_by_probability((0.5, 0.2), 4).note == "" and rank_by_probability((0.5, 0.2), 4) == (0.5, 0.2, 0, 0)
    # a value: equal to and hashed as the tuple, pickled with its note
    assert hash(ranked) == hash((0.5, 0.2, 0.1))
    back = pickle.loads(pickle.dumps(ranked))
    assert back == ranked and back.note == ranked.note and isinstance(back, RankedVector)
    for bad, match in [((0.5, -0.1), r"v\[rank 2\] must be in \[0, 1\]"), ((0.7, 0.6), "sum to at most 1"),
                       ((0.2, 1.0), r"v\[rank 2\] must be < 1"), ((), "at least one")]:
        with pytest.raises(ValueError, match=match):
            rank_by_probability(bad, 4, "v")
    # Sequoia's shipped vector: rank 9 (8 of 667 positions) above rank 8 (2 of 667), 32 ranks
    shipped = rank_by_probability(SEQUOIA_SHIPPED, 16, "acceptance_vector")
    assert list(shipped) == sorted(SEQUOIA_SHIPPED, reverse=True)[:16]
    assert "measured rank 9 0.01199 > rank 8 0.002999" in shipped.note and "16 least likely of its 32" in shipped.note


def test_draft_pass_tokens():
    assert draft_pass_tokens((2, 4, 4)) == (1, 2, 4)
    assert draft_pass_tokens((1, 1, 1)) == (1, 1, 1)  # a chain: gamma passes of one token
    assert draft_pass_tokens(()) == ()


# --------------------------------------------------------------------------- Sequoia's dynamic program


@pytest.mark.parametrize("p,max_nodes,max_depth", [(P4, 12, 4), (P3, 10, 5), ((0.5, 0.3, 0.2), 9, 3)])
def test_sequoia_dp_optimum_is_in_the_profile_menu(p, max_nodes, max_depth):
    values = sequoia_values(p, max_nodes, max_depth)
    profiles = tree_profiles(len(p), max_depth, max_nodes)
    best: dict[tuple[int, int], float] = {}
    for ws in profiles:
        e = expected_tokens_drafts([TreeDraft(p, ws)])
        for d in range(len(ws), max_depth + 1):
            key = (sum(ws), d)
            best[key] = max(best.get(key, 0.0), e)
    assert set(values) == set(best)
    for key, v in values.items():
        assert best[key] == pytest.approx(v, rel=1e-12), key
    # the DP's own tree, as a profile, is top-ranked-optimal too (theorem [TREE-1])
    T, branch_map = sequoia_table(p, max_nodes, max_depth)
    for (n, d), v in values.items():
        row = T[n + 1][d + 1]
        b = max(range(len(row)), key=lambda k: (row[k], -k))
        ws = sequoia_widths(branch_map, (n + 1, d + 1, b))
        assert sum(ws) == n and len(ws) <= d
        assert 1 + sum(depth_masses(p, ws)) == pytest.approx(v, rel=1e-12)


COST_TABLES = {
    "sequoia-demo": (0.3, {1: 10, 2: 10, 4: 10, 8: 12, 16: 14}),
    "slow-drafter": (4.0, {1: 10, 2: 10.5, 4: 11, 8: 12, 16: 15}),
    "flat-verifier": (0.05, {m: 10.0 for m in range(1, 17)}),
    "steep-verifier": (0.5, {m: 8.0 + 0.6 * m for m in range(2, 17)}),
}


@pytest.mark.parametrize("table", sorted(COST_TABLES))
def test_sequoia_choice_matches_the_profile_menu(table):
    draft_time, verify_time = COST_TABLES[table]
    p, max_nodes, max_depth = P4, 15, 6
    widths, e = sequoia_best_tree(p, max_nodes, max_depth, draft_time, verify_time)
    dp_obj = ((len(widths) + 1) * draft_time + verify_time[sum(widths) + 1]) / e
    # the same objective over the menu: Sequoia charges depth + 1 drafter steps (its levels)
    menu = [((1 * draft_time + verify_time[1]) / 1.0, ())] if 1 in verify_time else []
    for ws in tree_profiles(len(p), max_depth, max_nodes):
        if sum(ws) + 1 in verify_time:
            e_ws = expected_tokens_drafts([TreeDraft(p, ws)])
            menu.append((((len(ws) + 1) * draft_time + verify_time[sum(ws) + 1]) / e_ws, ws))
    best_obj, best_ws = min(menu)
    assert best_obj == pytest.approx(dp_obj, rel=1e-12), (best_ws, widths)
    if widths:
        assert expected_tokens_drafts([TreeDraft(p, widths)]) == pytest.approx(e, rel=1e-12)


# --------------------------------------------------------------------------- Monte Carlo

MC_ROUNDS = 100_000
MC_CASES = {
    # drafters: (alpha, gamma, staging, cycle_ns, tree or None); verify_ns, sync_ns
    "one-tree": ([(P4[0], 3, None, 300, (P4, (2, 4, 4)))], 500, 10),
    "tree+chains": (
        [(P3[0], 3, None, 280, (P3, (3, 3, 2))), (0.6, 3, None, 60, None), (0.8, 4, (0.7, 2), 120, None)],
        500, 10,
    ),
    "trees-same-depth": (
        [
            (P3[0], 3, None, 350, (P3, (2, 2, 2))),
            (P4[0], 3, None, 320, (P4, (1, 3, 2))),
            (0.7, 2, None, 90, None),
        ],
        300, 5,
    ),
}


def _mc_args(case):
    spec, verify, sync = MC_CASES[case]
    drafters = [SimDrafter(a, g, c, staging=st, tree=None if t is None else TreeDraft(*t))
                for a, g, st, c, t in spec]
    drafts = [(d.alpha, d.draft_length) if d.tree is None else d.tree for d in drafters]
    return (drafters, verify, sync), drafts


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("case", sorted(MC_CASES))
def test_mc_trees_agree_on_token_identities(case, pipeline):
    args, drafts = _mc_args(case)
    res = simulate_rounds(*args, pipeline, MC_ROUNDS, seed=17)
    text = format_simulation(res)
    assert res.tokens_agree(), text
    assert res.time_agree(), text
    assert res.continue_agree(), text
    assert res.waste_agree(), text
    assert res.stream_verified and res.diverged_rounds == 0, text
    assert res.closed_form_tokens == expected_tokens_drafts(drafts, pipeline)
    if not pipeline:
        assert res.closed_form_continue == 0.0 and res.continue_rate == 0.0
        return
    assert res.closed_form_continue == continue_probability_drafts(drafts)
    # the dropped bonus token is visible ...
    assert abs(res.mean_tokens - expected_tokens_drafts(drafts)) > 10 * res.tokens_ci95
    if case == "tree+chains":
        return  # its long chain dominates the continue rate
    # ... and so is continuing along the rank-1 path only: counting any full-depth acceptance
    # (W_i(D_i) in place of rho_i) would claim a higher continue rate
    wrong = [
        d if isinstance(d, tuple) else TreeDraft((d.masses[-1] ** (1 / d.depth),), (1,) * d.depth)
        for d in drafts
    ]
    assert continue_probability_drafts(wrong) - res.continue_rate > 8 * res.continue_ci95, text


def test_mc_width_one_tree_has_the_chain_closed_forms():
    # a width-1 tree goes through the tree walk; its closed forms are the chain functions
    tree = SimDrafter(0.8, 3, 40, tree=TreeDraft((0.8, 0.1), (1, 1, 1)))
    res = simulate_rounds([tree, SimDrafter(0.6, 2, 30)], 300, 0, True, 50_000, seed=2)
    assert res.closed_form_tokens == expected_tokens([0.8, 0.6], [3, 2], True)
    assert res.closed_form_continue == continue_probability([0.8, 0.6], [3, 2])
    assert res.tokens_agree() and res.continue_agree() and res.waste_agree() and res.time_agree()
    assert res.stream_verified


def test_mc_trees_depend_only_on_the_seed():
    args, _ = _mc_args("tree+chains")
    a = simulate_rounds(*args, True, 3000, seed=5)
    assert simulate_rounds(*args, True, 3000, seed=5) == a
    assert simulate_rounds(*args, True, 3000, seed=6) != a


def test_mc_trees_reject_bad_arguments():
    tree = TreeDraft(P3, (2, 2))
    ok = ([SimDrafter(P3[0], 2, 100, tree=tree)], 300, 0, True, 100)
    simulate_rounds(*ok, seed=1)
    with pytest.raises(ValueError, match="bonus1"):
        simulate_rounds(*ok, seed=1, policy="naive")
    with pytest.raises(ValueError, match="depth"):
        SimDrafter(P3[0], 3, 100, tree=tree)
    with pytest.raises(ValueError, match="p\\[0\\]"):
        SimDrafter(0.5, 2, 100, tree=tree)
    with pytest.raises(ValueError, match="chains only"):
        SimDrafter(P3[0], 2, 100, staging=(0.6, 2), tree=tree)
    with pytest.raises(TypeError, match="TreeDraft"):
        SimDrafter(P3[0], 2, 100, tree=(P3, (2, 2)))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TreeDraft((0.3, 0.5), (1,))
