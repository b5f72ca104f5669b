"""A draft head's Hugging Face config as a scenario's `[[drafters]]` entry (`specpim-cp catalog import-hf`).

A head is derived from its verifier (formulations/drafter_kinds.md), so its config becomes the fields of a
`[drafters.head]` table, each with the config key it came from: an EAGLE-3 head (`LlamaForCausalLMEagle3`
style: `draft_vocab_size`, `target_hidden_size` or `hidden_size`, `intermediate_size`, the fused layers from
`eagle_config.eagle_aux_hidden_state_layer_ids` or `num_aux_hidden_states`), DeepSeek-V3 style MTP
(`num_nextn_predict_layers` > 0) and Medusa (`medusa_num_heads`, `medusa_num_layers`). A config that names
a draft head of another kind is one line. No network: the file is read as given.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from specpim_cp.catalog import shown
from specpim_cp.errors import ScenarioError

#: Words in an architecture name that mark a draft head's config.
HEAD_MARKERS = ("eagle", "medusa", "mtp", "draft", "speculator", "hydra")
KNOWN = ("EAGLE-3 (draft_vocab_size), DeepSeek-V3 MTP (num_nextn_predict_layers), Medusa (medusa_num_heads, "
         "medusa_num_layers)")


def head_kind(cfg: dict) -> str | None:
    """"eagle", "mtp", "medusa" for a head config this module reads, "unknown" for another draft head's, None
    for a model's config."""
    arch = cfg.get("architectures")
    names = " ".join(a for a in arch if isinstance(a, str)).lower() if isinstance(arch, list) else ""
    if "draft_vocab_size" in cfg or "eagle3" in names:
        return "eagle"
    if "medusa_num_heads" in cfg:
        return "medusa"
    if "num_nextn_predict_layers" in cfg and cfg["num_nextn_predict_layers"] not in (0, None):
        return "mtp"
    if any(m in names for m in HEAD_MARKERS) or any(m in str(cfg.get("model_type", "")).lower()
                                                     for m in HEAD_MARKERS):
        return "unknown"
    return None


def _integer(path: Path, cfg: dict, key: str, low: int = 1, high: int = 1 << 24) -> int:
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ScenarioError(f"{path}: {key} must be an integer from {low} to {high:,}, got {shown(v)}")
    return v


def _fields(path: Path, cfg: dict, kind: str) -> list[tuple[str, int | str, str]]:
    """(head field, value, config key) of the head's `[drafters.head]` table."""
    if kind == "mtp":
        return [("depth", _integer(path, cfg, "num_nextn_predict_layers", 1, 16), "num_nextn_predict_layers")]
    if kind == "medusa":
        out = [("heads", _integer(path, cfg, "medusa_num_heads", 1, 16), "medusa_num_heads")]
        if "medusa_num_layers" in cfg:
            out.append(("layers", _integer(path, cfg, "medusa_num_layers", 1, 4), "medusa_num_layers"))
        return out
    width_key = "target_hidden_size" if cfg.get("target_hidden_size") is not None else "hidden_size"
    out = [("draft_vocab", _integer(path, cfg, "draft_vocab_size"), "draft_vocab_size"),
           ("hidden_size", _integer(path, cfg, width_key), width_key)]
    if "intermediate_size" in cfg:
        out.append(("intermediate_size", _integer(path, cfg, "intermediate_size"), "intermediate_size"))
    ids = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") if isinstance(
        cfg.get("eagle_config"), dict) else None
    if isinstance(ids, list) and ids:
        out.append(("fused_layers", len(ids), "eagle_config.eagle_aux_hidden_state_layer_ids"))
    elif "num_aux_hidden_states" in cfg:
        out.append(("fused_layers", _integer(path, cfg, "num_aux_hidden_states", 1, 8), "num_aux_hidden_states"))
    return out


def import_head_toml(path: str | Path, cfg: dict) -> tuple[str, str]:
    """(kind, TOML text of a `[[drafters]]` entry) for a head config (`head_kind` not None); ScenarioError
    (one line) for a draft head of a kind not read."""
    path = Path(path)
    kind = head_kind(cfg)
    arch = cfg.get("architectures")
    if kind in (None, "unknown"):
        raise ScenarioError(f"{path}: a draft-head config ({shown(arch)}) of a kind not read; known: {KNOWN} "
                            "(write its [drafters.head] table by hand: formulations/drafter_kinds.md)")
    origin = f"Hugging Face config.json {path} ({', '.join(arch) if isinstance(arch, list) else kind})"
    lines = [f"# a {kind} head from {origin}: a drafter of a scenario whose verifier it was built for",
             "[[drafters]]", f'kind = "{kind}"', "", "[drafters.head]"]
    lines += [f"{field} = {value}  # {key}" for field, value, key in _fields(path, cfg, kind)]
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # the entry loads as written
    return kind, text
