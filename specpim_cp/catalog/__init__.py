"""Catalogs as data: models, devices (hosts and memory systems), default acceptance rates.

The TOML files beside this module are the source of truth; each entry carries a `source`.
A user extends a catalog by passing their own TOML with the same schema (`load_catalog(extra=...)`):
an entry of a user file adds a name or replaces the entry of that name whole; `based_on = "NAME"`
starts from an existing entry instead, so the file lists only the fields it changes (each with its own
source). Acceptance rates (pairs, families, default, tree_conditional_tail) are added or replaced one
key at a time. Every error names the file and the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from specpim_cp.catalog.entries import Catalog, HostSpec, MemorySpec, ModelSpec, NgramSpec
from specpim_cp.catalog.precision import PRECISIONS
from specpim_cp.errors import ScenarioError
from specpim_cp.files import read_table

# -- the values each numeric field accepts -------------------------------------------------------------
# Every number a catalog file, a Hugging Face config (`catalog import-hf`) or a `range_X` gives is checked
# against its field's range when it is read, so that pricing stays finite (no float overflow, no division
# by zero) and every exact-model coefficient fits CP-SAT's 64-bit rows. The ranges come from physics with
# wide margins (x100 to x10^5 around today's hardware and models); a value outside is a typo or a unit
# error, not a design point.


@dataclass(frozen=True)
class FieldLimit:
    """The values one numeric field accepts: `low` <= v <= `high` (strict at an `open` end), in `unit`."""

    low: float
    high: float
    unit: str = ""
    low_open: bool = False
    high_open: bool = False

    def holds(self, v: float) -> bool:
        """Compared, never converted: a 400-digit integer compares exactly, NaN fails, inf is outside."""
        low_ok = self.low < v if self.low_open else self.low <= v
        high_ok = v < self.high if self.high_open else v <= self.high
        return bool(low_ok and high_ok)

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return (f"{'(' if self.low_open else '['}{_number_text(self.low)}, {_number_text(self.high)}"
                f"{')' if self.high_open else ']'}{unit}")


def _number_text(x: float) -> str:
    """A limit as written in the code: 1e7 for a power of ten from 10^5, 67108864, 0.001."""
    if float(x).is_integer():
        n = int(x)
        digits = str(abs(n))
        return f"1e{len(digits) - 1}" if n >= 10**5 and digits.strip("0") == "1" else str(n)
    return f"{x:g}"


#: Decoder layers: released LLMs have at most ~130 (PaLM 540B: 118).
MAX_LAYERS = 10_000
#: Any matrix dimension of a model (hidden, FFN, vocabulary, heads x head_dim): released models stay below
#: 1e5 (FFN) and 3e5 (vocabulary); the fused q/k/v matrix of a catalog model is at most 3 x this wide.
MAX_MODEL_DIM = 10**7
#: Parameters of one model: 500x the largest announced (about 2e12); with 8 bytes each, 8 PB of weights.
MAX_PARAMETERS = 10**15
#: A model's position limit: 1e9 tokens, 1000x the longest context released (about 1e7 tokens); 0: none known.
MAX_POSITION = 10**9
#: Routed or shared experts per MoE layer: 50x the 2,048 of Switch-C (Fedus et al. 2022); Mixtral has 8,
#: Qwen3-30B-A3B 128, DeepSeek-V3 256.
MAX_EXPERTS = 10**5
#: Tokens of one pass a measured expert curve may name (`kernels.MAX_TOKENS`, the most a pass is priced at).
MAX_PASS_TOKENS = 10**6
#: Memory units per group and groups per device: 5 HBM stacks of 8-16 dies today. Every pim_units value
#: 0..units_per_group is an architecture the exact model prices, so this also bounds the design space.
MAX_UNITS = 1024
#: One memory unit's capacity: 64 TiB, 16,000x a 4 GiB DRAM die. With at most MAX_UNITS x MAX_UNITS units a
#: device holds at most 64 PiB, and eight devices' KiB (2^59) stay inside CP-SAT's 2^62 rows (CAP-1/2).
MAX_UNIT_CAPACITY_MIB = 1 << 26

#: Bandwidths: 1 MB/s .. 1 PB/s (a PIM lane 10-32 GB/s, an HBM stack 0.3-1 TB/s, an H100 3.35 TB/s).
BANDWIDTH_GBPS = FieldLimit(1e-3, 1e6, "GB/s")
#: Throughputs: 1 GFLOPS .. 1 EFLOPS per device (an H100: 989 TFLOPS), 1 MFLOPS .. 1 PFLOPS per PIM lane.
PEAK_TFLOPS = FieldLimit(1e-3, 1e6, "TFLOPS")
LANE_GFLOPS = FieldLimit(1e-3, 1e6, "GFLOPS")
#: Efficiencies (fractions of a peak): a thousandth .. all of it; below, times reach 1000x the roofline.
EFFICIENCY = FieldLimit(1e-3, 1.0)
#: Energy per bit or per MAC: 0 (included elsewhere) .. 10 nJ, 1000x a DRAM access (5-7 pJ/bit).
ENERGY_PJ = FieldLimit(0, 1e4, "pJ")
#: Fixed times per kernel, round or n-gram step: 0 .. 1 s (the catalog's are 0.2-7 us).
FIXED_TIME_NS = FieldLimit(0, 1e9, "ns")

#: The range of every numeric catalog field (by name; the names are unique across the sections), and of
#: the acceptance rates and sensitivity_delta of [pairs], [families] and the top-level keys.
FIELD_LIMITS: dict[str, FieldLimit] = {
    # [models.NAME]: the decoder shape (`model_shape_problem` adds the rules across fields)
    "layers": FieldLimit(1, MAX_LAYERS),
    "hidden": FieldLimit(1, MAX_MODEL_DIM),
    "heads": FieldLimit(1, MAX_MODEL_DIM),
    "kv_heads": FieldLimit(1, MAX_MODEL_DIM),
    "head_dim": FieldLimit(1, MAX_MODEL_DIM),
    "ffn": FieldLimit(1, MAX_MODEL_DIM),
    "vocab": FieldLimit(1, MAX_MODEL_DIM),
    "experts": FieldLimit(0, MAX_EXPERTS),  # 0: a dense model (formulations/moe.md)
    "experts_per_token": FieldLimit(0, MAX_EXPERTS),
    "shared_experts": FieldLimit(0, MAX_EXPERTS),
    "shared_expert_ffn": FieldLimit(0, MAX_MODEL_DIM),
    "bytes_per_param": FieldLimit(1, 8, "bytes"),  # INT8 .. FP64
    "nominal_params_b": FieldLimit(0, MAX_PARAMETERS / 1e9, "billion"),
    "max_position": FieldLimit(0, MAX_POSITION, "tokens"),  # 0: no position limit known
    "sliding_window": FieldLimit(0, MAX_POSITION, "tokens"),  # 0: full attention (no window)
    # [ngrams.NAME]
    "step_ns": FIXED_TIME_NS,
    "energy_nj_per_step": FieldLimit(0, 1e9, "nJ"),  # 1 J per step; a CPU lookup costs about 100 nJ
    # [hosts.NAME]
    "peak_fp16_tflops": PEAK_TFLOPS,
    "kernel_table_bandwidth_gbps": BANDWIDTH_GBPS,
    "idle_power_mw": FieldLimit(0, 1e7, "mW"),  # 10 kW per device; GPUs idle at 30-75 W
    "onchip_energy_pj_per_bit": ENERGY_PJ,
    "mac_energy_pj": ENERGY_PJ,
    "link_bandwidth_gbps": BANDWIDTH_GBPS,
    "link_energy_pj_per_bit": ENERGY_PJ,
    "sync_latency_ns": FIXED_TIME_NS,
    "launch_overhead_ns": FIXED_TIME_NS,
    "attention_bandwidth_efficiency": EFFICIENCY,
    "compute_efficiency": EFFICIENCY,
    # [memories.NAME]
    "groups": FieldLimit(1, MAX_UNITS),
    "units_per_group": FieldLimit(1, MAX_UNITS),
    "units_per_channel": FieldLimit(1, MAX_UNITS),
    "group_external_bandwidth_gbps": BANDWIDTH_GBPS,
    "normal_unit_capacity_mib": FieldLimit(1, MAX_UNIT_CAPACITY_MIB, "MiB"),
    "pim_unit_capacity_mib": FieldLimit(1, MAX_UNIT_CAPACITY_MIB, "MiB"),
    "pim_lanes_per_unit": FieldLimit(1, 65536),  # 32 processing units per die or package today
    "pim_lane_bandwidth_gbps": BANDWIDTH_GBPS,
    "pim_lane_gflops": LANE_GFLOPS,
    "pim_efficiency": EFFICIENCY,
    "pim_mode_switch_ns": FIXED_TIME_NS,
    "external_energy_pj_per_bit": ENERGY_PJ,
    "internal_energy_pj_per_bit": ENERGY_PJ,
    "pim_mac_energy_pj": ENERGY_PJ,
    # acceptance rates ([pairs], [families], default, tree_conditional_tail) and their +- span
    "acceptance": FieldLimit(0, 1, high_open=True),
    "sensitivity_delta": FieldLimit(0, 1, high_open=True),
}
_SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "bytes_per_param",
                 "nominal_params_b", "experts", "experts_per_token", "shared_experts", "shared_expert_ffn")


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def shown(v: object) -> str:
    """`v` for an error message: a huge integer as its magnitude (its digits may be thousands long)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**15:
        return f"{'-' if v < 0 else ''}an integer of about 10^{int(abs(v).bit_length() * 0.30103)}"
    if isinstance(v, list):
        return "[" + ", ".join(shown(x) for x in v) + "]"
    return repr(v)


def active_text(m: ModelSpec, total: int | None = None) -> str:
    """A model's parameters one token uses, as `catalog models` and `import-hf` show them: '12.9B of 46.7B'
    for a mixture of experts (`total`: the count to compare with, default `m.parameter_count()`), else the
    parameter count alone."""
    total = m.parameter_count() if total is None else total
    active = m.active_parameter_count() + (total - m.parameter_count())
    return f"{active / 1e9:.3g}B of {total / 1e9:.3g}B" if m.is_moe else f"{total / 1e9:.3g}B"


def field_problem(field_name: str, value: float) -> str | None:
    """Why `value` cannot be numeric field `field_name`'s (`FIELD_LIMITS`), or None when it can: the one
    check every reader of a catalog number uses (catalog files, `range_X`, `catalog import-hf`)."""
    limit = FIELD_LIMITS[field_name]
    if limit.holds(value):
        return None
    return f"must be in {limit.text()}, got {shown(value)}"


#: Fields that are names or labels, not constants: they need no source.
_NAME_FIELDS = ("label", "family", "tokenizer", "ffn_kind")


def _split_sources(entry: dict, where: str) -> tuple[dict, dict, dict]:
    """(values, sources, ranges) of a catalog entry; every constant must have a source.

    `source_X` covers every field whose name starts with X (`source_link` covers `link_bandwidth_gbps`
    and `link_energy_pj_per_bit`); `range_X = [low, high]` gives the plausible span of field X that
    `specpim-cp sensitivity` moves it over (checked by `_checked_ranges` once the values are).
    """
    values = {k: v for k, v in entry.items() if not k.startswith(("source", "range_"))}
    sources = {k: v for k, v in entry.items() if k.startswith("source")}
    ranges = {k[len("range_"):]: v for k, v in entry.items() if k.startswith("range_")}
    for k, v in sources.items():
        if not isinstance(v, str) or not v.strip():
            raise ScenarioError(f"catalog: {where}.{k} must be a non-empty text naming the source")
    covered = [k[len("source_"):] for k in sources if k.startswith("source_")]
    for k in values:
        if k in _NAME_FIELDS or "source" in sources:
            continue
        if not any(k.startswith(c) for c in covered):
            raise ScenarioError(f"catalog: {where}.{k} has no source (add source_{k} = \"...\")")
    for k in ranges:
        if k not in values:
            raise ScenarioError(f"catalog: {where}.range_{k} names no field of the entry")
    return values, sources, ranges


def _checked_ranges(where: str, values: dict, ranges: dict) -> dict[str, tuple[float, float]]:
    """`range_X = [low, high]` as (low, high): two numbers around X's value, both inside the values
    field X accepts (`field_problem`), so `sensitivity` only moves a constant where it can be priced."""
    out = {}
    for k, r in ranges.items():
        if k not in FIELD_LIMITS:
            raise ScenarioError(f"catalog: {where}.range_{k}: {k} is not a numeric constant, so it takes no range")
        if not (isinstance(r, list) and len(r) == 2 and all(_is_number(x) for x in r)):
            raise ScenarioError(f"catalog: {where}.range_{k} must be [low, high] (two numbers), got {shown(r)}")
        for end, x in zip(("low", "high"), r):
            problem = field_problem(k, x)
            if problem:
                raise ScenarioError(f"catalog: {where}.range_{k}: the {end} end {problem}")
        if not r[0] <= values[k] <= r[1]:
            raise ScenarioError(f"catalog: {where}.range_{k} must be [low, high] around {shown(values[k])}, "
                                f"got {shown(r)}")
        out[k] = (float(r[0]), float(r[1]))
    return out


LOADER_FIELDS = ("name", "source", "sources", "ranges", "slice_of")  # set by the loader, not written in an entry
_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a text"}


def _make(cls, name: str, values: dict, where: str, **loader):
    """A catalog dataclass from an entry's values; an unknown or missing field, a value of the wrong
    type or one outside the values its field accepts (`FIELD_LIMITS`) is an error naming the field."""
    known = {f.name: f for f in dataclasses.fields(cls) if f.name not in LOADER_FIELDS}
    for k in values:
        if k not in known:
            raise ScenarioError(f"catalog: {where}.{k}: unknown field (known: {', '.join(known)})")
    for k, f in known.items():
        if k not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ScenarioError(f"catalog: {where}.{k}: missing (an entry needs {', '.join(known)})")
    out = {}
    for k, v in values.items():
        kind = known[k].type
        ok = {"int": isinstance(v, int) and not isinstance(v, bool), "float": _is_number(v),
              "bool": isinstance(v, bool), "str": isinstance(v, str)}.get(kind, True)
        if not ok:
            raise ScenarioError(f"catalog: {where}.{k}: must be {_TYPE_WORDS[kind]}, got {shown(v)}")
        if kind in ("int", "float"):
            problem = field_problem(k, v)
            if problem:
                raise ScenarioError(f"catalog: {where}.{k}: {problem}")
            v = float(v) if kind == "float" else v
        out[k] = v
    return cls(name=name, **out, **loader)


def _joined_source(sources: dict) -> str:
    """A model's sources as one line: the entry's `source`, then per-field sources grouped by their text
    up to the first '): ' (an imported config's path), e.g. `config.json (...): layers = num_hidden_layers`."""
    groups: dict[str, list[str]] = {}
    for k, v in sources.items():
        if k == "source":
            groups.setdefault(v, [])
            continue
        field_name = k[len("source_"):]
        cut = v.find("): ")
        if cut >= 0:
            groups.setdefault(v[:cut + 1], []).append(f"{field_name} = {v[cut + 3:]}")
        else:
            groups.setdefault(v, []).append(field_name)
    return "; ".join(f"{head}: {', '.join(items)}" if items else head for head, items in groups.items())


def model_shape_problem(m: ModelSpec) -> tuple[str | None, str] | None:
    """The first rule model shape `m` breaks, as (field or None for the whole shape, what is wrong), or
    None. The one set of shape rules, for catalog entries and `catalog import-hf` alike: every number in
    its `FIELD_LIMITS` range, heads a multiple of kv_heads (grouped-query attention shares each KV head
    among heads / kv_heads query heads), the attention width heads x head_dim at most MAX_MODEL_DIM (it
    is a matrix dimension as hidden is) and at most MAX_PARAMETERS parameters."""
    for k in _SHAPE_FIELDS:
        problem = field_problem(k, getattr(m, k))
        if problem:
            return k, problem
    if m.kv_heads > m.heads or m.heads % m.kv_heads:
        return "kv_heads", (f"{m.kv_heads} KV heads must divide the {m.heads} attention heads (each KV head "
                            "serves heads / kv_heads query heads)")
    if m.q_dim > MAX_MODEL_DIM:
        return "head_dim", (f"heads x head_dim = {m.heads} x {m.head_dim} = {m.q_dim:,} exceeds "
                            f"{_number_text(MAX_MODEL_DIM)} (the attention width is a matrix dimension, as hidden is)")
    problem = _experts_problem(m)
    if problem:
        return problem
    params = m.parameter_count()
    if params > MAX_PARAMETERS:
        return None, (f"{params:.3g} parameters (layers x (attention + FFN) + embeddings) exceed "
                      f"{_number_text(MAX_PARAMETERS)} (500x the largest announced model)")
    return None


def _experts_problem(m: ModelSpec) -> tuple[str, str] | None:
    """The first mixture-of-experts rule `m` breaks (formulations/moe.md): 1 <= experts_per_token <=
    experts, shared experts with their width, and a measured curve [MOE-2] of (tokens, experts) points
    with tokens rising and experts non-decreasing between k and min(experts, tokens x k)."""
    e, k = m.experts, m.experts_per_token
    if not m.is_moe:
        for name, value in (("experts_per_token", k), ("shared_experts", m.shared_experts),
                            ("shared_expert_ffn", m.shared_expert_ffn)):
            if value:
                return name, f"{value} needs routed experts (experts = 0 is a dense model)"
        if m.distinct_experts_measured:
            return "distinct_experts_measured", "a measured curve needs routed experts (experts = 0 is a dense model)"
        return None
    if k < 1:
        return "experts_per_token", f"a mixture of experts routes each token to 1 .. {e} experts, got {k}"
    if k > e:
        return "experts_per_token", f"{k} experts per token exceed the {e} experts"
    if m.shared_experts and not m.shared_expert_ffn:
        return "shared_expert_ffn", f"{m.shared_experts} shared experts need their intermediate size (>= 1)"
    if m.shared_expert_ffn and not m.shared_experts:
        return "shared_experts", f"shared_expert_ffn = {m.shared_expert_ffn} but no shared experts (0)"
    last_tokens, last_experts = 0, 0.0
    for tokens, touched in m.distinct_experts_measured:
        what = f"point [{shown(tokens)}, {shown(touched)}]"
        if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= MAX_PASS_TOKENS:
            return "distinct_experts_measured", f"{what}: tokens must be an integer in [1, {MAX_PASS_TOKENS}]"
        if tokens <= last_tokens:
            return "distinct_experts_measured", f"{what}: tokens must rise from point to point"
        high = min(e, tokens * k)
        if not k <= touched <= high:
            return "distinct_experts_measured", (f"{what}: a pass of {tokens} tokens touches between {k} (one "
                                                 f"token's experts) and {high} distinct experts")
        if touched < last_experts:
            return "distinct_experts_measured", f"{what}: distinct experts cannot fall as tokens rise"
        last_tokens, last_experts = tokens, touched
    return None


def _measured_pairs(m: ModelSpec, where: str) -> ModelSpec:
    """`distinct_experts_measured` as a tuple of (tokens, experts) pairs (TOML gives lists of lists)."""
    v = m.distinct_experts_measured
    if isinstance(v, list | tuple) and not v:
        return dataclasses.replace(m, distinct_experts_measured=())
    if not isinstance(v, list | tuple) or any(
            not isinstance(p, list | tuple) or len(p) != 2 or not all(_is_number(x) for x in p) for p in v):
        raise ScenarioError(f"catalog: {where}.distinct_experts_measured: must be a list of [tokens, experts] "
                            f"pairs, got {shown(v)}")
    return dataclasses.replace(m, distinct_experts_measured=tuple((p[0], float(p[1])) for p in v))


def _check_model(m: ModelSpec) -> None:
    where = f"catalog: models.{m.name}"
    if m.ffn_kind not in ("two-matrix", "gated"):
        raise ScenarioError(f"{where}.ffn_kind: must be 'two-matrix' or 'gated', got '{m.ffn_kind}'")
    problem = model_shape_problem(m)
    if problem:
        field_name, what = problem
        raise ScenarioError(f"{where}.{field_name}: {what}" if field_name else f"{where}: {what}")


def _check_host(h: HostSpec) -> None:
    from specpim_cp.kernels import ROOFLINE, known_gpus

    tables = [*known_gpus(), ROOFLINE]
    if h.kernel_table not in tables:
        raise ScenarioError(f"catalog: hosts.{h.name}.kernel_table: unknown '{h.kernel_table}' (measured tables: "
                            f"{', '.join(tables[:-1])}; or \"{ROOFLINE}\" for a host without measurements)")


def _check_rates(table: dict, where: str, table_key: str, table_source: object) -> tuple[dict, dict]:
    """Acceptance rates are in [0, 1); pair and family keys read DRAFTER>VERIFIER. Every rate has a source,
    its own `"source_KEY"` or the table's (`table_key`, e.g. source_pairs); `"range_KEY" = [low, high]` is
    its plausible span, around it and inside [0, 1), which `sensitivity` moves it over. Returns the
    (ranges, sources) of the rates by key."""
    table_source = table.get(table_key, table_source)
    ranges, sources = {}, {}
    for k, v in table.items():
        if k.startswith(("source", "range_")):
            continue
        if k.count(">") != 1 or not all(k.split(">")):
            raise ScenarioError(f"catalog: {where}.\"{k}\": a key reads DRAFTER>VERIFIER (e.g. \"opt-125m>opt-13b\")")
        problem = field_problem("acceptance", v) if _is_number(v) else f"must be a number, got {shown(v)}"
        if problem:
            raise ScenarioError(f"catalog: {where}.\"{k}\": an acceptance rate {problem}")
        source = table.get(f"source_{k}", table_source)
        if not isinstance(source, str) or not source.strip():
            raise ScenarioError(f"catalog: {where}.\"{k}\" has no source (add \"source_{k}\" = \"...\", or "
                                f"{table_key} for the whole table)")
        sources[k] = source
        if f"range_{k}" in table:
            ranges[k] = _rate_range(f"{where}.\"range_{k}\"", table[f"range_{k}"], v)
    for k in table:
        named = k[len("range_"):] if k.startswith("range_") else k[len("source_"):] if k.startswith("source_") else None
        if named is not None and k != table_key and named not in sources:
            raise ScenarioError(f"catalog: {where}.\"{k}\" names no rate of the table")
    return ranges, sources


def _rate_range(where: str, r: object, value: float) -> tuple[float, float]:
    """`range_KEY = [low, high]` of an acceptance rate: two rates in [0, 1) around `value`."""
    if not (isinstance(r, list) and len(r) == 2 and all(_is_number(x) for x in r)):
        raise ScenarioError(f"catalog: {where} must be [low, high] (two numbers), got {shown(r)}")
    for end, x in zip(("low", "high"), r):
        problem = field_problem("acceptance", x)
        if problem:
            raise ScenarioError(f"catalog: {where}: the {end} end {problem}")
    if not r[0] <= value <= r[1]:
        raise ScenarioError(f"catalog: {where} must be [low, high] around {shown(value)}, got {shown(r)}")
    return float(r[0]), float(r[1])


def _shipped(name: str) -> dict:
    """One of the catalog TOML files beside this module."""
    return tomllib.loads(resources.files("specpim_cp.catalog").joinpath(name).read_text(encoding="utf-8"))


def _check_memory(m: MemorySpec) -> None:
    where = f"catalog: memories.{m.name}"
    bad = [p for p in m.pim_precisions if p not in PRECISIONS]
    if bad or not m.pim_precisions:
        raise ScenarioError(f"{where}.pim_precisions: a list of {', '.join(PRECISIONS)}, got {shown(list(m.pim_precisions))}")
    if m.pim_arrangement not in ("spread", "packed"):
        raise ScenarioError(f"{where}.pim_arrangement: must be 'spread' or 'packed', got '{m.pim_arrangement}'")
    if m.units_per_group % m.units_per_channel:
        raise ScenarioError(f"{where}.units_per_channel: must divide units_per_group ({m.units_per_group})")


def _precision_tuple(v: object) -> tuple:
    """A memory's `pim_precisions` as given (a TOML list) made hashable; `_check_memory` checks the names."""
    return tuple(v) if isinstance(v, (list, tuple)) else (v,)


def _check_native_memories(hosts: dict[str, HostSpec], memory_names: Iterable[str]) -> None:
    """Every host's `native_memory` names a memory type (of this file or one merged before it)."""
    known = sorted(set(memory_names))
    for h in hosts.values():
        if h.native_memory and h.native_memory not in known:
            raise ScenarioError(f"catalog: hosts.{h.name}.native_memory: unknown memory type '{h.native_memory}' "
                                f"(known: {', '.join(known)})")


def build_catalog(models: dict, devices: dict, acceptance: dict) -> Catalog:
    model_specs = {}
    for n, e in models.get("models", {}).items():
        values, sources, ranges = _split_sources(e, f"models.{n}")
        if not sources:
            raise ScenarioError(f"catalog: models.{n} has no source (add source = \"...\" or source_X per field)")
        if ranges:
            raise ScenarioError(f"catalog: models.{n}.range_{next(iter(ranges))}: a model shape takes no range")
        source = _joined_source(sources)
        model_specs[n] = _make(ModelSpec, n, values, f"models.{n}", source=source, sources=sources)
        model_specs[n] = _measured_pairs(model_specs[n], f"models.{n}")
        _check_model(model_specs[n])
    ngram_specs = {}
    for n, e in models.get("ngrams", {}).items():
        values, sources, ranges = _split_sources(e, f"ngrams.{n}")
        if ranges:
            raise ScenarioError(f"catalog: ngrams.{n}.range_{next(iter(ranges))}: an n-gram entry takes no range "
                                "(sensitivity moves host and memory constants only)")
        ngram_specs[n] = _make(NgramSpec, n, values, f"ngrams.{n}", source="; ".join(sources.values()))
    hosts = {}
    for n, e in devices.get("hosts", {}).items():
        values, sources, ranges = _split_sources(e, f"hosts.{n}")
        hosts[n] = _make(HostSpec, n, values, f"hosts.{n}", sources=sources)
        hosts[n] = dataclasses.replace(hosts[n], ranges=_checked_ranges(f"hosts.{n}", values, ranges))
        _check_host(hosts[n])
    memories = {}
    for n, e in devices.get("memories", {}).items():
        if "based_on" in e:  # an entry of the same file it starts from (user files resolve theirs on merge)
            e = _resolve_based_on("memories", e, devices, f"memories.{n}")
        values, sources, ranges = _split_sources(e, f"memories.{n}")
        memories[n] = _make(MemorySpec, n, values, f"memories.{n}", sources=sources)
        memories[n] = dataclasses.replace(memories[n], ranges=_checked_ranges(f"memories.{n}", values, ranges),
                                          pim_precisions=_precision_tuple(memories[n].pim_precisions))
        _check_memory(memories[n])
    if "default" in acceptance and not acceptance.get("source_default"):
        raise ScenarioError("catalog: acceptance default has no source (source_default)")
    rate_ranges, rate_sources = {}, {"default": acceptance.get("source_default") or "built-in fallback"}
    for section in _RATE_SECTIONS:
        ranges, sources = _check_rates(acceptance.get(section, {}), f"acceptance {section}", f"source_{section}",
                                       acceptance.get(f"source_{section}"))
        rate_ranges.update({f"{section}.{k}": r for k, r in ranges.items()})
        rate_sources.update({f"{section}.{k}": s for k, s in sources.items()})
    for key, default, limit in (("default", 0.6, "acceptance"), ("sensitivity_delta", 0.1, "sensitivity_delta")):
        v = acceptance.get(key, default)
        problem = field_problem(limit, v) if _is_number(v) else f"must be a number, got {shown(v)}"
        if problem:
            raise ScenarioError(f"catalog: acceptance {key}: {problem}")
    if "range_default" in acceptance:
        if "default" not in acceptance:
            raise ScenarioError("catalog: acceptance range_default needs default (the rate it spans) in the same file")
        rate_ranges["default"] = _rate_range("acceptance range_default", acceptance["range_default"],
                                             acceptance["default"])
    pairs = {k: float(v) for k, v in acceptance.get("pairs", {}).items() if not k.startswith(("source", "range_"))}
    fams = {k: float(v) for k, v in acceptance.get("families", {}).items() if not k.startswith(("source", "range_"))}
    delta = acceptance.get("sensitivity_delta", 0.1)
    if "sensitivity_delta" in acceptance and not acceptance.get("source_sensitivity_delta"):
        raise ScenarioError("catalog: acceptance sensitivity_delta has no source (source_sensitivity_delta)")
    tail = acceptance.get("tree_conditional_tail", [])
    if tail and not acceptance.get("source_tree_conditional_tail"):
        raise ScenarioError("catalog: acceptance tree_conditional_tail has no source (source_tree_conditional_tail)")
    if not isinstance(tail, list) or any(not _is_number(c) or field_problem("acceptance", c) for c in tail):
        raise ScenarioError("catalog: acceptance tree_conditional_tail must be a list of rates in "
                            f"{FIELD_LIMITS['acceptance'].text()}")
    return Catalog(model_specs, ngram_specs, hosts, memories, float(acceptance.get("default", 0.6)), pairs, fams,
                   float(delta), tuple(float(c) for c in tail), acceptance_ranges=rate_ranges,
                   acceptance_sources=rate_sources)


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    cat = build_catalog(_shipped("models.toml"), _shipped("devices.toml"), _shipped("acceptance.toml"))
    _check_native_memories(cat.hosts, cat.memories)
    return cat


#: Where each section of a user catalog file goes: the shipped file it extends.
_ENTRY_SECTIONS = {"models": "models", "ngrams": "models", "hosts": "devices", "memories": "devices"}
_RATE_SECTIONS = ("pairs", "families")
_ACCEPTANCE_KEYS = ("default", "sensitivity_delta", "tree_conditional_tail")


def file_digest(path: str | Path) -> str:
    """SHA-256 of a catalog file's bytes (what a scenario's inputs hash includes, not the path)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise ScenarioError(f"catalog {path}: cannot read ({exc.strerror or exc})") from None


def _read_user(path: Path) -> dict:
    """A user catalog file as TOML, its sections checked for shape (errors name the file)."""
    data = read_table(path, "a catalog", syntax="TOML", label=f"catalog {path}")
    allowed = [*_ENTRY_SECTIONS, *_RATE_SECTIONS, *_ACCEPTANCE_KEYS]
    sourced = [f"source_{k}" for k in (*_RATE_SECTIONS, *_ACCEPTANCE_KEYS)] + ["range_default"]
    for key, value in data.items():
        if key not in allowed and key not in sourced:
            raise ScenarioError(f"catalog {path}: unknown section or key '{key}' (known: {', '.join(allowed)}, "
                                "each acceptance key with its source_KEY)")
        if key in _ENTRY_SECTIONS:
            if not isinstance(value, dict):
                raise ScenarioError(f"catalog {path}: {key} must be a table of entries ([{key}.NAME])")
            for name, entry in value.items():
                if not isinstance(entry, dict):
                    raise ScenarioError(f"catalog {path}: {key}.{name} must be a table ([{key}.\"{name}\"])")
        if key in _RATE_SECTIONS and not isinstance(value, dict):
            raise ScenarioError(f"catalog {path}: {key} must be a table of \"DRAFTER>VERIFIER\" = rate")
    return data


def _resolve_based_on(section: str, entry: dict, known: dict, where: str, depth: int = 0) -> dict:
    """An entry with `based_on = "BASE"`: BASE's fields and sources, the entry's own fields (each with
    its own source, checked before) replacing them; a replaced field drops BASE's range for it."""
    own = {k: v for k, v in entry.items() if k != "based_on"}
    _split_sources(own, where)  # every field the file sets carries the file's source
    base_name = entry["based_on"]
    if not isinstance(base_name, str) or base_name not in known.get(section, {}):
        raise ScenarioError(f"catalog: {where}.based_on: no {section} entry '{base_name}' to start from "
                            f"(known: {', '.join(sorted(known.get(section, {})))})")
    out = dict(known[section][base_name])
    if "based_on" in out:  # a base that starts from another entry itself (hbm3 from hbm3-pim)
        if out["based_on"] == base_name or depth > 8:
            raise ScenarioError(f"catalog: {where}.based_on: '{base_name}' starts from itself")
        out = _resolve_based_on(section, out, known, f"{section}.{base_name}", depth + 1)
    for k in own:
        if not k.startswith(("source", "range_")):
            out.pop(f"range_{k}", None)
            out.pop(f"source_{k}", None)
    out.update(own)
    return out


def _merge_user(path: Path, data: dict, models: dict, devices: dict, acceptance: dict) -> None:
    """Check one user file on its own (so an error names it), then merge it over the catalog so far."""
    targets = {"models": models, "devices": devices}
    own = {"models": {}, "devices": {}}
    try:
        for section, shipped in _ENTRY_SECTIONS.items():
            for name, entry in data.get(section, {}).items():
                where = f"{section}.{name}"
                if "based_on" in entry:
                    entry = _resolve_based_on(section, entry, targets[shipped], where)
                own[shipped].setdefault(section, {})[name] = entry
        own_acceptance = {k: v for k, v in data.items() if k not in _ENTRY_SECTIONS}
        for section in _RATE_SECTIONS:  # a top-level source_pairs belongs to the [pairs] table
            if f"source_{section}" in own_acceptance and section in own_acceptance:
                own_acceptance[section] = {**own_acceptance[section],
                                           f"source_{section}": own_acceptance.pop(f"source_{section}")}
        own_catalog = build_catalog(own["models"], own["devices"], own_acceptance)
        _check_native_memories(own_catalog.hosts, [*devices.get("memories", {}), *own_catalog.memories])
    except ScenarioError as exc:
        msg = str(exc)
        raise ScenarioError(f"catalog {path}: {msg.removeprefix('catalog: ')}") from None
    for shipped, sections in own.items():
        for section, entries in sections.items():
            targets[shipped].setdefault(section, {}).update(entries)
    for section in _RATE_SECTIONS:
        table = dict(own_acceptance.get(section, {}))
        if not table:
            continue
        merged = acceptance.setdefault(section, {})
        key = f"source_{section}"
        if key in table:
            note = f"{path}: {table.pop(key)}"
            merged[key] = f"{merged[key]}; {note}" if merged.get(key) else note
        for k in list(table):
            if k.startswith("source_"):
                table[k] = f"{path}: {table[k]}"
            elif not k.startswith("range_"):  # a replaced rate drops the built-in rate's own source and range
                merged.pop(f"source_{k}", None)
                merged.pop(f"range_{k}", None)
        merged.update(table)
    for key in _ACCEPTANCE_KEYS:
        if key in own_acceptance:
            acceptance[key] = own_acceptance[key]
            acceptance[f"source_{key}"] = own_acceptance.get(f"source_{key}")
    if "default" in own_acceptance:  # a replaced default drops the built-in range unless the file gives one
        acceptance.pop("range_default", None)
        if "range_default" in own_acceptance:
            acceptance["range_default"] = own_acceptance["range_default"]


def _stat_key(path: str | Path) -> tuple[str, int, int]:
    """A cache key that changes when the file does (a missing file keys as -1 and fails when loaded)."""
    try:
        st = Path(path).stat()
        return str(path), st.st_mtime_ns, st.st_size
    except OSError:
        return str(path), -1, -1


@lru_cache(maxsize=16)
def _load_files(keys: tuple[tuple[str, int, int], ...]) -> Catalog:
    models = _shipped("models.toml")
    devices = _shipped("devices.toml")
    acceptance = _shipped("acceptance.toml")
    for path, _, _ in keys:
        _merge_user(Path(path), _read_user(Path(path)), models, devices, acceptance)
    cat = build_catalog(models, devices, acceptance)
    return dataclasses.replace(cat, files=tuple(path for path, _, _ in keys))


def load_catalog(extra: Sequence[str | Path] | None = None) -> Catalog:
    """The default catalog with the entries of user TOML files (same schema) added or replacing, in order.

    Each file is checked on its own first: a missing file, bad TOML, an unknown section, an entry without
    a source or a malformed value raises ScenarioError naming the file and the field. Cached per file
    state (path, modification time, size).
    """
    if not extra:
        return default_catalog()
    return _load_files(tuple(_stat_key(p) for p in extra))
