"""Your own hardware and models: user catalogs (--catalog, a scenario's `catalog`), `catalog import-hf`,
hosts with and without kernel measurements, and the errors a bad catalog gives."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.catalog import default_catalog, load_catalog
from specpim_cp.catalog.import_hf import import_hf
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.kernels import (
    ROOFLINE,
    host_linear_us,
    kernel_model_label,
    predict_linear_us,
    roofline_linear_ns,
)
from specpim_cp.physics.costs import CostModel
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.scenario import load_scenario, parse_scenario, scenario_catalog
from specpim_cp.solvers.result import inputs_hash

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
OPT13 = str(EXAMPLES / "opt-13b.toml")

VERIFIER_CONFIG = {  # a small Llama-2 style model with grouped-query attention
    "_name_or_path": "tests/Tiny-Llama-Verifier", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 16, "num_attention_heads": 16,
    "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu"}
DRAFTER_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512, "intermediate_size": 1408,
    "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 32000}
ARCHITECTURES = {  # (config, expected fields)
    "mistral": ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
                 "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                 "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096, "head_dim": None},
                {"kv_heads": 8, "head_dim": 128, "ffn_kind": "gated", "tied_embeddings": False}),
    "qwen2": ({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
               "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
               "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True},
              {"kv_heads": 2, "head_dim": 64, "tied_embeddings": True, "nominal_params_b": 0.494}),
    "opt": ({"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096,
             "num_hidden_layers": 24, "num_attention_heads": 16, "vocab_size": 50272, "word_embed_proj_dim": 512},
            {"kv_heads": 16, "ffn": 4096, "ffn_kind": "two-matrix", "tied_embeddings": True,
             "tokenizer": "gpt2-bpe"}),
    "gpt2": ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12,
              "n_head": 12, "n_inner": None, "vocab_size": 50257, "n_positions": 1024},
             {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "tied_embeddings": True, "tokenizer": "gpt2-bpe"}),
}

HARDWARE = '''
[memories.aim-x16]
based_on = "gddr"
label = "GDDR6-AiM, 16 processing units per package"
pim_lanes_per_unit = 16
source_pim_lanes_per_unit = "what-if for the test: one processing unit per two banks (SK hynix AiM has one per bank)"

[pairs]
"tiny-llama-drafter>tiny-llama-verifier" = 0.72
source_pairs = "ASSUMPTION for the test"
'''

SCENARIO = '''name = "user-tiny"
catalog = ["models.toml", "hardware.toml"]
batch_size = 1
prompt_tokens = 128
generated_tokens = 128
memory_types = ["aim-x16"]
max_draft_length = 4
[verifier]
model = "tiny-llama-verifier"
devices = 1
[[drafters]]
model = "tiny-llama-drafter"
devices = 1
'''


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _ok(result):
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


def _one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, f"{n!r} not in {err!r}"
    return err


@pytest.fixture()
def user_dir(tmp_path: Path) -> Path:
    """A folder with two HF configs imported by the CLI into models.toml, a hardware file and a scenario."""
    (tmp_path / "verifier.json").write_text(json.dumps(VERIFIER_CONFIG))
    (tmp_path / "drafter.json").write_text(json.dumps(DRAFTER_CONFIG))
    _ok(_run("catalog", "import-hf", str(tmp_path / "verifier.json"), "-o", str(tmp_path / "verifier.toml")))
    drafter = _ok(_run("catalog", "import-hf", str(tmp_path / "drafter.json"), "--name", "tiny-llama-drafter"))
    (tmp_path / "models.toml").write_text((tmp_path / "verifier.toml").read_text() + "\n" + drafter)
    (tmp_path / "hardware.toml").write_text(HARDWARE)
    (tmp_path / "scenario.toml").write_text(SCENARIO)
    return tmp_path


# ------------------------------------------------------------------------------------------------
# import-hf
# ------------------------------------------------------------------------------------------------
def test_import_hf_llama_gqa_every_value_sourced(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(VERIFIER_CONFIG))
    res = _run("catalog", "import-hf", str(path))
    entry = tomllib.loads(_ok(res))["models"]["tiny-llama-verifier"]  # the name from _name_or_path
    assert {k: entry[k] for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "ffn_kind", "vocab",
                                  "tied_embeddings", "bytes_per_param", "parallel_block", "family", "tokenizer")} == {
        "layers": 16, "hidden": 2048, "heads": 16, "kv_heads": 4, "head_dim": 128, "ffn": 5632, "ffn_kind": "gated",
        "vocab": 32000, "tied_embeddings": False, "bytes_per_param": 2, "parallel_block": False, "family": "llama",
        "tokenizer": "llama-sp"}
    where = f"Hugging Face config.json {path} (LlamaForCausalLM, tests/Tiny-Llama-Verifier)"
    assert entry["source_kv_heads"] == f"{where}: num_key_value_heads"
    assert entry["source_layers"] == f"{where}: num_hidden_layers"
    for field in entry:
        if not field.startswith("source_") and field != "family":
            assert f"source_{field}" in entry, field
    spec = load_catalog([_write(tmp_path / "m.toml", res.stdout)]).models["tiny-llama-verifier"]
    assert spec.kv_dim == 4 * 128 and spec.parameter_count() == pytest.approx(spec.nominal_params_b * 1e9, rel=1e-3)
    assert "RoPE" in res.stdout  # what the schema leaves out is said
    assert "max_position = 4096" in res.stdout and spec.max_position == 4096  # the position limit is kept


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_import_hf_architectures(tmp_path, arch):
    config, expected = ARCHITECTURES[arch]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model, notes = import_hf(path, name=arch)
    for k, v in expected.items():
        assert model.values[k] == pytest.approx(v) if isinstance(v, float) else model.values[k] == v, k
    spec = load_catalog([_write(tmp_path / "m.toml", model.to_toml(notes))]).models[arch]
    assert spec.family == arch
    if arch == "qwen2":
        assert any("biases" in n for n in notes)
    if arch == "opt":
        assert any("word_embed_proj_dim 512" in n for n in notes)
    if arch == "mistral":
        assert any("sliding window of 4096 tokens" in n for n in notes) and spec.sliding_window == 4096


@pytest.mark.parametrize(("config", "needles"), [
    ({"architectures": ["FalconForCausalLM"], "model_type": "falcon"}, ["falcon", "not supported", "llama"]),
    ({k: v for k, v in VERIFIER_CONFIG.items() if k != "intermediate_size"}, ["missing key 'intermediate_size'"]),
    ({**VERIFIER_CONFIG, "num_hidden_layers": "16"}, ["num_hidden_layers", "positive integer"]),
    ({**VERIFIER_CONFIG, "num_key_value_heads": 5}, ["num_key_value_heads"]),
    ([1, 2], ["JSON object"]),
])
def test_import_hf_errors_are_one_line(tmp_path, config, needles):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    _one_line_error(_run("catalog", "import-hf", str(path)), *needles)


def test_import_hf_unreadable_and_not_json(tmp_path):
    _one_line_error(_run("catalog", "import-hf", str(tmp_path / "none.json")), "none.json", "cannot read")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    _one_line_error(_run("catalog", "import-hf", str(bad)), "bad.json", "not valid JSON")


# ------------------------------------------------------------------------------------------------
# A scenario on an imported model and a user-defined memory, end to end
# ------------------------------------------------------------------------------------------------
def test_user_catalog_end_to_end(user_dir):
    scenario = str(user_dir / "scenario.toml")
    files = [str(user_dir / "models.toml"), str(user_dir / "hardware.toml")]
    solved = [json.loads(_ok(_run("solve", scenario, "--deterministic", "--time-limit", "30", "--json")))
              for _ in range(2)]
    assert solved[0]["design"] == solved[1]["design"]  # deterministic
    assert solved[0]["solve"]["status"] == "OPTIMAL"
    first = solved[0]
    assert first["catalog_files"] == files
    assert first["host_kernel_model"] == "fitted to Vidur a100 measurements"
    models = [first["design"]["verifier"], *first["design"]["drafters"]]
    # the verifier alone when it beats the drafter ([NOSPEC]), else both
    assert [m["model"] for m in models] == ["tiny-llama-verifier", "tiny-llama-drafter"][:len(models)]
    assert {m["memory_type"] for m in models} == {"aim-x16"}
    assert all(m["pim_units"] <= 4 for m in models)

    design = user_dir / "design.json"
    design.write_text(json.dumps(first))
    ev = json.loads(_ok(_run("evaluate", scenario, "--design", str(design), "--json")))
    assert ev["round_time_ns"] == first["metrics"]["round_time_ns"] and ev["catalog_files"] == files
    text = _ok(_run("evaluate", scenario, "--design", str(design)))
    assert "kernels fitted to Vidur a100 measurements" in text and "hardware.toml" in text

    rows = json.loads(_ok(_run("baselines", scenario, "--json")))
    priced = [r for r in rows if r["metrics"] is not None]
    assert {"GPU-AR", "GPU-SI"} <= {r["name"] for r in priced}
    assert all(r["catalog_files"] == files for r in priced)
    assert min(r["metrics"]["latency_ns_per_token"] for r in priced) >= first["metrics"]["latency_ns_per_token"]

    heur = json.loads(_ok(_run("heuristic", scenario, "--budget", "quick", "--json")))
    assert heur["catalog_files"] == files
    assert heur["metrics"]["latency_ns_per_token"] >= first["metrics"]["latency_ns_per_token"]

    # the same files by --catalog on a scenario without `catalog` give the same optimum
    plain = user_dir / "plain.toml"
    plain.write_text(SCENARIO.replace('catalog = ["models.toml", "hardware.toml"]\n', ""))
    _one_line_error(_run("solve", str(plain)), "aim-x16")  # without the files: unknown names
    again = json.loads(_ok(_run("solve", str(plain), "--deterministic", "--time-limit", "30", "--json",
                                *[a for f in files for a in ("--catalog", f)])))
    assert again["design"] == first["design"] and again["catalog_files"] == files


def test_memory_variant_prices_through_its_catalog_entry(user_dir):
    sc = load_scenario(user_dir / "scenario.toml")
    cat = scenario_catalog(sc)
    aim, gddr = cat.memory("aim-x16"), cat.memory("gddr")
    assert (aim.pim_lanes_per_unit, gddr.pim_lanes_per_unit) == (16, 32)
    assert aim.sources["source_pim_lanes_per_unit"].startswith("what-if")
    assert aim.group_external_bandwidth_gbps == gddr.group_external_bandwidth_gbps  # the rest from gddr
    assert cat.default_acceptance("tiny-llama-drafter", "tiny-llama-verifier") == 0.72
    costs = CostModel(sc, cat)
    model = cat.models["tiny-llama-verifier"]
    half = costs.op_cost(model, "ffn_up", "pim", 4, ArchConfig("aim-x16", 4, 1), 1)
    gddr_sc = sc.model_copy(update={"memory_types": ["gddr"]})
    full = CostModel(gddr_sc, cat).op_cost(model, "ffn_up", "pim", 4, ArchConfig("gddr", 4, 1), 1)
    assert half.time_ns > 1.8 * (full.time_ns - gddr.pim_mode_switch_ns)  # half the units: about twice the time


def test_scenario_hash_covers_catalog_content_not_path(user_dir):
    sc = load_scenario(user_dir / "scenario.toml")
    before, inputs_before = sc.content_hash(), inputs_hash(sc, {"m": 1})
    hw = user_dir / "hardware.toml"
    hw.write_text(HARDWARE.replace("= 0.72", "= 0.70"))
    assert sc.content_hash() != before and inputs_hash(sc, {"m": 1}) != inputs_before
    hw.write_text(HARDWARE)
    assert sc.content_hash() == before
    # a scenario without catalog files hashes as before the field existed (golden files keep their hashes)
    plain = load_scenario(OPT13)
    assert "catalog" not in plain.hash_data() and plain.catalog == []


def test_relative_catalog_resolves_against_the_scenario_folder(user_dir, monkeypatch, tmp_path_factory):
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    sc = load_scenario(user_dir / "scenario.toml")
    assert sc.catalog == [str(user_dir / "models.toml"), str(user_dir / "hardware.toml")]
    single = user_dir / "single.toml"
    single.write_text(SCENARIO.replace('catalog = ["models.toml", "hardware.toml"]', 'catalog = "models.toml"')
                      .replace('memory_types = ["aim-x16"]', 'memory_types = ["gddr"]')
                      .replace("[[drafters]]\nmodel = \"tiny-llama-drafter\"\ndevices = 1\n", ""))
    assert load_scenario(single).catalog == [str(user_dir / "models.toml")]


def test_a_scenario_naming_catalog_files_is_never_priced_without_them(user_dir):
    sc = load_scenario(user_dir / "scenario.toml")
    with pytest.raises(ScenarioError, match="names catalog file"):
        Evaluator(sc, default_catalog())
    with pytest.raises(ScenarioError, match="names catalog file"):
        parse_scenario(sc.model_dump(mode="json"), default_catalog())
    # the library's default is the scenario's own catalog
    assert Evaluator(sc).catalog.files == tuple(sc.catalog)


def test_overriding_a_builtin_host_reaches_the_price(tmp_path):
    idle = tmp_path / "idle.toml"
    idle.write_text('[hosts.a100-40gb]\nbased_on = "a100-40gb"\nidle_power_mw = 120000\n'
                    'source_idle_power_mw = "what-if: a busier idle"\n')
    rows = {json.loads(_ok(_run("baselines", OPT13, "--json", *args)))[0]["metrics"]["energy_pj_per_token"]
            for args in ((), ("--catalog", str(idle)))}
    assert len(rows) == 2  # the override changed the energy


# ------------------------------------------------------------------------------------------------
# Bad catalogs: one line naming the file and the field, exit 2, from every command
# ------------------------------------------------------------------------------------------------
BAD_CATALOGS = {
    "bad-toml": ("[memories.x\n", ["not valid TOML"]),
    "no-source": ('[memories.m2]\nbased_on = "gddr"\npim_lanes_per_unit = 16\n',
                  ["memories.m2.pim_lanes_per_unit", "no source"]),
    "unknown-section": ("[gpus.x]\na = 1\n", ["unknown section", "gpus"]),
    "unknown-field": ('[memories.m2]\nbased_on = "gddr"\npim_lane = 3\nsource_pim_lane = "x"\n',
                      ["memories.m2.pim_lane", "unknown field"]),
    "wrong-type": ('[memories.m2]\nbased_on = "gddr"\ngroups = "four"\nsource_groups = "x"\n',
                   ["memories.m2.groups", "integer"]),
    "out-of-range": ('[memories.m2]\nbased_on = "gddr"\npim_efficiency = 1.5\nsource_pim_efficiency = "x"\n',
                     ["memories.m2.pim_efficiency"]),
    "unknown-base": ('[memories.m2]\nbased_on = "gddr5"\n', ["memories.m2.based_on", "gddr5"]),
    "missing-field": ('[models.m]\nlayers = 2\nsource = "x"\n', ["models.m.", "missing"]),
    "model-no-source": ('[models.m]\nfamily = "x"\nlayers = 2\n', ["models.m", "no source"]),
    "unknown-kernel-table": ('[hosts.h]\nbased_on = "a100-40gb"\nkernel_table = "v100"\nsource_kernel_table = "x"\n',
                             ["hosts.h.kernel_table", "v100", "roofline"]),
    "pair-without-source": ('[pairs]\n"a>b" = 0.7\n', ["acceptance pairs", "source_pairs"]),
    "pair-key": ('[pairs]\n"ab" = 0.7\nsource_pairs = "x"\n', ["DRAFTER>VERIFIER"]),
    "rate-too-high": ('default = 1.5\nsource_default = "x"\n', ["acceptance default"]),
    "empty-source": ('[memories.m2]\nbased_on = "gddr"\npim_efficiency = 0.5\nsource_pim_efficiency = ""\n',
                     ["source_pim_efficiency"]),
    "entry-not-table": ("[models]\nx = 3\n", ["models.x"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CATALOGS))
@pytest.mark.parametrize("command", ["solve", "evaluate", "baselines", "heuristic", "pareto", "simulate"])
def test_bad_catalog_is_one_line_naming_file_and_field(tmp_path, case, command):
    text, needles = BAD_CATALOGS[case]
    path = _write(tmp_path / "mine.toml", text)
    design = _write(tmp_path / "d.json", "{}")
    extra = ["--design", design] if command in ("evaluate", "simulate") else []
    _one_line_error(_run(command, OPT13, *extra, "--catalog", path), path, *needles)


@pytest.mark.parametrize("where", ["option", "scenario"])
def test_missing_catalog_file(tmp_path, where):
    missing = str(tmp_path / "missing.toml")
    if where == "option":
        res = _run("solve", OPT13, "--catalog", missing)
    else:
        sc = tmp_path / "s.toml"
        sc.write_text('catalog = "missing.toml"\n' + Path(OPT13).read_text())
        res = _run("solve", str(sc))
    _one_line_error(res, missing, "cannot read")


def test_scenario_catalog_field_type_errors(tmp_path):
    for value, needle in (("3", "catalog"), ('[""]', "empty file name")):
        sc = tmp_path / "s.toml"
        sc.write_text(f"catalog = {value}\n" + Path(OPT13).read_text())
        _one_line_error(_run("solve", str(sc)), needle)


def test_catalog_commands_list_and_check_user_files(user_dir):
    hw, models = str(user_dir / "hardware.toml"), str(user_dir / "models.toml")
    check = _ok(_run("catalog", "check", models, hw))
    assert "adds tiny-llama-verifier, tiny-llama-drafter" in check and "adds aim-x16" in check
    assert "tiny-llama-drafter>tiny-llama-verifier" in check and check.rstrip().endswith(f"ok: {models}, {hw}")
    assert "tiny-llama-verifier" in _ok(_run("catalog", "models", "--catalog", models))
    devices = _ok(_run("catalog", "devices", "--catalog", hw))
    assert "aim-x16.source_pim_lanes_per_unit: what-if" in devices and "derated roofline" in devices
    _one_line_error(_run("catalog", "check", str(user_dir / "none.toml")), "none.toml")


# ------------------------------------------------------------------------------------------------
# Hosts: measured tables for A100/H100/A40, a derated roofline for MI100, labelled in every output
# ------------------------------------------------------------------------------------------------
def test_hosts_and_their_kernel_models():
    cat = default_catalog()
    assert {h: cat.hosts[h].kernel_table for h in ("a100-40gb", "a100-80gb", "h100-sxm", "a40", "mi100")} == {
        "a100-40gb": "a100", "a100-80gb": "a100", "h100-sxm": "h100", "a40": "a40", "mi100": ROOFLINE}
    a40 = cat.hosts["a40"]
    assert (a40.peak_fp16_tflops, a40.kernel_table_bandwidth_gbps) == (149.7, 696.0)
    assert cat.hosts["mi100"].kernel_model == "derated roofline (no measurements)"
    assert cat.hosts["h100-sxm"].kernel_model == kernel_model_label("h100") == "fitted to Vidur h100 measurements"
    for h in cat.hosts.values():  # every constant sourced (the loader enforces it; the roofline's too)
        for f in ("attention_bandwidth_efficiency", "compute_efficiency", "launch_overhead_ns", "idle_power_mw"):
            assert any(f.startswith(k.removeprefix("source_")) for k in h.sources), (h.name, f)


def test_roofline_formula_and_monotone():
    t = roofline_linear_ns(8192, 8192, 1, bandwidth_gbps=1000.0, peak_fp16_tflops=100.0, bandwidth_efficiency=0.5,
                           compute_efficiency=0.5, launch_overhead_ns=5000)
    assert t == pytest.approx(5000 + 2 * (8192 * 8192 + 2 * 8192) / 500.0)  # memory-bound at one token
    big = roofline_linear_ns(8192, 8192, 4096, bandwidth_gbps=1000.0, peak_fp16_tflops=100.0,
                             bandwidth_efficiency=0.5, compute_efficiency=0.5, launch_overhead_ns=5000)
    assert big == pytest.approx(5000 + 2 * 4096 * 8192 * 8192 / 50e3)  # compute-bound at many
    ts = [roofline_linear_ns(4096, 4096, m, bandwidth_gbps=1228.8, peak_fp16_tflops=184.6, bandwidth_efficiency=0.77,
                             compute_efficiency=0.6, launch_overhead_ns=5000) for m in (1, 8, 64, 512, 4096)]
    assert ts == sorted(ts)


def test_mi100_scenario_prices_fc_by_the_roofline_and_says_so(tmp_path):
    sc_path = tmp_path / "mi100.toml"
    sc_path.write_text(Path(OPT13).read_text().replace('host = "a100-40gb"', 'host = "mi100"'))
    sc = load_scenario(sc_path)
    cat = scenario_catalog(sc)
    host = cat.host("mi100")
    costs = CostModel(sc, cat)
    model = cat.models[sc.verifier.model]
    arch = ArchConfig("hbm", 0, 2)
    got = costs.op_cost(model, "ffn_up", "host", 0, arch, 1, "normal")
    shape = costs.shapes(model)["ffn_up"]
    want = roofline_linear_ns(shape.in_features, -(-shape.out_features // 2), 1,
                              bandwidth_gbps=costs.layout_bandwidth_gbps(arch, "normal"),
                              peak_fp16_tflops=host.peak_fp16_tflops,
                              bandwidth_efficiency=host.attention_bandwidth_efficiency,
                              compute_efficiency=host.compute_efficiency, launch_overhead_ns=host.launch_overhead_ns)
    assert got.time_ns == round(want) or abs(got.time_ns - want) <= 1
    rows = json.loads(_ok(_run("baselines", str(sc_path), "--json")))
    assert rows[0]["host_kernel_model"] == "derated roofline (no measurements)"
    assert "kernels derated roofline (no measurements)" in _ok(_run("baselines", str(sc_path)))
    a100 = json.loads(_ok(_run("baselines", OPT13, "--json")))
    assert a100[0]["host_kernel_model"] == "fitted to Vidur a100 measurements" and a100[0]["catalog_files"] == []


def test_kernels_predict_accepts_host_names(tmp_path):
    args = ["--in-features", "5120", "--out-features", "15360", "--tokens", "8", "--tensor-parallel", "2"]
    by_table = float(_ok(_run("kernels", "predict", "--gpu", "a100", *args)))
    assert float(_ok(_run("kernels", "predict", "--gpu", "a100-40gb", *args))) == by_table
    assert float(_ok(_run("kernels", "predict", "--gpu", "a40", *args))) == pytest.approx(
        predict_linear_us("a40", 5120, 15360, 8, 2), abs=0.006)
    mi100 = default_catalog().hosts["mi100"]
    assert float(_ok(_run("kernels", "predict", "--gpu", "mi100", *args))) == pytest.approx(
        host_linear_us(mi100, 5120, 15360, 8, 2), abs=0.006)
    err = _one_line_error(_run("kernels", "predict", "--gpu", "v100", *args), "v100")
    for name in ("a100", "h100", "a40", "a100-40gb", "a100-80gb", "h100-sxm", "mi100"):
        assert name in err
    mine = _write(tmp_path / "h.toml", '[hosts.my-gpu]\nbased_on = "mi100"\npeak_fp16_tflops = 369.2\n'
                                       'source_peak_fp16_tflops = "what-if: twice the MI100"\n')
    assert float(_ok(_run("kernels", "predict", "--gpu", "my-gpu", "--catalog", mine, *args))) > 0


def test_user_catalog_in_batch_grid_and_report(user_dir, tmp_path):
    """The batch workers and the grid cells price with the scenario's own catalog files (and --catalog),
    and the results reach the report."""
    scenario = str(user_dir / "scenario.toml")
    out = tmp_path / "batch"
    _ok(_run("batch", scenario, "--out", str(out), "--methods", "exact,baselines", "--no-pareto", "--jobs", "1",
             "--deterministic", "--time-limit", "30"))
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    exact = [r for r in records if r["method"] == "exact"]
    assert exact and exact[0]["status"] == "OPTIMAL"
    assert {p["memory_type"] for p in exact[0]["pim"]} == {"aim-x16"}
    assert "user-tiny" in (out / "summary.md").read_text()
    # --catalog on a plain scenario: same optimum
    plain = user_dir / "plain.toml"
    plain.write_text(SCENARIO.replace('catalog = ["models.toml", "hardware.toml"]\n', ""))
    out2 = tmp_path / "batch2"
    _ok(_run("batch", str(plain), "--out", str(out2), "--methods", "exact", "--no-pareto", "--jobs", "1",
             "--deterministic", "--time-limit", "30", "--catalog", str(user_dir / "models.toml"),
             "--catalog", str(user_dir / "hardware.toml")))
    exact2 = [json.loads(line) for line in (out2 / "results.jsonl").read_text().splitlines()]
    assert exact2[0]["objective"] == exact[0]["objective"]
    # a grid whose base names the catalog files (relative to the base scenario file)
    grid = tmp_path / "g.toml"
    grid.write_text(f'base = "{scenario}"\n[axes]\nbatch_size = [1, 2]\n')
    out3 = tmp_path / "grid"
    _ok(_run("grid", str(grid), "--out", str(out3), "--jobs", "1", "--deterministic", "--time-limit", "30"))
    cells = [json.loads(line) for line in (out3 / "results.jsonl").read_text().splitlines()]
    assert sum(1 for r in cells if r["method"] == "exact" and r["status"] == "OPTIMAL") == 2
