"""The promise of the CLI: every error a user can cause prints ONE line `error: ...` naming the
field or the problem, exits with code 2, shows no traceback and writes nothing (no output file, no temp
file). A corpus of malformed and hostile inputs, each run through the real CLI entry (click's runner;
a few through a real process). batch/grid/report are covered by their own tests.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import build_design

from specpim_cp.cli import main
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
OPT13 = str(ROOT / "benchmarks" / "examples" / "opt-13b.toml")
LLAMA13 = str(ROOT / "benchmarks" / "examples" / "llama-13b.toml")

HEADER = 'name = "t"\nbatch_size = 1\nprompt_tokens = 256\ngenerated_tokens = 128\n'
VERIFIER = '[verifier]\nmodel = "opt-13b"\ndevices = 2\n'
DRAFTER = '[[drafters]]\nmodel = "opt-1.3b"\ndevices = 1\n'
GOOD = HEADER + VERIFIER + DRAFTER


def _with(line: str, text: str = GOOD) -> str:
    """`text` with a top-level `line` added before the first table."""
    return text.replace("[verifier]", line + "\n[verifier]", 1)


def _sub(old: str, new: str, text: str = GOOD) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _design(sc_path: str = OPT13, pipeline: bool = False) -> dict:
    sc = load_scenario(sc_path)
    place = rule_placement("host-only", sc.space.share_levels)
    archs = [ArchConfig("hbm", 0, e.devices or 1) for e in [sc.verifier, *sc.drafters]]
    d = build_design(sc, archs, [place] * len(archs), [3] * len(sc.drafters), [None] * len(sc.drafters), pipeline)
    return json.loads(d.to_json())


def _design_text(**edit) -> str:
    """The opt-13b example's host-only design as JSON, after `edit` (dotted paths; None deletes)."""
    data = _design()
    for path, value in edit.items():
        keys = path.split("__")
        node = data
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return json.dumps(data)


_DELETE = object()


@dataclass
class Case:
    """argv ({d} = the case's folder), input files (name -> text or bytes), words the error must contain."""

    args: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)
    needles: tuple[str, ...] = ()


def _scenario_case(text: str | bytes, *needles: str, command: str = "baselines", name: str = "s.toml") -> Case:
    extra = {"evaluate": ["--design", "{d}/d.json", "-o", "{d}/out/r.txt"],
             "simulate": ["--design", "{d}/d.json", "--rounds", "100"],
             "solve": ["--no-warm-start", "--time-limit", "5", "-o", "{d}/out/r.json", "--json"],
             "pareto": ["--time-limit", "5", "-o", "{d}/p.csv"],
             "heuristic": ["-o", "{d}/h.json", "--json"],
             "baselines": ["--json", "-o", "{d}/out/b.json"],
             "compare": [], "sensitivity": ["--plot", "{d}/t.png"]}[command]
    files = {name: text}
    if command in ("evaluate", "simulate"):
        files["d.json"] = json.dumps(_design())
    return Case([command, "{d}/" + name, *extra], files, needles)


COMMANDS = ("baselines", "evaluate", "simulate", "solve", "pareto", "heuristic", "compare", "sensitivity")

# -- scenario files: each case runs through one command; the commands take turns ---------------
SCENARIOS: dict[str, tuple[str | bytes, tuple[str, ...]]] = {
    # the file itself
    "empty": ("", ("empty",)),
    "whitespace-only": ("  \n\t\n", ("empty",)),
    "not-utf8": (b"name = \"t\xff\xfe\"\n", ("UTF-8",)),
    "binary": (bytes(range(256)) * 4, ("UTF-8",)),
    "utf16": ('name = "t"\n'.encode("utf-16"), ("UTF-8",)),
    "toml-syntax": ('name = "t"\nbatch_size = [\n', ("not valid TOML",)),
    "toml-duplicate-key": (HEADER + "batch_size = 2\n" + VERIFIER, ("not valid TOML",)),
    "toml-unterminated-string": ('name = "t\n', ("not valid TOML",)),
    "toml-nul-byte": ('name = "t"\x00\n', ("not valid TOML",)),
    "deeply-nested": ("a = " + "[" * 50_000 + "]" * 50_000 + "\n", ("nested too deeply",)),
    # top-level fields
    "batch-string": (_sub("batch_size = 1", 'batch_size = "x"'), ("batch_size", "integer")),
    "batch-fraction": (_sub("batch_size = 1", "batch_size = 1.5"), ("batch_size",)),
    "batch-bool": (_sub("batch_size = 1", "batch_size = true"), ("batch_size", "number")),
    "batch-negative": (_sub("batch_size = 1", "batch_size = -4"), ("batch_size",)),
    "batch-zero": (_sub("batch_size = 1", "batch_size = 0"), ("batch_size",)),
    "batch-huge": (_sub("batch_size = 1", "batch_size = 513"), ("batch_size",)),
    "prompt-zero": (_sub("prompt_tokens = 256", "prompt_tokens = 0"), ("prompt_tokens",)),
    "prompt-negative": (_sub("prompt_tokens = 256", "prompt_tokens = -1"), ("prompt_tokens",)),
    "prompt-list": (_sub("prompt_tokens = 256", "prompt_tokens = [256]"), ("prompt_tokens",)),
    "prompt-bool": (_sub("prompt_tokens = 256", "prompt_tokens = false"), ("prompt_tokens",)),
    "generated-zero": (_sub("generated_tokens = 128", "generated_tokens = 0"), ("generated_tokens",)),
    "generated-inf": (_sub("generated_tokens = 128", "generated_tokens = inf"), ("generated_tokens",)),
    "missing-name": (_sub('name = "t"\n', ""), ("name", "required")),
    "missing-batch": (_sub("batch_size = 1\n", ""), ("batch_size",)),
    "missing-prompt": (_sub("prompt_tokens = 256\n", ""), ("prompt_tokens",)),
    "missing-verifier": (HEADER + DRAFTER, ("verifier",)),
    "empty-name": (_sub('name = "t"', 'name = ""'), ("name",)),
    "name-escapes-folder": (_sub('name = "t"', 'name = "a/../../x"'), ("name", "'/'")),
    "name-backslash": (_sub('name = "t"', 'name = "a\\\\b"'), ("name",)),
    "name-hidden": (_sub('name = "t"', 'name = ".."'), ("name", "'.'")),
    "name-newline": (_sub('name = "t"', 'name = "a\\nb"'), ("name", "control")),
    "name-too-long": (_sub('name = "t"', f'name = "{"n" * 101}"'), ("name", "100")),
    "name-not-string": (_sub('name = "t"', "name = 7"), ("name", "string")),
    "description-not-string": (_with("description = 5"), ("description",)),
    "unknown-top-level-key": (_with("bogus = 1"), ("bogus",)),
    "misspelled-key": (_with("batchsize = 2"), ("batchsize",)),
    "objective-unknown": (_with('objective = "speed"'), ("objective", "latency")),
    "host-unknown": (_with('host = "tpu"'), ("host", "tpu")),
    "host-not-string": (_with("host = 3"), ("host",)),
    "memory-types-empty": (_with("memory_types = []"), ("memory_types",)),
    "memory-types-unknown": (_with('memory_types = ["sram"]'), ("memory_types", "sram")),
    "memory-types-string": (_with('memory_types = "hbm"'), ("memory_types",)),
    "memory-types-duplicate": (_with('memory_types = ["hbm", "hbm"]'), ("memory_types", "twice")),
    "max-draft-length-zero": (_with("max_draft_length = 0"), ("max_draft_length",)),
    "max-draft-length-huge": (_with("max_draft_length = 17"), ("max_draft_length",)),
    "device-budget-zero": (_with("device_budget = 0"), ("device_budget",)),
    "device-budget-too-small": (_with("device_budget = 2"), ("device_budget",)),
    # [verifier]
    "verifier-unknown-model": (_sub("opt-13b", "opt-14b"), ("verifier.model", "opt-14b")),
    "verifier-model-number": (_sub('model = "opt-13b"', "model = 13"), ("verifier.model",)),
    "verifier-devices-three": (_sub("devices = 2", "devices = 3"), ("verifier.devices",)),
    "verifier-devices-zero": (_sub("devices = 2", "devices = 0"), ("verifier.devices",)),
    "verifier-devices-negative": (_sub("devices = 2", "devices = -2"), ("verifier.devices",)),
    "verifier-devices-sixteen": (_sub("devices = 2", "devices = 16"), ("verifier.devices",)),
    "verifier-devices-string": (_sub("devices = 2", 'devices = "two"'), ("verifier.devices",)),
    "verifier-devices-bool": (_sub("devices = 2", "devices = true"), ("verifier.devices", "number")),
    "verifier-max-devices-zero": (_sub("devices = 2", "devices = 2\nmax_devices = 0"), ("verifier.max_devices",)),
    "verifier-max-devices-zero-budget": (
        _with("device_budget = 4", _sub("devices = 2", "max_devices = 0")), ("verifier.max_devices",)),
    "verifier-max-devices-below-devices": (
        _sub("devices = 2", "devices = 2\nmax_devices = 1"), ("verifier.max_devices", "below")),
    "verifier-no-devices-no-budget": (_sub("devices = 2\n", ""), ("verifier.devices", "device_budget")),
    "verifier-unknown-key": (_sub("devices = 2", "devices = 2\nlayers = 3"), ("verifier", "layers")),
    "verifier-not-a-table": (HEADER + 'verifier = "opt-13b"\n', ("verifier",)),
    # [[drafters]]
    "drafter-unknown-model": (_sub("opt-1.3b", "opt-1b"), ("drafters[0].model", "opt-1b")),
    "drafter-other-tokenizer": (_sub("opt-1.3b", "llama-7b"), ("drafters[0].model", "tokenizer")),
    "drafter-bigger-than-verifier": (_sub("opt-1.3b", "opt-30b"), ("drafters[0].model", "not smaller")),
    "drafter-same-as-verifier": (_sub("opt-1.3b", "opt-13b"), ("drafters[0].model", "not smaller")),
    "drafter-duplicate": (GOOD + DRAFTER, ("drafters[1].model", "duplicates")),
    "drafter-acceptance-one": (GOOD + "acceptance = 1.0\n", ("drafters[0].acceptance",)),
    "drafter-acceptance-negative": (GOOD + "acceptance = -0.1\n", ("drafters[0].acceptance",)),
    "drafter-acceptance-nan": (GOOD + "acceptance = nan\n", ("drafters[0].acceptance",)),
    "drafter-acceptance-string": (GOOD + 'acceptance = "high"\n', ("drafters[0].acceptance",)),
    "drafter-devices-zero": (_sub("devices = 1", "devices = 0"), ("drafters[0].devices",)),
    "drafter-unknown-key": (GOOD + "speed = 3\n", ("drafters[0]", "speed")),
    "drafters-five": (HEADER + '[verifier]\nmodel = "opt-66b"\ndevices = 8\n' + "".join(
        f'[[drafters]]\nmodel = "{m}"\ndevices = 1\n'
        for m in ("opt-125m", "opt-350m", "opt-1.3b", "opt-2.7b", "opt-6.7b")), ("drafters",)),
    "drafters-not-an-array": (HEADER + VERIFIER + '[drafters]\nmodel = "opt-1.3b"\n', ("drafters",)),
    # [drafters.staging]
    "staging-empty-draft2": (GOOD + "[drafters.staging]\ndraft2 = []\n", ("drafters[0].staging.draft2",)),
    "staging-draft2-not-smaller": (GOOD + '[drafters.staging]\ndraft2 = ["opt-2.7b"]\n',
                                   ("drafters[0].staging.draft2[0]", "not smaller")),
    "staging-draft2-unknown": (GOOD + '[drafters.staging]\ndraft2 = ["markov"]\n',
                               ("drafters[0].staging.draft2[0]", "markov")),
    "staging-draft2-other-tokenizer": (GOOD + '[drafters.staging]\ndraft2 = ["llama-1.3b"]\n',
                                       ("drafters[0].staging.draft2[0]", "tokenizer")),
    "staging-acceptance-not-draft2": (
        GOOD + '[drafters.staging]\ndraft2 = ["ngram"]\nacceptance = { "opt-125m" = 0.5 }\n',
        ("drafters[0].staging.acceptance", "opt-125m")),
    "staging-acceptance-above-one": (
        GOOD + '[drafters.staging]\ndraft2 = ["ngram"]\nacceptance = { "ngram" = 1.5 }\n',
        ("drafters[0].staging.acceptance",)),
    "staging-max-draft-length-zero": (GOOD + '[drafters.staging]\ndraft2 = ["ngram"]\nmax_draft_length = 0\n',
                                      ("drafters[0].staging.max_draft_length",)),
    "staging-unknown-key": (GOOD + '[drafters.staging]\ndraft2 = ["ngram"]\nwidth = 2\n',
                            ("drafters[0].staging", "width")),
    "staging-required-string": (GOOD + '[drafters.staging]\ndraft2 = ["ngram"]\nrequired = "perhaps"\n',
                                ("drafters[0].staging.required",)),
    # [drafters.tree]
    "tree-vector-sum-above-one": (GOOD + "[drafters.tree]\nacceptance_vector = [0.7, 0.6]\n",
                                  ("drafters[0].tree", "acceptance_vector")),
    "tree-vector-empty": (GOOD + "[drafters.tree]\nacceptance_vector = []\n", ("drafters[0].tree", "acceptance_vector")),
    "tree-vector-negative": (GOOD + "[drafters.tree]\nacceptance_vector = [0.5, -0.1]\n",
                             ("drafters[0].tree", "acceptance_vector")),
    "tree-vector-rank1-one": (GOOD + "[drafters.tree]\nacceptance_vector = [1.0]\n",
                              ("drafters[0].tree", "acceptance_vector")),
    "tree-vector-nan": (GOOD + "[drafters.tree]\nacceptance_vector = [nan]\n", ("drafters[0].tree", "acceptance_vector")),
    "tree-vector-vs-acceptance": (GOOD + "acceptance = 0.5\n[drafters.tree]\nacceptance_vector = [0.6, 0.1]\n",
                                  ("drafters[0].tree", "acceptance")),
    "tree-max-nodes-zero": (GOOD + "[drafters.tree]\nmax_nodes = 0\n", ("drafters[0].tree.max_nodes",)),
    "tree-max-nodes-huge": (GOOD + "[drafters.tree]\nmax_nodes = 33\n", ("drafters[0].tree.max_nodes",)),
    "tree-max-children-zero": (GOOD + "[drafters.tree]\nmax_children = 0\n", ("drafters[0].tree.max_children",)),
    "tree-unknown-key": (GOOD + "[drafters.tree]\ndepth = 3\n", ("drafters[0].tree", "depth")),
    # [space]
    "space-memory-type-not-listed": (_with('memory_types = ["hbm"]', GOOD + '[space]\nmemory_type = "gddr"\n'),
                                     ("space.memory_type", "gddr")),
    "space-pim-units-too-many": (GOOD + '[space]\nmemory_type = "hbm"\npim_units = 9\n', ("space.pim_units",)),
    "space-pim-units-negative": (GOOD + "[space]\npim_units = -1\n", ("space.pim_units",)),
    "space-mapping-unknown": (GOOD + '[space]\nmapping = "weird"\n', ("space.mapping",)),
    "space-pipeline-yes": (GOOD + '[space]\npipeline = "yes"\n', ("space.pipeline",)),
    "space-pipeline-on-no-drafters": (HEADER + VERIFIER + '[space]\npipeline = "on"\n',
                                      ("space.pipeline", "drafter")),
    "space-draft-lengths-count": (GOOD + "[space]\ndraft_lengths = [2, 3]\n", ("space.draft_lengths",)),
    "space-draft-lengths-zero": (GOOD + "[space]\ndraft_lengths = [0]\n", ("space.draft_lengths",)),
    "space-draft-lengths-too-long": (GOOD + "[space]\ndraft_lengths = [99]\n", ("space.draft_lengths",)),
    "space-staging-maybe": (GOOD + '[space]\nstaging = "maybe"\n', ("space.staging",)),
    "space-share-levels-zero": (GOOD + "[space]\nshare_levels = 0\n", ("space.share_levels",)),
    "space-share-levels-nine": (GOOD + "[space]\nshare_levels = 9\n", ("space.share_levels",)),
    "space-trees-maybe": (GOOD + '[space]\ntrees = "maybe"\n', ("space.trees",)),
    "space-unknown-key": (GOOD + "[space]\ngpus = 2\n", ("space", "gpus")),
    "space-not-a-table": (_with("space = 3"), ("space",)),
    # [assumptions]
    "assumptions-memory-model": (GOOD + '[assumptions]\nmemory_model = "shared"\n', ("assumptions.memory_model",)),
    "assumptions-energy-accounting": (GOOD + '[assumptions]\nenergy_accounting = "static"\n',
                                      ("assumptions.energy_accounting",)),
    "assumptions-unknown-key": (GOOD + "[assumptions]\nclock_ghz = 2\n", ("assumptions", "clock_ghz")),
    "assumptions-not-a-table": (_with("assumptions = 3"), ("assumptions",)),
}

JSON_SCENARIOS: dict[str, tuple[str, tuple[str, ...]]] = {
    "json-syntax": ('{"name": "t",', ("not valid JSON",)),
    "json-list": ("[1, 2]", ("JSON object",)),
    "json-string": ('"opt-13b"', ("JSON object",)),
    "json-null": ("null", ("JSON object",)),
    "json-huge-int": (json.dumps({"name": "t", "batch_size": 10**40, "prompt_tokens": 1, "generated_tokens": 1,
                                  "verifier": {"model": "opt-13b", "devices": 1}}), ("batch_size",)),
}


@pytest.mark.parametrize("case", sorted(SCENARIOS))
def test_bad_scenario(tmp_path, case):
    text, needles = SCENARIOS[case]
    command = COMMANDS[sorted(SCENARIOS).index(case) % len(COMMANDS)]
    _check(tmp_path, _scenario_case(text, *needles, command=command))


@pytest.mark.parametrize("vector,extra", [("[0.3, 0.5]", ""), ("[0.4, 0.2, 0.1]", "max_children = 2\n")])
def test_measured_vectors_are_accepted_and_reranked(tmp_path, vector, extra):
    """[TREE-5] A measured vector is taken as measured: ranked by probability and cut to max_children, and
    the solve says so (it used to be refused)."""
    from specpim_cp.physics.rounds import Acceptance
    from specpim_cp.problem.scenario import load_scenario, scenario_catalog

    path = tmp_path / "s.toml"
    path.write_text(GOOD + f"[drafters.tree]\n{extra}acceptance_vector = {vector}\n")
    sc = load_scenario(path)
    acc = Acceptance.of(sc, scenario_catalog(sc))
    assert list(acc.trees[0]) == sorted(acc.trees[0], reverse=True) and len(acc.notes) == 1
    res = CliRunner().invoke(main, ["solve", str(path), "--time-limit", "20", "--no-warm-start"])
    assert res.exit_code == 0, res.output
    assert "note: " in res.output and ("re-ranked" in res.output or "unused" in res.output)


@pytest.mark.parametrize("case", sorted(JSON_SCENARIOS))
def test_bad_json_scenario(tmp_path, case):
    text, needles = JSON_SCENARIOS[case]
    _check(tmp_path, _scenario_case(text, *needles, command="evaluate", name="s.json"))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_rejects_bad_files(tmp_path, command):
    for text, needles in (SCENARIOS["not-utf8"], SCENARIOS["drafter-duplicate"]):
        _check(tmp_path, _scenario_case(text, *needles, command=command))
    for target, needle in (("{d}", "{d}"), ("{d}/none.toml", "none.toml"), ("nosuchset/opt-13b", "nosuchset")):
        case = _scenario_case("", command=command)  # the scenario argument replaced below
        case.args[1] = target  # a directory, a missing file, an unknown built-in set
        case.needles = (needle,)
        _check(tmp_path, case)


# -- designs: evaluate --design, simulate --design, solve --hint ---------------------------------
DESIGNS: dict[str, tuple[str | bytes, tuple[str, ...]]] = {
    "not-json": ('{"pipeline": false', ("not valid JSON",)),
    "empty": ("", ("not valid JSON",)),
    "not-utf8": (b"\xff\xfe{}", ("UTF-8",)),
    "a-list": ("[1, 2]", ("design",)),
    "a-number": ("42", ("design",)),
    "missing-verifier": (json.dumps({"pipeline": False}), ("design.verifier",)),
    "extra-top-level": (_design_text(speed=3), ("design", "speed")),
    "pipeline-maybe": (_design_text(pipeline="maybe"), ("pipeline",)),
    "verifier-no-placement": (_design_text(verifier__placement=_DELETE), ("design.verifier.placement",)),
    "verifier-extra-field": (_design_text(verifier__clock=2), ("design.verifier", "clock")),
    "placement-missing-op": (_design_text(verifier__placement__qkv=_DELETE), ("design.verifier.placement",)),
    "placement-unknown-op": (_design_text(verifier__placement__conv={"engine": "host"}),
                             ("design.verifier.placement",)),
    "engine-gpu": (_design_text(verifier__placement__qkv={"engine": "gpu"}), ("design.verifier.placement.qkv",)),
    "share-negative": (_design_text(verifier__placement__qkv={"engine": "pim", "share": -1}),
                       ("design.verifier.placement.qkv",)),
    "layout-mismatch": (_design_text(verifier__placement__qkv={"engine": "host", "layout": "pim"}),
                        ("design.verifier.placement.qkv", "layout")),
    "pim-without-units": (_design_text(verifier__placement__qkv={"engine": "pim", "share": 4}),
                          ("design.verifier.placement.qkv",)),
    "pim-units-negative": (_design_text(verifier__pim_units=-1), ("design.verifier.pim_units",)),
    "devices-string": (_design_text(verifier__devices="x"), ("design.verifier.devices",)),
    "devices-bool": (_design_text(verifier__devices=True), ("design.verifier.devices", "number")),
    "memory-type-unknown": (_design_text(verifier__memory_type="sram"), ("design.verifier.memory_type", "sram")),
    "drafter-no-draft-length": (_design_text(drafters__0__draft_length=_DELETE), ("drafters[0].draft_length",)),
    "drafter-draft-length-zero": (_design_text(drafters__0__draft_length=0), ("drafters[0].draft_length",)),
    "drafter-draft-length-huge": (_design_text(drafters__0__draft_length=99), ("drafters[0].draft_length",)),
    "verifier-with-tree": (_design_text(verifier__tree=[1, 2]), ("verifier.tree", "drafters")),
    "verifier-with-draft-length": (_design_text(verifier__draft_length=3), ("verifier.draft_length",)),
    "drafter-tree-zero-width": (_design_text(drafters__0__tree=[1, 0], drafters__0__draft_length=2),
                                ("drafters[0].tree",)),
    "drafter-tree-depth-mismatch": (_design_text(drafters__0__tree=[1, 2]), ("drafters[0].tree", "depth")),
    "drafter-tree-not-offered": (_design_text(drafters__0__tree=[1, 2], drafters__0__draft_length=2),
                                 ("drafters[0].tree", "tree")),
    "drafter-staging-not-offered": (_design_text(drafters__0__staging={"draft2": "ngram", "draft_length": 2}),
                                    ("drafters[0].staging",)),
    "too-many-drafters": (_design_text(drafters=[_design()["drafters"][0]] * 2), ("design.drafters",)),
    "drafter-devices-not-fixed": (_design_text(drafters__0__devices=2), ("drafters[0].devices",)),
}


@pytest.mark.parametrize("case", sorted(DESIGNS))
def test_bad_design(tmp_path, case):
    text, needles = DESIGNS[case]
    cmd = ("evaluate", "simulate")[sorted(DESIGNS).index(case) % 2]
    extra = ["--rounds", "100"] if cmd == "simulate" else ["--json", "-o", "{d}/out/e.json"]
    _check(tmp_path, Case([cmd, OPT13, "--design", "{d}/d.json", *extra], {"d.json": text}, needles))


@pytest.mark.parametrize("case", ["not-json", "verifier-with-tree", "engine-gpu", "drafter-draft-length-huge"])
def test_bad_hint(tmp_path, case):
    text, needles = DESIGNS[case]
    _check(tmp_path, Case(["solve", OPT13, "--hint", "{d}/d.json", "--time-limit", "5", "-o", "{d}/s.txt"],
                          {"d.json": text}, needles))


def test_hint_for_another_model_says_so(tmp_path):
    _check(tmp_path, Case(["solve", LLAMA13, "--hint", "{d}/d.json", "-o", "{d}/s.txt"],
                          {"d.json": json.dumps(_design())}, ("--hint", "opt-13b", "llama-13b")))


def test_hint_that_does_not_fit(tmp_path):
    big = HEADER + '[verifier]\nmodel = "opt-30b"\ndevices = 1\n' + DRAFTER
    d = _design()
    d["verifier"]["model"], d["verifier"]["devices"] = "opt-30b", 1
    _check(tmp_path, Case(["solve", "{d}/s.toml", "--hint", "{d}/d.json"],
                          {"s.toml": big, "d.json": json.dumps(d)}, ("--hint", "short by", "GiB")))


def test_hint_with_brute_force(tmp_path):
    _check(tmp_path, Case(["solve", OPT13, "--method", "brute-force", "--hint", "{d}/d.json"],
                          {"d.json": json.dumps(_design())}, ("--hint", "brute")))


# -- command-line options ------------------------------------------------------------------------
OPTIONS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "unknown-command": (["solvee", OPT13], ("solvee",)),
    "unknown-subcommand": (["catalog", "gpus"], ("gpus",)),
    "solve-unknown-option": (["solve", OPT13, "--bogus"], ("--bogus", "solve --help")),
    "solve-missing-argument": (["solve"], ("SCENARIO",)),
    "solve-bad-objective": (["solve", OPT13, "--objective", "speed"], ("--objective", "speed")),
    "solve-bad-method": (["solve", OPT13, "--method", "milp"], ("--method",)),
    "solve-time-limit-nan": (["solve", OPT13, "--time-limit", "nan"], ("--time-limit", "finite")),
    "solve-time-limit-inf": (["solve", OPT13, "--time-limit", "inf"], ("--time-limit", "finite")),
    "solve-time-limit-negative": (["solve", OPT13, "--time-limit", "-1"], ("--time-limit",)),
    "solve-time-limit-zero": (["solve", OPT13, "--time-limit", "0"], ("--time-limit",)),
    "solve-time-limit-text": (["solve", OPT13, "--time-limit", "soon"], ("--time-limit",)),
    "solve-workers-zero": (["solve", OPT13, "--workers", "0"], ("--workers",)),
    "solve-workers-huge": (["solve", OPT13, "--workers", "65"], ("--workers",)),
    "solve-deterministic-workers": (["solve", OPT13, "--deterministic", "--workers", "4"],
                                    ("--workers", "--deterministic", "one worker")),
    "solve-seed-negative": (["solve", OPT13, "--seed", "-1"], ("--seed",)),
    "solve-seed-text": (["solve", OPT13, "--seed", "abc"], ("--seed",)),
    "solve-output-is-directory": (["solve", OPT13, "-o", "{d}"], ("-o",)),
    "solve-output-parent-is-file": (["solve", OPT13, "-o", "{d}/afile/out.json"], ("afile", "not a folder")),
    "solve-output-empty": (["solve", OPT13, "-o", ""], ("-o", "empty")),
    "solve-hint-missing": (["solve", OPT13, "--hint", "{d}/none.json"], ("none.json",)),
    "pareto-time-limit-nan": (["pareto", OPT13, "--time-limit", "nan"], ("--time-limit",)),
    "pareto-deterministic-workers": (["pareto", OPT13, "--deterministic", "--workers", "2"], ("--workers",)),
    "pareto-output-parent-is-file": (["pareto", OPT13, "-o", "{d}/afile/p.csv"], ("afile",)),
    "pareto-unknown-option": (["pareto", OPT13, "--objective", "latency"], ("--objective",)),
    "heuristic-budget-unknown": (["heuristic", OPT13, "--budget", "huge"], ("--budget", "huge")),
    "heuristic-budget-two-parts": (["heuristic", OPT13, "--budget", "10x10"], ("--budget",)),
    "heuristic-budget-population-one": (["heuristic", OPT13, "--budget", "1x1x1"], ("population",)),
    "heuristic-budget-negative": (["heuristic", OPT13, "--budget", "-1x10x1"], ("--budget",)),
    "heuristic-budget-absurd": (["heuristic", OPT13, "--budget", "1x99999999999x1"], ("--budget",)),
    "heuristic-output-parent-is-file": (["heuristic", OPT13, "-o", "{d}/afile/h.txt"], ("afile",)),
    "compare-time-limit-inf": (["compare", OPT13, "--time-limit", "inf"], ("--time-limit",)),
    "compare-budget-unknown": (["compare", OPT13, "--budget", "slow"], ("--budget",)),
    "sensitivity-time-limit-nan": (["sensitivity", OPT13, "--time-limit", "nan"], ("--time-limit",)),
    "sensitivity-plot-not-png": (["sensitivity", OPT13, "--plot", "{d}/t.pdf"], ("--plot", "PNG")),
    "sensitivity-plot-parent-is-file": (["sensitivity", OPT13, "--plot", "{d}/afile/t.png"], ("afile",)),
    "evaluate-missing-design": (["evaluate", OPT13], ("--design",)),
    "evaluate-output-parent-is-file": (["evaluate", OPT13, "--design", "{d}/d.json", "-o", "{d}/afile/e.txt"],
                                       ("afile",)),
    "baselines-output-parent-is-file": (["baselines", OPT13, "-o", "{d}/afile/b.txt"], ("afile",)),
    "simulate-rounds-one": (["simulate", OPT13, "--design", "{d}/d.json", "--rounds", "1"], ("--rounds",)),
    "simulate-rounds-text": (["simulate", OPT13, "--design", "{d}/d.json", "--rounds", "many"], ("--rounds",)),
    "simulate-seed-text": (["simulate", OPT13, "--design", "{d}/d.json", "--seed", "x"], ("--seed",)),
    "show-missing-design": (["show", OPT13, "-o", "{d}/s.png"], ("--design",)),
    "show-design-file-missing": (["show", OPT13, "--design", "{d}/none.json", "-o", "{d}/s.png"],
                                 ("none.json", "cannot read")),
    "show-design-of-another-model": (["show", LLAMA13, "--design", "{d}/d.json", "-o", "{d}/s.png"],
                                     ("design.verifier.model", "opt-13b", "llama-13b")),
    "show-output-parent-is-file": (["show", OPT13, "--design", "{d}/d.json", "-o", "{d}/afile/s.png"],
                                   ("afile", "not a folder")),
    "show-output-not-a-figure": (["show", OPT13, "--design", "{d}/d.json", "-o", "{d}/s.txt"], ("s.txt", ".png")),
    "kernels-unknown-gpu": (["kernels", "predict", "--gpu", "v100", "--in-features", "8", "--out-features", "8",
                             "--tokens", "1"], ("v100",)),
    "kernels-zero-features": (["kernels", "predict", "--gpu", "a100", "--in-features", "0", "--out-features", "8",
                               "--tokens", "1"], ("--in-features",)),
    "kernels-negative-tokens": (["kernels", "predict", "--gpu", "a100", "--in-features", "8", "--out-features",
                                 "8", "--tokens", "-3"], ("--tokens",)),
    "kernels-text-features": (["kernels", "predict", "--gpu", "a100", "--in-features", "big", "--out-features",
                               "8", "--tokens", "1"], ("--in-features",)),
    "kernels-float-features": (["kernels", "predict", "--gpu", "a100", "--in-features", "8.5", "--out-features",
                                "8", "--tokens", "1"], ("--in-features",)),
    "kernels-tensor-parallel-zero": (["kernels", "predict", "--gpu", "a100", "--in-features", "8",
                                      "--out-features", "8", "--tokens", "1", "--tensor-parallel", "0"],
                                     ("--tensor-parallel",)),
    "kernels-missing-gpu": (["kernels", "predict", "--in-features", "8", "--out-features", "8", "--tokens", "1"],
                            ("--gpu",)),
    "validate-unknown-option": (["validate", "--csv"], ("--csv",)),
    "sweep-acceptance-nan": (["sweep", OPT13, "--acceptance", "nan:0.9:0.1", "--out", "{d}/sw"], ("--acceptance",)),
    "sweep-acceptance-garbage": (["sweep", OPT13, "--acceptance", "a:b", "--out", "{d}/sw"], ("--acceptance",)),
    "sweep-acceptance-one": (["sweep", OPT13, "--acceptance", "0.5:1.0:0.1", "--out", "{d}/sw"], ("--acceptance",)),
}


@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_bad_option(tmp_path, case):
    args, needles = OPTIONS[case]
    _check(tmp_path, Case(args, {"afile": "not a folder\n", "d.json": json.dumps(_design())}, needles))


# -- solve-mix: mix files (a base scenario and [[mix.cells]]) and its options ---------------------------
MIX = 'name = "m"\nscenario = "s.toml"\n'
CELL = "[[mix.cells]]\nbatch_size = 2\nweight = 1\n"
GOOD_MIX = MIX + CELL


def _mix_sub(old: str, new: str) -> str:
    return _sub(old, new, GOOD_MIX)


MIXES: dict[str, tuple[str | bytes, list[str], tuple[str, ...]]] = {
    # the mix file
    "empty-file": ("", [], ("mix: missing",)),
    "binary": (bytes(range(256)), [], ("UTF-8",)),
    "toml-syntax": ('scenario = [\n', [], ("not valid TOML",)),
    "plain-scenario": (GOOD, [], ("mix: missing",)),
    "no-cells": (MIX + "[mix]\n", [], ("mix.cells",)),
    "cells-empty": (MIX + "[mix]\ncells = []\n", [], ("mix.cells", "no cells")),
    "cells-not-tables": (MIX + "[mix]\ncells = [1, 2]\n", [], ("mix.cells[0]",)),
    "unknown-top-key": ("bogus = 1\n" + GOOD_MIX, [], ("bogus",)),
    "name-empty": (_mix_sub('name = "m"', 'name = ""'), [], ("name",)),
    "base-missing": (_mix_sub('"s.toml"', '"none.toml"'), [], ("scenario", "none.toml")),
    "base-not-string": (_mix_sub('"s.toml"', "3"), [], ("scenario",)),
    # cells
    "weight-zero": (_mix_sub("weight = 1", "weight = 0"), [], ("mix.cells[0].weight", "> 0")),
    "weight-negative": (GOOD_MIX + "[[mix.cells]]\nbatch_size = 4\nweight = -2\n", [], ("mix.cells[1].weight",)),
    "weight-inf": (_mix_sub("weight = 1", "weight = inf"), [], ("mix.cells[0].weight",)),
    "weight-nan": (_mix_sub("weight = 1", "weight = nan"), [], ("mix.cells[0].weight",)),
    "weight-bool": (_mix_sub("weight = 1", "weight = true"), [], ("mix.cells[0].weight",)),
    "weight-string": (_mix_sub("weight = 1", 'weight = "heavy"'), [], ("mix.cells[0].weight",)),
    "weight-missing": (_mix_sub("weight = 1\n", ""), [], ("mix.cells[0].weight",)),
    "batch-zero": (_mix_sub("batch_size = 2", "batch_size = 0"), [], ("mix.cells[0].batch_size",)),
    "batch-huge": (_mix_sub("batch_size = 2", "batch_size = 513"), [], ("mix.cells[0].batch_size",)),
    "prompt-zero": (GOOD_MIX + "prompt_tokens = 0\n", [], ("mix.cells[0].prompt_tokens",)),
    "acceptance-one": (GOOD_MIX + 'acceptance = {"opt-1.3b" = 1.0}\n', [], ("mix.cells[0].acceptance",)),
    "acceptance-model-absent": (GOOD_MIX + 'acceptance = {"opt-125m" = 0.5}\n', [],
                                ("mix.cells[0].acceptance.opt-125m", "not a drafter")),
    "task-unknown": (GOOD_MIX + 'task = "qa"\n', [], ("mix.cells[0].task", "qa")),
    "task-rate-above-one": (MIX + '[mix.tasks.qa]\n"opt-1.3b" = 1.5\n' + CELL, [], ("mix.tasks", "qa")),
    "task-model-absent": (MIX + '[mix.tasks.qa]\n"llama-7b" = 0.5\n' + CELL, [], ("mix.tasks.qa.llama-7b",)),
    "cell-unknown-key": (GOOD_MIX + "bogus = 1\n", [], ("mix.cells[0].bogus",)),
    "mix-in-scenario-bad-cell": (GOOD + "[[mix.cells]]\nbatch_size = 2\nweight = 0\n", [], ("mix.cells[0].weight",)),
    # options (checked before any solve)
    "objective-unknown": (GOOD_MIX, ["--objective", "edp"], ("--objective",)),
    "time-limit-nan": (GOOD_MIX, ["--time-limit", "nan"], ("--time-limit",)),
    "time-limit-zero": (GOOD_MIX, ["--time-limit", "0"], ("--time-limit",)),
    "cell-time-limit-inf": (GOOD_MIX, ["--cell-time-limit", "inf"], ("--cell-time-limit",)),
    "workers-with-deterministic": (GOOD_MIX, ["--workers", "2", "--deterministic"], ("--workers",)),
    "workers-zero": (GOOD_MIX, ["--workers", "0"], ("--workers",)),
    "seed-negative": (GOOD_MIX, ["--seed", "-1"], ("--seed",)),
    "output-below-a-file": (GOOD_MIX, ["-o", "{d}/afile/r.json"], ("afile", "not a folder")),
    "policy-dir-is-a-file": (GOOD_MIX, ["--policy-dir", "{d}/afile"], ("afile",)),
    "policy-dir-below-a-file": (GOOD_MIX, ["--policy-dir", "{d}/afile/p"], ("afile", "not a folder")),
    "catalog-missing": (GOOD_MIX, ["--catalog", "{d}/none.toml"], ("none.toml",)),
}


@pytest.mark.parametrize("case", sorted(MIXES))
def test_bad_mix(tmp_path, case):
    text, extra, needles = MIXES[case]
    files = {"s.toml": GOOD, "m.toml": text, "afile": "not a folder\n"}
    output = [] if "-o" in extra else ["-o", "{d}/out/r.json"]
    _check(tmp_path, Case(["solve-mix", "{d}/m.toml", *extra, "--json", *output], files, needles))


def test_solve_mix_missing_file_and_argument(tmp_path):
    _check(tmp_path, Case(["solve-mix", "{d}/none.toml"], {}, ("none.toml", "no such mix file", "mix/opt-13b")))
    _check(tmp_path, Case(["solve-mix"], {}, ("MIX",)))


# -- what today's code got wrong -------------------------------------------------------------------
BIG = HEADER + '[verifier]\nmodel = "opt-66b"\ndevices = 1\n' + DRAFTER
#: Ten million tokens of context on models with no position limit (constructed shapes), so the capacity and
#: integer-range checks are what refuse it; on OPT (2,048 positions) the position limit does.
HUGE_CONTEXT = _sub("prompt_tokens = 256", "prompt_tokens = 10000000",
                    HEADER + '[verifier]\nmodel = "llama-2.7b"\ndevices = 2\n[[drafters]]\nmodel = "llama-1.3b"\n'
                    'devices = 1\n')


@pytest.mark.parametrize("args", [["solve", "{d}/s.toml"], ["solve", "{d}/s.toml", "--no-warm-start"],
                                  ["heuristic", "{d}/s.toml"], ["pareto", "{d}/s.toml", "-o", "{d}/p.csv"]])
def test_oversized_model_names_the_capacity_shortfall(tmp_path, args):
    """The warm-start heuristic must not mask the real error: the capacity shortfall in GiB."""
    _check(tmp_path, Case(args, {"s.toml": BIG}, ("CAP", "verifier (opt-66b)", "GiB")))


@pytest.mark.parametrize("args", [["solve", "{d}/s.toml", "--no-warm-start", "--json", "-o", "{d}/r.json"],
                                  ["solve", "{d}/s.toml"], ["pareto", "{d}/s.toml"]])
def test_context_of_ten_million_tokens(tmp_path, args):
    _check(tmp_path, Case(args, {"s.toml": HUGE_CONTEXT}, ("GiB",)))


def test_context_beyond_the_position_limit(tmp_path):
    text = _sub("prompt_tokens = 256", "prompt_tokens = 10000000")
    _check(tmp_path, Case(["solve", "{d}/s.toml"], {"s.toml": text}, ("verifier.model", "opt-13b", "2,048",
                                                                       "prompt_tokens")))


def test_integer_range_guard_names_the_limit(tmp_path, monkeypatch):
    """Past the capacity check, the 64-bit rows of the CP-SAT model are the limit: named, before any solve."""
    guards = importlib.import_module("specpim_cp.solvers.exact.guards")
    monkeypatch.setattr(guards, "check_capacity", lambda sm: None)
    for args in (["solve", "{d}/s.toml", "--no-warm-start"], ["pareto", "{d}/s.toml"]):
        _check(tmp_path, Case(args, {"s.toml": HUGE_CONTEXT}, ("64-bit", "2^62", "EN-1", "prompt_tokens")))


def test_write_failure_names_the_users_file_not_the_temp_file(tmp_path, monkeypatch):
    from specpim_cp import files

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".out.json.x1y2.tmp"))

    monkeypatch.setattr(files.tempfile, "mkstemp", refuse)
    err = _check(tmp_path, Case(["baselines", OPT13, "--json", "-o", "{d}/out.json"], {}, ("out.json",
                                                                                          "Permission denied")))
    assert ".tmp" not in err


def test_sensitivity_without_uncertain_constants(tmp_path, monkeypatch):
    import specpim_cp.check.sensitivity as sens

    monkeypatch.setattr(sens, "uncertain_constants", lambda sc, cat: [])
    _check(tmp_path, Case(["sensitivity", OPT13], {}, ("uncertain constants",)))


# -- real processes: exit code and stderr as a shell sees them ------------------------------------
PROCESS_CASES = {
    "binary-scenario": (["baselines", "{d}/s.toml"], {"s.toml": bytes(range(256))}, "UTF-8"),
    "usage-error": (["solve", OPT13, "--bogus"], {}, "--bogus"),
    "missing-argument": (["pareto"], {}, "SCENARIO"),
    "output-below-a-file": (["baselines", OPT13, "-o", "{d}/afile/out.txt"], {"afile": "x"}, "afile"),
    "huge-context-solve": (["solve", "{d}/s.toml", "--no-warm-start"], {"s.toml": HUGE_CONTEXT}, "GiB"),
    "bad-design": (["evaluate", OPT13, "--design", "{d}/d.json"], {"d.json": DESIGNS["verifier-with-tree"][0]},
                   "verifier.tree"),
}


@pytest.mark.parametrize("case", sorted(PROCESS_CASES))
def test_real_process(tmp_path, case):
    args, files, needle = PROCESS_CASES[case]
    before = _write(tmp_path, files)
    exe = shutil.which("specpim-cp")
    cmd = [exe] if exe else [sys.executable, "-m", "specpim_cp.cli"]
    proc = subprocess.run([*cmd, *(a.replace("{d}", str(tmp_path)) for a in args)], check=False,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert needle in proc.stderr
    assert _files(tmp_path) == before


# -- the checks --------------------------------------------------------------------------------------
def _write(folder: Path, files: dict[str, str | bytes]) -> set[Path]:
    for name, text in files.items():
        p = folder / name
        p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text, encoding="utf-8")
    return _files(folder)


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


def _check(tmp_path: Path, case: Case) -> str:
    """Run `case` in a fresh folder: exit 2, one `error:` line naming the needles, no traceback, no new files."""
    folder = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    before = _write(folder, case.files)
    args = [a.replace("{d}", str(folder)) for a in case.args]
    result = CliRunner().invoke(main, args)
    err = result.stderr
    assert result.exit_code == 2, (args, result.exit_code, result.stdout[-500:], err, result.exception)
    assert err.startswith("error: ") and err.endswith("\n"), (args, err)
    assert err.count("\n") == 1, f"more than one line on stderr for {args}: {err!r}"
    assert "Traceback" not in err and "Traceback" not in result.stdout
    assert result.stdout == "", (args, result.stdout[-500:])
    for needle in case.needles:
        needle = needle.replace("{d}", str(folder))
        assert needle in err, f"{needle!r} not in {err!r} ({args})"
    assert _files(folder) == before, f"{args} left files: {sorted(map(str, _files(folder) - before))}"
    return err


def test_corpus_size():
    n = (len(SCENARIOS) + len(JSON_SCENARIOS) + 5 * len(COMMANDS) + len(DESIGNS) + 4 + 3 + len(OPTIONS)
         + 4 + 3 + 2 + 1 + 1 + len(PROCESS_CASES) + len(MIXES) + 2)
    assert n >= 100, n


# -- what works: paths, units, progress --------------------------------------------------------------
def test_name_cannot_escape_the_output_folder(tmp_path):
    """`name` becomes results/sweep-NAME and batch file names: a name with a path in it is refused."""
    bad = _sub('name = "t"', 'name = "a/../../x"')
    _check(tmp_path, Case(["sweep", "{d}/s.toml", "--acceptance", "0.5:0.6:0.1"], {"s.toml": bad}, ("name",)))


def test_safe_stem_and_file_mode(tmp_path):
    from specpim_cp.files import safe_stem, write_atomic

    for name in ("a/../../x", "../..", "/etc/passwd", "a\\b", ".hidden", "x\x00y", ""):
        stem = safe_stem(name)
        assert stem and "/" not in stem and "\\" not in stem and ".." not in stem and not stem.startswith(".")
        assert (tmp_path / stem).resolve().parent == tmp_path.resolve()
    assert safe_stem("opt-13b-b1") == "opt-13b-b1"
    out = tmp_path / "sub" / "f.txt"
    write_atomic(out, "x\n")
    assert out.stat().st_mode & 0o777 == 0o644
    write_atomic(out, b"\x89PNG")
    assert out.read_bytes() == b"\x89PNG" and out.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in out.parent.iterdir()) == ["f.txt"]


def test_show_writes_a_png(tmp_path):
    """`show` with a design file: one PNG (mode 0644) at the -o path, its name on stdout, nothing else."""
    (tmp_path / "d.json").write_text(json.dumps(_design()))
    out = tmp_path / "out" / "s.png"
    res = CliRunner().invoke(main, ["show", OPT13, "--design", str(tmp_path / "d.json"), "-o", str(out)])
    assert res.exit_code == 0 and res.stderr == "", (res.stderr, res.exception)
    assert res.stdout == f"{out}\n"
    png = out.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert out.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["d.json", "out", "s.png"]


def test_solve_units_and_no_progress_off_a_terminal(tmp_path):
    """Text: objective and metrics in us/token (mJ/token); JSON: evaluator units named by objective_unit."""
    res = CliRunner().invoke(main, ["solve", OPT13, "--no-warm-start"])
    assert res.exit_code == 0 and res.stderr == "", res.stderr
    head = res.stdout.splitlines()[0]
    assert "objective latency = " in head and "us/token" in head and "ns/token" not in head
    res = CliRunner().invoke(main, ["solve", OPT13, "--no-warm-start", "--objective", "energy"])
    assert res.exit_code == 0 and "mJ/token" in res.stdout.splitlines()[0]
    res = CliRunner().invoke(main, ["solve", OPT13, "--no-warm-start", "--json", "-o", str(tmp_path / "s.json")])
    assert res.exit_code == 0 and res.stdout == "" and res.stderr == ""
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["solve"]["objective_unit"] == "ns/token"
    assert data["solve"]["objective"] == pytest.approx(data["metrics"]["latency_ns_per_token"])


def test_pareto_csv_and_compare_name_their_units():
    res = CliRunner().invoke(main, ["pareto", OPT13])
    assert res.exit_code == 0 and res.stderr == "", res.stderr
    header = res.stdout.splitlines()[0].split(",")
    assert header[:3] == ["latency_ns_per_token", "energy_pj_per_token", "edp_ns_pj_per_token2"]
    assert all(h == "design" or h.startswith("tokens") or "_ns" in h or "_pj" in h for h in header)
    res = CliRunner().invoke(main, ["compare", OPT13])
    assert res.exit_code == 0 and res.stderr == "", res.stderr
    assert "latency (us/token)" in res.stdout and "above optimum (%)" in res.stdout and "wall (s)" in res.stdout


def test_progress_hooks_report_incumbent_bound_and_generations():
    from specpim_cp.solvers.exact import SolverOptions, solve
    from specpim_cp.solvers.heuristic import run_heuristic

    sc = load_scenario(OPT13)
    events = []
    res = solve(sc, options=SolverOptions(30, deterministic=True), on_progress=events.append)
    assert events and events[-1].incumbent == res.report.objective and events[-1].gap == 0.0
    assert all(e.bound is not None and e.bound <= e.incumbent for e in events)
    gens = []
    run_heuristic(sc, budget="quick", on_generation=lambda *a: gens.append(a))
    assert [g[0] for g in gens] == list(range(13)) and gens[-1][2] < float("inf")


def test_progress_line_only_on_a_terminal(monkeypatch, capsys):
    from specpim_cp.cli.common import Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with Progress("x") as bar:
        bar.show("working")
    assert not bar and capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with Progress("x") as bar:
        bar.show("working")
    err = capsys.readouterr().err
    assert "working" in err and err.endswith("\r\033[K")
