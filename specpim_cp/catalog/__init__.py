"""Catalogs as data: models, devices (hosts and memory systems), default acceptance rates.

The TOML files beside this module are the source of truth; each entry carries a `source`.
A user extends a catalog by passing their own TOML with the same schema (`load_catalog(extra=...)`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tomllib

from specpim_cp.errors import ScenarioError

MIB = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    tokenizer: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    ffn_kind: str  # "two-matrix" | "gated"
    parallel_block: bool
    vocab: int
    tied_embeddings: bool
    bytes_per_param: int
    nominal_params_b: float
    source: str

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def parameter_count(self) -> int:
        """Parameters of the decoder layers, LM head and input embedding (counted once when tied)."""
        d = self.hidden
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        ffn = d * self.ffn * (3 if self.ffn_kind == "gated" else 2)
        embed = self.vocab * d * (1 if self.tied_embeddings else 2)
        return self.layers * (attn + ffn) + embed


@dataclass(frozen=True)
class NgramSpec:
    name: str
    step_ns: int
    energy_nj_per_step: int
    source: str


@dataclass(frozen=True)
class HostSpec:
    """A host processor (GPU class). Energy: idle power for the time a device is powered, plus per byte
    the host streams (DRAM access at the memory's pJ/bit, on-chip movement at `onchip_energy_pj_per_bit`)
    and per MAC."""

    name: str
    peak_fp16_tflops: float
    kernel_table: str
    kernel_table_bandwidth_gbps: float
    idle_power_mw: int
    onchip_energy_pj_per_bit: float
    mac_energy_pj: float
    link_bandwidth_gbps: float
    link_energy_pj_per_bit: float
    sync_latency_ns: int
    launch_overhead_ns: int
    attention_bandwidth_efficiency: float
    compute_efficiency: float
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    ranges: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class MemorySpec:
    """A device's memory system: `groups` x `units_per_group` units (HBM: stacks x dies, GDDR: chips x
    packages); `units_per_channel` units share one channel group (HBM2 8-Hi: dies pair by stack ID)."""

    name: str
    label: str
    groups: int
    units_per_group: int
    units_per_channel: int
    pim_arrangement: str  # "spread": PIM units take one per channel group first; "packed": fill groups
    group_external_bandwidth_gbps: float
    normal_unit_capacity_mib: int
    pim_unit_capacity_mib: int
    pim_lanes_per_unit: int
    pim_lane_bandwidth_gbps: float
    pim_lane_gflops: float
    pim_efficiency: float
    pim_mode_switch_ns: int
    external_energy_pj_per_bit: float
    internal_energy_pj_per_bit: float
    pim_mac_energy_pj: float
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    ranges: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def max_pim_units(self) -> int:
        return self.units_per_group

    @property
    def unit_external_bandwidth_gbps(self) -> float:
        return self.group_external_bandwidth_gbps / self.units_per_group


@dataclass(frozen=True)
class Catalog:
    models: dict[str, ModelSpec]
    ngrams: dict[str, NgramSpec]
    hosts: dict[str, HostSpec]
    memories: dict[str, MemorySpec]
    acceptance_default: float
    acceptance_pairs: dict[str, float]
    acceptance_families: dict[str, float]
    acceptance_sensitivity_delta: float = 0.1  # +- span of every acceptance rate in `sensitivity`

    def model(self, name: str, field_name: str = "model") -> ModelSpec:
        if name not in self.models:
            raise ScenarioError(f"{field_name}: unknown model '{name}' (known: {', '.join(sorted(self.models))})")
        return self.models[name]

    def host(self, name: str) -> HostSpec:
        if name not in self.hosts:
            raise ScenarioError(f"host: unknown host '{name}' (known: {', '.join(sorted(self.hosts))})")
        return self.hosts[name]

    def memory(self, name: str, field_name: str = "memory_types") -> MemorySpec:
        if name not in self.memories:
            raise ScenarioError(
                f"{field_name}: unknown memory type '{name}' (known: {', '.join(sorted(self.memories))})"
            )
        return self.memories[name]

    def family_of(self, name: str) -> str:
        return "ngram" if name in self.ngrams else self.models[name].family

    def default_acceptance(self, drafter: str, verifier: str) -> float:
        """Exact pair, then family pair, then the catalog default (all marked as assumptions)."""
        pair = f"{drafter}>{verifier}"
        if pair in self.acceptance_pairs:
            return self.acceptance_pairs[pair]
        fam_d = self.family_of(drafter)
        fam_v = self.family_of(verifier)
        for key in (f"{fam_d}>{fam_v}", f"{fam_d}>any"):
            if key in self.acceptance_families:
                return self.acceptance_families[key]
        return self.acceptance_default


#: Fields that are names or labels, not constants: they need no source.
_NAME_FIELDS = ("label", "family", "tokenizer", "ffn_kind")


def _split_sources(entry: dict, where: str) -> tuple[dict, dict, dict]:
    """(values, sources, ranges) of a catalog entry; every constant must have a source.

    `source_X` covers every field whose name starts with X (`source_link` covers `link_bandwidth_gbps`
    and `link_energy_pj_per_bit`); `range_X = [low, high]` gives the plausible span of field X that
    `specpim-cp sensitivity` moves it over (low <= value <= high).
    """
    values = {k: v for k, v in entry.items() if not k.startswith(("source", "range_"))}
    sources = {k: v for k, v in entry.items() if k.startswith("source")}
    ranges = {k[len("range_"):]: v for k, v in entry.items() if k.startswith("range_")}
    covered = [k[len("source_"):] for k in sources if k.startswith("source_")]
    for k in values:
        if k in _NAME_FIELDS or "source" in sources:
            continue
        if not any(k.startswith(c) for c in covered):
            raise ScenarioError(f"catalog: {where}.{k} has no source (add source_{k} = \"...\")")
    for k, r in ranges.items():
        if k not in values:
            raise ScenarioError(f"catalog: {where}.range_{k} names no field of the entry")
        if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int | float) for x in r)
                and r[0] <= values[k] <= r[1]):
            raise ScenarioError(f"catalog: {where}.range_{k} must be [low, high] around {values[k]}, got {r}")
    return values, sources, {k: (float(r[0]), float(r[1])) for k, r in ranges.items()}


def _read(path: Path | None, name: str) -> dict:
    if path is None:
        return tomllib.loads(resources.files("specpim_cp.catalog").joinpath(name).read_text())
    return tomllib.loads(Path(path).read_text())


def _check_memory(m: MemorySpec) -> None:
    where = f"catalog: memories.{m.name}"
    if m.pim_arrangement not in ("spread", "packed"):
        raise ScenarioError(f"{where}.pim_arrangement: must be 'spread' or 'packed', got '{m.pim_arrangement}'")
    if m.units_per_channel < 1 or m.units_per_group % m.units_per_channel:
        raise ScenarioError(f"{where}.units_per_channel: must divide units_per_group ({m.units_per_group})")
    if not 0 < m.pim_efficiency <= 1:
        raise ScenarioError(f"{where}.pim_efficiency: must be in (0, 1], got {m.pim_efficiency}")


def build_catalog(models: dict, devices: dict, acceptance: dict) -> Catalog:
    try:
        model_specs = {}
        for n, e in models.get("models", {}).items():
            if not str(e.get("source", "")).strip():
                raise ScenarioError(f"catalog: models.{n} has no source")
            model_specs[n] = ModelSpec(name=n, **e)
        ngram_specs = {}
        for n, e in models.get("ngrams", {}).items():
            values, sources, _ = _split_sources(e, f"ngrams.{n}")
            ngram_specs[n] = NgramSpec(name=n, step_ns=values["step_ns"], energy_nj_per_step=values["energy_nj_per_step"],
                                       source="; ".join(sources.values()))
        hosts = {}
        for n, e in devices.get("hosts", {}).items():
            values, sources, ranges = _split_sources(e, f"hosts.{n}")
            hosts[n] = HostSpec(name=n, sources=sources, ranges=ranges, **values)
        memories = {}
        for n, e in devices.get("memories", {}).items():
            values, sources, ranges = _split_sources(e, f"memories.{n}")
            memories[n] = MemorySpec(name=n, sources=sources, ranges=ranges, **values)
            _check_memory(memories[n])
    except (TypeError, KeyError) as exc:  # missing or unknown field in a catalog entry
        raise ScenarioError(f"catalog: malformed entry ({exc})") from None
    for section, key in (("default", "source_default"), ("pairs", "source_pairs"), ("families", "source_families")):
        table = acceptance.get(section)
        present = table is not None and (section == "default" or any(not k.startswith("source") for k in table))
        if present and not (acceptance.get(key) or (isinstance(table, dict) and table.get(key))):
            raise ScenarioError(f"catalog: acceptance {section} has no source ({key})")
    pairs = {k: float(v) for k, v in acceptance.get("pairs", {}).items() if not k.startswith("source")}
    fams = {k: float(v) for k, v in acceptance.get("families", {}).items() if not k.startswith("source")}
    delta = acceptance.get("sensitivity_delta", 0.1)
    if "sensitivity_delta" in acceptance and not acceptance.get("source_sensitivity_delta"):
        raise ScenarioError("catalog: acceptance sensitivity_delta has no source (source_sensitivity_delta)")
    return Catalog(model_specs, ngram_specs, hosts, memories, float(acceptance.get("default", 0.6)), pairs, fams,
                   float(delta))


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    return build_catalog(_read(None, "models.toml"), _read(None, "devices.toml"), _read(None, "acceptance.toml"))


def load_catalog(extra: list[Path] | None = None) -> Catalog:
    """The default catalog, with entries from user TOML files (same schema) added or overriding."""
    if not extra:
        return default_catalog()
    models = _read(None, "models.toml")
    devices = _read(None, "devices.toml")
    acceptance = _read(None, "acceptance.toml")
    for path in extra:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ScenarioError(f"catalog {path}: {exc}") from None
        for section, target in (("models", models), ("ngrams", models), ("hosts", devices),
                                ("memories", devices), ("pairs", acceptance), ("families", acceptance)):
            target.setdefault(section, {}).update(data.get(section, {}))
    return build_catalog(models, devices, acceptance)
