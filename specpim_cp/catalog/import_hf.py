"""A Hugging Face `config.json` as a catalog model entry (`specpim-cp catalog import-hf`).

Reads the decoder shape of Llama 2/3, Mistral, Qwen2, OPT and GPT-2 style configs, and of the
mixture-of-experts Mixtral, Qwen2-MoE and Qwen3-MoE configs (experts, experts per token, expert and
shared-expert widths; formulations/moe.md), and writes a `[models."NAME"]` TOML entry of the catalog schema
(`models.toml`), every value with its `source_X = "Hugging Face config.json PATH (ARCHITECTURES): KEY"`.
What the schema cannot express is said in the sources rather than silently dropped: biases (a few kB per
layer), OPT's embedding projection (`word_embed_proj_dim`), Qwen2-MoE's shared expert gate; a sliding
window (Mistral's `sliding_window`) becomes `sliding_window`, and one on only some layers is refused; an MoE config with dense layers (`mlp_only_layers`, `decoder_sparse_step` > 1) is refused,
since every layer of an MoE entry is priced as MoE, and an MoE entry notes its active parameters. RoPE
settings do not change bytes or FLOPs and are ignored. The position limit becomes `max_position`, the
tokenizer a known one's name when model_type and vocab_size match it (`catalog/tokenizers.py`). No
network: the file is read as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specpim_cp.catalog import ModelSpec, active_text, field_problem, model_shape_problem, shown
from specpim_cp.catalog.import_head import head_kind, import_head_toml
from specpim_cp.catalog.tokenizers import tokenizer_for
from specpim_cp.errors import ScenarioError
from specpim_cp.files import read_table, toml_string

#: model_type -> (family, FFN kind, tie_word_embeddings when the key is absent: transformers' default)
ARCHITECTURES = {
    "llama": ("llama", "gated", False),
    "mistral": ("mistral", "gated", False),
    "qwen2": ("qwen2", "gated", False),
    "opt": ("opt", "two-matrix", True),
    "gpt2": ("gpt2", "two-matrix", True),
    "mixtral": ("mixtral", "gated", False),
    "qwen2_moe": ("qwen2_moe", "gated", False),
    "qwen3_moe": ("qwen3_moe", "gated", False),
}
#: model_type -> (config key of the experts count, of each routed expert's intermediate size, of the shared
#: expert's intermediate size or None): transformers' MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig
MOE_KEYS = {
    "mixtral": ("num_local_experts", "intermediate_size", None),
    "qwen2_moe": ("num_experts", "moe_intermediate_size", "shared_expert_intermediate_size"),
    "qwen3_moe": ("num_experts", "moe_intermediate_size", None),
}
#: architectures[0] -> model_type, for configs without model_type
_CLASS_TYPES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
                "OPTForCausalLM": "opt", "GPT2LMHeadModel": "gpt2", "MixtralForCausalLM": "mixtral",
                "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3MoeForCausalLM": "qwen3_moe"}
#: Keys per schema field (first present wins): transformers' names, GPT-2 style names after them
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer"),
    "hidden": ("hidden_size", "n_embd"),
    "heads": ("num_attention_heads", "n_head"),
    "vocab": ("vocab_size",),
}
BYTES_PER_PARAM = 2  # FP16/BF16 inference: the host kernel tables and PIM units are FP16

#: The JSON type of every config key the importer reads besides the integers of `integer` (which checks
#: its own): a key present with another type (null aside) is one line naming it, before any value is used.
CONFIG_TYPES: dict[str, tuple[str, type]] = {
    "model_type": ("a string", str), "architectures": ("a list of strings", list),
    "_name_or_path": ("a string", str), "hidden_act": ("a string", str), "activation_function": ("a string", str),
    "torch_dtype": ("a string", str), "dtype": ("a string", str), "tie_word_embeddings": ("true or false", bool),
    "attention_bias": ("true or false", bool), "max_position_embeddings": ("an integer", int),
    "n_positions": ("an integer", int), "sliding_window": ("an integer", int),
    "word_embed_proj_dim": ("an integer", int), "mlp_only_layers": ("a list of integers", list),
    "decoder_sparse_step": ("an integer", int), "intermediate_size": ("an integer", int),
    "use_sliding_window": ("true or false", bool), "max_window_layers": ("an integer", int),
}


def check_config_types(path: Path, cfg: dict) -> None:
    """Every key of CONFIG_TYPES that `cfg` holds (not null) has its JSON type; the lists hold their items'."""
    for key, (what, kind) in CONFIG_TYPES.items():
        v = cfg.get(key)
        if v is None:
            continue
        ok = isinstance(v, kind) and (kind is bool or not isinstance(v, bool))
        if ok and key == "architectures":
            ok = all(isinstance(x, str) for x in v)
        if ok and key == "mlp_only_layers":
            ok = all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        if not ok:
            raise ScenarioError(f"{path}: {key} must be {what}, got {shown(v)}")


def checked_text(value: str, what: str) -> str:
    """`value` when TOML can hold it (the written entry must load back), else one line naming `what`."""
    try:
        toml_string(value)
    except ValueError:
        raise ScenarioError(f"{what}: {shown(value)} holds an undecodable byte (not text); give a name in "
                            "plain text (--name)") from None
    return value


def _free_text(value: str) -> str:
    """`value` for a source note: an undecodable byte (a file name's) written as its escape, not refused."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class ImportedModel:
    """A model entry: `values` in the schema's field order and, per field, the config key it came from."""

    name: str
    values: dict
    sources: dict

    def to_toml(self, notes: tuple[str, ...] = ()) -> str:
        notes = tuple(" ".join(_free_text(n).split()) for n in notes)  # a comment is one line
        lines = ["# imported by `specpim-cp catalog import-hf`", *(f"# note: {n}" for n in notes),
                 f"[models.{toml_string(self.name)}]"]
        for field, value in self.values.items():
            lines.append(f"{field} = {_toml_value(value)}")
            if field in self.sources:
                lines.append(f"source_{field} = {toml_string(_free_text(self.sources[field]))}")
        return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return toml_string(v)


def _model_type(path: Path, cfg: dict) -> str:
    kind = cfg.get("model_type")
    arch = cfg.get("architectures")
    if kind is None and isinstance(arch, list) and arch:
        kind = _CLASS_TYPES.get(arch[0])
    if kind not in ARCHITECTURES:
        raise ScenarioError(f"{path}: model_type '{kind}' (architectures {arch}) is not supported; supported: "
                            f"{', '.join(ARCHITECTURES)} (write the [models] entry by hand, see models.toml)")
    return kind


def import_hf(path: str | Path, name: str | None = None, tokenizer: str | None = None) -> tuple[ImportedModel,
                                                                                              tuple[str, ...]]:
    """The catalog entry of the config at `path`, and notes on what the schema leaves out."""
    path = Path(path)
    cfg = read_table(path, "a Hugging Face config.json", syntax="JSON")
    check_config_types(path, cfg)
    kind = _model_type(path, cfg)
    family, ffn_kind, tied_default = ARCHITECTURES[kind]
    arch = cfg.get("architectures")
    arch_text = ", ".join(arch) if arch else kind
    origin = cfg.get("_name_or_path")
    if isinstance(origin, str) and origin.strip():
        arch_text += f", {origin.strip()}"
    where = f"Hugging Face config.json {path} ({arch_text})"
    values: dict = {}
    sources: dict = {}
    keys: dict = {}  # schema field -> the config key it came from
    notes: list[str] = []

    def integer(field: str, config_keys: tuple[str, ...], default: int | None = None, why: str = "") -> int:
        for key in config_keys:
            if key in cfg and cfg[key] is not None:
                v = cfg[key]
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ScenarioError(f"{path}: {key} must be a positive integer, got {shown(v)}")
                problem = field_problem(field, v)  # the catalog's own range for the field
                if problem:
                    raise ScenarioError(f"{path}: {key} (the model's {field}) {problem}")
                values[field], sources[field], keys[field] = v, f"{where}: {key}", key
                return v
        if default is None:
            raise ScenarioError(f"{path}: missing key '{config_keys[0]}' (the model's {field}; a {kind} config has it)")
        values[field], sources[field] = default, f"{where}: {config_keys[0]} absent, {why}"
        keys[field] = f"{config_keys[0]} absent, {why}"
        return default

    values["family"] = family
    layers = integer("layers", _KEYS["layers"])
    hidden = integer("hidden", _KEYS["hidden"])
    heads = integer("heads", _KEYS["heads"])
    if kind in ("opt", "gpt2"):
        values["kv_heads"], sources["kv_heads"] = heads, f"{where}: num_attention_heads (multi-head attention)"
        keys["kv_heads"] = keys["heads"]
    else:
        integer("kv_heads", ("num_key_value_heads",), heads, "multi-head attention (= num_attention_heads)")
    if hidden % heads and "head_dim" not in cfg:
        raise ScenarioError(f"{path}: missing key 'head_dim' (hidden size {shown(hidden)} is not a multiple of "
                            f"{shown(heads)} heads)")
    integer("head_dim", ("head_dim",), hidden // heads, f"hidden size / heads = {hidden} / {heads}")
    if kind == "opt":
        integer("ffn", ("ffn_dim",))
    elif kind == "gpt2":
        integer("ffn", ("n_inner",), 4 * hidden, f"4 x n_embd = {4 * hidden} (GPT-2's default)")
    elif kind in MOE_KEYS:
        _experts(path, cfg, kind, integer, values, sources, keys, where, notes)
    else:
        integer("ffn", ("intermediate_size",))
    values["ffn_kind"] = ffn_kind
    act = cfg.get("hidden_act", cfg.get("activation_function"))
    sources["ffn_kind"] = (f"{where}: model_type {kind} ("
                           + ("gate and up projections, SwiGLU" if ffn_kind == "gated" else "up and down projections")
                           + (f", {act})" if act else ")"))
    values["parallel_block"] = False
    sources["parallel_block"] = f"{where}: model_type {kind} (sequential attention then FFN)"
    vocab = integer("vocab", _KEYS["vocab"])
    tied = cfg.get("tie_word_embeddings")
    if tied is not None and not isinstance(tied, bool):
        raise ScenarioError(f"{path}: tie_word_embeddings must be true or false, got {shown(tied)}")
    values["tied_embeddings"] = tied_default if tied is None else tied
    sources["tied_embeddings"] = (f"{where}: tie_word_embeddings" if tied is not None
                                  else f"{where}: tie_word_embeddings absent, {kind} default {str(tied_default).lower()}")
    dtype = cfg.get("torch_dtype", cfg.get("dtype"))
    values["bytes_per_param"] = BYTES_PER_PARAM
    sources["bytes_per_param"] = (f"{where}: torch_dtype {dtype}, priced as FP16/BF16 inference (2 bytes) as "
                                  "every catalog model (the host kernel tables are FP16)")
    values["tokenizer"], sources["tokenizer"] = _tokenizer(kind, vocab, tokenizer, where)
    for key in ("max_position_embeddings", "n_positions"):  # checked by the scenario: prompt + generated tokens
        if isinstance(cfg.get(key), int):
            integer("max_position", (key,))
            break
    _sliding_window(path, cfg, kind, layers, integer, sources, notes)
    shape = _checked_shape(path, values, keys)

    # what the schema leaves out, said where it is decided
    bias_params = 0
    if kind in ("qwen2", "qwen2_moe") or cfg.get("attention_bias") is True:  # Qwen2(-MoE) always has q/k/v biases
        bias_params = layers * (heads + 2 * values["kv_heads"]) * values["head_dim"]
        notes.append(f"q/k/v biases ({bias_params} parameters) are counted in nominal_params_b but not priced: "
                     "the schema has no biases, and they add a few kB per layer")
    if kind == "opt" and cfg.get("word_embed_proj_dim", hidden) != hidden:
        notes.append(f"word_embed_proj_dim {cfg['word_embed_proj_dim']} != hidden_size {hidden}: the embedding "
                     "is priced as vocab x hidden_size and the two projections are ignored")
    if "max_position" not in values:
        notes.append("no position limit (max_position_embeddings / n_positions absent): prompt_tokens + "
                     "generated_tokens are not checked against one")
    if kind in ("llama", "mistral", "qwen2", *MOE_KEYS):
        notes.append("RoPE settings ignored (they change neither bytes nor FLOPs)")
    gate_params = layers * hidden if kind == "qwen2_moe" else 0  # Qwen2-MoE's sigmoid shared_expert_gate
    if gate_params:
        notes.append(f"the shared expert's gate ({gate_params} parameters, hidden x 1 per layer) is counted in "
                     "nominal_params_b but not priced")

    params = shape.parameter_count() + bias_params + gate_params
    extras = (", q/k/v biases" if bias_params else "") + (", shared expert gates" if gate_params else "")
    values["nominal_params_b"] = round(params / 1e9, 3 if params >= 1e8 else 4)
    if shape.is_moe:
        notes.append(f"active parameters per token: {active_text(shape, params)} (attention, router, shared "
                     f"experts, {shape.experts_per_token} of {shape.experts} routed experts, embeddings)")
    sources["nominal_params_b"] = (f"computed from the shapes above ({params} parameters: decoder layers, "
                                   f"embeddings{extras})")
    entry_name = checked_text((name or _default_name(path, cfg)).strip(),
                              "--name" if name else f"{path}: the model's name (from _name_or_path or the folder)")
    if not entry_name:
        raise ScenarioError(f"{path}: --name: an empty model name")
    values["tokenizer"] = checked_text(values["tokenizer"], "--tokenizer")
    order = ("family", "tokenizer", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "ffn_kind",
             *(MOE_FIELDS if kind in MOE_KEYS else ()), "parallel_block", "vocab", "tied_embeddings",
             "bytes_per_param", "nominal_params_b", "max_position", "sliding_window")
    return ImportedModel(entry_name, {k: values[k] for k in order if k in values}, sources), tuple(notes)


def _sliding_window(path: Path, cfg: dict, kind: str, layers: int, integer, sources: dict,
                    notes: list[str]) -> None:
    """`sliding_window` when the config's every layer uses one (absent or null: full attention). Qwen2-style
    configs carry a window they use only with `use_sliding_window = true` (transformers' default false), and
    then only on the layers from `max_window_layers` on: a window on some layers alone is refused."""
    uses = cfg.get("use_sliding_window")
    if cfg.get("sliding_window") is None or uses is False or (kind.startswith("qwen") and uses is not True):
        return
    if cfg.get("use_sliding_window") is True and cfg.get("max_window_layers", 0) > 0:
        raise ScenarioError(f"{path}: use_sliding_window with max_window_layers {shown(cfg['max_window_layers'])}: "
                            f"layers below it keep full attention; a window on only some of the {layers} layers "
                            "is not supported (every layer is priced alike)")
    integer("sliding_window", ("sliding_window",))
    sources["sliding_window"] += (" (each query reads at most this many keys; the KV cache keeps the last this many "
                                  "positions, a rolling buffer: Mistral 7B, Jiang et al. 2023, arXiv:2310.06825, "
                                  "section 2)")
    notes.append(f"sliding window of {cfg['sliding_window']} tokens: attention reads and the KV cache are capped at "
                 "it (formulations/costs.md WIN-1, WIN-2)")


def _tokenizer(kind: str, vocab: int, given: str | None, where: str) -> tuple[str, str]:
    """(tokenizer name, its source): `given` (--tokenizer), else the known tokenizer of model_type and
    vocab_size (padding ignored, catalog/tokenizers.toml), else `TYPE-vocabN`."""
    if given:
        return given, "given on the command line (--tokenizer)"
    known = tokenizer_for(kind, vocab)
    if known is None:
        return f"{kind}-vocab{vocab}", (f"{where}: model_type {kind} and vocab_size {vocab}, a tokenizer the "
                                        "catalog does not know (drafters must share it; --tokenizer names it)")
    padding = f", padded to {vocab} rows" if vocab > known.tokens else ""
    return known.name, (f"{where}: model_type {kind} and vocab_size {vocab}: the {known.name} tokenizer "
                        f"({known.tokens} tokens{padding}; catalog tokenizers.toml: {known.source})")


#: The mixture-of-experts fields of a catalog model entry, in the order an imported entry writes them.
MOE_FIELDS = ("experts", "experts_per_token", "shared_experts", "shared_expert_ffn")


def _experts(path: Path, cfg: dict, kind: str, integer, values: dict, sources: dict, keys: dict, where: str,
             notes: list[str]) -> None:
    """The MoE fields of an MoE config (formulations/moe.md): experts, experts per token, each routed
    expert's width as `ffn`, and the shared expert of Qwen2-MoE; every layer must be an MoE layer."""
    experts_key, width_key, shared_key = MOE_KEYS[kind]
    for key, dense_layers in (("mlp_only_layers", cfg.get("mlp_only_layers")),
                              ("decoder_sparse_step", cfg.get("decoder_sparse_step"))):
        if dense_layers not in (None, [], 1):
            raise ScenarioError(f"{path}: {key} {shown(dense_layers)}: layers with a dense FFN are not supported "
                                "(every layer of an MoE entry is priced as a mixture of experts)")
    integer("experts", (experts_key,))
    integer("experts_per_token", ("num_experts_per_tok",))
    integer("ffn", (width_key,))
    if shared_key is None:
        values["shared_experts"], values["shared_expert_ffn"] = 0, 0
        sources["shared_experts"] = sources["shared_expert_ffn"] = f"{where}: model_type {kind} (no shared expert)"
    else:
        integer("shared_expert_ffn", (shared_key,))
        values["shared_experts"] = 1
        sources["shared_experts"] = f"{where}: model_type {kind} (one shared expert of {shared_key})"
        keys["shared_experts"] = shared_key
    notes.append("the experts a pass of M tokens touches: uniform routing, E (1 - (1 - k/E)^M) (formulations/moe.md "
                 "MOE-1); add distinct_experts_measured = [[tokens, experts], ...] to price measured routing")
    if kind == "mixtral" or cfg.get("intermediate_size") is None:
        return
    notes.append(f"intermediate_size {shown(cfg['intermediate_size'])} (a dense layer's FFN) is unused: every "
                 f"layer is a mixture of experts of {width_key}")


def _checked_shape(path: Path, values: dict, keys: dict) -> ModelSpec:
    """The imported shape as a ModelSpec, checked by the catalog's one set of shape rules
    (`model_shape_problem`: ranges, heads a multiple of KV heads, attention width, parameter count);
    an error names the config key."""
    shape = ModelSpec(name="", nominal_params_b=0.0, source="", **{k: values[k] for k in (
        "family", "tokenizer", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "ffn_kind",
        "parallel_block", "vocab", "tied_embeddings", "bytes_per_param", *MOE_FIELDS) if k in values})
    problem = model_shape_problem(shape)
    if problem:
        field, what = problem
        where = f"{keys[field]} (the model's {field})" if field in keys else "the model's shape"
        raise ScenarioError(f"{path}: {where}: {what}")
    return shape


def _default_name(path: Path, cfg: dict) -> str:
    """`_name_or_path`'s last part (meta-llama/Llama-2-7b-hf -> llama-2-7b-hf), else the config's folder."""
    given = cfg.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given.strip().rstrip("/").split("/")[-1].lower()
    folder = path.absolute().parent.name
    if folder:
        return folder.lower()
    raise ScenarioError(f"{path}: give the model a name (--name)")


def import_hf_toml(path: str | Path, name: str | None = None, tokenizer: str | None = None) -> tuple[str, str]:
    """(model name, TOML text of its catalog entry), checked by the catalog loader before it is returned; for a
    draft head's config, (its kind, a scenario's `[[drafters]]` entry: `import_head.import_head_toml`)."""
    import tomllib

    from specpim_cp.catalog import build_catalog

    cfg = read_table(Path(path), "a Hugging Face config.json", syntax="JSON")
    if head_kind(cfg) is not None:  # a draft head: a scenario's [[drafters]] entry (catalog/import_head.py)
        return import_head_toml(path, cfg)
    model, notes = import_hf(path, name, tokenizer)
    text = model.to_toml(notes)
    build_catalog(tomllib.loads(text), {}, {})  # the entry loads as written (a bug here is ours, not the user's)
    return model.name, text
