"""Mixture-of-experts models (formulations/moe.md): the distinct experts a pass touches
(MOE-1, MOE-2), the MoE FFN's prices and capacity (MOE-3, MOE-4), `catalog import-hf` of Mixtral,
Qwen2-MoE and Qwen3-MoE configs, dense models pricing as before, and a Mixtral verifier solved, checked
against the evaluator and drawn.

Fixtures in tests/data (each a published Hugging Face config.json, unchanged):
- mixtral-8x7b.config.json: mistralai/Mixtral-8x7B-Instruct-v0.1 config.json at revision eba92302 (the
  shapes of Mixtral-8x7B-v0.1: 8 experts, top-2, intermediate 14336; Jiang et al. 2024, Table 1);
- qwen1.5-moe-a2.7b.config.json: Qwen/Qwen1.5-MoE-A2.7B config.json as copied (with its `_name_or_path`)
  in MaziyarPanahi/Qwen1.5-MoE-A2.7B-Wikihow (60 experts, top-4, moe_intermediate_size 1408, one shared
  expert of 5632; the same values as the 8-bit copy RichardErkhov/Qwen_-_Qwen1.5-MoE-A2.7B-8bits);
- qwen3-moe-30b-a3b.config.json: Qwen/Qwen3-30B-A3B config.json (transformers 4.51.0), as reproduced
  verbatim in a public compilation of the Qwen3 configs; it agrees with the model card (48 layers, 32 Q
  and 4 KV heads, 128 experts, 8 activated, 30.5B parameters).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_catalog_user import _ok, _one_line_error

from specpim_cp.catalog import default_catalog, load_catalog
from specpim_cp.catalog.import_hf import import_hf
from specpim_cp.check.validate import _moe_rows
from specpim_cp.cli import main
from specpim_cp.physics.costs import KIB, CostModel
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.operators import PLACEABLE_OPS, distinct_experts, op_shapes
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import SolverOptions, solve

DATA = Path(__file__).resolve().parent / "data"
MIXTRAL = DATA / "mixtral-8x7b.config.json"
QWEN2_MOE = DATA / "qwen1.5-moe-a2.7b.config.json"
QWEN3_MOE = DATA / "qwen3-moe-30b-a3b.config.json"
#: mistralai/Mistral-7B-v0.1 config.json (the dense drafter of the end-to-end scenario)
MISTRAL_7B = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
              "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096, "rope_theta": 10000.0,
              "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def _run(*args: str):
    return CliRunner().invoke(main, list(args))




def _scenario(model: str, devices: int, catalog=None, **extra):
    cat = catalog or default_catalog()
    data = {"name": "moe", "batch_size": 1, "prompt_tokens": 128, "generated_tokens": 128, "host": "a100-40gb",
            "memory_types": ["hbm"], "verifier": {"model": model, "devices": devices}, **extra}
    return parse_scenario(data, cat), cat


# ------------------------------------------------------------------------------------------------
# MOE-1, MOE-2: distinct experts
# ------------------------------------------------------------------------------------------------
def test_distinct_experts_uniform_routing():
    mixtral = default_catalog().models["mixtral-8x7b"]
    e, k = mixtral.experts, mixtral.experts_per_token
    assert (e, k) == (8, 2)
    assert distinct_experts(mixtral, 1) == k  # one token: exactly its k experts
    assert distinct_experts(mixtral, 2) == pytest.approx(3.5)  # 8 (1 - 0.75^2)
    for m in (3, 5, 9, 17):
        assert distinct_experts(mixtral, m) == pytest.approx(e * (1 - (1 - k / e) ** m), rel=1e-12)
    values = [distinct_experts(mixtral, m) for m in range(1, 80)]
    assert values == sorted(values) and all(k <= v <= min(e, m * k) for m, v in zip(range(1, 80), values))
    assert distinct_experts(mixtral, 64) == pytest.approx(e, abs=1e-6)  # many tokens touch every expert
    spec = dataclasses.replace(mixtral, experts=128, experts_per_token=8)  # Qwen3-30B-A3B's routing
    assert distinct_experts(spec, 1) == 8 and distinct_experts(spec, 9) == pytest.approx(56.39, abs=0.01)


def _curve_catalog(tmp_path: Path, points: str) -> Path:
    path = tmp_path / "curve.toml"
    path.write_text('[models."mixtral-measured"]\nbased_on = "mixtral-8x7b"\n'
                    f"distinct_experts_measured = {points}\n"
                    'source_distinct_experts_measured = "test: a made-up routing trace"\n')
    return path


def test_measured_curve_overrides_the_formula(tmp_path):
    cat = load_catalog([_curve_catalog(tmp_path, "[[2, 3.0], [8, 5.0]]")])
    measured, uniform = cat.models["mixtral-measured"], cat.models["mixtral-8x7b"]
    assert measured.distinct_experts_measured == ((2, 3.0), (8, 5.0))
    assert distinct_experts(measured, 1) == 2  # flat below the first point, clamped to one token's k
    assert distinct_experts(measured, 2) == 3.0
    assert distinct_experts(measured, 5) == pytest.approx(4.0)  # linear between the points
    assert distinct_experts(measured, 40) == 5.0  # flat beyond the last
    assert distinct_experts(uniform, 5) == pytest.approx(6.1, abs=0.01)
    # the prices follow the curve: fewer experts read, less host time and DRAM energy
    sc, _ = _scenario("mixtral-8x7b", 4, cat)
    cm = CostModel(sc, cat)
    arch = ArchConfig("hbm", 0, 4)
    at = {m.name: cm.op_cost(m, "ffn_up", "host", 0, arch, 5) for m in (measured, uniform)}
    assert at["mixtral-measured"].time_ns < at["mixtral-8x7b"].time_ns
    ratio = at["mixtral-measured"].parts_nj[0] / at["mixtral-8x7b"].parts_nj[0]
    assert ratio == pytest.approx(4.0 / distinct_experts(uniform, 5), rel=1e-3)  # the router's bytes are tiny


@pytest.mark.parametrize(("points", "needle"), [
    ("[[2, 3.0], [2, 4.0]]", "tokens must rise"),
    ("[[2, 5.0]]", "between 2 (one token's experts) and 4 distinct experts"),
    ("[[4, 1.0]]", "between 2"),
    ("[[2, 4.0], [4, 3.0]]", "cannot fall"),
    ("[[0, 2.0]]", "tokens must be an integer"),
    ("[[2.5, 3.0]]", "tokens must be an integer"),
    ("[3, 4]", "list of [tokens, experts] pairs"),
    ('"many"', "list of [tokens, experts] pairs"),
])
def test_bad_measured_curve_is_one_line(tmp_path, points, needle):
    path = _curve_catalog(tmp_path, points)
    _one_line_error(_run("catalog", "check", str(path)), str(path),
                    "models.mixtral-measured.distinct_experts_measured", needle)


@pytest.mark.parametrize(("fields", "needles"), [
    ("experts = 8\nexperts_per_token = 9\n", ["models.mine.experts_per_token", "9 experts per token exceed the 8"]),
    ("experts = 8\nexperts_per_token = 0\n", ["models.mine.experts_per_token", "1 .. 8 experts"]),
    ("experts_per_token = 2\n", ["models.mine.experts_per_token", "experts = 0 is a dense model"]),
    ("experts = 8\nexperts_per_token = 2\nshared_experts = 1\n", ["models.mine.shared_expert_ffn"]),
    ("experts = -1\n", ["models.mine.experts", "[0, 1e5]"]),
])
def test_bad_expert_fields_are_one_line(tmp_path, fields, needles):
    path = tmp_path / "mine.toml"
    path.write_text(f'[models."mine"]\nbased_on = "llama-7b"\n{fields}source_experts = "test"\n'
                    'source_shared = "test"\n')
    _one_line_error(_run("catalog", "check", str(path)), str(path), *needles)


# ------------------------------------------------------------------------------------------------
# MOE-3, MOE-4, MOE-5: the MoE FFN priced and stored
# ------------------------------------------------------------------------------------------------
def test_moe_ffn_prices_follow_the_formulas():
    sc, cat = _scenario("mixtral-8x7b", 4)
    m = cat.models["mixtral-8x7b"]
    cm = CostModel(sc, cat)
    d, f, e, k, n, layers = m.hidden, m.ffn, m.experts, m.experts_per_token, 4, m.layers
    mem = cat.memory("hbm")
    shapes = op_shapes(m)
    assert [p.name for p in shapes["ffn_up"].parts] == ["router", "experts_up"]
    assert [p.name for p in shapes["ffn_down"].parts] == ["experts_down"]
    # MOE-4: every expert is stored, the router on every device
    tb = cm.tensor_bytes(m, n)
    assert tb.op_kib["ffn_up"] == -(-(layers * (n * d * e + e * d * 2 * f) * 2) // KIB)
    assert tb.op_kib["ffn_down"] == layers * e * f * d * 2 // KIB
    # MOE-5: 46.7B parameters (Mistral AI), every expert counted
    assert m.parameter_count() == pytest.approx(46.7e9, rel=1e-3)
    expert_up_dev = d * (2 * f // n) * 2  # bytes of one expert's gate+up on one device
    router = d * e * 2
    for tokens in (1, 2, 5):
        touched = distinct_experts(m, tokens)
        host = cm.op_cost(m, "ffn_up", "host", 0, ArchConfig("hbm", 0, n), tokens)
        read = n * (touched * expert_up_dev + router)  # the host reads each touched expert once per pass
        assert host.parts_nj[0] == pytest.approx(read * 8 * mem.external_energy_pj_per_bit / 1000, abs=2)
        pim = cm.op_cost(m, "ffn_up", "pim", sc.space.share_levels, ArchConfig("hbm", 4, n), tokens)
        streamed = n * tokens * (k * expert_up_dev + router)  # PIM streams each token's k experts
        assert pim.parts_nj[2] == pytest.approx(streamed * 8 * mem.internal_energy_pj_per_bit / 1000, abs=2)
        macs = tokens * (k * d * 2 * f + n * d * e)
        assert pim.parts_nj[3] == pytest.approx(macs * mem.pim_mac_energy_pj / 1000, abs=2)
    # one token: the host reads k experts; a wide pass reads at most all E while PIM streams M k
    one = cm.op_cost(m, "ffn_down", "host", 0, ArchConfig("hbm", 0, n), 1)
    wide = cm.op_cost(m, "ffn_down", "host", 0, ArchConfig("hbm", 0, n), 33)
    assert 3.5 < wide.parts_nj[0] / one.parts_nj[0] < e / k + 1e-6


def test_shared_experts_price_as_a_dense_ffn(tmp_path):
    model, _ = import_hf(QWEN2_MOE)
    cat = load_catalog([_write(tmp_path / "q.toml", model.to_toml())])
    q = cat.models["qwen1.5-moe-a2.7b"]
    shapes = op_shapes(q)
    shared_up = next(p for p in shapes["ffn_up"].parts if p.name == "shared_up")
    shared_down = next(p for p in shapes["ffn_down"].parts if p.name == "shared_down")
    assert (shared_up.in_features, shared_up.out_features, shared_up.experts) == (2048, 2 * 5632, 0)
    assert (shared_down.in_features, shared_down.row_parallel) == (5632, True)
    sc, _ = _scenario("qwen1.5-moe-a2.7b", 1, cat)
    cm = CostModel(sc, cat)
    stored = q.layers * (2048 * 60 + 60 * 2048 * 2 * 1408 + 2048 * 2 * 5632) * 2
    assert cm.tensor_bytes(q, 1).op_kib["ffn_up"] == -(-stored // KIB)


#: Every dense catalog model as it was before MoE support (`a100-40gb` host, hbm and gddr, four
#: architectures, every placement, seven operators, 1/2/9/34 tokens; tensor bytes on 1-8 devices;
#: parameter counts). The digest was taken from the cost model before the MoE changes, with the device
#: constants below (the catalog's then); they are pinned here so that a later, deliberate change of a
#: device constant in devices.toml does not read as a number moved by MoE support.
BASELINE_DEVICES = """
[hosts.a100-40gb]
based_on = "a100-40gb"
peak_fp16_tflops = 312.0
kernel_table = "a100"
kernel_table_bandwidth_gbps = 2039.0
idle_power_mw = 63000
onchip_energy_pj_per_bit = 12.9
mac_energy_pj = 0.32
link_bandwidth_gbps = 300.0
link_energy_pj_per_bit = 1.3
sync_latency_ns = 7000
launch_overhead_ns = 5000
attention_bandwidth_efficiency = 0.8
compute_efficiency = 0.7
source = "the catalog's constants when the dense digest was taken (tests/test_moe.py)"

[memories.hbm]
based_on = "hbm"
groups = 5
units_per_group = 8
units_per_channel = 2
pim_arrangement = "spread"
group_external_bandwidth_gbps = 307.2
normal_unit_capacity_mib = 1024
pim_unit_capacity_mib = 512
pim_lanes_per_unit = 32
pim_lane_bandwidth_gbps = 9.6
pim_lane_gflops = 9.6
pim_efficiency = 0.64
pim_mode_switch_ns = 313
external_energy_pj_per_bit = 5.47
internal_energy_pj_per_bit = 1.56
pim_mac_energy_pj = 0.32
source = "the catalog's constants when the dense digest was taken (tests/test_moe.py)"

[memories.gddr]
based_on = "gddr"
groups = 4
units_per_group = 4
units_per_channel = 1
pim_arrangement = "spread"
group_external_bandwidth_gbps = 256.0
normal_unit_capacity_mib = 2048
pim_unit_capacity_mib = 1024
pim_lanes_per_unit = 32
pim_lane_bandwidth_gbps = 32.0
pim_lane_gflops = 32.0
pim_efficiency = 0.56
pim_mode_switch_ns = 280
external_energy_pj_per_bit = 6.48
internal_energy_pj_per_bit = 0.5
pim_mac_energy_pj = 0.0
source = "the catalog's constants when the dense digest was taken (tests/test_moe.py)"
"""
DENSE_MODELS = ("gpt2-large", "gpt2-medium", "gpt2-small", "gpt2-xl", "llama-1.3b", "llama-13b", "llama-2.7b",
                "llama-32.5b", "llama-65b", "llama-7b", "llama2-70b", "opt-1.3b", "opt-125m", "opt-13b", "opt-2.7b",
                "opt-30b", "opt-350m", "opt-6.7b", "opt-66b", "palm-1.3b", "palm-2.7b", "palm-62b", "palm-8b")
DENSE_DIGEST = "43b07da276d72e439d0807366e97511c608600e86002d67bee711956750ec32e"


def test_dense_models_price_as_before(tmp_path):
    cat = load_catalog([_write(tmp_path / "baseline.toml", BASELINE_DEVICES)])
    sc = parse_scenario({"name": "snap", "batch_size": 2, "prompt_tokens": 128, "generated_tokens": 64,
                         "host": "a100-40gb", "memory_types": ["hbm", "gddr"],
                         "verifier": {"model": "opt-13b", "devices": 2}}, cat)
    cm = CostModel(sc, cat)
    out: dict = {}
    for name in DENSE_MODELS:
        m = cat.models[name]
        assert not m.is_moe and not any(s.parts for s in op_shapes(m).values())
        for arch in (ArchConfig("hbm", 0, 1), ArchConfig("hbm", 4, 2), ArchConfig("gddr", 2, 4), ArchConfig("hbm", 8, 1)):
            where = f"{arch.memory_type},{arch.pim_units},{arch.devices}"
            for pl in cm.placements(arch):
                for op in PLACEABLE_OPS:
                    for t in (1, 2, 9, 34):
                        c = cm.placement_cost(m, op, pl, arch, t)
                        out[f"{name}|{where}|{pl.engine},{pl.share},{pl.layout}|{op}|{t}"] = (
                            None if c is None else [c.time_ns, c.energy_nj, list(c.parts_nj)])
        for n in (1, 2, 4, 8):
            tb = cm.tensor_bytes(m, n)
            out[f"{name}|tb{n}"] = [tb.op_kib, tb.embedding_kib]
        out[f"{name}|params"] = m.parameter_count()
    assert len(out) == 11707
    assert hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest() == DENSE_DIGEST


# ------------------------------------------------------------------------------------------------
# catalog import-hf
# ------------------------------------------------------------------------------------------------
def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


IMPORTS = {  # fixture -> (expected fields, published total parameters)
    "mixtral": (MIXTRAL, {"family": "mixtral", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                          "head_dim": 128, "ffn": 14336, "ffn_kind": "gated", "experts": 8, "experts_per_token": 2,
                          "shared_experts": 0, "shared_expert_ffn": 0, "vocab": 32000, "tied_embeddings": False},
                46.7e9),
    "qwen2_moe": (QWEN2_MOE, {"family": "qwen2_moe", "layers": 24, "hidden": 2048, "heads": 16, "kv_heads": 16,
                              "head_dim": 128, "ffn": 1408, "experts": 60, "experts_per_token": 4,
                              "shared_experts": 1, "shared_expert_ffn": 5632, "vocab": 151936}, 14.3e9),
    "qwen3_moe": (QWEN3_MOE, {"family": "qwen3_moe", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4,
                              "head_dim": 128, "ffn": 768, "experts": 128, "experts_per_token": 8,
                              "shared_experts": 0, "shared_expert_ffn": 0, "vocab": 151936}, 30.5e9),
}


@pytest.mark.parametrize("kind", sorted(IMPORTS))
def test_import_moe_configs(tmp_path, kind):
    path, expected, published = IMPORTS[kind]
    model, notes = import_hf(path, name=kind)
    assert {f: model.values[f] for f in expected} == expected
    assert model.values["nominal_params_b"] * 1e9 == pytest.approx(published, rel=0.01)
    config_key = {"mixtral": "num_local_experts", "qwen2_moe": "num_experts", "qwen3_moe": "num_experts"}[kind]
    assert model.sources["experts"].endswith(f": {config_key}")
    assert model.sources["experts_per_token"].endswith(": num_experts_per_tok")
    assert any("MOE-1" in n for n in notes)
    if kind != "mixtral":
        assert any("intermediate_size" in n and "unused" in n for n in notes)
    if kind == "qwen2_moe":
        assert any("shared expert's gate" in n for n in notes) and any("biases" in n for n in notes)
    spec = load_catalog([_write(tmp_path / "m.toml", model.to_toml(notes))]).models[kind]
    assert spec.is_moe and spec.parameter_count() == pytest.approx(published, rel=0.01)


def test_imported_mixtral_prices_as_the_catalog_entry(tmp_path):
    model, _ = import_hf(MIXTRAL, name="mixtral-hf")
    cat = load_catalog([_write(tmp_path / "m.toml", model.to_toml())])
    hf, shipped = cat.models["mixtral-hf"], cat.models["mixtral-8x7b"]
    sc, _ = _scenario("mixtral-8x7b", 4, cat)
    cm = CostModel(sc, cat)
    arch = ArchConfig("hbm", 4, 4)
    for op in PLACEABLE_OPS:
        for p in cm.placements(arch):
            assert cm.placement_cost(hf, op, p, arch, 3) == cm.placement_cost(shipped, op, p, arch, 3), (op, p)


@pytest.mark.parametrize(("change", "needles"), [
    ({"num_experts_per_tok": 9}, ["num_experts_per_tok (the model's experts_per_token)",
                                  "9 experts per token exceed the 8 experts"]),
    ({"num_local_experts": None}, ["missing key 'num_local_experts'"]),
    ({"num_experts_per_tok": 0}, ["num_experts_per_tok", "positive integer"]),
])
def test_bad_mixtral_config_is_one_line_exit_2(tmp_path, change, needles):
    cfg = {k: v for k, v in json.loads(MIXTRAL.read_text()).items() if change.get(k, 0) is not None}
    cfg.update({k: v for k, v in change.items() if v is not None})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    _one_line_error(_run("catalog", "import-hf", str(path)), str(path), *needles)


def test_moe_config_with_dense_layers_is_refused(tmp_path):
    cfg = json.loads(QWEN3_MOE.read_text())
    cfg["mlp_only_layers"] = [0, 1]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    _one_line_error(_run("catalog", "import-hf", str(path)), "mlp_only_layers [0, 1]", "dense FFN")


# ------------------------------------------------------------------------------------------------
# A Mixtral verifier with a dense drafter, end to end
# ------------------------------------------------------------------------------------------------
SCENARIO = '''name = "mixtral-mistral"
catalog = ["models.toml"]
batch_size = 1
prompt_tokens = 128
generated_tokens = 128
memory_types = ["hbm"]
max_draft_length = 4
[verifier]
model = "mixtral-hf"
devices = 4
[[drafters]]
model = "mistral-7b"
devices = 1
'''


@pytest.fixture()
def mixtral_dir(tmp_path: Path) -> Path:
    """Mixtral imported from its config.json, Mistral-7B as the drafter (told to share Mixtral's tokenizer)."""
    verifier = _ok(_run("catalog", "import-hf", str(MIXTRAL), "--name", "mixtral-hf"))
    (tmp_path / "mistral.json").write_text(json.dumps(MISTRAL_7B))
    drafter = _ok(_run("catalog", "import-hf", str(tmp_path / "mistral.json"), "--name", "mistral-7b",
                       "--tokenizer", "mixtral-vocab32000"))
    (tmp_path / "models.toml").write_text(verifier + "\n" + drafter)
    (tmp_path / "scenario.toml").write_text(SCENARIO)
    return tmp_path


def test_mixtral_scenario_solves_equals_evaluator_and_shows(mixtral_dir):
    scenario = str(mixtral_dir / "scenario.toml")
    solved = json.loads(_ok(_run("solve", scenario, "--deterministic", "--time-limit", "60", "--json")))
    assert solved["solve"]["status"] == "OPTIMAL"
    assert solved["design"]["verifier"]["model"] == "mixtral-hf"
    design = mixtral_dir / "design.json"
    design.write_text(json.dumps(solved))
    ev = json.loads(_ok(_run("evaluate", scenario, "--design", str(design), "--json")))
    for key in ("round_time_ns", "energy_nj_per_round"):
        assert ev[key] == solved["metrics"][key], key  # the optimizer's claim is the evaluator's price
    picture = mixtral_dir / "schedule.png"
    _ok(_run("show", scenario, "--design", str(design), "-o", str(picture)))
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    heur = json.loads(_ok(_run("heuristic", scenario, "--budget", "quick", "--json")))
    assert heur["metrics"]["latency_ns_per_token"] >= solved["metrics"]["latency_ns_per_token"]


TINY_MOE = """
[models."tiny-moe"]
based_on = "mixtral-8x7b"
layers = 2
hidden = 512
heads = 8
kv_heads = 2
head_dim = 64
ffn = 256
experts = 8
experts_per_token = 2
shared_experts = 1
shared_expert_ffn = 512
vocab = 32000
nominal_params_b = 0.04
source = "test: a two-layer mixture of experts small enough for brute force"

[models."tiny-dense"]
based_on = "mixtral-8x7b"
layers = 1
hidden = 256
heads = 4
kv_heads = 2
head_dim = 64
ffn = 512
experts = 0
experts_per_token = 0
nominal_params_b = 0.02
source = "test: a one-layer dense drafter with Mixtral's tokenizer"
"""


@pytest.mark.parametrize(("memory", "objective"), [("gddr", "latency"), ("hbm", "energy")])
def test_moe_optimum_equals_brute_force(tmp_path, memory, objective):
    """The exact model reads the evaluator's MoE prices: its optimum is the enumerated one."""
    cat = load_catalog([_write(tmp_path / "tiny.toml", TINY_MOE)])
    space = {"memory_type": memory, "share_levels": 1, **({"pim_units": 4} if memory == "hbm" else {})}
    sc = parse_scenario({"name": "tiny-moe", "batch_size": 2, "prompt_tokens": 64, "generated_tokens": 32,
                         "objective": objective, "memory_types": [memory], "max_draft_length": 3,
                         "verifier": {"model": "tiny-moe", "devices": 1},
                         "drafters": [{"model": "tiny-dense", "devices": 1, "acceptance": 0.7}], "space": space}, cat)
    exact = solve(sc, options=SolverOptions(60, deterministic=True), catalog=cat)
    assert exact.report.status == "OPTIMAL"
    assert exact.report.objective == brute_force(sc, catalog=cat).report.objective
    assert Evaluator(sc, cat).evaluate(exact.design).metrics.objective(objective) == exact.report.objective


# ------------------------------------------------------------------------------------------------
# MOE-6: validation against gpt-fast's Mixtral
# ------------------------------------------------------------------------------------------------
def test_validate_rows_for_mixtral():
    rows = _moe_rows(default_catalog())
    assert len(rows) == 2 and all(r.ok for r in rows)
    for r in rows:
        assert r.area == "MoE decode latency" and "gpt-fast" in r.source and "tokens/s" in r.measured
        model_ms, measured_ms = float(r.model.split(" ms")[0]), float(r.measured.split(" ms")[0])
        ratio = float(r.model.split("(x")[1].split(",")[0])
        assert math.isclose(ratio, model_ms / measured_ms, abs_tol=0.01)


def test_catalog_models_lists_experts():
    out = _ok(CliRunner().invoke(main, ["catalog", "models"]))
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "2 of 8" in rows["mixtral-8x7b"] and " - " in rows["opt-13b"]
