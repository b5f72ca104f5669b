"""Edge devices (formulations/edge.md): weight precision [EDGE-1], the shared device [EDGE-2, EDGE-3], the
exact optimum against brute force on small edge spaces, and one-line errors on the new fields."""

from __future__ import annotations

from fractions import Fraction

import pytest
from click.testing import CliRunner

from specpim_cp.catalog import default_catalog
from specpim_cp.catalog.precision import WEIGHT_BITS, weight_bytes
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.costs import KIB, CostModel
from specpim_cp.physics.evaluate import Evaluator, idle_energy_nj
from specpim_cp.problem.design import ArchConfig, Placement
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve

PHONE = "lpddr5x-phone-pim"


def _scenario(**over) -> dict:
    data = {"name": "edge-test", "batch_size": 1, "prompt_tokens": 512, "generated_tokens": 128,
            "host": "snapdragon-8-gen-3", "memory_types": [PHONE], "shared_device": True, "max_draft_length": 2,
            "verifier": {"model": "qwen2.5-1.5b", "weights": "int4"},
            "drafters": [{"model": "qwen2.5-0.5b", "acceptance": 0.7}], "space": {"share_levels": 1}}
    data.update(over)
    return data


def test_int4_bits_include_group_scales_and_zero_points():
    assert WEIGHT_BITS["int4"] == Fraction(133, 32)  # 4 + 16/128 + 4/128
    assert weight_bytes(1024, "int4") == 532 and weight_bytes(3, "int4") == 2
    assert weight_bytes(1000, "fp16") == 2000 and weight_bytes(1000, "int8") == 1000


def test_precision_scales_decoder_weights_only():
    cat = default_catalog()
    fp16 = CostModel(parse_scenario(_scenario(verifier={"model": "qwen2.5-1.5b"}), cat), cat)
    int4 = CostModel(parse_scenario(_scenario(), cat), cat)
    spec = cat.models["qwen2.5-1.5b"]
    a, b = fp16.tensor_bytes(spec, 1).op_kib, int4.tensor_bytes(spec, 1).op_kib
    for op in ("qkv", "o_proj", "ffn_up", "ffn_down"):
        shape = fp16.shapes(spec)[op]
        n = spec.layers * shape.in_features * shape.out_features
        assert a[op] == -(-2 * n // KIB)
        assert b[op] == -(-weight_bytes(n, "int4") // KIB)
    for op in ("lm_head", "score", "context"):  # the LM head and the KV cache stay FP16
        assert a[op] == b[op]


def test_host_fc_time_falls_with_precision_and_pim_refuses_int4():
    cat = default_catalog()
    fp16 = CostModel(parse_scenario(_scenario(verifier={"model": "qwen2.5-1.5b"}), cat), cat)
    int4 = CostModel(parse_scenario(_scenario(), cat), cat)
    spec = cat.models["qwen2.5-1.5b"]
    arch = ArchConfig(f"{PHONE}[3/4]", 0, 1)
    t16 = fp16.op_cost(spec, "ffn_up", "host", 0, arch, 1).time_ns
    t4 = int4.op_cost(spec, "ffn_up", "host", 0, arch, 1).time_ns
    assert t4 < 0.35 * t16  # about 4.16 / 16 of the bytes, plus the launch
    pim = ArchConfig(f"{PHONE}[3/4]", 1, 1)
    assert fp16.op_cost(spec, "ffn_up", "pim", 1, pim, 1) is not None
    assert int4.op_cost(spec, "ffn_up", "pim", 1, pim, 1) is None  # the FP16 PIM units cannot run INT4
    assert int4.op_cost(spec, "score", "pim", 1, pim, 1) is not None  # attention reads the FP16 KV cache
    space = DesignSpace(parse_scenario(_scenario(), cat), cat)
    offered = {p.engine for p in space.models[0].allowed(pim, "ffn_up")}
    assert offered == {"host"}
    assert Placement(engine="pim", share=1) in space.models[1].allowed(ArchConfig(f"{PHONE}[1/4]", 1, 1), "ffn_up")


def test_shared_device_slices_and_idle_power():
    cat = default_catalog()
    sc = parse_scenario(_scenario(), cat)
    space = DesignSpace(sc, cat)
    assert {a.memory_type for a in space.models[0].archs} == {f"{PHONE}[{c}/4]" for c in (1, 2, 3, 4)}
    assert {a.memory_type for a in space.models[0].archs if not space.alone_only(0, a)} == \
        {f"{PHONE}[{c}/4]" for c in (1, 2, 3)}  # the whole device: the verifier alone's
    assert space.pipeline_options == (False,)
    costs = CostModel(sc, cat)
    host_mw = cat.host(sc.host).idle_power_mw
    assert sum(costs.idle_power_mw(ArchConfig(f"{PHONE}[{c}/4]", 0, 1)) for c in (1, 3)) == host_mw
    mem = cat.memory(f"{PHONE}[3/4]")
    assert mem.groups == 3 and mem.slice_of == 4


def test_interleaved_device_shares_capacity_and_idle_power():
    cat = default_catalog()
    sc = parse_scenario(_scenario(shared_device="interleaved", prompt_tokens=4096, batch_size=2,
                                  verifier={"model": "qwen2.5-3b"},
                                  drafters=[{"model": "qwen2.5-1.5b", "acceptance": 0.8}]), cat)
    space = DesignSpace(sc, cat)
    assert {a.memory_type for a in space.models[1].archs} == {PHONE}
    costs = CostModel(sc, cat)
    assert costs.idle_power_mw(ArchConfig(PHONE, 1, 1)) == cat.host(sc.host).idle_power_mw // 2
    ev = Evaluator(sc, cat)
    exact = solve(sc, options=SolverOptions(60, deterministic=True), catalog=cat)
    caps = [ev.capacity(md) for _, md in exact.design.models()]
    assert sum(c.pim_need_kib for c in caps) <= caps[0].pim_capacity_kib
    assert sum(c.normal_need_kib for c in caps) <= caps[0].normal_capacity_kib
    assert exact.design.verifier.pim_units == exact.design.drafters[0].pim_units


def test_designs_take_every_channel_once():
    cat = default_catalog()
    sc = parse_scenario(_scenario(), cat)
    exact = solve(sc, options=SolverOptions(60, deterministic=True), catalog=cat)
    d = exact.design
    bad = d.model_copy(update={"verifier": d.verifier.model_copy(update={"memory_type": f"{PHONE}[1/4]"})}) \
        if d.verifier.memory_type != f"{PHONE}[1/4]" else \
        d.model_copy(update={"verifier": d.verifier.model_copy(update={"memory_type": f"{PHONE}[2/4]"})})
    with pytest.raises(ScenarioError, match="channels"):
        Evaluator(sc, cat).evaluate(bad)


@pytest.mark.parametrize(("objective", "over"), [
    ("latency", {}),
    ("energy", {}),
    ("latency", {"prompt_tokens": 4096, "batch_size": 2,
                 "verifier": {"model": "qwen2.5-3b", "weights": "int8"}}),  # capacity binds the slices
    ("edp", {"memory_types": ["lpddr5x-laptop-pim"], "host": "snapdragon-x-elite"}),
    ("latency", {"shared_device": "interleaved"}),
    ("energy", {"shared_device": "interleaved", "drafters": [
        {"model": "qwen2.5-0.5b", "acceptance": 0.7, "staging": {"draft2": ["ngram"], "max_draft_length": 2}}]}),
    ("latency", {"shared_device": "interleaved", "prompt_tokens": 4096, "batch_size": 2,  # the joint capacity binds
                 "verifier": {"model": "qwen2.5-3b"}, "drafters": [{"model": "qwen2.5-1.5b", "acceptance": 0.8}]}),
    ("latency", {"shared_device": "interleaved", "memory_types": ["lpddr5x-laptop-pim"], "host": "snapdragon-x-elite",
                 "max_draft_length": 1, "space": {"share_levels": 1, "pim_units": 2}}),
    # a prompt-lookup drafter: no weights, no channel, no capacity (by channels the verifier takes all four)
    ("latency", {"verifier": {"model": "llama-3.2-1b"}, "drafters": [{"kind": "ngram", "acceptance": 0.6}]}),
    ("energy", {"shared_device": "interleaved", "verifier": {"model": "llama-3.2-1b", "weights": "int4"},
                "drafters": [{"kind": "ngram", "acceptance": 0.6}]}),
    ("latency", {"drafters": [{"model": "qwen2.5-0.5b", "acceptance": 0.7},  # the slices are the two models'
                              {"kind": "ngram", "acceptance": 0.4}]}),
    ("edp", {"shared_device": "interleaved", "drafters": [{"model": "qwen2.5-0.5b", "acceptance": 0.7},
                                                          {"kind": "ngram", "acceptance": 0.4}]}),
    # the sub-500M Llama drafters, staged: LLaMA-68M as the draft2 of LLaMA-160M for an INT4 Llama-2-7B
    ("latency", {"shared_device": "interleaved", "verifier": {"model": "llama-2-7b", "weights": "int4"},
                 "drafters": [{"model": "llama-160m", "staging": {"draft2": ["llama-68m"], "max_draft_length": 2}}]}),
    ("energy", {"verifier": {"model": "llama-2-7b", "weights": "int4"},
                "drafters": [{"model": "llama-160m", "staging": {"draft2": ["llama-68m"], "max_draft_length": 2}}]}),
    # [NOSPEC] a poor drafter: the verifier alone, on every channel of the device
    ("latency", {"verifier": {"model": "qwen2.5-1.5b"}, "drafters": [{"model": "qwen2.5-0.5b", "acceptance": 0.05}]}),
])
def test_shared_device_optimum_equals_brute_force(objective, over):
    """The exact model's EDGE-2 rows and slice architectures give the enumerated optimum: shared channels
    and capacity, the PIM split between the models, INT4/INT8 weights on FP16-only PIM units."""
    cat = default_catalog()
    sc = parse_scenario(_scenario(objective=objective, **over), cat)
    exact = solve(sc, options=SolverOptions(120, deterministic=True), catalog=cat)
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute_force(sc, catalog=cat).report.objective
    assert Evaluator(sc, cat).evaluate(exact.design).metrics.objective(objective) == exact.report.objective


def test_lookup_drafter_takes_no_channel_and_no_idle_share():
    """[EDGE-2, EDGE-3] An n-gram lookup on a shared device sits on the verifier's architecture: by channels
    the verifier may take every channel, interleaved it carries the device's whole idle power."""
    cat = default_catalog()
    lookup = {"verifier": {"model": "llama-3.2-1b"}, "drafters": [{"kind": "ngram", "acceptance": 0.6}]}
    space = DesignSpace(parse_scenario(_scenario(**lookup), cat), cat)
    assert {a.memory_type for a in space.models[0].archs} == {f"{PHONE}[{c}/4]" for c in (1, 2, 3, 4)}
    assert all(a.colocated for a in space.models[1].archs)
    sc = parse_scenario(_scenario(shared_device="interleaved", **lookup), cat)
    assert DesignSpace(sc, cat).offers_no_spec  # [EDGE-3] alone, the verifier carries the device's idle power
    host_mw = cat.host(sc.host).idle_power_mw
    assert CostModel(sc, cat).idle_power_mw(ArchConfig(PHONE, 1, 1)) == host_mw
    on = sc.model_copy(update={"space": sc.space.model_copy(update={"speculation": "on"})})  # the lookup drafts
    exact = solve(on, options=SolverOptions(60, deterministic=True), catalog=cat)
    assert exact.report.status == "OPTIMAL" and exact.design.drafters[0].colocated


@pytest.mark.parametrize(("objective", "acceptance", "speculates"), [
    ("latency", 0.05, False), ("energy", 0.05, False), ("latency", 0.8, True), ("energy", 0.8, True)])
def test_interleaved_verifier_alone_equals_brute_force(objective, acceptance, speculates):
    """[NOSPEC, EDGE-3] An interleaved device offers the verifier alone, which then carries the whole device's
    idle power (each model carries half of it when speculating): CP-SAT == brute force where it wins (a poor
    drafter) and where it loses, on latency and on energy."""
    cat = default_catalog()
    sc = parse_scenario(_scenario(objective=objective, shared_device="interleaved",  # an INT4 verifier
                                  drafters=[{"model": "qwen2.5-0.5b", "acceptance": acceptance}]), cat)
    assert DesignSpace(sc, cat).offers_no_spec
    exact = solve(sc, options=SolverOptions(120, deterministic=True), catalog=cat)
    assert exact.report.status == "OPTIMAL" and bool(exact.design.drafters) == speculates
    assert exact.report.objective == brute_force(sc, catalog=cat).report.objective
    ev = Evaluator(sc, cat)
    priced = ev.evaluate(exact.design)
    assert priced.metrics.objective(objective) == exact.report.objective
    host_mw = cat.host(sc.host).idle_power_mw
    powers = [host_mw // 2, host_mw // 2] if speculates else [host_mw]  # a share each, or the whole device's
    assert priced.breakdown.round.idle_energy_nj == sum(idle_energy_nj(p, priced.metrics.round_time_ns)
                                                        for p in powers)
    if not speculates:  # priced as the scenario without drafters prices it
        alone = parse_scenario(_scenario(objective=objective, shared_device="interleaved", drafters=[]), cat)
        assert Evaluator(alone, cat).evaluate(exact.design).metrics == priced.metrics


def test_verifier_alone_takes_the_whole_device():
    """[NOSPEC] on a device shared by channels the verifier alone takes every channel (the GPU-AR baseline's
    and the evaluator's reading); that slice is offered to it only when not speculating."""
    cat = default_catalog()
    sc = parse_scenario(_scenario(verifier={"model": "qwen2.5-1.5b"},
                                  drafters=[{"model": "qwen2.5-0.5b", "acceptance": 0.05}]), cat)
    space = DesignSpace(sc, cat)
    whole = ArchConfig(f"{PHONE}[4/4]", 1, 1)
    assert whole in space.models[0].archs and space.alone_only(0, whole)
    assert not space.alone_only(0, ArchConfig(f"{PHONE}[3/4]", 1, 1))
    exact = solve(sc, options=SolverOptions(60, deterministic=True), catalog=cat)
    assert not exact.design.drafters and exact.design.verifier.memory_type == f"{PHONE}[4/4]"


def _cli_error(tmp_path, data: dict, *needles: str) -> None:
    import json

    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2, (result.exit_code, result.output)
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)


@pytest.mark.parametrize(("over", "needles"), [
    ({"verifier": {"model": "qwen2.5-1.5b", "channels": 4}}, ("verifier.channels", "4 channels")),
    ({"verifier": {"model": "qwen2.5-1.5b", "channels": 3},
      "drafters": [{"model": "qwen2.5-0.5b", "channels": 2}]}, ("channels", "above the 4 channels")),
    ({"shared_device": False, "verifier": {"model": "qwen2.5-1.5b", "devices": 1, "channels": 2},
      "drafters": [{"model": "qwen2.5-0.5b", "devices": 1}]}, ("verifier.channels", "shared_device")),
    ({"shared_device": "interleaved", "verifier": {"model": "qwen2.5-1.5b", "channels": 2}},
     ("verifier.channels", "interleaved")),
    ({"device_budget": 2}, ("device_budget", "one device")),
    ({"space": {"pipeline": "on"}}, ("space.pipeline", "time-shares")),
    ({"verifier": {"model": "qwen2.5-1.5b", "devices": 2}}, ("verifier.devices", "one device")),
    ({"verifier": {"model": "qwen2.5-1.5b", "weights": "int3"}}, ("verifier.weights",)),
    ({"verifier": {"model": "llama-3.1-8b"}, "drafters": [{"model": "llama-3.2-1b"}]}, ("infeasible", "CAP")),
    ({"space": {"mapping": "fc-offload", "share_levels": 1}}, ("mapping", "verifier")),
    ({"drafters": [{"kind": "eagle"}]}, ("drafters[0].kind", "eagle head on a shared device")),
    ({"drafters": [{"kind": "ngram", "channels": 1}]}, ("drafters[0].channels", "n-gram lookup")),
])
def test_bad_edge_input_is_one_line_exit_2(tmp_path, over, needles):
    _cli_error(tmp_path, _scenario(**over), *needles)


def test_defaults_keep_the_inputs_hash():
    cat = default_catalog()
    data = {"name": "h", "batch_size": 1, "prompt_tokens": 64, "generated_tokens": 16,
            "verifier": {"model": "opt-1.3b", "devices": 1}, "drafters": [{"model": "opt-125m", "devices": 1}]}
    dumped = parse_scenario(data, cat).hash_data()
    assert "shared_device" not in dumped and "weights" not in dumped["verifier"]
    assert "channels" not in dumped["drafters"][0]
    changed = parse_scenario({**data, "verifier": {"model": "opt-1.3b", "devices": 1, "weights": "int8"}}, cat)
    assert changed.content_hash() != parse_scenario(data, cat).content_hash()


def test_edge_set_loads_and_baselines_run_on_the_shared_device():
    """Every `edge` scenario loads; on one of each sharing mode (and with a prompt-lookup drafter) the edge
    baselines give designs of the shared device that the evaluator accepts, none better than the exact optimum."""
    from specpim_cp.problem.builtin_sets import SET_DESCRIPTIONS, scenario_files
    from specpim_cp.problem.scenario import load_scenario
    from specpim_cp.solvers.baselines import run_baselines

    cat = default_catalog()
    assert "edge" in SET_DESCRIPTIONS
    files = {p.stem: p for p in scenario_files(["edge"])}
    assert len(files) >= 10
    for path in files.values():
        load_scenario(path, cat)
    for name in ("phone-qwen2.5-3b-int4-channels", "phone-llama3.2-3b-int4", "phone-llama3.2-1b-lookup"):
        sc = load_scenario(files[name], cat)
        exact = solve(sc, options=SolverOptions(60, deterministic=True), catalog=cat)
        results = {b.name: b for b in run_baselines(sc, cat)}
        assert set(results) == {"GPU-AR", "GPU-SI", "FC-offload", "attention-offload"}
        for b in results.values():
            assert b.evaluation is not None, (name, b.name, b.error)
            if b.name != "GPU-AR":
                Evaluator(sc, cat).check(b.evaluation.design)
                assert exact.report.objective <= b.evaluation.metrics.objective(sc.objective)


def test_edge_validation_rows_hold():
    from specpim_cp.check.validate import ValidationRow
    from specpim_cp.check.validate_edge import edge_rows

    rows = edge_rows(default_catalog(), ValidationRow)
    assert rows and all(r.ok for r in rows), [(r.quantity, r.model, r.measured) for r in rows if not r.ok]
    laptop = [r for r in rows if "X Elite" in r.quantity]
    phone = [r for r in rows if "Galaxy S24" in r.quantity]
    # the laptop's bandwidth fraction is fitted on one row and tested on others held out, each sourced
    assert sum("(fitted)" in r.tolerance for r in laptop) == 1
    assert sum("(held out)" in r.tolerance for r in laptop) >= 2 and len(phone) >= 2
    assert all(r.source for r in laptop + phone)
