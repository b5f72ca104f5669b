"""`export-tree --engine medusa|eagle`: a tree the engine cannot load is refused before anything is written.

Medusa's `generate_medusa_buffers` and EAGLE's `generate_tree_buffers` index a top-k of 10 candidates, so a
0-based rank >= 10 aliases another candidate; a Medusa model drafts one depth per head. A 53-node tree with
max_children 16 is refused for both engines (one line naming the node, its rank, the limit and the scenario
field that bounds ranks); with max_children = 10 every tree exports and its choices rebuild the same tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_line_error

from specpim_cp.cli import main
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.speculation import expected_tokens_drafts
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.scenario import Scenario, load_scenario
from specpim_cp.problem.tree_export import ENGINES, tree_from_choices
from specpim_cp.problem.trees import TreeDraft
from specpim_cp.solvers.baselines import gpu_si

SCENARIO = builtin_sets()["paper-trees-large"] / "opt-13b-b1-gpu-si-n128.toml"


def _scenario(max_children: int) -> Scenario:
    sc = load_scenario(SCENARIO)
    tree = sc.drafters[0].tree.model_copy(update={"max_children": max_children})
    return sc.model_copy(update={"drafters": [sc.drafters[0].model_copy(update={"tree": tree})]})


def _evaluated(tmp_path: Path, sc: Scenario, widths: tuple[int, ...]) -> tuple[Path, dict]:
    """`evaluate --json` of GPU-SI's design with drafter 0 drafting the top-ranked tree `widths`."""
    base = gpu_si(sc).design
    drafter = base.drafters[0].model_copy(update={"tree": widths, "draft_length": len(widths)})
    design = base.model_copy(update={"drafters": [drafter]})
    out = Evaluator(sc).evaluate(design).as_dict()
    path = tmp_path / "design.json"
    path.write_text(json.dumps(out))
    return path, out


def _invoke(*args: str):
    return CliRunner().invoke(main, ["export-tree", *args])


@pytest.mark.parametrize("engine", [None, "medusa", "eagle"])
def test_a_rank_16_tree_is_refused_for_both_engines(tmp_path, engine):
    path, _ = _evaluated(tmp_path, _scenario(16), (16, 37))
    target = tmp_path / "choices.json"
    args = [str(path), "--format", "choices", "-o", str(target)] + ([] if engine is None else ["--engine", engine])
    name = ENGINES[engine or "medusa"].name
    one_line_error(_invoke(*args), "drafters[0]", "node [10] has rank 10", "up to 15", f"{name} loads ranks 0..9",
                   "max_children = 10")
    assert not target.exists()


def test_a_top_10_tree_exports_for_both_engines_and_round_trips(tmp_path):
    sc = _scenario(10)
    path, out = _evaluated(tmp_path, sc, (10, 30))
    vector = out["breakdown"]["drafters"][0]["tree_vector"]
    assert len(vector) == 10  # max_children bounds the ranks the tree can use
    for engine in ("medusa", "eagle"):
        res = _invoke(str(path), "--format", "choices", "--engine", engine)
        assert res.exit_code == 0, res.output
        paths = json.loads(res.stdout)
        assert len(paths) == 40 and max(max(p) for p in paths) == 9
        nodes = tree_from_choices(paths, vector)
        assert expected_tokens_drafts([TreeDraft(tuple(vector), (10, 30))]) == pytest.approx(
            1 + sum(n.path_probability for n in nodes))
        # Medusa's depth is only reported without a head count, EAGLE has no depth limit
        assert ("depth 2" in res.stderr and "Medusa heads" in res.stderr) == (engine == "medusa")


def test_medusa_depth_beyond_its_heads_is_refused(tmp_path):
    path, _ = _evaluated(tmp_path, _scenario(10), (3, 3))
    one_line_error(_invoke(str(path), "--format", "json", "--medusa-heads", "1"),
                   "depth 2", "1 heads", "max_draft_length = 1")
    res = _invoke(str(path), "--format", "json", "--medusa-heads", "2")
    assert res.exit_code == 0 and res.stderr == "", res.output
    res = _invoke(str(path), "--format", "json", "--engine", "eagle", "--medusa-heads", "1")
    assert res.exit_code == 0, res.output


def test_the_drawing_uses_the_exports_0_based_ranks(tmp_path):
    path, _ = _evaluated(tmp_path, _scenario(10), (2, 1))
    res = CliRunner().invoke(main, ["evaluate", str(SCENARIO), "--design", str(path)])
    assert res.exit_code == 0, res.output
    lines = [line.strip() for line in res.output.splitlines()]
    assert "ranks 0-based" in res.output
    assert [line.split()[0] for line in lines if line[:2] in ("r0", "r1")][:3] == ["r0", "r0", "r1"]
    assert json.loads(_invoke(str(path), "--format", "choices").stdout) == [[0], [1], [0, 0]]
