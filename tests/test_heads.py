"""Drafter kinds (EAGLE-3, MTP, Medusa, n-gram heads): shapes from the verifier, placement on the verifier's
devices or their own as a decision (CP-SAT = brute force for every kind and both placements), rounds per
kind (no pipeline with hidden-state heads, Medusa's one pass), Monte Carlo = closed forms, one-line errors."""

from __future__ import annotations

import json
import tomllib
from fractions import Fraction

import pytest
from click.testing import CliRunner
from helpers import one_line_error

from specpim_cp.catalog import load_catalog
from specpim_cp.catalog.heads import HeadSpec
from specpim_cp.check.simulate_design import simulate_design
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.heads import transfer_cost
from specpim_cp.problem.heads import head_graph, head_op_shapes
from specpim_cp.problem.scenario import parse_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve

SPACE = {"memory_type": "hbm", "pim_units": 4, "share_levels": 1, "mapping": "attention-offload"}


def head_scenario(kind: str, placement: str = "free", objective: str = "latency", tree: bool = False,
                  **extra) -> dict:
    """A small scenario: OPT-1.3B (Mixtral for MTP) with one head of `kind`."""
    d: dict = {"kind": kind, "placement": placement, "acceptance": 0.7}
    if placement != "verifier" and kind != "ngram":
        d["devices"] = 1
    if kind == "medusa":
        d["head"] = {"heads": 3}
    if kind == "mtp":
        d["head"] = {"depth": 2}
    if tree:
        d["tree"] = {"max_nodes": 4, "max_children": 2}
    moe = kind == "mtp"
    return {"name": f"head-{kind}-{placement}", "batch_size": 2, "prompt_tokens": 128, "generated_tokens": 64,
            "objective": objective, "host": "a100-80gb", "memory_types": ["hbm"], "max_draft_length": 3,
            "verifier": {"model": "mixtral-8x7b" if moe else "opt-1.3b", "devices": 4 if moe else 1},
            "drafters": [d], "space": dict(SPACE)} | extra


CASES = [("eagle", "free", "latency", False), ("eagle", "own", "latency", False),
         ("eagle", "verifier", "energy", False), ("eagle", "free", "edp", False), ("eagle", "free", "latency", True),
         ("medusa", "free", "latency", False), ("medusa", "own", "energy", False),
         ("medusa", "verifier", "energy", True), ("mtp", "free", "latency", False), ("mtp", "own", "energy", False),
         ("mtp", "verifier", "latency", False), ("ngram", "free", "latency", False),
         ("ngram", "verifier", "energy", False)]


@pytest.mark.parametrize("kind,placement,objective,tree", CASES, ids=lambda v: str(v))
def test_cp_sat_optimum_equals_brute_force_for_every_kind_and_placement(kind, placement, objective, tree):
    sc = parse_scenario(head_scenario(kind, placement, objective, tree))
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    brute = brute_force(sc)
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute.report.objective
    assert Evaluator(sc).evaluate(exact.design).metrics.objective(objective) == exact.report.objective
    head = exact.design.drafters[0]
    if placement == "verifier" or kind == "ngram":
        assert head.colocated
    if placement == "own":
        assert not head.colocated


def tight_scenario(placement: str) -> dict:
    """OPT-6.7B at batch 34 nearly fills one 32 GiB GDDR device: an EAGLE head no longer fits beside it."""
    return {"name": f"tight-{placement}", "batch_size": 34, "prompt_tokens": 128, "generated_tokens": 1024,
            "host": "a100-40gb", "memory_types": ["gddr"], "max_draft_length": 2,
            "verifier": {"model": "opt-6.7b", "devices": 1},
            "drafters": [{"kind": "eagle", "placement": placement, "devices": 1, "acceptance": 0.7}],
            "space": {"memory_type": "gddr", "pim_units": 0, "share_levels": 1, "mapping": "host-only",
                      "speculation": "on"}}


def test_a_head_that_does_not_fit_beside_the_verifier_gets_devices_of_its_own():
    with pytest.raises(ScenarioError):
        brute_force(parse_scenario(tight_scenario("verifier")))
    free = tight_scenario("verifier")
    free["space"]["speculation"] = "free"  # the verifier alone is then the only design [NOSPEC]
    assert brute_force(parse_scenario(free)).design.drafters == []
    sc = parse_scenario(tight_scenario("free"))
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    assert exact.report.objective == brute_force(sc).report.objective
    assert not exact.design.drafters[0].colocated


def test_own_devices_add_the_hidden_state_transfer_and_nothing_else():
    sc = parse_scenario(head_scenario("eagle"))
    ev = Evaluator(sc)
    design = solve(sc, options=SolverOptions(60, deterministic=True)).design
    on_v = design.model_copy(update={"drafters": [design.drafters[0].model_copy(update={"colocated": True})]})
    own = design.model_copy(update={"drafters": [design.drafters[0].model_copy(update={"colocated": False})]})
    a, b = ev.evaluate(on_v), ev.evaluate(own)
    head = ev.catalog.models[design.drafters[0].model]
    t_ns, _ = transfer_cost(head, ev.costs.host, sc.batch_size, a.metrics.tokens_per_round_micro)
    assert t_ns > 0 and b.metrics.round_time_ns == a.metrics.round_time_ns + t_ns
    assert b.breakdown.round.head_transfer_ns == t_ns and a.breakdown.round.head_transfer_ns == 0
    # k = 3 hidden states of every committed token, over the host link
    moved = 3 * head.hidden * 2 * sc.batch_size * a.metrics.tokens_per_round
    assert t_ns == pytest.approx(moved / ev.costs.host.link_bandwidth_gbps, abs=1)


def test_colocated_heads_share_the_verifiers_capacity_and_store_no_copy_of_shared_tensors():
    sc = parse_scenario(head_scenario("eagle"))
    ev = Evaluator(sc)
    design = solve(sc, options=SolverOptions(60, deterministic=True)).design
    design = design.model_copy(update={"drafters": [design.drafters[0].model_copy(update={"colocated": True})]})
    alone = ev.capacity(design.verifier)
    head = ev.capacity(design.drafters[0])
    own = ev.capacity(design.drafters[0].model_copy(update={"colocated": False}))
    merged = ev.evaluate(design).breakdown.verifier.capacity
    assert (merged.pim_need_kib, merged.normal_need_kib) == (alone.pim_need_kib + head.pim_need_kib,
                                                               alone.normal_need_kib + head.normal_need_kib)
    v = ev.catalog.models["opt-1.3b"]
    embedding_kib = v.vocab * v.hidden * 2 // 1024  # the verifier's embedding, copied only on own devices
    assert (own.pim_need_kib + own.normal_need_kib) - (head.pim_need_kib + head.normal_need_kib) == embedding_kib
    assert ev.idle_power_mw(design.drafters[0]) == 0


def test_head_shapes_follow_the_verifier_and_the_kinds_fields():
    cat = load_catalog()
    sc = parse_scenario(head_scenario("eagle"))
    head = Evaluator(sc).catalog.models["eagle:opt-1.3b"]
    assert isinstance(head, HeadSpec) and head.layers == 1 and head.vocab == 32000 and head.hidden == 2048
    qkv = head_op_shapes(head)["qkv"]
    assert [(p.name, p.in_features, p.out_features) for p in qkv.parts] == [("fuse", 3 * 2048, 2048),
                                                                           ("qkv", 2 * 2048, 3 * 2048)]
    g = head_graph(head)
    assert {d["op"] for _, d in g.nodes(data=True) if d["op"]} == set(head_op_shapes(head))
    assert list(g.successors("hidden_states")) == ["fuse"]
    medusa = Evaluator(parse_scenario(head_scenario("medusa"))).catalog.models["medusa:opt-1.3b"]
    lm = head_op_shapes(medusa)["lm_head"]
    assert medusa.layers == 0 and [(p.in_features, p.out_features) for p in lm.parts] == [
        (2048, 3 * 2048), (2048, 3 * cat.models["opt-1.3b"].vocab)]
    mtp_ev = Evaluator(parse_scenario(head_scenario("mtp")))
    mtp = mtp_ev.catalog.models["mtp:mixtral-8x7b"]
    assert mtp.stored_layers == 2 and mtp.experts == 8  # D modules of the verifier's (MoE) block
    one = mtp_ev.costs.tensor_bytes(mtp, 4).op_kib["ffn_up"]
    assert one == 2 * mtp_ev.costs.tensor_bytes(cat.models["mixtral-8x7b"], 4).op_kib["ffn_up"] // 32


def test_rounds_follow_each_kind():
    medusa = DesignSpace(parse_scenario({**head_scenario("medusa"), "max_draft_length": 8}), load_catalog())
    assert medusa.gamma_options(0) == (1, 2, 3)  # K = 3 heads draft at most 3 positions
    assert medusa.pipeline_options == (False,)  # a hidden-state head never runs ahead
    assert DesignSpace(parse_scenario({**head_scenario("mtp"), "max_draft_length": 8}),
                       load_catalog()).gamma_options(0) == (1, 2)
    ngram = DesignSpace(parse_scenario(head_scenario("ngram")), load_catalog())
    assert ngram.pipeline_options == (False, True)  # a lookup needs no hidden state
    # Medusa drafts every position in one pass: its drafting per round does not grow with the draft length
    sc = parse_scenario(head_scenario("medusa"))
    ev = Evaluator(sc)
    d = solve(sc, options=SolverOptions(60, deterministic=True)).design
    cycles = {g: ev.evaluate(d.model_copy(update={"drafters": [d.drafters[0].model_copy(
        update={"draft_length": g})]})).breakdown.drafters[0].cycle_ns for g in (1, 2, 3)}
    assert len(set(cycles.values())) == 1


@pytest.mark.parametrize("kind,tree", [("eagle", False), ("eagle", True), ("medusa", False), ("medusa", True),
                                       ("mtp", False), ("ngram", False)])
def test_monte_carlo_agrees_with_the_closed_forms_for_every_kind(kind, tree):
    sc = parse_scenario(head_scenario(kind, "own" if kind in ("eagle", "medusa") else "free", tree=tree))
    d = solve(sc, options=SolverOptions(60, deterministic=True)).design
    sim = simulate_design(sc, d, rounds=20_000, seed=5)
    assert sim.simulation.tokens_agree() and sim.simulation.time_agree()
    assert sim.simulation.closed_form_tokens == pytest.approx(sim.evaluator_tokens, rel=1e-5)
    assert sim.simulation.closed_form_time_ns == pytest.approx(sim.evaluator_round_ns, abs=2)


def test_head_acceptance_defaults_come_from_the_catalog_families():
    for kind, family in (("eagle", "eagle3"), ("mtp", "mtp"), ("medusa", "medusa"), ("ngram", "prompt-lookup")):
        data = head_scenario(kind)
        del data["drafters"][0]["acceptance"]
        ev = Evaluator(parse_scenario(data))
        assert ev.acceptance.drafters[0] == ev.catalog.acceptance_families[f"{family}>any"]
        assert f"families.{family}>any" in ev.catalog.acceptance_ranges
    # the conversion written in acceptance.toml: tau = (1 - a^(L+1)) / (1 - a) at L = 7
    a = load_catalog().acceptance_families["eagle3>any"]
    assert (1 - a ** 8) / (1 - a) == pytest.approx(3.20, abs=0.03)


BAD = [
    ({"head": {"hidden_size": 4096}}, "drafters[0].head.hidden_size: an EAGLE head of width 4096"),
    ({"kind": "medusa", "head": {"heads": 0}}, "drafters[0].head.heads"),
    ({"staging": {"draft2": ["ngram"]}}, "drafters[0].staging: a eagle head drafts by itself"),
    ({"kind": "mtp", "tree": {"max_nodes": 4}}, "drafters[0].tree: a mtp drafter drafts chains"),
    ({"kind": "ngram", "placement": "own"}, "drafters[0].placement"),
    ({"model": "opt-125m"}, "drafters[0].model: a eagle head is derived from the verifier"),
]


@pytest.mark.parametrize("change,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_impossible_heads_are_one_line_errors(change, message):
    data = head_scenario("eagle")
    data["drafters"][0].update(change)
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(data)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_a_pipeline_with_a_hidden_state_head_is_refused_by_the_cli(tmp_path):
    data = head_scenario("eagle")
    data["space"]["pipeline"] = "on"
    with pytest.raises(ScenarioError, match=r"^space.pipeline: 'on' cannot run drafters\[0\] \(a eagle head\)"):
        parse_scenario(data)
    path = tmp_path / "s.toml"
    path.write_text('name = "p"\nbatch_size = 1\nprompt_tokens = 64\ngenerated_tokens = 64\n'
                    '[verifier]\nmodel = "opt-1.3b"\ndevices = 1\n[[drafters]]\nkind = "eagle"\ndevices = 1\n'
                    '[space]\npipeline = "on"\n')
    one_line_error(CliRunner().invoke(main, ["solve", str(path)]), "space.pipeline", "drafters[0]")


def test_model_drafters_are_unchanged_by_the_kind_field():
    base = {"name": "m", "batch_size": 1, "prompt_tokens": 64, "generated_tokens": 64,
            "verifier": {"model": "opt-1.3b", "devices": 1}, "drafters": [{"model": "opt-125m", "devices": 1}]}
    a = parse_scenario(base)
    b = parse_scenario({**base, "drafters": [{"model": "opt-125m", "devices": 1, "kind": "model"}]})
    assert a == b and a.content_hash() != "" and Fraction(spec.TOKENS_SCALE) > 0


HEAD_CONFIGS = {
    "eagle3": ({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 1, "draft_vocab_size": 32000, "vocab_size": 128256},
               ['kind = "eagle"', "draft_vocab = 32000  # draft_vocab_size", "hidden_size = 4096  # hidden_size",
                "intermediate_size = 14336"]),
    "eagle31": ({"architectures": ["Eagle3Speculator"], "hidden_size": 2048, "target_hidden_size": 4096,
                 "draft_vocab_size": 32000, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 16, 29]}},
                ["hidden_size = 4096  # target_hidden_size", "fused_layers = 3  # eagle_config."]),
    "deepseek-v3": ({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
                     "num_nextn_predict_layers": 1, "hidden_size": 7168},
                    ['kind = "mtp"', "depth = 1  # num_nextn_predict_layers"]),
    "medusa": ({"architectures": ["MedusaModel"], "medusa_num_heads": 5, "medusa_num_layers": 1},
               ['kind = "medusa"', "heads = 5  # medusa_num_heads", "layers = 1  # medusa_num_layers"]),
}


@pytest.mark.parametrize("case", sorted(HEAD_CONFIGS))
def test_import_hf_reads_head_configs_as_a_drafter_entry(tmp_path, case):
    cfg, needles = HEAD_CONFIGS[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    res = CliRunner().invoke(main, ["catalog", "import-hf", str(path)])
    assert res.exit_code == 0, res.output
    for n in needles:
        assert n in res.output, (n, res.output)
    entry = tomllib.loads(res.output)["drafters"][0]
    data = head_scenario(entry["kind"])
    data["drafters"][0]["head"] = entry["head"]
    if entry["kind"] == "eagle":  # a head built for a 4096-wide verifier
        data["verifier"]["model"] = "llama-7b"
        data["drafters"][0]["head"].pop("intermediate_size", None)
    parse_scenario(data)


@pytest.mark.parametrize("cfg,needle", [
    ({"architectures": ["HydraDraftModel"], "hidden_size": 4096}, "a draft-head config (['HydraDraftModel'])"),
    ({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "draft_vocab_size": 0}, "draft_vocab_size"),
    ({"medusa_num_heads": 0}, "medusa_num_heads must be an integer from 1"),
])
def test_bad_or_unknown_head_configs_are_one_line(tmp_path, cfg, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    one_line_error(CliRunner().invoke(main, ["catalog", "import-hf", str(path)]), needle)


def wider_spaces() -> dict[str, dict]:
    """Spaces where the placement meets other decisions: PIM units free (several verifier architectures to
    sit on), a device budget shared by the verifier and the head, a head beside a drafter model or a lookup."""
    out = {}
    d = head_scenario("medusa", tree=True)
    d["space"].pop("pim_units")
    d["space"]["mapping"] = "fc-offload"
    out["medusa-pim-free"] = d
    d = head_scenario("eagle")
    d.update(device_budget=3, verifier={"model": "opt-1.3b", "max_devices": 2})
    d["drafters"][0].pop("devices")
    d["drafters"][0]["max_devices"] = 2
    out["eagle-budget"] = d
    d = head_scenario("ngram", max_draft_length=2)
    d["drafters"].insert(0, {"model": "opt-125m", "devices": 1, "acceptance": 0.6})
    out["model-and-ngram"] = d
    d = head_scenario("eagle", "free", "edp", max_draft_length=2)
    d["drafters"].append({"kind": "ngram", "acceptance": 0.4})
    out["eagle-and-ngram"] = d
    return out


@pytest.mark.parametrize("name", sorted(wider_spaces()))
def test_cp_sat_optimum_equals_brute_force_in_wider_spaces(name):
    sc = parse_scenario(wider_spaces()[name])
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute_force(sc).report.objective
    if "budget" in name:
        assert sum(md.devices for _, md in exact.design.models() if not md.colocated) <= 3


def test_a_medusa_head_on_the_verifiers_lm_head_stores_only_its_blocks():
    data = head_scenario("medusa", "free")
    data["drafters"][0]["head"] = {"heads": 3, "lm_head": "shared"}
    sc = parse_scenario(data)
    ev = Evaluator(sc)
    design = solve(sc, options=SolverOptions(60, deterministic=True)).design
    head = design.drafters[0]
    on_v = ev.capacity(head.model_copy(update={"colocated": True}))
    own = ev.capacity(head.model_copy(update={"colocated": False}))
    v = ev.catalog.models["opt-1.3b"]
    blocks_kib = 3 * v.hidden * v.hidden * 2 // 1024
    assert on_v.pim_need_kib + on_v.normal_need_kib == blocks_kib
    assert own.pim_need_kib + own.normal_need_kib == blocks_kib + v.hidden * v.vocab * 2 // 1024
    assert solve(sc, options=SolverOptions(60, deterministic=True)).report.objective == brute_force(sc).report.objective


def test_a_head_free_to_sit_with_the_verifier_leaves_it_the_whole_budget():
    """A budget of 2 with a head that may sit on the verifier's devices: while speculating the verifier may take
    both devices (the head needs none of its own), and the exact optimum equals brute force over that space."""
    d = head_scenario("eagle", max_draft_length=2)
    d.update(device_budget=2, verifier={"model": "opt-1.3b", "max_devices": 2})
    d["drafters"][0].pop("devices")
    d["drafters"][0]["max_devices"] = 1
    d["space"]["speculation"] = "on"
    sc = parse_scenario(d)
    space = DesignSpace(sc, scenario_catalog(sc))
    assert 2 in space.device_options(0)
    two = [a for a in space.models[0].archs if a.devices == 2]
    assert two and not any(space.alone_only(0, a) for a in two)
    exact = solve(sc, options=SolverOptions(60, deterministic=True))
    assert exact.report.objective == brute_force(sc).report.objective
