"""`specpim-cp show`: the schedule picture draws exactly what the evaluator prices, and bad input is one line."""

from __future__ import annotations

import itertools
import math
import stat
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.cli import main
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import Design, Staging
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.operators import LAYER_OPS
from specpim_cp.problem.scenario import Scenario, load_scenario, parse_scenario
from specpim_cp.solvers import baselines
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.views.schedule_picture import schedule_figure, schedule_picture

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _example(name: str) -> Scenario:
    return load_scenario(EXAMPLES / f"{name}.toml")


def _tree_scenario() -> Scenario:
    """opt-13b with token trees for its drafter (two verifier devices: the all-reduce lane is used)."""
    data = tomllib.loads((EXAMPLES / "opt-13b.toml").read_text())
    data["name"] = "opt-13b-trees"
    data["drafters"][0]["tree"] = {"max_nodes": 8, "max_children": 3}
    return parse_scenario(data)


@pytest.fixture(scope="module")
def cases() -> dict[str, tuple[Scenario, Design]]:
    """Every example (exact designs where they solve in seconds, else a baseline), a staged design, a
    pipelined one and token trees (vanilla and pipelined)."""
    out = {}
    for name in ("gpt2-staged", "opt-13b", "palm-8b"):  # palm: a parallel block with concurrent PIM shares
        sc = _example(name)
        speculating = sc.model_copy(update={"space": sc.space.model_copy(update={"speculation": "on"})})
        out[name] = (sc, solve(speculating, options=SolverOptions(deterministic=True)).design)
    sc = _example("opt-13b")  # its optimum is the verifier alone ([NOSPEC]): a round of one pass, no drafter
    out["opt-13b-alone"] = (sc, solve(sc, options=SolverOptions(deterministic=True)).design)
    assert not out["opt-13b-alone"][1].drafters
    sc = _example("llama-13b")
    out["llama-13b"] = (sc, baselines.attention_offload(sc).design)  # host reads contend with PIM
    sc = _example("llama-32.5b-three-drafters")
    design = baselines.gpu_si(sc).design
    out["llama-32.5b-three-drafters"] = (sc, design)
    out["three-drafters-pipelined"] = (sc, design.model_copy(update={"pipeline": True}))
    sc, exact = out["gpt2-staged"]
    staged = exact.drafters[0].model_copy(update={"draft_length": 6, "staging": Staging(draft2="ngram", draft_length=3)})
    out["staged"] = (sc, exact.model_copy(update={"drafters": [staged]}))
    out["staged-pipelined"] = (sc, exact.model_copy(update={"drafters": [staged], "pipeline": True}))
    sc = _tree_scenario()
    trees = baselines.gpu_si_trees(sc).design
    assert trees.drafters[0].tree is not None
    out["tree"] = (sc, trees)
    out["tree-pipelined"] = (sc, trees.model_copy(update={"pipeline": True}))
    out["autoregressive"] = (_example("opt-13b"), baselines.gpu_ar(_example("opt-13b")).design)
    return out


ALL = ("gpt2-staged", "opt-13b", "palm-8b", "llama-13b", "llama-32.5b-three-drafters", "three-drafters-pipelined",
       "staged", "staged-pipelined", "tree", "tree-pipelined", "autoregressive", "opt-13b-alone")
DRAWN = ("gpt2-staged", "opt-13b", "palm-8b", "llama-13b", "llama-32.5b-three-drafters", "staged-pipelined",
         "tree-pipelined")


def test_every_example_is_covered():
    assert {p.stem for p in EXAMPLES.glob("*.toml")} <= set(ALL)


@pytest.mark.parametrize("name", DRAWN)
def test_the_figure_is_a_png_written_0644(cases, name, tmp_path):
    sc, design = cases[name]
    path = schedule_figure(sc, design, tmp_path / "out" / f"{name}.png")
    data = path.read_bytes()
    assert len(data) > 10_000 and data.startswith(PNG_MAGIC)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.parametrize("name", ALL)
def test_the_drawn_layers_are_the_evaluators_schedule(cases, name):
    sc, design = cases[name]
    ev = Evaluator(sc)
    pic = schedule_picture(sc, design, evaluator=ev)
    evaluation = ev.evaluate(design)
    levels = sc.space.share_levels
    assert len(pic.layers) == len(design.models())
    for layer, (label, md), (_, mb) in zip(pic.layers, design.models(), evaluation.breakdown.models(), strict=True):
        assert (layer.label, layer.tokens) == (label, mb.pass_tokens)
        price = ev.pass_price(md, mb.pass_tokens)
        assert {b.node for b in layer.bars} == set(price.starts_ns)
        for b in layer.bars:
            assert b.start_ns == price.starts_ns[b.node], (label, b)
            expected = price.allreduce_ns if b.node.startswith("allreduce") else price.op_time_ns[b.node]
            assert b.duration_ns == expected, (label, b)
            if b.node.startswith("allreduce"):
                assert (b.lane, b.pim_slots) == ("link", 0)
                continue
            p = md.placement[b.node]
            assert b.lane == p.engine
            contends = p.engine == "host" and ev.costs.host_contends_with_pim(md.arch, p.layout)
            assert b.pim_slots == (p.share if p.engine == "pim" else levels if contends else 0), (label, b)
        assert layer.makespan_ns == price.layer_makespan_ns == max(b.end_ns for b in layer.bars)
        assert layer.pass_ns == mb.pass_time_ns
        assert layer.pass_ns == layer.embedding_ns + layer.layers * layer.makespan_ns + layer.lm_head_ns
        # drawn PIM blocks that overlap in time hold disjoint slots, all within the PIM units
        pim = [b for b in layer.bars if b.pim_slots and b.duration_ns]
        for b in pim:
            assert 0 <= b.slot_offset and b.slot_offset + b.pim_slots <= levels
            for c in pim:
                if b is not c and b.start_ns < c.end_ns and c.start_ns < b.end_ns:
                    assert (b.slot_offset + b.pim_slots <= c.slot_offset
                            or c.slot_offset + c.pim_slots <= b.slot_offset), (label, b, c)
    assert set(LAYER_OPS) <= {b.node for b in pic.layers[0].bars}


@pytest.mark.parametrize("name", ALL)
def test_the_round_adds_up_to_the_evaluators_round_time(cases, name):
    sc, design = cases[name]
    ev = Evaluator(sc)
    pic = schedule_picture(sc, design, evaluator=ev)
    evaluation = ev.evaluate(design)
    b, rnd, m = evaluation.breakdown, pic.round, evaluation.metrics
    assert rnd.round_time_ns == m.round_time_ns
    assert (rnd.verify_ns, rnd.sync_ns, rnd.pipeline) == (b.round.verify_ns, b.round.sync_ns, design.pipeline)
    assert math.ceil(sum(x for _, x in rnd.parts)) == m.round_time_ns
    verify = [x for x in rnd.bars if x.kind == "verify"]
    assert [(x.lane, x.duration_ns) for x in verify] == [("verifier", b.round.verify_ns)]
    assert sum(x.duration_ns for x in rnd.bars if x.kind == "sync") == b.round.sync_ns
    deterministic = all(md.staging is None for md in design.drafters)
    ends = []
    for i, (md, d) in enumerate(zip(design.drafters, b.drafters, strict=True)):
        bars = [x for x in rnd.bars if x.lane == f"drafters[{i}]"]
        assert bars[0].start_ns == 0 and all(x.end_ns == y.start_ns for x, y in itertools.pairwise(bars))
        if md.tree is not None:  # one cycle: a pass per depth
            assert [x.kind for x in bars] == ["tree"] * len(md.tree)
            assert sum(x.duration_ns for x in bars) == d.cycle_ns
        elif md.staging is None:  # gamma steps
            assert [x.duration_ns for x in bars] == [d.cycle_ns] * md.draft_length
        else:  # per cycle: gamma2 draft2 steps and a pass, later cycles with their probability
            assert len(bars) % 2 == 0
            for k in range(0, len(bars), 2):
                assert bars[k].kind == "draft2" and bars[k + 1].kind == "draft"
                assert bars[k].duration_ns + bars[k + 1].duration_ns == d.cycle_ns
                assert bars[k].probability == bars[k + 1].probability
            probs = [x.probability for x in bars[::2]]
            assert probs[0] == 1 and probs == sorted(probs, reverse=True) and probs[-1] > 0
        ends.append(bars[-1].end_ns)
    if not deterministic:
        return
    # one drafting outcome: every part is an integer and they add up exactly
    assert all(x.denominator == 1 for _, x in rnd.parts)
    assert sum(rnd.parts[k][1] for k in range(len(rnd.parts))) == m.round_time_ns
    drafting = max(ends, default=0)
    assert rnd.drafting_ns == drafting
    if not design.pipeline:
        assert verify[0].end_ns == m.round_time_ns == drafting + b.round.sync_ns + b.round.verify_ns
        return
    v = b.round.verify_ns
    assert verify[0].start_ns == 0
    overlap, resync, sync = (x for _, x in rnd.parts)
    assert overlap == max(drafting, v) and sync == b.round.sync_ns
    assert resync == math.ceil(round(b.round.fail_probability * 1_000_000) * min(drafting, v) / 1_000_000)
    (block,) = [x for x in rnd.bars if x.kind == "resync"]
    assert (block.start_ns, block.duration_ns) == (max(drafting, v), min(drafting, v))


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------
def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _assert_user_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert result.stdout == ""
    for n in needles:
        assert n in err, (n, err)


@pytest.fixture(scope="module")
def opt_design(cases, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("designs") / "opt.json"
    path.write_text(cases["opt-13b"][1].to_json())
    return path


def test_show_writes_the_default_name_in_the_current_folder(opt_design, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # any JSON output holding a design: here `evaluate --json`
    ev_json = tmp_path / "ev.json"
    assert _run("evaluate", str(EXAMPLES / "opt-13b.toml"), "--design", str(opt_design), "--json",
                "-o", str(ev_json)).exit_code == 0
    res = _run("show", str(EXAMPLES / "opt-13b.toml"), "--design", str(ev_json))
    assert res.exit_code == 0, res.output
    out = tmp_path / "opt-13b-schedule.png"
    assert res.stdout.strip() == "opt-13b-schedule.png"
    assert out.read_bytes().startswith(PNG_MAGIC)


def _capacity_design(cases, tmp: Path) -> Path:
    """llama-13b's verifier with every operator on half-PIM HBM: its PIM units cannot hold it."""
    sc, design = cases["llama-13b"]
    verifier = design.verifier.model_copy(update={"memory_type": "hbm", "pim_units": 4,
                                                  "placement": rule_placement("all-pim", sc.space.share_levels)})
    path = tmp / "capacity.json"
    path.write_text(design.model_copy(update={"verifier": verifier}).to_json())
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


BAD = {
    "missing design file": (lambda c, t: t / "nope.json", None, ["nope.json"]),
    "design not JSON": (lambda c, t: _write(t / "bad.json", "{"), None, ["not valid JSON"]),
    "design not a design": (lambda c, t: _write(t / "list.json", "[1, 2]"), None, ["design"]),
    "another scenario's design": (lambda c, t: _write(t / "g.json", c["gpt2-staged"][1].to_json()), None,
                                  ["verifier"]),
    "capacity": (_capacity_design, "llama-13b", ["short by"]),
    "unknown suffix": (None, None, ["out.txt", ".png"]),
    "output below a file": (None, None, ["is a file"]),
    "missing scenario": (None, "no-such-scenario", ["no-such-scenario"]),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_writes_nothing(case, cases, opt_design, tmp_path):
    make, scenario, needles = BAD[case]
    design = opt_design if make is None else make(cases, tmp_path)
    scenario = (str(EXAMPLES / f"{scenario or 'opt-13b'}.toml") if scenario != "no-such-scenario"
                else str(tmp_path / "no-such-scenario.toml"))
    out = tmp_path / "out.png"
    if case == "unknown suffix":
        out = tmp_path / "out.txt"
    if case == "output below a file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out.png"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    _assert_user_error(_run("show", scenario, "--design", str(design), "-o", str(out)), *needles)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_usage_errors_are_one_line():
    _assert_user_error(_run("show", str(EXAMPLES / "opt-13b.toml")), "--design")
    _assert_user_error(_run("show"), "SCENARIO")
