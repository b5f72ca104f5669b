"""Numbers TOML and JSON accept but the model cannot price. Every numeric catalog field (models,
n-grams, hosts, memories, acceptance), every `range_X`, every Hugging Face config field, the `kernels
predict` options and `sweep --acceptance` have a range (`catalog.FIELD_LIMITS`, `kernels.MAX_*`,
`check.sweep`), checked when the value is read: one line `error: ...` naming the field and the range,
exit 2, no traceback, nothing written, before any solve. The exact model's 64-bit check covers the
capacity rows and every bound the model derives from its prices. And what lies inside the ranges
prices: the shipped catalog, every benchmark scenario, hardware and models at both ends of the ranges.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cli_corpus import GOOD, OPT13, Case, _check

from specpim_cp.catalog import (
    FIELD_LIMITS,
    LOADER_FIELDS,
    MAX_MODEL_DIM,
    HostSpec,
    MemorySpec,
    ModelSpec,
    NgramSpec,
    default_catalog,
    load_catalog,
)
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.kernels import (
    MAX_FEATURES,
    MAX_TENSOR_PARALLEL,
    MAX_TOKENS,
    predict_linear_us,
    roofline_linear_ns,
)
from specpim_cp.problem.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
HUGE = "1" + "0" * 400  # a 401-digit integer: TOML and JSON read it, a float cannot hold it

#: (section, entry it is based on) per kind of catalog entry, and its numeric fields
BASES = {"models": "opt-13b", "ngrams": "ngram", "hosts": "a100-40gb", "memories": "hbm"}
SPECS = {"models": ModelSpec, "ngrams": NgramSpec, "hosts": HostSpec, "memories": MemorySpec}


def _numeric_fields(cls) -> dict[str, str]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name].__name__ for f in dataclasses.fields(cls)
            if hints[f.name] in (int, float) and f.name not in LOADER_FIELDS}


def _entry(section: str, fields: dict[str, str], name: str = "mine", base: str | None = None) -> str:
    """A `[section."name"]` entry based on a built-in one, each field (raw TOML text) with its source."""
    lines = [f'[{section}."{name}"]', f'based_on = "{base or BASES[section]}"']
    for k, v in fields.items():
        lines += [f"{k} = {v}", f'source_{k} = "range test"']
    return "\n".join(lines) + "\n"


def _bad_values(field: str, kind: str) -> list[str]:
    """Raw TOML values just and far outside the field's range (several per field)."""
    lim = FIELD_LIMITS[field]
    if kind == "int":
        return [HUGE, f"-{HUGE}", str(int(lim.high) + 1), str(int(lim.low) - 1), str((1 << 63) - 1)]
    out = ["nan", "inf", "-inf", "1e300", repr(lim.high * 10)]
    out.append("-1e-300" if lim.low == 0 else "5e-324")
    return out


FIELD_CASES = [(section, field, value)
               for section, cls in SPECS.items()
               for field, kind in _numeric_fields(cls).items()
               for value in _bad_values(field, kind)]


def test_every_numeric_field_has_a_range():
    fields = {f for cls in SPECS.values() for f in _numeric_fields(cls)}
    assert fields <= set(FIELD_LIMITS), fields - set(FIELD_LIMITS)
    assert len(FIELD_CASES) >= 5 * len(fields)


@pytest.mark.parametrize(("section", "field", "value"), FIELD_CASES,
                         ids=[f"{s}.{f}={v[:12]}" for s, f, v in FIELD_CASES])
def test_catalog_field_out_of_range(tmp_path, section, field, value):
    err = _check(tmp_path, Case(["catalog", "check", "{d}/mine.toml"],
                                {"mine.toml": _entry(section, {field: value})},
                                ("{d}/mine.toml", f"{section}.mine.{field}", FIELD_LIMITS[field].text())))
    if value == HUGE:
        assert "an integer of about 10^400" in err and "0000000000" not in err


# -- the rules across a model's fields: one function for catalog entries and import-hf ---------------
SHAPES = {
    "kv-heads-not-dividing": ({"heads": "32", "kv_heads": "5", "head_dim": "160"}, ("models.mine.kv_heads", "divide")),
    "kv-heads-above-heads": ({"kv_heads": "80"}, ("models.mine.kv_heads", "divide")),
    "kv-heads-one-too-many": ({"heads": "8", "kv_heads": "3"}, ("models.mine.kv_heads", "divide")),
    "attention-width": ({"heads": "100000", "kv_heads": "100000", "head_dim": "1000"},
                        ("models.mine.head_dim", "heads x head_dim", "1e7")),
    "parameters": ({"layers": "10000", "hidden": "1000000", "ffn": "1000000", "heads": "1000", "kv_heads": "1000",
                    "head_dim": "1000"}, ("models.mine", "parameters", "1e15")),
    "bytes-float": ({"bytes_per_param": "1.5"}, ("models.mine.bytes_per_param", "integer")),
    "layers-bool": ({"layers": "true"}, ("models.mine.layers", "integer")),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_model_shape_rules(tmp_path, case):
    fields, needles = SHAPES[case]
    _check(tmp_path, Case(["catalog", "check", "{d}/m.toml"], {"m.toml": _entry("models", fields)}, needles))


# -- acceptance rates and their keys -----------------------------------------------------------------
RATES = {
    "default-nan": ('default = nan\nsource_default = "t"\n', ("acceptance default", "[0, 1)")),
    "default-one": ('default = 1.0\nsource_default = "t"\n', ("acceptance default", "[0, 1)")),
    "default-huge": (f'default = {HUGE}\nsource_default = "t"\n', ("acceptance default", "10^400")),
    "default-negative": ('default = -0.1\nsource_default = "t"\n', ("acceptance default",)),
    "delta-one": ('sensitivity_delta = 1\nsource_sensitivity_delta = "t"\n', ("sensitivity_delta", "[0, 1)")),
    "delta-inf": ('sensitivity_delta = inf\nsource_sensitivity_delta = "t"\n', ("sensitivity_delta",)),
    "pair-huge": (f'[pairs]\n"opt-1.3b>opt-13b" = {HUGE}\nsource_pairs = "t"\n', ("acceptance pairs", "[0, 1)")),
    "pair-tiny-negative": ('[pairs]\n"opt-1.3b>opt-13b" = -5e-324\nsource_pairs = "t"\n', ("acceptance pairs",)),
    "family-minus-inf": ('[families]\n"opt>opt" = -inf\nsource_families = "t"\n', ("acceptance families",)),
    "family-string": ('[families]\n"opt>opt" = "high"\nsource_families = "t"\n', ("acceptance families", "number")),
    "tail-nan": ('tree_conditional_tail = [0.3, nan]\nsource_tree_conditional_tail = "t"\n',
                 ("tree_conditional_tail", "[0, 1)")),
    "tail-one": ('tree_conditional_tail = [1.0]\nsource_tree_conditional_tail = "t"\n', ("tree_conditional_tail",)),
}


@pytest.mark.parametrize("case", sorted(RATES))
def test_acceptance_out_of_range(tmp_path, case):
    text, needles = RATES[case]
    _check(tmp_path, Case(["catalog", "check", "{d}/a.toml"], {"a.toml": text}, ("{d}/a.toml", *needles)))


# -- range_X: inside the values field X accepts, around X's value --------------------------------------
def _ranged(section: str, field: str, value: str, rng: str) -> str:
    return _entry(section, {field: value}, name=BASES[section], base=BASES[section]) + f"range_{field} = {rng}\n"


RANGES = {  # (section, field, value, range) -> needles
    "pim-efficiency-to-zero": (("memories", "pim_efficiency", "0.64", "[0, 0.85]"), ("low end", "[0.001, 1]")),
    "pim-efficiency-denormal": (("memories", "pim_efficiency", "0.64", "[5e-324, 0.85]"), ("low end",)),
    "pim-efficiency-above-one": (("memories", "pim_efficiency", "0.64", "[0.45, 1.5]"), ("high end",)),
    "idle-power-negative": (("hosts", "idle_power_mw", "63000", "[-63000, 110000]"), ("low end", "[0, 1e7] mW")),
    "idle-power-huge": (("hosts", "idle_power_mw", "63000", f"[50000, {HUGE}]"), ("high end", "10^400")),
    "onchip-energy-nan": (("hosts", "onchip_energy_pj_per_bit", "12.9", "[nan, 18.0]"), ("low end", "nan")),
    "onchip-energy-inf": (("hosts", "onchip_energy_pj_per_bit", "12.9", "[8.0, inf]"), ("high end", "inf")),
    "launch-overhead-negative": (("hosts", "launch_overhead_ns", "5000", "[-1, 10000]"), ("low end", "[0, 1e9] ns")),
    "compute-efficiency-zero": (("hosts", "compute_efficiency", "0.7", "[0.0, 0.8]"), ("low end",)),
    "mode-switch-beyond-second": (("memories", "pim_mode_switch_ns", "313", "[300, 1e10]"), ("high end",)),
    "energy-negative-float": (("memories", "external_energy_pj_per_bit", "5.47", "[-1e-300, 6.0]"), ("low end",)),
    "not-around-value": (("memories", "pim_efficiency", "0.64", "[0.7, 0.9]"), ("around 0.64",)),
    "reversed": (("hosts", "idle_power_mw", "63000", "[110000, 50000]"), ("around 63000",)),
    "three-numbers": (("hosts", "idle_power_mw", "63000", "[1, 2, 3]"), ("[low, high]",)),
    "bools": (("hosts", "idle_power_mw", "1", "[true, 2]"), ("[low, high]",)),
    "a-number": (("hosts", "idle_power_mw", "63000", "63000"), ("[low, high]",)),
}


@pytest.mark.parametrize("case", sorted(RANGES))
def test_range_inside_the_field(tmp_path, case):
    (section, field, value, rng), needles = RANGES[case]
    where = f"{section}.{BASES[section]}.range_{field}"
    _check(tmp_path, Case(["catalog", "check", "{d}/r.toml"], {"r.toml": _ranged(section, field, value, rng)},
                          (where, *needles)))


@pytest.mark.parametrize(("text", "needles"), [
    (('[hosts.h]\nbased_on = "mi100"\nrange_kernel_table = [1, 2]\nkernel_table = "roofline"\n'
      'source_kernel_table = "t"\n'), ("hosts.h.range_kernel_table", "not a numeric constant")),
    ('[memories.m]\nbased_on = "hbm"\nlabel = "x"\nrange_label = [0, 1]\n', ("memories.m.range_label", "numeric")),
    ('[ngrams.n]\nbased_on = "ngram"\nstep_ns = 2000\nsource_step_ns = "t"\nrange_step_ns = [1000, 3000]\n',
     ("ngrams.n.range_step_ns", "no range")),
])
def test_range_of_a_field_without_one(tmp_path, text, needles):
    _check(tmp_path, Case(["catalog", "check", "{d}/r.toml"], {"r.toml": text}, needles))


# -- every command that reads a catalog refuses it before any work ------------------------------------
SLOW_LINK = _entry("hosts", {"kernel_table_bandwidth_gbps": "1e-300"})
HUGE_CAPACITY = _entry("memories", {"normal_unit_capacity_mib": str((1 << 63) - 1)}, name="hbm", base="hbm")
ZERO_RANGE = _ranged("memories", "pim_efficiency", "0.64", "[0.0, 0.85]")


@pytest.mark.parametrize(("args", "text", "needles"), [
    (["solve", OPT13, "--no-warm-start", "--json", "-o", "{d}/r.json"], HUGE_CAPACITY,
     ("memories.hbm.normal_unit_capacity_mib", "67108864")),
    (["solve", OPT13, "--method", "brute-force"], ZERO_RANGE, ("range_pim_efficiency", "low end")),
    (["sensitivity", OPT13, "--plot", "{d}/t.png"], ZERO_RANGE, ("range_pim_efficiency", "[0.001, 1]")),
    (["sensitivity", OPT13, "--json"], _ranged("hosts", "idle_power_mw", "63000", "[-63000, 110000]"),
     ("range_idle_power_mw", "-63000")),
    (["sweep", OPT13, "--acceptance", "0.5:0.6:0.1", "--out", "{d}/sw"], HUGE_CAPACITY, ("normal_unit_capacity_mib",)),
    (["kernels", "predict", "--gpu", "mine", "--in-features", "8", "--out-features", "8", "--tokens", "1"], SLOW_LINK,
     ("hosts.mine.kernel_table_bandwidth_gbps", "[0.001, 1e6] GB/s")),
    (["baselines", OPT13, "--json", "-o", "{d}/b.json"], _entry("models", {"vocab": HUGE}, name="opt-13b"),
     ("models.opt-13b.vocab", "10^400")),
    (["catalog", "devices"], _entry("memories", {"pim_lane_gflops": "inf"}), ("pim_lane_gflops",)),
    (["catalog", "models"], _entry("models", {"layers": "-1"}), ("models.mine.layers", "[1, 10000]")),
])
def test_commands_refuse_the_catalog(tmp_path, args, text, needles):
    _check(tmp_path, Case([*args, "--catalog", "{d}/c.toml"], {"c.toml": text}, ("{d}/c.toml", *needles)))


def test_scenario_catalog_is_checked_too(tmp_path):
    scenario = GOOD.replace("[verifier]", 'catalog = "c.toml"\n[verifier]', 1)
    _check(tmp_path, Case(["solve", "{d}/s.toml"], {"s.toml": scenario, "c.toml": SLOW_LINK},
                          ("c.toml", "kernel_table_bandwidth_gbps")))


# -- catalog import-hf: the config's numbers, the same ranges and shape rules -----------------------------
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
         "vocab_size": 32000}
GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
        "vocab_size": 50257}


def _config(base: dict, **raw: str) -> str:
    """`base` as JSON with `raw` values spliced in as JSON text (huge integers, NaN, Infinity)."""
    text = json.dumps({**base, **{k: 0 for k in raw}})
    for k, v in raw.items():
        text = text.replace(f'"{k}": 0', f'"{k}": {v}')
    return text


IMPORTS = {
    "layers-huge": (_config(LLAMA, num_hidden_layers=HUGE), ("num_hidden_layers", "[1, 10000]", "10^400")),
    "layers-above": (_config(LLAMA, num_hidden_layers="10001"), ("num_hidden_layers", "[1, 10000]")),
    "hidden-above": (_config(LLAMA, hidden_size=str(MAX_MODEL_DIM * 2)), ("hidden_size", "[1, 1e7]")),
    "ffn-huge": (_config(LLAMA, intermediate_size=HUGE), ("intermediate_size", "10^400")),
    "vocab-huge-negative": (_config(LLAMA, vocab_size=f"-{HUGE}"), ("vocab_size", "positive integer")),
    "heads-huge": (_config(LLAMA, num_attention_heads=HUGE), ("num_attention_heads", "[1, 1e7]")),
    "head-dim-huge": (_config(LLAMA, head_dim=HUGE), ("head_dim", "[1, 1e7]")),
    "gpt2-inner-huge": (_config(GPT2, n_inner=HUGE), ("n_inner", "10^400")),
    "gpt2-embd-default-ffn": (_config(GPT2, n_embd="9000000", n_head="9"), ("n_inner", "4 x n_embd", "1e7")),
    "layers-nan": (_config(LLAMA, num_hidden_layers="NaN"), ("num_hidden_layers", "positive integer")),
    "layers-infinity": (_config(LLAMA, num_hidden_layers="Infinity"), ("num_hidden_layers",)),
    "layers-1e400": (_config(LLAMA, num_hidden_layers="1e400"), ("num_hidden_layers",)),
    "kv-not-dividing": (_config(LLAMA, num_key_value_heads="5"), ("num_key_value_heads", "divide")),
    "kv-above-heads": (_config(LLAMA, num_key_value_heads="64"), ("num_key_value_heads", "divide")),
    "attention-width": (_config(LLAMA, head_dim="1000000"), ("head_dim", "heads x head_dim")),
    "parameters": (_config(LLAMA, num_hidden_layers="10000", hidden_size="1000000", num_attention_heads="1000",
                           num_key_value_heads="1000", intermediate_size="1000000"), ("parameters", "1e15")),
}


@pytest.mark.parametrize("case", sorted(IMPORTS))
def test_import_hf_numbers(tmp_path, case):
    text, needles = IMPORTS[case]
    _check(tmp_path, Case(["catalog", "import-hf", "{d}/config.json", "--name", "m", "-o", "{d}/out/m.toml"],
                          {"config.json": text}, ("{d}/config.json", *needles)))


def test_import_hf_and_the_catalog_share_the_shape_rules(tmp_path):
    """What import-hf writes loads in the catalog, and the 5-over-32 KV heads it refuses the catalog refuses."""
    (tmp_path / "c.json").write_text(json.dumps(LLAMA))
    res = CliRunner().invoke(main, ["catalog", "import-hf", str(tmp_path / "c.json"), "--name", "m"])
    assert res.exit_code == 0, res.stderr
    (tmp_path / "m.toml").write_text(res.stdout)
    assert load_catalog([tmp_path / "m.toml"]).models["m"].kv_heads == 8
    (tmp_path / "m.toml").write_text(res.stdout.replace("kv_heads = 8", "kv_heads = 5"))
    with pytest.raises(ScenarioError, match="kv_heads: 5 KV heads must divide the 32 attention heads"):
        load_catalog([tmp_path / "m.toml"])


# -- kernels predict ---------------------------------------------------------------------------------------
def _predict(gpu: str, *, in_features="8", out_features="8", tokens="1", tp="1") -> list[str]:
    return ["kernels", "predict", "--gpu", gpu, "--in-features", in_features, "--out-features", out_features,
            "--tokens", tokens, "--tensor-parallel", tp]


KERNELS = {
    "in-huge-table": (_predict("a100", in_features=HUGE), ("--in-features", str(MAX_FEATURES))),
    "in-huge-roofline": (_predict("mi100", in_features=HUGE), ("--in-features",)),
    "in-above": (_predict("h100", in_features=str(MAX_FEATURES + 1)), ("--in-features", str(MAX_FEATURES))),
    "out-int64": (_predict("a40", out_features=str((1 << 63) - 1)), ("--out-features",)),
    "out-thousands-of-digits": (_predict("a100", out_features="9" * 5000), ("--out-features",)),
    "tokens-above": (_predict("a100", tokens=str(MAX_TOKENS + 1)), ("--tokens", str(MAX_TOKENS))),
    "tokens-huge-host": (_predict("a100-40gb", tokens=HUGE), ("--tokens",)),
    "tokens-float": (_predict("a100", tokens="1e3"), ("--tokens",)),
    "tp-above": (_predict("a100", tp=str(MAX_TENSOR_PARALLEL + 1)), ("--tensor-parallel",)),
    "tp-huge": (_predict("mi100", tp=HUGE), ("--tensor-parallel",)),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_kernels_predict_limits(tmp_path, case):
    args, needles = KERNELS[case]
    _check(tmp_path, Case(args, {}, needles))


def test_kernels_at_their_limits_price_finitely():
    for gpu in ("a100", "mi100", "a100-40gb"):
        res = CliRunner().invoke(main, _predict(gpu, in_features=str(MAX_FEATURES), out_features=str(MAX_FEATURES),
                                                tokens=str(MAX_TOKENS), tp=str(MAX_TENSOR_PARALLEL)))
        assert res.exit_code == 0 and math.isfinite(float(res.stdout)), (gpu, res.stderr)
    assert MAX_FEATURES >= 3 * MAX_MODEL_DIM  # a fused q/k/v matrix of any catalog model can be priced
    with pytest.raises(ValueError, match="features"):
        predict_linear_us("a100", 10**400, 8, 1)
    with pytest.raises(ValueError, match="finite"):
        roofline_linear_ns(8, 8, 1, bandwidth_gbps=float("nan"), peak_fp16_tflops=1.0, bandwidth_efficiency=1.0,
                           compute_efficiency=1.0, launch_overhead_ns=0)


# -- sweep --acceptance ----------------------------------------------------------------------------------
SWEEPS = {
    "denormal-step": ("0.1:0.5:5e-324", ("--acceptance", "STEP", "1e-06")),
    "tiny-step": ("0.1:0.5:1e-300", ("STEP",)),
    "step-below-limit": ("0.5:0.5000001:1e-7", ("STEP",)),
    "step-zero": ("0.1:0.5:0", ("STEP",)),
    "step-negative": ("0.1:0.5:-0.1", ("STEP",)),
    "step-huge-negative": (f"0.1:0.5:-{HUGE}", ("STEP",)),
    "too-many-points": ("0:0.999:1e-6", ("999001 points", "201")),
    "hi-huge": (f"0.1:{HUGE}:0.1", ("finite",)),
    "hi-one": ("0.1:1:0.1", ("[0, 1)",)),
    "lo-tiny-negative": ("-5e-324:0.5:0.1", ("[0, 1)",)),
    "hi-below-lo": ("0.5:0.4:0.1", ("HI >= LO",)),
    "overflowing-float": ("0.1:0.5:1e400", ("finite",)),
}


@pytest.mark.parametrize("case", sorted(SWEEPS))
def test_sweep_acceptance_limits(tmp_path, case):
    spec, needles = SWEEPS[case]
    _check(tmp_path, Case(["sweep", OPT13, f"--acceptance={spec}", "--out", "{d}/sw"], {}, needles))


# -- the exact model's 64-bit rows: capacity rows and derived bounds --------------------------------------
#: Inside every range, but the slowest hardware with the largest model: the evaluator prices it (as a
#: float, finite), the exact model's 64-bit integers cannot hold it.
EXTREME = (_entry("models", {"layers": "10000", "hidden": "100000", "heads": "1000", "kv_heads": "1000",
                             "head_dim": "100", "ffn": "100000"}, name="huge")
           + _entry("memories", {"normal_unit_capacity_mib": str(1 << 26), "pim_unit_capacity_mib": str(1 << 26),
                                 "group_external_bandwidth_gbps": "0.001", "pim_lane_bandwidth_gbps": "0.001",
                                 "pim_lane_gflops": "0.001", "pim_efficiency": "0.001"}, name="slow"))
EXTREME_SCENARIO = ('name = "extreme"\nbatch_size = 512\nprompt_tokens = 1000\ngenerated_tokens = 1000\n'
                    'memory_types = ["slow"]\nmax_draft_length = 2\ncatalog = "c.toml"\n'
                    '[verifier]\nmodel = "huge"\ndevices = 8\n[[drafters]]\nmodel = "opt-1.3b"\ndevices = 1\n')


def test_extreme_catalog_prices_but_the_exact_model_refuses_it(tmp_path):
    files = {"s.toml": EXTREME_SCENARIO, "c.toml": EXTREME}
    _check(tmp_path, Case(["solve", "{d}/s.toml", "--json", "-o", "{d}/r.json"], files,
                          ("64-bit", "slowest priced operator", "verifier (huge)")))
    (tmp_path / "s.toml").write_text(EXTREME_SCENARIO)
    (tmp_path / "c.toml").write_text(EXTREME)
    res = CliRunner().invoke(main, ["baselines", str(tmp_path / "s.toml"), "--json"])
    assert res.exit_code == 0, res.stderr
    latencies = [r["metrics"]["latency_ns_per_token"] for r in json.loads(res.stdout) if r.get("metrics")]
    assert latencies and all(math.isfinite(x) and x > 1e15 for x in latencies)


def test_capacity_rows_are_checked_before_any_row_is_added():
    """Past the catalog's ranges (the Python API builds specs unchecked), a capacity beyond 2^62 KiB is
    named [CAP-...] before the model is built, instead of OR-Tools' TypeError."""
    from specpim_cp.solvers.exact import solve

    sc = load_scenario(OPT13)
    cat = default_catalog()
    for mib in ((1 << 63) - 1, 1 << 70):
        memories = {n: dataclasses.replace(m, normal_unit_capacity_mib=mib) for n, m in cat.memories.items()}
        with pytest.raises(ScenarioError, match=r"64-bit.*\[CAP-2\].*normal units"):
            solve(sc, catalog=dataclasses.replace(cat, memories=memories))


def test_row_check_covers_a_capacity_beyond_two_to_the_62():
    """A capacity between 2^62 and 2^63 KiB builds in OR-Tools; the row check names its CAP row."""
    from specpim_cp.physics.evaluate import Evaluator
    from specpim_cp.solvers.exact.guards import INT_LIMIT, check_integer_range
    from specpim_cp.solvers.exact.model import SpecModel

    sc = load_scenario(OPT13)
    cat = default_catalog()
    hbm = cat.memories["hbm"]
    units = 2 * hbm.groups * hbm.units_per_group  # the verifier's two devices
    mib = (INT_LIMIT + (INT_LIMIT >> 2)) // (units * 1024)
    cat = dataclasses.replace(cat, memories={**cat.memories, "hbm": dataclasses.replace(hbm, normal_unit_capacity_mib=mib)})
    sc = sc.model_copy(update={"memory_types": ("hbm",)})
    sm = SpecModel(sc, cat, Evaluator(sc, cat))
    with pytest.raises(ScenarioError, match=r"\[CAP\] a row's bound"):
        check_integer_range(sm)



@pytest.mark.parametrize("coeff, overflows", [((1 << 31) - 1, False), (1 << 31, True)])
def test_row_check_is_exact_at_the_limit(coeff, overflows):
    """A row within a hair of 2^62 is summed in exact integers: 2^31 x [0, 2^31] overflows CP-SAT's
    integer rule, (2^31 - 1) x [0, 2^31] does not, though the two differ by 5e-10 relative."""
    from specpim_cp.physics.evaluate import Evaluator
    from specpim_cp.solvers.exact.guards import check_integer_range
    from specpim_cp.solvers.exact.model import SpecModel

    sc = load_scenario(OPT13)
    cat = default_catalog()
    sm = SpecModel(sc, cat, Evaluator(sc, cat))
    check_integer_range(sm)  # the built model itself is in range
    probe = sm.m.new_int_var(0, 1 << 31, "probe")
    sm.m.add(coeff * probe >= 0)
    if overflows:
        with pytest.raises(ScenarioError, match=r"probe\) can reach 2.15e\+09 , and its row multiplies it by 2,147,483,648"):
            check_integer_range(sm)
    else:
        check_integer_range(sm)

# -- sensitivity: a nominal energy of 0 has no relative change ---------------------------------------------
ZERO_ENERGY = (_entry("hosts", {"idle_power_mw": "0", "onchip_energy_pj_per_bit": "0.0", "mac_energy_pj": "0.0",
                                "link_energy_pj_per_bit": "0.0"}, name="a100-40gb", base="a100-40gb")
               + "".join(_entry("memories", {"external_energy_pj_per_bit": "0.0", "internal_energy_pj_per_bit": "0.0",
                                             "pim_mac_energy_pj": "0.0"}, name=m, base=m) for m in ("hbm", "gddr")))


def test_sensitivity_with_zero_energy(tmp_path):
    _check(tmp_path, Case(["sensitivity", OPT13, "--catalog", "{d}/z.toml", "--plot", "{d}/t.png"],
                          {"z.toml": ZERO_ENERGY}, ("opt-13b", "energy is 0", "undefined")))


# -- what lies inside the ranges loads and prices as before --------------------------------------------------
def test_shipped_catalog_and_benchmarks_are_inside_the_ranges():
    cat = default_catalog()
    for spec in [*cat.models.values(), *cat.ngrams.values(), *cat.hosts.values(), *cat.memories.values()]:
        for field in _numeric_fields(type(spec)):
            assert FIELD_LIMITS[field].holds(getattr(spec, field)), (spec.name, field)
        for field, (lo, hi) in getattr(spec, "ranges", {}).items():
            assert FIELD_LIMITS[field].holds(lo) and FIELD_LIMITS[field].holds(hi), (spec.name, field)
    scenarios = [p for folder in (ROOT / "specpim_cp" / "benchmarks", ROOT / "benchmarks")
                 for p in sorted(folder.rglob("*.toml")) if "[verifier]" in p.read_text(encoding="utf-8")]
    assert len(scenarios) > 20
    for path in scenarios:
        load_scenario(path)


TINY = (_entry("models", {"layers": "2", "hidden": "1", "heads": "1", "kv_heads": "1", "head_dim": "1", "ffn": "1",
                          "vocab": "1", "bytes_per_param": "1", "nominal_params_b": "0.0"}, name="tiny-v", base="opt-125m")
        + _entry("models", {"layers": "1", "hidden": "1", "heads": "1", "kv_heads": "1", "head_dim": "1", "ffn": "1",
                            "vocab": "1", "bytes_per_param": "1", "nominal_params_b": "0.0"}, name="tiny-d",
                 base="opt-125m")
        + _entry("ngrams", {"step_ns": "0", "energy_nj_per_step": "0"}, name="ng0")
        + _entry("hosts", {"kernel_table": '"roofline"', "peak_fp16_tflops": "1e6", "kernel_table_bandwidth_gbps": "1e6",
                           "idle_power_mw": "10000000", "onchip_energy_pj_per_bit": "1e4", "mac_energy_pj": "1e4",
                           "link_bandwidth_gbps": "1e6", "link_energy_pj_per_bit": "1e4", "sync_latency_ns": "1000000000",
                           "launch_overhead_ns": "0", "attention_bandwidth_efficiency": "1.0",
                           "compute_efficiency": "0.001"}, name="edge")
        + _entry("memories", {"groups": "1", "units_per_group": "1", "units_per_channel": "1",
                              "normal_unit_capacity_mib": "1", "pim_unit_capacity_mib": "1",
                              "group_external_bandwidth_gbps": "1e6", "pim_lanes_per_unit": "65536",
                              "pim_lane_bandwidth_gbps": "1e6", "pim_lane_gflops": "1e6", "pim_efficiency": "1.0",
                              "pim_mode_switch_ns": "0", "external_energy_pj_per_bit": "0.0",
                              "internal_energy_pj_per_bit": "1e4", "pim_mac_energy_pj": "0.0"}, name="edge"))
TINY_SCENARIO = ('name = "edge"\nbatch_size = 1\nprompt_tokens = 1\ngenerated_tokens = 1\nhost = "edge"\n'
                 'memory_types = ["edge"]\nmax_draft_length = 2\ncatalog = "c.toml"\n[verifier]\nmodel = "tiny-v"\n'
                 'devices = 1\n[[drafters]]\nmodel = "tiny-d"\ndevices = 1\n[drafters.staging]\ndraft2 = ["ng0"]\n')


def test_the_other_ends_of_the_ranges_solve(tmp_path):
    """The smallest model and the fastest, most power-hungry hardware the ranges allow: solved exactly."""
    (tmp_path / "s.toml").write_text(TINY_SCENARIO)
    (tmp_path / "c.toml").write_text(TINY)
    res = CliRunner().invoke(main, ["solve", str(tmp_path / "s.toml"), "--json", "--time-limit", "10"])
    assert res.exit_code == 0, res.stderr
    metrics = json.loads(res.stdout)["metrics"]
    assert math.isfinite(metrics["latency_ns_per_token"]) and metrics["energy_pj_per_token"] > 0


# -- integers past Python's own int-from-text limit, in any file the CLI reads ------------------------
OVER_PARSER = "9" * 5000  # beyond sys.get_int_max_str_digits(): the parsers themselves refuse it


@pytest.mark.parametrize(("args", "files", "needles"), [
    (["solve", "{d}/s.toml"], {"s.toml": GOOD.replace("batch_size = 1", f"batch_size = {OVER_PARSER}")},
     ("{d}/s.toml", "more than 4,300 digits")),
    (["baselines", "{d}/s.json"], {"s.json": json.dumps({"name": "t"})[:-1] + f', "batch_size": {OVER_PARSER}}}'},
     ("{d}/s.json", "more than 4,300 digits")),
    (["evaluate", OPT13, "--design", "{d}/d.json"], {"d.json": f'{{"verifier": {OVER_PARSER}}}'},
     ("{d}/d.json", "more than 4,300 digits")),
    (["catalog", "check", "{d}/mine.toml"], {"mine.toml": _entry("models", {"layers": OVER_PARSER})},
     ("{d}/mine.toml", "more than 4,300 digits")),
])
def test_integers_beyond_the_parsers_limit(tmp_path, args, files, needles):
    _check(tmp_path, Case(args, files, needles))
