"""Inputs taken as meant: tokenizer identity by family and real vocabulary (padding ignored), a model's
position limit, and the active parameters of a mixture of experts.

Configs are the shapes of the released models (Qwen2.5-72B/0.5B, Llama-3.1-8B, Llama-2-7B, Mistral-7B,
and tests/data's Mixtral-8x7B), written here by hand with their published keys.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_line_error

from specpim_cp.catalog import default_catalog, load_catalog
from specpim_cp.catalog.import_hf import import_hf, import_hf_toml
from specpim_cp.catalog.tokenizers import known_tokenizers, same_tokenizer, tokenizer_for, tokenizer_identity
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.scenario import parse_scenario

DATA = Path(__file__).parent / "data"
QWEN25_72B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
              "intermediate_size": 29568, "num_hidden_layers": 80, "num_attention_heads": 64,
              "num_key_value_heads": 8, "vocab_size": 152064, "max_position_embeddings": 32768,
              "tie_word_embeddings": False, "_name_or_path": "Qwen/Qwen2.5-72B"}
QWEN25_05B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
              "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
              "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
              "tie_word_embeddings": True, "_name_or_path": "Qwen/Qwen2.5-0.5B"}
LLAMA31_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
              "tie_word_embeddings": False, "_name_or_path": "meta-llama/Llama-3.1-8B"}
LLAMA32_1B = {**LLAMA31_8B, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
              "head_dim": 64, "tie_word_embeddings": True, "_name_or_path": "meta-llama/Llama-3.2-1B"}
LLAMA2_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
             "_name_or_path": "meta-llama/Llama-2-7b-hf"}
MISTRAL_7B = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
              "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096,
              "max_position_embeddings": 32768, "tie_word_embeddings": False,
              "_name_or_path": "mistralai/Mistral-7B-v0.1"}
MIXTRAL = DATA / "mixtral-8x7b.config.json"


def _config(tmp_path: Path, cfg: dict) -> Path:
    path = tmp_path / f"{cfg['_name_or_path'].split('/')[-1]}.json"
    path.write_text(json.dumps(cfg))
    return path


def _catalog(tmp_path: Path, *cfgs: dict | Path) -> Path:
    """A user catalog of the imported configs (their default names), written to tmp_path/models.toml."""
    texts = [import_hf_toml(c if isinstance(c, Path) else _config(tmp_path, c))[1] for c in cfgs]
    path = tmp_path / "models.toml"
    path.write_text("\n".join(texts))
    return path


def _scenario(verifier: str, drafter: str, prompt: int = 256, generated: int = 128, **extra) -> dict:
    return {"name": "pair", "batch_size": 1, "prompt_tokens": prompt, "generated_tokens": generated,
            "host": "h100-sxm", "verifier": {"model": verifier, "devices": 4},
            "drafters": [{"model": drafter, "devices": 1}], **extra}


# --------------------------------------------------------------------------- tokenizer identity


def test_qwen25_sizes_share_one_tokenizer_whatever_the_padding(tmp_path):
    big, _ = import_hf(_config(tmp_path, QWEN25_72B))
    small, _ = import_hf(_config(tmp_path, QWEN25_05B))
    assert big.values["vocab"] == 152064 and small.values["vocab"] == 151936  # the embeddings keep their rows
    assert big.values["tokenizer"] == small.values["tokenizer"] == "qwen2-bpe"
    assert "padded to 152064 rows" in big.sources["tokenizer"] and "tokenizers.toml" in big.sources["tokenizer"]
    cat = load_catalog([_catalog(tmp_path, QWEN25_72B, QWEN25_05B)])
    sc = parse_scenario(_scenario("qwen2.5-72b", "qwen2.5-0.5b"), cat)
    assert sc.drafters[0].model == "qwen2.5-0.5b"


def test_mistral_and_mixtral_share_one_tokenizer_under_every_name(tmp_path):
    mistral, _ = import_hf(_config(tmp_path, MISTRAL_7B))
    mixtral, _ = import_hf(MIXTRAL, name="mixtral-hf")
    assert mistral.values["tokenizer"] == mixtral.values["tokenizer"] == "mistral-sp"
    names = ("mistral-sp", "mistral-vocab32000", "mixtral-sp", "mixtral-vocab32000")
    assert {tokenizer_identity(n) for n in names} == {"mistral-sp"}
    assert all(same_tokenizer(a, b) for a in names for b in names)
    # the built-in Mixtral (mixtral-sp) verifies an imported Mistral-7B, and so does an imported Mixtral
    cat = load_catalog([_catalog(tmp_path, MISTRAL_7B)])
    parse_scenario(_scenario("mixtral-8x7b", "mistral-7b-v0.1"), cat)
    old = tmp_path / "old.toml"  # written by an older import-hf: its default names still pair
    old.write_text(import_hf_toml(_config(tmp_path, MISTRAL_7B), name="mistral-old", tokenizer="mistral-vocab32000")[1]
                   + import_hf_toml(MIXTRAL, name="mixtral-old", tokenizer="mixtral-vocab32000")[1])
    cat = load_catalog([old])
    parse_scenario(_scenario("mixtral-old", "mistral-old"), cat)
    parse_scenario(_scenario("mixtral-8x7b", "mistral-old"), cat)


def test_llama_3_pairs_and_other_tokenizers_stay_apart(tmp_path):
    assert tokenizer_for("llama", 128256).name == "llama3-bpe"
    assert tokenizer_for("llama", 32000).name == "llama-sp"
    assert tokenizer_for("qwen2", 32000) is None and tokenizer_for("llama", 32001) is None
    cat = load_catalog([_catalog(tmp_path, LLAMA31_8B, LLAMA32_1B, LLAMA2_7B, MISTRAL_7B)])
    parse_scenario(_scenario("llama-3.1-8b", "llama-3.2-1b"), cat)
    # one vocabulary size is not one tokenizer: Llama 2's and Mistral's SentencePiece models differ
    for verifier, drafter in (("mixtral-8x7b", "llama-2-7b-hf"), ("llama-3.1-8b", "llama-7b"),
                              ("llama-3.1-8b", "llama-2.7b")):
        with pytest.raises(ScenarioError, match=r"drafters\[0\]\.model: .* tokenizer"):
            parse_scenario(_scenario(verifier, drafter), cat)
    # an unknown (model_type, vocab_size) keeps its own name
    unknown, _ = import_hf(_config(tmp_path, {**QWEN25_05B, "vocab_size": 32000, "_name_or_path": "x/odd"}))
    assert unknown.values["tokenizer"] == "qwen2-vocab32000"


def test_every_known_tokenizer_is_sourced_and_holds_its_padded_sizes():
    for t in known_tokenizers():
        assert t.source.strip() and t.model_types and all(t.fits(t.model_types[0], v) for v in t.vocab_sizes)
        assert all(tokenizer_identity(a) == t.name for a in t.aliases)
    names = [n for t in known_tokenizers() for n in (t.name, *t.aliases)]
    assert len(names) == len(set(names))


# --------------------------------------------------------------------------- position limit


def test_a_prompt_beyond_the_position_limit_is_one_line(tmp_path):
    models = _catalog(tmp_path, LLAMA31_8B, LLAMA32_1B)
    scenario = tmp_path / "long.toml"
    scenario.write_text(f'catalog = "{models.name}"\nname = "long"\nbatch_size = 1\nprompt_tokens = 200000\n'
                        'generated_tokens = 128\nhost = "h100-sxm"\n[verifier]\nmodel = "llama-3.1-8b"\n'
                        'devices = 4\n[[drafters]]\nmodel = "llama-3.2-1b"\ndevices = 1\n')
    res = CliRunner().invoke(main, ["solve", str(scenario)])
    one_line_error(res, "verifier.model", "llama-3.1-8b", "131,072", "prompt_tokens", "generated_tokens",
                   "200,128")
    cat = load_catalog([models])
    parse_scenario(_scenario("llama-3.1-8b", "llama-3.2-1b", prompt=131072 - 128), cat)  # at the limit: taken


def test_built_in_limits_name_the_model_that_binds():
    cat = default_catalog()
    assert cat.models["opt-13b"].max_position == 2048 and cat.models["gpt2-small"].max_position == 1024
    assert cat.models["llama-1.3b"].max_position == 0  # a constructed model: no limit known
    assert all("source_max_position" in m.sources for m in cat.models.values() if m.max_position)
    with pytest.raises(ScenarioError, match=r"drafters\[0\]\.model: 'gpt2-small' takes at most 1,024"):
        parse_scenario(_scenario("opt-13b", "gpt2-small", prompt=1000), cat)
    with pytest.raises(ScenarioError, match=r"verifier\.model: 'opt-13b' takes at most 2,048"):
        parse_scenario(_scenario("opt-13b", "opt-1.3b", prompt=2000, generated=49), cat)
    parse_scenario(_scenario("opt-13b", "opt-1.3b", prompt=2000, generated=48), cat)


# --------------------------------------------------------------------------- MoE active parameters


def test_mixtral_active_parameters_are_shown(tmp_path):
    m = default_catalog().models["mixtral-8x7b"]
    assert m.parameter_count() / 1e9 == pytest.approx(46.7, abs=0.05)
    assert m.active_parameter_count() / 1e9 == pytest.approx(12.9, abs=0.05)  # Mistral AI: 12.9B active
    dense = default_catalog().models["opt-13b"]
    assert dense.active_parameter_count() == dense.parameter_count()
    res = CliRunner().invoke(main, ["catalog", "models"])
    assert res.exit_code == 0 and "active (B)" in res.stdout
    row = next(line for line in res.stdout.splitlines() if line.startswith("mixtral-8x7b "))
    assert "46.70" in row and "12.88" in row and "32,768" in row
    assert "mixtral-8x7b: " in res.stdout and "active parameters per token: 12.9B of 46.7B" in res.stdout
    res = CliRunner().invoke(main, ["catalog", "import-hf", str(MIXTRAL), "--name", "mixtral-hf"])
    assert res.exit_code == 0 and "# note: active parameters per token: 12.9B of 46.7B" in res.stdout
