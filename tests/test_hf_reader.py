"""One typed reader for Hugging Face configs (`catalog import-hf`): a key of the wrong JSON type is one line
naming it, and what the importer writes always loads back (names and sources with quotes, control
characters, non-BMP characters, or an undecodable byte)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_line_error

from specpim_cp.catalog import load_catalog
from specpim_cp.catalog.import_hf import CONFIG_TYPES, import_hf, import_hf_toml
from specpim_cp.cli import main
from specpim_cp.files import toml_text

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": "tests/tiny",
          "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 4, "num_hidden_layers": 2,
          "num_key_value_heads": 2, "vocab_size": 32000, "max_position_embeddings": 2048,
          "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float16"}

WRONG = {"architectures": {"a": 1}, "model_type": ["llama"], "_name_or_path": 7, "hidden_act": ["silu"],
         "torch_dtype": 16, "tie_word_embeddings": "no", "attention_bias": 1, "max_position_embeddings": "2048",
         "sliding_window": 4.5, "mlp_only_layers": [True], "decoder_sparse_step": False,
         "intermediate_size": "688", "activation_function": {}, "dtype": [], "n_positions": True,
         "word_embed_proj_dim": "x", "use_sliding_window": "yes", "max_window_layers": 2.5}




def test_every_typed_key_has_a_wrong_value_here():
    assert set(WRONG) == set(CONFIG_TYPES)


@pytest.mark.parametrize("key", sorted(WRONG))
def test_a_key_of_the_wrong_type_isone_line_error(tmp_path, key):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, key: WRONG[key]}))
    one_line_error(CliRunner().invoke(main, ["catalog", "import-hf", str(path)]), f"{key} must be")


@pytest.mark.parametrize("name", ['quote " and \\ back', "tab\tnew\nline\x7f\x00", "emoji \U0001F600 ü",
                                  "[models.x]"])
def test_what_is_written_loads_back(tmp_path, name):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "_name_or_path": f"org/{name}"}))
    model_name, text = import_hf_toml(path)  # checked by the catalog loader inside
    assert model_name == name.strip().lower()
    out = tmp_path / "m.toml"
    out.write_text(text)
    assert model_name in load_catalog([str(out)]).models
    named, text = import_hf_toml(path, name=name.strip())
    assert named in tomllib.loads(text)["models"]


def test_an_undecodable_name_isone_line_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "_name_or_path": "org/bad\udcff"}))
    one_line_error(CliRunner().invoke(main, ["catalog", "import-hf", str(path)]), "_name_or_path", "undecodable")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(CONFIG))
    one_line_error(CliRunner().invoke(main, ["catalog", "import-hf", str(good), "--name", "x\udcff"]), "--name",
              "undecodable")


def test_an_undecodable_path_is_escaped_in_the_sources(tmp_path):
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/dir\xff"))
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(json.dumps(CONFIG))
    model, notes = import_hf(path, name="ok")
    entry = tomllib.loads(model.to_toml(notes))["models"]["ok"]
    assert "dir\\udcff" in entry["source_layers"]


def test_toml_text_round_trips_any_text():
    data = {"name": "a\x7fb\x01\U0001F600", "t": {"k\"ey": "v\\"}}
    assert tomllib.loads(toml_text(data)) == data
