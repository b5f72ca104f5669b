"""One strict schema for design files: every command that reads a design (`evaluate --design`, `show`,
`solve --hint`, `export-tree`) refuses, in one line naming the field and before any arithmetic, what a
scenario's limits refuse: widths, tree nodes, draft length, drafters, PIM units, devices, shares, a boolean
or a float where an integer belongs, huge integers, an acceptance vector too long or out of range."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_line_error

from specpim_cp.cli import main
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import ArchConfig, Design, DrafterChoice, SpecChoice, parse_design
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.problem.trees import check_positional

SCENARIO = {"name": "design-files", "batch_size": 1, "prompt_tokens": 128, "generated_tokens": 64,
            "host": "a100-40gb", "memory_types": ["hbm"], "max_draft_length": 3, "objective": "latency",
            "verifier": {"model": "opt-1.3b", "devices": 1},
            "drafters": [{"model": "opt-125m", "devices": 1, "acceptance": 0.7,
                          "tree": {"max_nodes": 5, "max_children": 3}}],
            "space": {"mapping": "host-only"}}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, dict]:
    """(the scenario file, `evaluate --json` output of a tree design of it)."""
    sc = parse_scenario(SCENARIO)
    choice = SpecChoice((DrafterChoice(2, None, (2, 2)),), False)
    design = Design.assemble(["opt-1.3b", "opt-125m"], [ArchConfig("hbm", 0, 1)] * 2,
                             [rule_placement("host-only", 1)] * 2, choice)
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    return path, Evaluator(sc).evaluate(design).as_dict()


def _set(out: dict, where: str, value) -> dict:
    """A copy of the output with `design.<where>` (dotted, list indices as numbers) set to `value`."""
    out = copy.deepcopy(out)
    node, keys = out["design"], where.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return out


BAD = {  # design field -> (value, words the one line must hold)
    "drafters.0.tree": ([1000, 1000], ["drafters[0].tree", "2,000 nodes", "128"]),
    "drafters.0.draft_length": (100_000, ["drafters[0].draft_length", "16"]),
    "verifier.pim_units": (10**40, ["verifier.pim_units", "1024"]),
    "verifier.devices": (True, ["verifier.devices"]),
    "drafters.0.devices": (2.0, ["drafters[0].devices", "integer"]),
    "verifier.placement.qkv.share": (10**6, ["verifier.placement.qkv.share", "8"]),
}


def _million_node_tree(out: dict) -> dict:
    return _set(_set(out, "drafters.0.tree", [1] + [999_999]), "drafters.0.draft_length", 2)




def _commands(scenario: Path, design: Path) -> list[list[str]]:
    return [["evaluate", str(scenario), "--design", str(design)], ["show", str(scenario), "--design", str(design)],
            ["solve", str(scenario), "--hint", str(design), "--time-limit", "5"], ["export-tree", str(design), "--format", "json"]]


@pytest.mark.parametrize("field", sorted(BAD))
def test_every_command_refuses_a_field_out_of_bounds(files, tmp_path, field):
    scenario, out = files
    value, needles = BAD[field]
    bad = _set(out, field, value)
    if field == "drafters.0.draft_length":
        bad = _set(bad, "drafters.0.tree", None)
    if field == "drafters.0.tree":
        bad = _set(bad, "drafters.0.draft_length", 2)
    design = tmp_path / "bad.json"
    design.write_text(json.dumps(bad))
    for command in _commands(scenario, design):
        one_line_error(CliRunner().invoke(main, command), *needles)


def test_a_million_node_tree_is_refused_by_its_count(files, tmp_path):
    scenario, out = files
    design = tmp_path / "big.json"
    design.write_text(json.dumps(_million_node_tree(out)))
    for command in _commands(scenario, design):
        one_line_error(CliRunner().invoke(main, command), "drafters[0].tree: 1,000,000 nodes")


def test_a_boolean_width_is_not_a_one(files, tmp_path):
    _, out = files
    design = tmp_path / "bool.json"
    design.write_text(json.dumps(_set(out, "drafters.0.tree", [True, 2])))
    one_line_error(CliRunner().invoke(main, ["export-tree", str(design), "--format", "json"]), "drafters[0].tree[0]")


def test_five_drafters_are_refused(files):
    _, out = files
    with pytest.raises(Exception, match="drafters"):
        parse_design(_set(out, "drafters", out["design"]["drafters"] * 5)["design"])


@pytest.mark.parametrize(("vector", "needle"), [([10**400, 0.1], "too large for a float"),
                                                ([0.1] * 2000, "at most 1024"),
                                                ([True, 0.1], "not a list of numbers")])
def test_export_tree_checks_the_acceptance_vector(files, tmp_path, vector, needle):
    _, out = files
    bad = copy.deepcopy(out)
    bad["breakdown"]["drafters"][0]["tree_vector"] = vector
    design = tmp_path / "vector.json"
    design.write_text(json.dumps(bad))
    one_line_error(CliRunner().invoke(main, ["export-tree", str(design), "--format", "json"]), "tree_vector", needle)


def test_the_design_as_written_still_reads(files, tmp_path):
    """The strict schema reads what every command writes (the design of an `evaluate --json` output)."""
    _, out = files
    design = tmp_path / "good.json"
    design.write_text(json.dumps(out))
    assert parse_design(out["design"]).drafters[0].tree == (2, 2)
    res = CliRunner().invoke(main, ["export-tree", str(design), "--format", "choices"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == [[0], [1], [0, 0], [0, 1]]


def test_vector_limits_are_the_scenarios():
    with pytest.raises(ValueError, match="at most 1024"):
        check_positional([0.0] * 1025, ranked=False)
    bad = copy.deepcopy(SCENARIO)
    bad["drafters"][0]["tree"]["acceptance_vector"] = [0.5] + [0.0] * 1024
    with pytest.raises(Exception, match="acceptance_vector"):
        parse_scenario(bad)
