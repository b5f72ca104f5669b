"""The catalog's entry types: a model's shape, an n-gram drafter, a host, a memory system, and the
catalog that holds them with its acceptance rates (loaded and checked by `specpim_cp.catalog`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache

from specpim_cp.catalog.slices import parse_slice, slice_name
from specpim_cp.errors import ScenarioError

MIB = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    """A decoder shape. Dense (`experts = 0`): every layer's FFN is `ffn` wide. Mixture of experts
    (`experts` >= 1, formulations/moe.md): every layer's FFN is a router (hidden x experts), `experts`
    routed experts of width `ffn` of which each token uses `experts_per_token`, plus `shared_experts`
    always-on experts of width `shared_expert_ffn`; `distinct_experts_measured` ((tokens, experts) pairs)
    replaces the uniform-routing estimate of the experts a pass touches [MOE-2]."""

    name: str
    family: str
    tokenizer: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # dense: the FFN width; MoE: each routed expert's intermediate size
    ffn_kind: str  # "two-matrix" | "gated"
    parallel_block: bool
    vocab: int
    tied_embeddings: bool
    bytes_per_param: int
    nominal_params_b: float
    source: str
    experts: int = 0  # routed experts per layer (E); 0: a dense model
    experts_per_token: int = 0  # k: experts each token is routed to
    shared_experts: int = 0  # experts every token uses (DeepSeekMoE / Qwen2-MoE style)
    shared_expert_ffn: int = 0  # intermediate size of each shared expert
    distinct_experts_measured: tuple[tuple[int, float], ...] = ()  # (tokens in a pass, distinct experts)
    max_position: int = 0  # the position limit (HF max_position_embeddings), tokens; 0: none known
    #: sliding-window attention (HF sliding_window): each query reads at most this many keys and the KV cache
    #: keeps only the last this many positions (a rolling buffer, formulations/costs.md WIN-1); 0: full attention
    sliding_window: int = 0
    sources: dict = field(default_factory=dict, compare=False, hash=False)  # source_X keys of the entry

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    def parameter_count(self) -> int:
        """Parameters of the decoder layers, LM head and input embedding (counted once when tied); an MoE
        layer counts its router, every routed expert and its shared experts [MOE-5]."""
        d = self.hidden
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        matrices = 3 if self.ffn_kind == "gated" else 2
        ffn = d * self.ffn * matrices
        if self.is_moe:
            ffn = d * self.experts + self.experts * ffn + self.shared_experts * d * self.shared_expert_ffn * matrices
        embed = self.vocab * d * (1 if self.tied_embeddings else 2)
        return self.layers * (attn + ffn) + embed

    def active_parameter_count(self) -> int:
        """Parameters one token uses: `parameter_count` with an MoE layer's routed experts cut to the
        `experts_per_token` it is routed to (router, attention, shared experts and embeddings all count);
        a dense model's is its parameter count."""
        if not self.is_moe:
            return self.parameter_count()
        matrices = 3 if self.ffn_kind == "gated" else 2
        idle = self.experts - self.experts_per_token
        return self.parameter_count() - self.layers * idle * self.hidden * self.ffn * matrices


@dataclass(frozen=True)
class NgramSpec:
    name: str
    step_ns: int
    energy_nj_per_step: int
    source: str
    tokenizer: str = "any"  # an n-gram model is built from the drafter's own token stream


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
    #: the memory type the GPU ships with (a [memories] name), priced when a scenario names this host and
    #: no memory_types; "" (hosts without one): the scenario default ["hbm", "gddr"]
    native_memory: str = ""
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    ranges: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def kernel_model(self) -> str:
        """How this host's FC kernels are priced, as every report labels it."""
        from specpim_cp.kernels.roofline import kernel_model_label

        return kernel_model_label(self.kernel_table)


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
    #: True when no product has these PIM units (a what-if, e.g. HBM3-PIM); `catalog devices` shows it
    what_if: bool = False
    #: False for a memory as sold without PIM units (an H100's HBM3): designs take no PIM units on it
    pim_capable: bool = True
    #: the weight precisions the PIM units compute on (catalog/precision.py); a model stored in another keeps
    #: its linear layers on the host (formulations/edge.md [EDGE-1])
    pim_precisions: tuple[str, ...] = ("fp16",)
    #: a channel slice of a shared device (catalog/slices.py): the device's channel groups; 0: whole devices
    slice_of: int = 0
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    ranges: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def max_pim_units(self) -> int:
        return self.units_per_group if self.pim_capable else 0

    @property
    def unit_external_bandwidth_gbps(self) -> float:
        return self.group_external_bandwidth_gbps / self.units_per_group


@lru_cache(maxsize=1024)
def channel_slice(base: MemorySpec, channels: int) -> MemorySpec:
    """`base` cut to `channels` of its channel groups (a shared device's slice, catalog/slices.py)."""
    return dataclasses.replace(base, name=slice_name(base.name, channels, base.groups), groups=channels,
                               label=f"{base.label}: {channels} of {base.groups} channels", slice_of=base.groups)


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
    #: conditional acceptance of ranks 2.. of a token tree's candidates (trees.positional_vector)
    tree_conditional_tail: tuple[float, ...] = ()
    #: the user catalog files merged over the built-in one, in order (empty: the built-in catalog)
    files: tuple[str, ...] = ()
    #: per acceptance entry ("pairs.D>V", "families.F>G", "default", `acceptance_entry`): its `range_KEY`
    #: (low, high), the span `sensitivity` moves it over, and its source
    acceptance_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    acceptance_sources: dict[str, str] = field(default_factory=dict)

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
            parsed = parse_slice(name)
            if parsed is not None and parsed[0] in self.memories:
                base = self.memories[parsed[0]]
                if parsed[2] == base.groups and 1 <= parsed[1] <= base.groups:
                    return channel_slice(base, parsed[1])
            raise ScenarioError(
                f"{field_name}: unknown memory type '{name}' (known: {', '.join(sorted(self.memories))})"
            )
        return self.memories[name]

    def family_of(self, name: str) -> str:
        return "ngram" if name in self.ngrams else self.models[name].family

    def acceptance_entry(self, drafter: str, verifier: str) -> str:
        """The entry a pair's default acceptance comes from: the exact pair ("pairs.D>V"), then the family
        pair ("families.F>G", "families.F>any"), then "default"."""
        pair = f"{drafter}>{verifier}"
        if pair in self.acceptance_pairs:
            return f"pairs.{pair}"
        fam_d = self.family_of(drafter)
        fam_v = self.family_of(verifier)
        for key in (f"{fam_d}>{fam_v}", f"{fam_d}>any"):
            if key in self.acceptance_families:
                return f"families.{key}"
        return "default"

    def default_acceptance(self, drafter: str, verifier: str) -> float:
        """The rate of `acceptance_entry` (each with its source in acceptance.toml)."""
        section, _, key = self.acceptance_entry(drafter, verifier).partition(".")
        table = {"pairs": self.acceptance_pairs, "families": self.acceptance_families}.get(section)
        return self.acceptance_default if table is None else table[key]
