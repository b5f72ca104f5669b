"""`specpim-cp export-tree`: a design's token tree as Medusa/EAGLE choices and as a node list.

Each format is rebuilt into a tree (from choices: children and ranks per node; from json: parent links) whose
expected tokens, by the package's own function, equal the design's; the order is the engines' (len, path);
a chain exports as [[0], [0, 0], ...]; bad input is one line and exit code 2 with nothing written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.cli import main
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.speculation import expected_tokens_drafts, expected_tokens_micro_drafts
from specpim_cp.problem.design import ArchConfig, Design, DrafterChoice, SpecChoice
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import Scenario, parse_scenario
from specpim_cp.problem.tree_export import choice_order, tree_from_choices, tree_from_json, widths_of
from specpim_cp.problem.trees import TreeDraft, TreeNode, top_ranked_tree

TREE = {"max_nodes": 5, "max_children": 3}


def _scenario_data(trees: tuple[bool, ...] = (True,), pipeline: str = "off") -> dict:
    """opt-1.3b verifying small drafters on the host: one tree drafter, or (trees of length 2) opt-125m
    next to gpt2-small, each with a [tree] table when its flag is set."""
    drafters = [{"model": m, "devices": 1, "acceptance": a} for m, a in (("opt-125m", 0.7), ("gpt2-small", 0.6))]
    for d, tree in zip(drafters, trees, strict=False):
        if tree:
            d["tree"] = dict(TREE)
    return {"name": "export-tree", "batch_size": 1, "prompt_tokens": 128, "generated_tokens": 64,
            "host": "a100-40gb", "memory_types": ["hbm", "gddr"], "max_draft_length": 3, "objective": "latency",
            "verifier": {"model": "opt-1.3b", "devices": 1}, "drafters": drafters[:len(trees)],
            "space": {"mapping": "host-only", "pipeline": pipeline}}


def _scenario(trees: tuple[bool, ...] = (True,)) -> Scenario:
    return parse_scenario(_scenario_data(trees, pipeline="free"))


def _evaluated(tmp_path: Path, sc: Scenario, drafts: list, pipeline: bool = False,
               name: str = "design.json") -> tuple[str, dict]:
    """`evaluate --json` of a host-only design whose drafters draft `drafts` (a width tuple: a tree, an
    int: a chain of that length), written to tmp_path / name: (its path, its content)."""
    choice = SpecChoice(tuple(DrafterChoice(len(d), None, d) if isinstance(d, tuple) else DrafterChoice(d)
                              for d in drafts), pipeline)
    n = len(drafts) + 1
    names = [sc.verifier.model] + [d.model for d in sc.drafters]
    design = Design.assemble(names, [ArchConfig("hbm", 0, 1)] * n, [rule_placement("host-only", 1)] * n, choice)
    out = Evaluator(sc).evaluate(design).as_dict()
    path = tmp_path / name
    path.write_text(json.dumps(out))
    return str(path), out


def _export(*args: str) -> str:
    res = CliRunner().invoke(main, ["export-tree", *args])
    assert res.exit_code == 0, (res.exit_code, res.stderr, res.exception)
    return res.stdout


def _children(nodes: tuple[TreeNode, ...]) -> dict[tuple[int, ...], list[int]]:
    """Per node path (the root: ()), its children's 1-based ranks in rank order."""
    out: dict[tuple[int, ...], list[int]] = {(): []}
    for n in nodes:
        out.setdefault(n.ranks, [])
    for n in nodes:
        out[n.ranks[:-1]].append(n.rank)
    return {k: sorted(v) for k, v in out.items()}


WIDTHS = [(2,), (1, 3), (2, 3), (3, 2), (1, 2, 2), (2, 2, 1), (1, 1, 3)]


@pytest.mark.parametrize("pipeline", [False, True])
@pytest.mark.parametrize("widths", WIDTHS)
def test_choices_rebuild_the_tree_and_its_expected_tokens(tmp_path, widths, pipeline):
    path, out = _evaluated(tmp_path, _scenario(), [widths], pipeline)
    p = tuple(out["breakdown"]["drafters"][0]["tree_vector"])
    paths = json.loads(_export(path, "--format", "choices"))
    assert all(paths) and paths == sorted(paths, key=lambda x: (len(x), x))  # no root; Medusa's order
    rebuilt = tree_from_choices(paths, p)
    assert widths_of(rebuilt) == widths
    # children counts and ranks per node: the top-ranked tree of the profile, ranks contiguous from the best
    assert _children(rebuilt) == _children(top_ranked_tree(p, widths))
    assert all(ranks == list(range(1, len(ranks) + 1)) for ranks in _children(rebuilt).values())
    # its depth masses from the rebuilt paths, and the package's expected tokens = the design's
    masses = [math.fsum(n.path_probability for n in rebuilt if n.depth == d) for d in range(1, len(widths) + 1)]
    assert masses == pytest.approx(TreeDraft(p, widths).masses, rel=1e-12)
    draft = TreeDraft(p, widths_of(rebuilt))
    assert expected_tokens_micro_drafts([draft], pipeline) == out["tokens_per_round_micro"]


@pytest.mark.parametrize("widths", WIDTHS)
def test_json_rebuilds_by_parents(tmp_path, widths):
    path, out = _evaluated(tmp_path, _scenario(), [widths])
    doc = json.loads(_export(path, "--format", "json"))
    rebuilt = tree_from_json(doc)  # parent links and ranks only
    assert [[r - 1 for r in n.ranks] for n in rebuilt] == [n["path"] for n in doc["nodes"]]
    assert [n.depth for n in rebuilt] == [n["depth"] for n in doc["nodes"]]
    assert [n.path_probability for n in rebuilt] == pytest.approx([n["path_probability"] for n in doc["nodes"]])
    assert all(n["parent"] < n["id"] for n in doc["nodes"])  # a parent precedes its children
    assert widths_of(rebuilt) == widths == tuple(doc["widths"])
    assert doc["nodes"][0]["parent"] == -1 and doc["nodes"][0]["rank"] == 0
    assert doc["acceptance_vector"] == out["breakdown"]["drafters"][0]["tree_vector"]
    # same nodes, same order as --format choices
    assert [n["path"] for n in doc["nodes"]] == json.loads(_export(path, "--format", "choices"))
    e = expected_tokens_drafts([TreeDraft(tuple(doc["acceptance_vector"]), widths_of(rebuilt))])
    assert doc["expected_tokens_per_round"] == e
    assert doc["expected_accepted_draft_tokens"] == pytest.approx(math.fsum(doc["depth_masses"]), rel=1e-12)
    assert round(e * 1_000_000) == out["tokens_per_round_micro"]
    assert doc["design"] == {"pipeline": False, "drafters": 1, "tokens_per_round": out["tokens_per_round"]}
    assert "0-based" in doc["convention"]["rank"] and "bonus" in doc["convention"]["tokens"]
    assert doc["drafter"] == {"index": 0, "model": "opt-125m", "draft": "tree"}


def test_solve_json_output_exports_in_medusa_order(tmp_path):
    """End to end: `solve --json -o` on a tiny host-only space whose optimum drafts a tree."""
    sc_path = tmp_path / "sc.json"
    sc_path.write_text(json.dumps(_scenario_data()))
    out = tmp_path / "solved.json"
    res = CliRunner().invoke(main, ["solve", str(sc_path), "--deterministic", "--no-warm-start", "--json",
                                    "-o", str(out)])
    assert res.exit_code == 0, (res.stderr, res.exception)
    solved = json.loads(out.read_text())
    widths = tuple(solved["design"]["drafters"][0]["tree"])
    p = solved["metrics"]["breakdown"]["drafters"][0]["tree_vector"]
    paths = json.loads(_export(str(out), "--format", "choices"))
    engines = sorted(([r - 1 for r in n.ranks] for n in top_ranked_tree(p, widths)), key=lambda x: (len(x), x))
    assert paths == engines
    draft = TreeDraft(p, widths_of(tree_from_choices(paths, p)))
    assert expected_tokens_micro_drafts([draft]) == solved["metrics"]["tokens_per_round_micro"]


def test_medusa_order_and_choices_checks():
    # the 2-3 tree of p = (0.6, 0.3, 0.1): depth 2 keeps 0.36, 0.18, 0.18 (ties: earlier parent first)
    p = (0.6, 0.3, 0.1)
    rebuilt = tree_from_choices([[1, 0], [0, 1], [0], [0, 0], [1]], p)  # any order in, engines' order out
    assert [[r - 1 for r in n.ranks] for n in rebuilt] == [[0], [1], [0, 0], [0, 1], [1, 0]]
    assert [n.parent for n in rebuilt] == [-1, -1, 0, 0, 1]
    assert _children(rebuilt) == _children(top_ranked_tree(p, (2, 3)))
    assert sorted([[0, 1], [1], [0]], key=choice_order) == [[0], [1], [0, 1]]
    for bad, needle in (([[0], [0, 1, 0]], "no parent"), ([[0], [0]], "twice"), ([[0], [3]], "rank 3"),
                        ([[0], []], "non-empty"), ([[0], [-1]], ">= 0"), ([], "at least one")):
        with pytest.raises(ValueError, match=needle):
            tree_from_choices(bad, p)


def test_a_chain_exports_as_rank_zero_paths(tmp_path):
    path, out = _evaluated(tmp_path, _scenario(), [3])
    assert json.loads(_export(path, "--format", "choices", "--drafter", "0")) == [[0], [0, 0], [0, 0, 0]]
    doc = json.loads(_export(path, "--format", "json", "--drafter", "opt-125m"))
    assert doc["drafter"]["draft"] == "chain" and doc["widths"] == [1, 1, 1]
    assert doc["acceptance_vector"] == [out["breakdown"]["drafters"][0]["alpha"]]
    assert [n["parent"] for n in doc["nodes"]] == [-1, 0, 1]
    assert round(doc["expected_tokens_per_round"] * 1_000_000) == out["tokens_per_round_micro"]


def test_the_tree_drafter_is_the_default_and_out_writes_the_file(tmp_path):
    path, out = _evaluated(tmp_path, _scenario((False, True)), [2, (1, 2)])
    target = tmp_path / "choices.json"
    assert _export(path, "--format", "choices", "--out", str(target)) == ""
    assert json.loads(target.read_text()) == [[0], [0, 0], [0, 1]]
    assert json.loads(_export(path, "--format", "choices", "--drafter", "1")) == [[0], [0, 0], [0, 1]]
    assert json.loads(_export(path, "--format", "choices", "--drafter", "opt-125m")) == [[0], [0, 0]]
    doc = json.loads(_export(path, "--format", "json"))
    assert doc["drafter"] == {"index": 1, "model": "gpt2-small", "draft": "tree"}
    assert doc["design"]["tokens_per_round"] == out["tokens_per_round"]


def _assert_one_line_error(tmp_path: Path, args: list[str], *needles: str) -> None:
    target = tmp_path / "never.json"
    res = CliRunner().invoke(main, ["export-tree", *args, "--format", "json", "-o", str(target)])
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == "" and not target.exists()
    for n in needles:
        assert n in res.stderr, (n, res.stderr)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    chain, _ = _evaluated(tmp_path, _scenario(), [2], name="chain.json")
    tree, out = _evaluated(tmp_path, _scenario(), [(2, 3)])
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(out["design"]))
    broken = tmp_path / "broken.json"
    broken.write_text('{"design": {')
    two, _ = _evaluated(tmp_path, _scenario((True, True)), [(2,), (1, 2)], name="two.json")
    cases = [
        ([str(tmp_path / "missing.json")], ["missing.json", "cannot read"]),
        ([str(broken)], ["broken.json", "not valid JSON"]),
        ([str(bare)], ["bare.json", "no acceptance vector"]),
        ([chain], ["drafts no token tree", "0 opt-125m (chain of 2)", "--drafter"]),
        ([tree, "--drafter", "1"], ["--drafter 1", "out of range", "index 0"]),
        ([tree, "--drafter", "llama-7b"], ["--drafter llama-7b", "no drafter"]),
        ([two], ["2 drafters draft token trees", "0 opt-125m (tree 2)", "1 gpt2-small (tree 1-2)"]),
        ([str(tmp_path)], ["cannot read"]),
    ]
    for args, needles in cases:
        _assert_one_line_error(tmp_path, args, *needles)


def test_a_breakdown_of_another_design_is_refused(tmp_path):
    path, out = _evaluated(tmp_path, _scenario(), [(2, 3)])
    out["breakdown"]["drafters"][0]["tree"] = [2, 2]
    Path(path).write_text(json.dumps(out))
    _assert_one_line_error(tmp_path, [path], "breakdown.drafters[0].tree", "[2, 3]")
    out["breakdown"]["drafters"][0].update(tree=[2, 3], tree_vector=[0.2, 0.5])
    Path(path).write_text(json.dumps(out))
    _assert_one_line_error(tmp_path, [path], "non-increasing")
