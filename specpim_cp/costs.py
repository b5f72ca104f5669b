"""Per-operator cost tables: (model, op, engine, PIM share, architecture config, tokens) -> integer ns, nJ.

Computed once per scenario and shared by the evaluator, the exact optimizer, the heuristic and the
baselines, so all of them price a design identically. Every physical constant comes from the catalog.

Physics (DESIGN.md sections 2-3; the formulas are written out in formulations/costs.md):
- Host FC kernels: the fitted measured GPU table (`kernels.linear_time_us`), rescaled to the host
  bandwidth the design leaves (rule 2: external bandwidth x normal units / all units).
- Host attention: launch + max(KV bytes / (efficiency x host bandwidth), FLOPs / (efficiency x peak)).
  The KV cache of a sequence is read once per pass, whatever the number of query tokens.
- PIM GEMV: mode switch + max(stream, compute) + input broadcast + output read-back, where the
  weights (or K/V) are streamed once per query vector (no reuse across tokens, nor across query heads
  that share a KV head) through the operator's share of the PIM units.
- Tensor parallelism over the model's devices divides weights and work; all-reduces after o_proj and
  ffn_down (one per layer for a parallel block) are priced from the measured NVLink table.
- Energy: external bytes x pJ/bit, internal PIM bytes x pJ/bit, MACs x pJ/MAC. Static power is charged
  per device for the whole round by the evaluator, not here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from specpim_cp import kernels
from specpim_cp.catalog import Catalog, HostSpec, MemorySpec, ModelSpec
from specpim_cp.graph import ATTENTION_OPS, PLACEABLE_OPS, OpShape, op_shapes
from specpim_cp.scenario import Scenario

KIB = 1024
BITS_PER_BYTE = 8
PJ_PER_NJ = 1000


@dataclass(frozen=True, order=True)
class ArchConfig:
    """Architecture of one model's devices: memory type, PIM units per group (k), device count."""

    memory_type: str
    pim_units: int
    devices: int

    def label(self) -> str:
        return f"{self.memory_type}-k{self.pim_units}-x{self.devices}"


@dataclass(frozen=True)
class OpCost:
    time_ns: int
    energy_nj: int


@dataclass(frozen=True)
class TensorBytes:
    """Bytes a model stores (all layers, all devices), in KiB (rounded up), by where they are used."""

    op_kib: dict[str, int]  # weights of FC ops; K cache for score, V cache for context
    embedding_kib: int  # input embedding table (host side unless tied and the LM head is on host)

    def total_kib(self) -> int:
        return sum(self.op_kib.values()) + self.embedding_kib


def _ceil(x: float) -> int:
    return math.ceil(x - 1e-9)


class CostModel:
    """Cost tables of one scenario. Methods are pure and memoised per instance (operator costs, tensor
    sizes, spill rates and costs, all-reduces); entries are None when impossible."""

    def __init__(self, scenario: Scenario, catalog: Catalog):
        self.scenario = scenario
        self.catalog = catalog
        self.host: HostSpec = catalog.host(scenario.host)
        self.share_levels = scenario.space.share_levels
        self._op_cache: dict[tuple, OpCost | None] = {}
        self._shapes: dict[str, dict[str, OpShape]] = {}
        self._tensor_bytes: dict[tuple[str, int], TensorBytes] = {}
        self._spill_rates: dict[ArchConfig, tuple[Fraction, Fraction]] = {}
        self._spill_cost: dict[tuple[ArchConfig, int], OpCost] = {}
        self._allreduce: dict[tuple[str, ArchConfig, int], OpCost] = {}

    # -- architecture ------------------------------------------------------------------------
    def memory(self, arch: ArchConfig) -> MemorySpec:
        return self.catalog.memory(arch.memory_type)

    def host_bandwidth_gbps(self, arch: ArchConfig) -> float:
        """Rule 2: the host reaches only the normal units' channels."""
        mem = self.memory(arch)
        normal = mem.units_per_group - arch.pim_units
        return mem.groups * mem.group_external_bandwidth_gbps * normal / mem.units_per_group

    def pim_lanes(self, arch: ArchConfig) -> int:
        mem = self.memory(arch)
        return mem.groups * arch.pim_units * mem.pim_lanes_per_unit

    def capacity_kib(self, arch: ArchConfig) -> tuple[int, int]:
        """(PIM-side, normal-side) capacity of all the model's devices, KiB."""
        mem = self.memory(arch)
        pim = arch.devices * mem.groups * arch.pim_units * mem.pim_unit_capacity_mib * KIB
        normal = arch.devices * mem.groups * (mem.units_per_group - arch.pim_units) * mem.normal_unit_capacity_mib * KIB
        return pim, normal

    def static_power_mw(self, arch: ArchConfig) -> int:
        return arch.devices * self.host.static_power_mw

    def spill_rates(self, arch: ArchConfig) -> tuple[Fraction, Fraction]:
        """(ns per KiB, nJ per KiB) of shuffling spilled bytes each pass: read out and written back
        over the external bus of all the model's devices in parallel."""
        rates = self._spill_rates.get(arch)
        if rates is None:
            rates = self._spill_rates[arch] = self._spill_rates_uncached(arch)
        return rates

    def _spill_rates_uncached(self, arch: ArchConfig) -> tuple[Fraction, Fraction]:
        mem = self.memory(arch)
        ext_bytes_per_ns = Fraction(str(mem.group_external_bandwidth_gbps)) * mem.groups * arch.devices
        ns = Fraction(2 * KIB) / ext_bytes_per_ns
        nj = Fraction(2 * KIB * BITS_PER_BYTE) * Fraction(str(mem.external_energy_pj_per_bit)) / PJ_PER_NJ
        return ns, nj

    def spill_cost(self, arch: ArchConfig, spill_kib: int) -> OpCost:
        key = (arch, spill_kib)
        cost = self._spill_cost.get(key)
        if cost is None:
            ns, nj = self.spill_rates(arch)
            cost = self._spill_cost[key] = OpCost(math.ceil(spill_kib * ns), math.ceil(spill_kib * nj))
        return cost

    # -- tensors -----------------------------------------------------------------------------
    def shapes(self, model: ModelSpec) -> dict[str, OpShape]:
        if model.name not in self._shapes:
            self._shapes[model.name] = op_shapes(model)
        return self._shapes[model.name]

    @staticmethod
    def kv_heads_per_device(model: ModelSpec, devices: int) -> int:
        """KV heads are split across devices; a KV head cannot be split, so MQA replicates it."""
        return -(-model.kv_heads // devices)

    def tensor_bytes(self, model: ModelSpec, devices: int) -> TensorBytes:
        """KiB a model stores on `devices` devices (memoised: callers must not modify the result)."""
        key = (model.name, devices)
        tb = self._tensor_bytes.get(key)
        if tb is None:
            tb = self._tensor_bytes[key] = self._tensor_bytes_uncached(model, devices)
        return tb

    def _tensor_bytes_uncached(self, model: ModelSpec, devices: int) -> TensorBytes:
        sc = self.scenario
        bpp = model.bytes_per_param
        op_kib: dict[str, int] = {}
        for name, s in self.shapes(model).items():
            if s.kind == "fc":
                layers = 1 if name == "lm_head" else model.layers
                op_kib[name] = -(-(layers * s.in_features * s.out_features * bpp) // KIB)
            else:  # K (score) or V (context) cache at the maximum context, stored on every device
                per_device = self.kv_heads_per_device(model, devices) * model.head_dim
                kv = model.layers * sc.batch_size * sc.max_context * per_device * devices * bpp
                op_kib[name] = -(-kv // KIB)
        embedding = -(-(model.vocab * model.hidden * bpp) // KIB)
        return TensorBytes(op_kib, embedding)

    # -- operator costs ----------------------------------------------------------------------
    def op_cost(self, model: ModelSpec, op: str, engine: str, share: int, arch: ArchConfig,
                tokens: int) -> OpCost | None:
        """One invocation of `op` (one layer, or the LM head) on all the model's devices.

        `share` is the number of 1/share_levels fractions of the PIM units the op uses (PIM only).
        None when the placement is impossible (no PIM units, or no normal units for the host).
        """
        key = (model.name, op, engine, share if engine == "pim" else 0, arch, tokens)
        if key not in self._op_cache:
            self._op_cache[key] = self._op_cost(model, op, engine, share, arch, tokens)
        return self._op_cache[key]

    def _op_cost(self, model: ModelSpec, op: str, engine: str, share: int, arch: ArchConfig,
                 tokens: int) -> OpCost | None:
        mem = self.memory(arch)
        s = self.shapes(model)[op]
        n = arch.devices
        bpp = model.bytes_per_param
        ctx = self.scenario.average_context
        batch = self.scenario.batch_size
        e_ext = mem.external_energy_pj_per_bit * BITS_PER_BYTE  # pJ per byte
        e_int = mem.internal_energy_pj_per_bit * BITS_PER_BYTE
        if s.kind == "fc":
            in_dev = -(-s.in_features // n) if s.row_parallel else s.in_features
            out_dev = s.out_features if s.row_parallel else -(-s.out_features // n)
            weight_bytes_dev = in_dev * out_dev * bpp
            macs_total = tokens * s.in_features * s.out_features
            stream_bytes_dev = tokens * weight_bytes_dev  # PIM: once per token
            input_bytes_dev, output_bytes_dev = tokens * in_dev * bpp, tokens * out_dev * bpp
            host_bytes_dev = weight_bytes_dev
            host_flops_dev = 2 * tokens * in_dev * out_dev
        else:
            kvh = self.kv_heads_per_device(model, n)
            heads_dev = -(-model.heads // n)
            kv_bytes_seq = ctx * kvh * model.head_dim * bpp  # K (or V) of one sequence, one layer
            group = max(1, heads_dev // kvh)  # query heads sharing one KV head re-stream it on PIM
            stream_bytes_dev = tokens * group * kv_bytes_seq
            host_bytes_dev = batch * kv_bytes_seq  # a GPU kernel reads each sequence's cache once
            host_flops_dev = 2 * tokens * ctx * heads_dev * model.head_dim
            macs_total = tokens * ctx * heads_dev * model.head_dim * n
            input_bytes_dev = tokens * heads_dev * model.head_dim * bpp
            output_bytes_dev = tokens * heads_dev * (ctx if op == "score" else model.head_dim) * bpp
        if engine == "host":
            if arch.pim_units >= mem.units_per_group:
                return None
            bw = self.host_bandwidth_gbps(arch)
            if s.kind == "fc":
                scale = bw / self.host.kernel_table_bandwidth_gbps
                t_ns = kernels.linear_time_us(self.host.kernel_table, host_bytes_dev, tokens, scale) * 1e3
            else:
                t_mem = host_bytes_dev / (self.host.attention_bandwidth_efficiency * bw)
                t_cmp = host_flops_dev / (self.host.compute_efficiency * self.host.peak_fp16_tflops * 1e3)
                t_ns = self.host.launch_overhead_ns + max(t_mem, t_cmp)
            e_pj = host_bytes_dev * n * e_ext + macs_total * self.host.mac_energy_pj
        elif engine == "pim":
            if arch.pim_units == 0 or not 1 <= share <= self.share_levels:
                return None
            frac = share / self.share_levels
            lanes = self.pim_lanes(arch) * frac
            units = mem.groups * arch.pim_units * frac
            t_stream = stream_bytes_dev / (lanes * mem.pim_lane_bandwidth_gbps)
            t_compute = 2 * stream_bytes_dev / bpp / (lanes * mem.pim_lane_gflops)
            t_broadcast = input_bytes_dev / mem.unit_external_bandwidth_gbps  # every unit gets the input
            t_readback = output_bytes_dev / (units * mem.unit_external_bandwidth_gbps)
            t_ns = mem.pim_mode_switch_ns + max(t_stream, t_compute) + t_broadcast + t_readback
            e_pj = (stream_bytes_dev * n * e_int + macs_total * mem.pim_mac_energy_pj
                    + (input_bytes_dev * units + output_bytes_dev) * n * e_ext)
        else:
            raise ValueError(f"unknown engine {engine!r}")
        return OpCost(_ceil(t_ns), _ceil(e_pj / PJ_PER_NJ))

    def allreduce_cost(self, model: ModelSpec, arch: ArchConfig, tokens: int) -> OpCost:
        """One all-reduce of the layer's output activations across the model's devices."""
        key = (model.name, arch, tokens)
        cost = self._allreduce.get(key)
        if cost is None:
            cost = self._allreduce[key] = self._allreduce_uncached(model, arch, tokens)
        return cost

    def _allreduce_uncached(self, model: ModelSpec, arch: ArchConfig, tokens: int) -> OpCost:
        n = arch.devices
        if n == 1:
            return OpCost(0, 0)
        elements = tokens * model.hidden
        t_ns = kernels.allreduce_us(n, elements) * 1e3
        moved_bytes = 2 * (n - 1) * elements * model.bytes_per_param  # ring: 2(n-1)/n per device, n devices
        e_pj = moved_bytes * BITS_PER_BYTE * self.host.link_energy_pj_per_bit
        return OpCost(_ceil(t_ns), _ceil(e_pj / PJ_PER_NJ))

    def placements(self, arch: ArchConfig) -> list[tuple[str, int]]:
        """Every (engine, share) an operator may take on this architecture."""
        out: list[tuple[str, int]] = []
        if arch.pim_units < self.memory(arch).units_per_group:
            out.append(("host", 0))
        if arch.pim_units > 0:
            out += [("pim", s) for s in range(1, self.share_levels + 1)]
        return out


__all__ = ["ATTENTION_OPS", "KIB", "PLACEABLE_OPS", "ArchConfig", "CostModel", "OpCost", "TensorBytes"]
