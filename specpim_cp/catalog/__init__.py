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
    name: str
    peak_fp16_tflops: float
    kernel_table: str
    kernel_table_bandwidth_gbps: float
    static_power_mw: int
    mac_energy_pj: float
    link_bandwidth_gbps: float
    link_energy_pj_per_bit: float
    sync_latency_ns: int
    launch_overhead_ns: int
    attention_bandwidth_efficiency: float
    compute_efficiency: float
    sources: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class MemorySpec:
    name: str
    label: str
    groups: int
    units_per_group: int
    group_external_bandwidth_gbps: float
    normal_unit_capacity_mib: int
    pim_unit_capacity_mib: int
    pim_lanes_per_unit: int
    pim_lane_bandwidth_gbps: float
    pim_lane_gflops: float
    pim_mode_switch_ns: int
    external_energy_pj_per_bit: float
    internal_energy_pj_per_bit: float
    pim_mac_energy_pj: float
    sources: dict = field(default_factory=dict, compare=False, hash=False)

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


def _split_sources(entry: dict) -> tuple[dict, dict]:
    values = {k: v for k, v in entry.items() if not k.startswith("source")}
    sources = {k: v for k, v in entry.items() if k.startswith("source")}
    return values, sources


def _read(path: Path | None, name: str) -> dict:
    if path is None:
        return tomllib.loads(resources.files("specpim_cp.catalog").joinpath(name).read_text())
    return tomllib.loads(Path(path).read_text())


def build_catalog(models: dict, devices: dict, acceptance: dict) -> Catalog:
    try:
        model_specs = {n: ModelSpec(name=n, **e) for n, e in models.get("models", {}).items()}
        ngram_specs = {
            n: NgramSpec(name=n, step_ns=e["step_ns"], energy_nj_per_step=e["energy_nj_per_step"],
                         source=e.get("source_step", ""))
            for n, e in models.get("ngrams", {}).items()
        }
        hosts = {}
        for n, e in devices.get("hosts", {}).items():
            values, sources = _split_sources(e)
            hosts[n] = HostSpec(name=n, sources=sources, **values)
        memories = {}
        for n, e in devices.get("memories", {}).items():
            values, sources = _split_sources(e)
            memories[n] = MemorySpec(name=n, sources=sources, **values)
    except TypeError as exc:  # missing or unknown field in a catalog entry
        raise ScenarioError(f"catalog: malformed entry ({exc})") from None
    pairs = {k: float(v) for k, v in acceptance.get("pairs", {}).items() if not k.startswith("source")}
    fams = {k: float(v) for k, v in acceptance.get("families", {}).items() if not k.startswith("source")}
    return Catalog(model_specs, ngram_specs, hosts, memories, float(acceptance.get("default", 0.6)), pairs, fams)


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
