"""Per-operator cost tables: (model, op, placement, architecture config, tokens) -> integer ns, nJ.

Computed once per scenario and shared by every optimizer and the evaluator, so all of them price a design
identically. Constants come from the catalog; the formulas are in formulations/costs.md.

Memory model (formulations/physics.md P1), as the scenario's `[assumptions] memory_model` says:
- "time-shared" (default, rules 1-3): a PIM unit is ordinary DRAM in normal mode, so the host reads
  tensors wherever they live. A host operator's tensor is kept in the normal units ("normal" layout) or
  striped over every unit ("spread", a share k/U on PIM units); its bandwidth is the external bandwidth
  of the channel groups its data sits on. While a PIM unit computes, its channels serve no host reads:
  a host operator overlaps a PIM operator only if no channel group holds both its data and a PIM unit.
- "partitioned" (rule 4, the SpecPIM authors' convention): host data only in normal units, host
  bandwidth = external x normal units / all units, host and PIM never contend.
A PIM operator streams its tensor from its own PIM units at internal bandwidth x the memory's PIM
efficiency, once per token (no reuse across tokens), plus input broadcast, output read-back and a
fixed per-kernel overhead. Energy comes in components (`COMPONENTS`): host DRAM access, host on-chip
and compute, PIM internal streaming, PIM compute, transfers (PIM broadcast/read-back, links).
A mixture-of-experts FFN operator (formulations/moe.md) is priced as its kernels in sequence: the host
reads each expert the pass touches once, PIM streams each token's k experts; every expert is stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from specpim_cp import kernels
from specpim_cp.catalog import Catalog, HostSpec, MemorySpec, ModelSpec
from specpim_cp.catalog.heads import HeadSpec
from specpim_cp.catalog.precision import DEFAULT_PRECISION, weight_bytes
from specpim_cp.physics.heads import embedding_rows, embeds, lookup_cost, stored_layers
from specpim_cp.problem.context import kv_positions, pass_context
from specpim_cp.problem.design import ArchConfig, Placement
from specpim_cp.problem.edge import QUANTISED_OPS, device_entries, pim_runs, sharing, weight_precisions
from specpim_cp.problem.heads import head_op_shapes
from specpim_cp.problem.operators import ATTENTION_OPS, PLACEABLE_OPS, OpShape, distinct_experts, op_shapes
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.space import placement_options

KIB = 1024
BITS_PER_BYTE = 8
PJ_PER_NJ = 1000
#: Whole numbers below this are exact in float64 (and so are their sums and products below it).
_EXACT_FLOAT = float(1 << 53)

#: Energy components of every price, in this order (nJ each).
COMPONENTS = ("host_dram", "host_compute", "pim_internal", "pim_compute", "transfer")


@dataclass(frozen=True)
class OpCost:
    """One invocation's time (ns) and energy (nJ, the sum of its components)."""

    time_ns: int
    energy_nj: int
    parts_nj: tuple[int, ...] = (0, 0, 0, 0, 0)  # per COMPONENTS


def make_cost(t_ns: float, parts_pj: tuple[float, ...]) -> OpCost:
    parts = tuple([math.ceil(p / PJ_PER_NJ - 1e-9) for p in parts_pj])  # `_ceil`, inlined: a hot path
    return OpCost(math.ceil(t_ns - 1e-9), sum(parts), parts)


@dataclass(frozen=True)
class TensorBytes:
    """Bytes a model stores (all layers, all devices), in KiB (rounded up), by where they are used."""

    op_kib: dict[str, int]  # weights of FC ops; K cache for score, V cache for context
    embedding_kib: int  # input embedding table (0 when tied: the LM head's weights are the table)

    def total_kib(self) -> int:
        return sum(self.op_kib.values()) + self.embedding_kib


def _ceil(x: float) -> int:
    return math.ceil(x - 1e-9)


# ------------------------------------------------------------------------------------------------
# Channel organisation (catalog data: units_per_channel, pim_arrangement)
# ------------------------------------------------------------------------------------------------
def channel_groups(mem: MemorySpec) -> int:
    """Channel groups per memory group (HBM stack: 4 die pairs; GDDR chip: 4 packages)."""
    return mem.units_per_group // mem.units_per_channel


def full_pim_groups(mem: MemorySpec, k: int) -> int:
    """Channel groups with only PIM units when k units per group are PIM."""
    g, s = channel_groups(mem), mem.units_per_channel
    return max(0, k - g * (s - 1)) if mem.pim_arrangement == "spread" else k // s


def pim_touched_groups(mem: MemorySpec, k: int) -> int:
    """Channel groups with at least one PIM unit."""
    g, s = channel_groups(mem), mem.units_per_channel
    return min(k, g) if mem.pim_arrangement == "spread" else -(-k // s)


def mixed_groups(mem: MemorySpec, k: int) -> int:
    """Channel groups holding both a PIM unit and a normal unit."""
    return pim_touched_groups(mem, k) - full_pim_groups(mem, k)


class CostModel:
    """Cost tables of one scenario. Methods are pure and memoised per instance (operator costs, tensor
    sizes, layout splits, all-reduces); entries are None when impossible."""

    def __init__(self, scenario: Scenario, catalog: Catalog):
        self.scenario = scenario
        self.catalog = catalog
        self.host: HostSpec = catalog.host(scenario.host)
        self.share_levels = scenario.space.share_levels
        self.memory_model = scenario.assumptions.memory_model
        self.count_idle = scenario.assumptions.energy_accounting == "total"
        self.precisions = weight_precisions(scenario)  # [EDGE-1] per model name
        self.interleaved = sharing(scenario) == "interleaved"  # [EDGE-3]
        # per model name: (op, engine, share, layout, arch, context) -> token count -> price (`_op_memo`)
        self._op_memos: dict[str, dict[tuple, dict[int, OpCost | None]]] = {}
        self._memo_of: Callable[[Hashable], dict] | None = None
        self._shapes: dict[str, dict[str, OpShape]] = {}
        self._tensor_bytes: dict[tuple[str, int], TensorBytes] = {}
        self._allreduce: dict[tuple[str, ArchConfig, int], OpCost] = {}
        self._embed: dict[tuple[str, ArchConfig, str, int], OpCost] = {}
        self._placements: dict[ArchConfig, tuple[Placement, ...]] = {}
        self._host_layout_ok: dict[tuple[ArchConfig, str], bool] = {}

    # -- architecture ------------------------------------------------------------------------
    def memory(self, arch: ArchConfig) -> MemorySpec:
        return self.catalog.memory(arch.memory_type)

    def placements(self, arch: ArchConfig) -> tuple[Placement, ...]:
        """Every placement an operator may take on this architecture (physics only, no mapping rule;
        memoised)."""
        out = self._placements.get(arch)
        if out is None:
            out = self._placements[arch] = placement_options(self.memory(arch), arch, self.share_levels,
                                                             self.memory_model)
        return out

    def host_layout_allowed(self, arch: ArchConfig, layout: str) -> bool:
        """Whether a host operator may keep its tensor with `layout` on this architecture (memoised)."""
        ok = self._host_layout_ok.get((arch, layout))
        if ok is None:
            ok = self._host_layout_ok[(arch, layout)] = (Placement(engine="host", share=0, layout=layout)
                                                         in self.placements(arch))
        return ok

    def full_bandwidth_gbps(self, arch: ArchConfig) -> float:
        mem = self.memory(arch)
        return mem.groups * mem.group_external_bandwidth_gbps

    def layout_bandwidth_gbps(self, arch: ArchConfig, layout: str) -> float:
        """External bandwidth (per device) of the channel groups a tensor with this layout sits on."""
        mem = self.memory(arch)
        full = self.full_bandwidth_gbps(arch)
        k, units = arch.pim_units, mem.units_per_group
        if self.memory_model == "partitioned":
            return full * (units - k) / units if layout == "normal" else 0.0
        g = channel_groups(mem)
        if layout == "normal":
            return full * (g - full_pim_groups(mem, k)) / g
        if layout == "pim":
            return full * pim_touched_groups(mem, k) / g
        return full  # spread

    def host_contends_with_pim(self, arch: ArchConfig, layout: str) -> bool:
        """Whether a host operator with this layout shares a channel group with the PIM units (then it
        cannot overlap any PIM operator)."""
        if self.memory_model == "partitioned" or arch.pim_units == 0:
            return False
        mem = self.memory(arch)
        if layout == "normal":
            return mixed_groups(mem, arch.pim_units) > 0
        return True

    def side_fractions(self, arch: ArchConfig, layout: str) -> Fraction:
        """Fraction of a tensor with this layout kept in PIM units (the rest in normal units)."""
        if layout == "pim":
            return Fraction(1)
        if layout == "spread":
            return Fraction(arch.pim_units, self.memory(arch).units_per_group)
        return Fraction(0)

    def pim_lanes(self, arch: ArchConfig) -> int:
        mem = self.memory(arch)
        return mem.groups * arch.pim_units * mem.pim_lanes_per_unit

    def capacity_kib(self, arch: ArchConfig) -> tuple[int, int]:
        """(PIM-side, normal-side) capacity of all the model's devices, KiB."""
        mem = self.memory(arch)
        pim = arch.devices * mem.groups * arch.pim_units * mem.pim_unit_capacity_mib * KIB
        normal = arch.devices * mem.groups * (mem.units_per_group - arch.pim_units) * mem.normal_unit_capacity_mib * KIB
        return pim, normal

    def split_kib(self, arch: ArchConfig, layout: str, kib: int) -> tuple[int, int]:
        """(PIM-side, normal-side) KiB of a tensor of `kib` KiB with this layout (PIM side rounded up)."""
        frac = self.side_fractions(arch, layout)
        pim = -(-kib * frac.numerator // frac.denominator)
        return pim, kib - pim

    def idle_power_mw(self, arch: ArchConfig) -> int:
        """Idle power of the model's devices charged for the whole round (0 under dynamic accounting); a
        channel slice of a shared device carries its share of the one device's idle power ([EDGE-3]); a head on
        the verifier's devices none: their idle power is the verifier's ([HEAD-2])."""
        if not self.count_idle or arch.colocated:
            return 0
        mem = self.memory(arch)
        if mem.slice_of:
            return self.host.idle_power_mw * mem.groups // mem.slice_of
        if self.interleaved:  # every model on the whole device: an equal share each
            return self.host.idle_power_mw // len(device_entries(self.scenario))
        return arch.devices * self.host.idle_power_mw

    def draft2_layout(self, arch: ArchConfig) -> str | None:
        """Layout of a draft2 model's tensors on a drafter's devices (it runs on the host): spread when
        channels are time-shared and there are PIM units, else normal; None when the host cannot run."""
        host = [p.layout for p in self.placements(arch) if p.engine == "host"]
        if not host:
            return None
        return "spread" if "spread" in host else host[0]

    # -- tensors -----------------------------------------------------------------------------
    def shapes(self, model: ModelSpec) -> dict[str, OpShape]:
        if model.name not in self._shapes:
            self._shapes[model.name] = head_op_shapes(model) if isinstance(model, HeadSpec) else op_shapes(model)
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
        blocks = stored_layers(model)  # a head's stored blocks ([HEAD-1]); a model's layers
        for name, s in self.shapes(model).items():
            layers = 1 if name == "lm_head" else blocks
            if s.parts:  # [MOE-4] an MoE FFN stores every expert (and the router on every device)
                stored = sum(p.in_features * p.out_features * max(1, p.experts) * (devices if p.replicated else 1)
                             for p in s.parts)
                op_kib[name] = -(-(layers * stored * bpp) // KIB)
            elif s.kind == "fc":
                weights = layers * s.in_features * s.out_features
                op_kib[name] = -(-self.weight_bytes(model, name, weights) // KIB)
            else:  # K (score) or V (context) cache at the maximum context (at most the window), on every device
                per_device = self.kv_heads_per_device(model, devices) * model.head_dim
                kv = blocks * sc.batch_size * kv_positions(sc, model) * per_device * devices * bpp
                op_kib[name] = -(-kv // KIB)
        embedding = 0 if model.tied_embeddings else -(-(embedding_rows(model) * model.hidden * bpp) // KIB)
        return TensorBytes(op_kib, embedding)

    def weight_bytes(self, model: ModelSpec, op: str, weights: int) -> int:
        """Bytes of `weights` weights of operator `op`: the model's precision for the decoder's linear layers
        ([EDGE-1], catalog/precision.py), its bytes_per_param otherwise (LM head, MoE operators)."""
        precision = self.precisions.get(model.name, DEFAULT_PRECISION)
        if precision == DEFAULT_PRECISION or op not in QUANTISED_OPS:
            return weights * model.bytes_per_param
        return weight_bytes(weights, precision)

    # -- operator costs ----------------------------------------------------------------------
    def op_cost(self, model: ModelSpec, op: str, engine: str, share: int, arch: ArchConfig,
                tokens: int, layout: str = "normal", context: int | None = None) -> OpCost | None:
        """One invocation of `op` (one layer, or the LM head) on all the model's devices.

        `share`: the number of 1/share_levels fractions of the PIM units the op uses (PIM only);
        `layout`: where a host operator's tensor lives; `context`: the keys each query of an attention op
        reads (default: a decode pass's, `pass_context`; the prefill gives its own). None when the
        placement is impossible.
        """
        lay = "pim" if engine == "pim" else layout
        memo = self._op_memos.get(model.name)
        if memo is None:
            memo = self._op_memo(model)
        key = (op, engine, share if engine == "pim" else 0, lay, arch, context)
        by_tokens = memo.get(key)
        if by_tokens is None:
            by_tokens = memo[key] = {}
        if tokens not in by_tokens:
            lookup = lookup_cost(model, op, tokens) if isinstance(model, HeadSpec) else None
            by_tokens[tokens] = (self._op_cost(model, op, engine, share, arch, tokens, lay, context)
                                 if lookup is None else
                                 OpCost(lookup[0], lookup[1], (0, lookup[1], 0, 0, 0)))  # [HEAD-1] host lookup
        return by_tokens[tokens]

    def price_context(self) -> tuple:
        """What an operator's price depends on besides its model (spec and weight precision), placement,
        architecture, token count and attention context: the host, the memories, the batch, the decode
        context's lengths, the share levels and the memory model. Equal contexts price a model alike."""
        sc = self.scenario
        return (repr(self.host), repr(sorted(self.catalog.memories.items())), sc.batch_size, sc.prompt_tokens,
                sc.generated_tokens, self.share_levels, self.memory_model)

    def share_prices(self, memo_of: Callable[[Hashable], dict]) -> None:
        """Keep operator prices in memos shared with other cost models: `memo_of(key)` returns the one memo
        for `key` = (`price_context`, a model's weight precision, its spec), kept by the caller (a bounded
        LRU: solvers/shared_evaluator.py). Prices are pure values of the key, so sharing changes none."""
        self._memo_of = memo_of
        self._op_memos.clear()

    def _op_memo(self, model: ModelSpec) -> dict[tuple, dict[int, OpCost | None]]:
        """The memo of `model`'s operator prices: this cost model's own, or the shared one (`share_prices`)."""
        if self._memo_of is None:
            memo = {}
        else:
            memo = self._memo_of((self.price_context(), self.precisions.get(model.name, DEFAULT_PRECISION), model))
        self._op_memos[model.name] = memo
        return memo

    def placement_cost(self, model: ModelSpec, op: str, p: Placement, arch: ArchConfig, tokens: int) -> OpCost | None:
        return self.op_cost(model, op, p.engine, p.share, arch, tokens, p.layout)

    def placement_costs(self, model: ModelSpec, op: str, p: Placement, arch: ArchConfig,
                        token_counts: Sequence[int]) -> dict[int, OpCost | None]:
        """`placement_cost` at every count of `token_counts` (memoised like it; `placements_costs`)."""
        return self.placements_costs(model, op, [(arch, p)], token_counts)[0]

    def placements_costs(self, model: ModelSpec, op: str, pairs: Sequence[tuple[ArchConfig, Placement]],
                         token_counts: Sequence[int]) -> list[dict[int, OpCost | None]]:
        """`placement_costs` of every (architecture, placement) of `pairs`, memoised like `op_cost`: what is
        not yet priced is priced at once over numpy arrays (a row per pair, a column per count:
        `_raw_grid`), integers identical to `op_cost`'s one by one."""
        counts = list(token_counts)
        cache = self._op_memos.get(model.name)
        if cache is None:
            cache = self._op_memo(model)
        known, todo = [], []  # per pair, its prices by token count; the pairs with a count not yet priced
        for i, (a, p) in enumerate(pairs):
            pim = p.engine == "pim"
            key = (op, p.engine, p.share if pim else 0, "pim" if pim else p.layout, a, None)
            by_tokens = cache.get(key)
            if by_tokens is None:
                by_tokens = cache[key] = {}
            known.append(by_tokens)
            if any(t not in by_tokens for t in counts):
                todo.append(i)
        if todo:
            s = self.shapes(model)[op]
            grid = None
            if not s.parts and not (isinstance(model, HeadSpec) and lookup_cost(model, op, 1) is not None):
                grid = self._costs_grid(model, s, [pairs[i] for i in todo], counts)
            if grid is None:  # MoE kernels, an n-gram lookup, or integers beyond float64's: one count at a time
                for i in todo:
                    a, p = pairs[i]
                    for t in counts:
                        self.op_cost(model, op, p.engine, p.share, a, t, p.layout)
            else:
                for i, row in zip(todo, grid):
                    known[i].update(zip(counts, row))
        return [{t: by_tokens[t] for t in counts} for by_tokens in known]

    def _costs_grid(self, model: ModelSpec, s: OpShape, pairs: list[tuple[ArchConfig, Placement]],
                    counts: list[int]) -> list[list[OpCost | None]] | None:
        """`_op_cost` of a plain kernel (no MoE parts) on every pair at every count, rounded as `make_cost`
        does; None when some integer of the formula reaches 2^53 or a price is not finite, where float64
        could round differently from Python's integers (the caller then prices one count at a time)."""
        if any(p.engine not in ("host", "pim") for _, p in pairs):
            return None  # `_raw_cost` names the engine
        precision = self.precisions.get(model.name, DEFAULT_PRECISION)
        out: list[list[OpCost | None]] = [[None] * len(counts) for _ in pairs]
        for engine in ("host", "pim"):
            rows = [r for r, (a, p) in enumerate(pairs) if p.engine == engine and (
                self.host_layout_allowed(a, p.layout) if engine == "host" else
                a.pim_units and 1 <= p.share <= self.share_levels
                and (s.kind != "fc" or pim_runs(self.memory(a), precision, s.name, engine)))]  # [EDGE-1]
            if not rows:
                continue
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # not finite: priced one by one
                raw = self._raw_grid(model, s, engine, [pairs[r] for r in rows], counts)
            if raw is None:
                return None
            t_ns, parts_pj = raw
            rounded = np.empty((1 + len(COMPONENTS), len(rows), len(counts)))
            rounded[0] = np.ceil(t_ns - 1e-9)
            for c, part in enumerate(parts_pj):
                rounded[1 + c] = np.ceil(part / PJ_PER_NJ - 1e-9)  # `make_cost`'s rounding, element by element
            if not (np.isfinite(rounded).all() and np.abs(rounded).max() < _EXACT_FLOAT):
                return None
            whole = rounded.astype(np.int64)
            parts_nj = np.ascontiguousarray(whole[1:].transpose(1, 2, 0))  # (row, count, component)
            times, energies = whole[0].tolist(), parts_nj.sum(axis=2).tolist()  # exact: each part below 2^53
            for i, r in enumerate(rows):
                out[r] = [OpCost(t, e, tuple(ps)) for t, e, ps in zip(times[i], energies[i], parts_nj[i].tolist())]
        return out

    def _op_cost(self, model: ModelSpec, op: str, engine: str, share: int, arch: ArchConfig,
                 tokens: int, layout: str, context: int | None = None) -> OpCost | None:
        s = self.shapes(model)[op]
        if not s.parts:
            raw = self._raw_cost(model, s, engine, share, arch, tokens, layout, context)
            return None if raw is None else make_cost(*raw)
        # [MOE-3] an MoE FFN operator: its kernels (router, routed experts, shared experts) one after another
        raws = [self._raw_cost(model, part, engine, share, arch, tokens, layout) for part in s.parts]
        if any(r is None for r in raws):
            return None
        return make_cost(sum(r[0] for r in raws), tuple(sum(r[1][c] for r in raws) for c in range(len(COMPONENTS))))

    def _raw_cost(self, model: ModelSpec, s: OpShape, engine: str, share: int, arch: ArchConfig,
                  tokens: int, layout: str, context: int | None = None) -> tuple[float, tuple[float, ...]] | None:
        """(ns, pJ per component) of one kernel of shape `s`, before rounding; None when impossible."""
        mem = self.memory(arch)
        n = arch.devices
        bpp = model.bytes_per_param
        batch = self.scenario.batch_size
        # a pass's query tokens also attend to the pass's own earlier tokens (a draft chain or tree under
        # its mask): the context grows by the pass's tokens per sequence beyond the first, up to the window
        ctx = pass_context(self.scenario, model, tokens // batch) if context is None else context
        tokens *= s.token_factor  # [HEAD-1] a shared LM head's K inputs per token (Medusa)
        e_ext = mem.external_energy_pj_per_bit * BITS_PER_BYTE  # pJ per byte
        e_int = mem.internal_energy_pj_per_bit * BITS_PER_BYTE
        e_chip = self.host.onchip_energy_pj_per_bit * BITS_PER_BYTE
        fc_tokens, touched = tokens, 0.0  # the host kernel's tokens; distinct experts of an expert kernel
        stream_macs_dev = 0  # a dense FC kernel's weights streamed per pass (its precision may be below FP16)
        if s.kind == "fc" and s.experts:  # [MOE-3] routed experts, each split over the devices like a dense FFN
            in_dev = -(-s.in_features // n) if s.row_parallel else s.in_features
            out_dev = s.out_features if s.row_parallel else -(-s.out_features // n)
            expert_bytes_dev = in_dev * out_dev * bpp
            routed = tokens * s.experts_per_token  # (token, expert) pairs
            touched = distinct_experts(model, tokens)  # [MOE-1, MOE-2]
            macs_total = routed * s.in_features * s.out_features
            stream_bytes_dev = routed * expert_bytes_dev  # PIM: each token streams its k experts
            input_bytes_dev = tokens * in_dev * bpp * (1 if s.shared_input else s.experts_per_token)
            output_bytes_dev = routed * out_dev * bpp
            host_bytes_dev = touched * expert_bytes_dev  # the host reads each touched expert once per pass
            fc_tokens = max(1, math.ceil(routed / touched - 1e-9))  # tokens per touched expert
        elif s.kind == "fc" and s.replicated:  # the MoE router: every device holds and computes all of it
            in_dev, out_dev = s.in_features, s.out_features
            weight_bytes_dev = in_dev * out_dev * bpp
            macs_total = tokens * s.in_features * s.out_features * n
            stream_bytes_dev = tokens * weight_bytes_dev
            input_bytes_dev, output_bytes_dev = tokens * in_dev * bpp, tokens * out_dev * bpp
            host_bytes_dev = weight_bytes_dev
        elif s.kind == "fc":
            in_dev = -(-s.in_features // n) if s.row_parallel else s.in_features
            out_dev = s.out_features if s.row_parallel else -(-s.out_features // n)
            weight_bytes_dev = self.weight_bytes(model, s.name, in_dev * out_dev)  # [EDGE-1]
            macs_total = tokens * s.in_features * s.out_features
            stream_bytes_dev = tokens * weight_bytes_dev  # PIM: once per token
            stream_macs_dev = tokens * in_dev * out_dev
            input_bytes_dev, output_bytes_dev = tokens * in_dev * bpp, tokens * out_dev * bpp
            host_bytes_dev = weight_bytes_dev
        else:
            kvh = self.kv_heads_per_device(model, n)
            heads_dev = -(-model.heads // n)
            kv_bytes_seq = ctx * kvh * model.head_dim * bpp  # K (or V) of one sequence, one layer
            group = max(1, heads_dev // kvh)  # query heads sharing one KV head re-stream it on PIM
            stream_bytes_dev = tokens * group * kv_bytes_seq
            host_bytes_dev = batch * kv_bytes_seq  # a GPU kernel reads each sequence's cache once
            host_flops_dev = 2 * tokens * ctx * heads_dev * model.head_dim
            macs_total = tokens * ctx * heads_dev * model.head_dim * n
            # score: q (head_dim) in, probabilities (context) out; context: probabilities in, head_dim out
            q_bytes, p_bytes = tokens * heads_dev * model.head_dim * bpp, tokens * heads_dev * ctx * bpp
            input_bytes_dev, output_bytes_dev = (q_bytes, p_bytes) if s.name == "score" else (p_bytes, q_bytes)
        if engine == "host":
            if not self.host_layout_allowed(arch, layout):
                return None
            bw = self.layout_bandwidth_gbps(arch, layout)
            if s.kind == "fc" and stream_macs_dev:  # [EDGE-1] fewer bytes per weight: the bandwidth term shrinks
                bw = bw * float(bpp * in_dev * out_dev) / weight_bytes_dev
            if s.kind == "fc" and self.host.kernel_table == kernels.ROOFLINE:  # no measurements: derated roofline
                h = self.host
                t_ns = kernels.roofline_linear_ns(
                    in_dev, out_dev, fc_tokens, bandwidth_gbps=bw, peak_fp16_tflops=h.peak_fp16_tflops,
                    bandwidth_efficiency=h.attention_bandwidth_efficiency, compute_efficiency=h.compute_efficiency,
                    launch_overhead_ns=h.launch_overhead_ns)
                launch_ns = h.launch_overhead_ns
            elif s.kind == "fc":
                scale = bw / self.host.kernel_table_bandwidth_gbps
                t_ns = kernels.linear_time_us(self.host.kernel_table, in_dev, out_dev, fc_tokens, scale) * 1e3
                launch_ns = kernels.memory_floor(self.host.kernel_table)[0] * 1e3
            else:
                t_mem = host_bytes_dev / (self.host.attention_bandwidth_efficiency * bw)
                t_cmp = host_flops_dev / (self.host.compute_efficiency * self.host.peak_fp16_tflops * 1e3)
                t_ns = self.host.launch_overhead_ns + max(t_mem, t_cmp)
            if touched:  # [MOE-3] one grouped kernel: one launch, then each touched expert's GEMM
                t_ns = launch_ns + touched * (t_ns - launch_ns)
            moved = host_bytes_dev * n
            parts = (moved * e_ext, moved * e_chip + macs_total * self.host.mac_energy_pj, 0.0, 0.0, 0.0)
        elif engine == "pim":
            if arch.pim_units == 0 or not 1 <= share <= self.share_levels:
                return None
            frac = share / self.share_levels
            lanes = self.pim_lanes(arch) * frac
            units = mem.groups * arch.pim_units * frac
            t_stream = stream_bytes_dev / (lanes * mem.pim_lane_bandwidth_gbps)
            if stream_macs_dev and not pim_runs(mem, self.precisions.get(model.name, DEFAULT_PRECISION), s.name, engine):
                return None  # [EDGE-1] the PIM units do not compute at this precision
            macs_dev = stream_macs_dev or stream_bytes_dev / bpp
            t_compute = 2 * macs_dev / (lanes * mem.pim_lane_gflops)
            t_broadcast = input_bytes_dev / mem.unit_external_bandwidth_gbps  # every unit gets the input
            t_readback = output_bytes_dev / (units * mem.unit_external_bandwidth_gbps)
            t_ns = mem.pim_mode_switch_ns + max(t_stream, t_compute) / mem.pim_efficiency + t_broadcast + t_readback
            parts = (0.0, 0.0, stream_bytes_dev * n * e_int, macs_total * mem.pim_mac_energy_pj,
                     (input_bytes_dev * units + output_bytes_dev) * n * e_ext)
        else:
            raise ValueError(f"unknown engine {engine!r}")
        return t_ns, parts

    def _raw_grid(self, model: ModelSpec, s: OpShape, engine: str, pairs: list[tuple[ArchConfig, Placement]],
                  counts: list[int]) -> tuple[np.ndarray, tuple] | None:
        """`_raw_cost` of a plain kernel (dense FC or attention) on every pair (rows; each possible, all on
        `engine`, PIM at a precision its units run) at every count (columns): (ns, pJ per component) as arrays, each element computed by the
        scalar formula's operations in its order (a row's constants by the same Python arithmetic), so every
        price rounds alike; None when an integer of the formula reaches 2^53 (float64 would round what Python
        keeps exact). Mirrors `_raw_cost`, the reference: change both together (tests/test_price_arrays.py
        compares them on every built-in set)."""

        def col(values) -> np.ndarray:  # a row's constant, as a column
            return np.array(list(values), dtype=np.float64)[:, None]

        archs = [a for a, _ in pairs]
        mems = [self.memory(a) for a in archs]
        devices = [a.devices for a in archs]
        n = col(devices)
        bpp = model.bytes_per_param
        batch = self.scenario.batch_size
        tokens = np.array(counts, dtype=np.float64)[None, :] * s.token_factor  # [HEAD-1]
        e_ext = col(m.external_energy_pj_per_bit * BITS_PER_BYTE for m in mems)
        e_int = col(m.internal_energy_pj_per_bit * BITS_PER_BYTE for m in mems)
        e_chip = self.host.onchip_energy_pj_per_bit * BITS_PER_BYTE
        if s.kind == "fc":
            in_dev = [-(-s.in_features // d) if s.row_parallel else s.in_features for d in devices]
            out_dev = [s.out_features if s.row_parallel else -(-s.out_features // d) for d in devices]
            weight_bytes = [self.weight_bytes(model, s.name, i * o) for i, o in zip(in_dev, out_dev)]  # [EDGE-1]
            macs_total = tokens * s.in_features * s.out_features
            stream_bytes_dev = tokens * col(weight_bytes)
            stream_macs_dev = tokens * col(in_dev) * col(out_dev)
            input_bytes_dev, output_bytes_dev = tokens * col(in_dev) * bpp, tokens * col(out_dev) * bpp
            whole = [macs_total, stream_bytes_dev * n, stream_macs_dev, input_bytes_dev, output_bytes_dev]
        else:
            ctx = col(pass_context(self.scenario, model, t // batch) for t in counts).T
            kvh = [self.kv_heads_per_device(model, d) for d in devices]
            heads_dev = [-(-model.heads // d) for d in devices]
            kv_bytes_seq = ctx * col(kvh) * model.head_dim * bpp
            group = col(max(1, h // k) for h, k in zip(heads_dev, kvh))
            stream_bytes_dev = tokens * group * kv_bytes_seq
            host_bytes_dev = batch * kv_bytes_seq
            host_flops_dev = 2 * tokens * ctx * col(heads_dev) * model.head_dim
            macs_total = tokens * ctx * col(heads_dev) * model.head_dim * n
            q_bytes, p_bytes = tokens * col(heads_dev) * model.head_dim * bpp, tokens * col(heads_dev) * ctx * bpp
            input_bytes_dev, output_bytes_dev = (q_bytes, p_bytes) if s.name == "score" else (p_bytes, q_bytes)
            whole = [stream_bytes_dev * n, host_bytes_dev * n, host_flops_dev, macs_total, q_bytes, p_bytes]
        if max(float(w.max()) for w in whole) >= _EXACT_FLOAT:
            return None
        h = self.host
        if engine == "host":
            bws = [self.layout_bandwidth_gbps(a, p.layout) for a, p in pairs]
            if s.kind == "fc":  # [EDGE-1] (a dense kernel always streams: `_raw_cost`'s stream_macs_dev > 0)
                bws = [bw * float(bpp * i * o) / w for bw, i, o, w in zip(bws, in_dev, out_dev, weight_bytes)]
                fc_counts = tokens[0].astype(np.int64).tolist()
                if h.kernel_table == kernels.ROOFLINE:
                    t_ns = np.array([[kernels.roofline_linear_ns(
                        i, o, t, bandwidth_gbps=bw, peak_fp16_tflops=h.peak_fp16_tflops,
                        bandwidth_efficiency=h.attention_bandwidth_efficiency, compute_efficiency=h.compute_efficiency,
                        launch_overhead_ns=h.launch_overhead_ns) for t in fc_counts]
                        for i, o, bw in zip(in_dev, out_dev, bws)])
                else:
                    t_ns = np.array([[kernels.linear_time_us(h.kernel_table, i, o, t, bw / h.kernel_table_bandwidth_gbps)
                                      * 1e3 for t in fc_counts] for i, o, bw in zip(in_dev, out_dev, bws)])
                moved = col(w * d * e for w, d, e in zip(weight_bytes, devices, e_ext[:, 0].tolist()))
                chip = col(w * d * e_chip for w, d in zip(weight_bytes, devices))
                parts = (moved, chip + macs_total * h.mac_energy_pj, 0.0, 0.0, 0.0)
            else:
                t_mem = host_bytes_dev / col(h.attention_bandwidth_efficiency * bw for bw in bws)
                t_cmp = host_flops_dev / (h.compute_efficiency * h.peak_fp16_tflops * 1e3)
                t_ns = h.launch_overhead_ns + np.maximum(t_mem, t_cmp)
                moved = host_bytes_dev * n
                parts = (moved * e_ext, moved * e_chip + macs_total * h.mac_energy_pj, 0.0, 0.0, 0.0)
            return t_ns, parts
        fracs = [p.share / self.share_levels for _, p in pairs]
        lanes = [self.pim_lanes(a) * f for a, f in zip(archs, fracs)]
        units = col(m.groups * a.pim_units * f for m, a, f in zip(mems, archs, fracs))
        t_stream = stream_bytes_dev / col(ln * m.pim_lane_bandwidth_gbps for ln, m in zip(lanes, mems))
        macs_dev = stream_macs_dev if s.kind == "fc" else stream_bytes_dev / bpp
        t_compute = 2 * macs_dev / col(ln * m.pim_lane_gflops for ln, m in zip(lanes, mems))
        unit_bw = col(m.unit_external_bandwidth_gbps for m in mems)
        t_broadcast = input_bytes_dev / unit_bw
        t_readback = output_bytes_dev / (units * unit_bw)
        t_ns = (col(m.pim_mode_switch_ns for m in mems) + np.maximum(t_stream, t_compute) / col(
            m.pim_efficiency for m in mems) + t_broadcast + t_readback)
        parts = (0.0, 0.0, stream_bytes_dev * n * e_int, macs_total * col(m.pim_mac_energy_pj for m in mems),
                 (input_bytes_dev * units + output_bytes_dev) * n * e_ext)
        return t_ns, parts

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
        t_ns = kernels.allreduce_us(n, elements, self.host.link_bandwidth_gbps) * 1e3  # [AR-2] the host's link
        moved_bytes = 2 * (n - 1) * elements * model.bytes_per_param  # ring: 2(n-1)/n per device, n devices
        return make_cost(t_ns, (0.0, 0.0, 0.0, 0.0, moved_bytes * BITS_PER_BYTE * self.host.link_energy_pj_per_bit))

    def spill_cost(self, arch: ArchConfig, spill_kib: int) -> OpCost:
        """A fixed recipe's spill on one pass (`ModelDesign.spill`, formulations/baselines.md SPILL-2): the
        `spill_kib` KiB the PIM units cannot hold are read from the normal units and written into the PIM
        units, two transfers over the external bus of the model's devices at its full bandwidth, one after
        the other, at the memory's external energy per bit (component "transfer")."""
        moved = 2 * spill_kib * KIB
        if moved == 0:
            return OpCost(0, 0)
        t_ns = moved / (self.full_bandwidth_gbps(arch) * arch.devices)
        e_ext = self.memory(arch).external_energy_pj_per_bit * BITS_PER_BYTE
        return make_cost(t_ns, (0.0, 0.0, 0.0, 0.0, moved * e_ext))

    def embedding_cost(self, model: ModelSpec, arch: ArchConfig, layout: str, tokens: int) -> OpCost:
        """The input embedding lookup of one pass: `tokens` rows read (only the bytes used, DUR-3), by one
        host kernel, from the channel groups the table sits on (the LM head's layout: tied, or beside it)."""
        key = (model.name, arch, layout, tokens)
        cost = self._embed.get(key)
        if cost is None and not embeds(model):
            cost = self._embed[key] = OpCost(0, 0)
        if cost is None:
            mem = self.memory(arch)
            rows = tokens * model.hidden * model.bytes_per_param
            bw = self.layout_bandwidth_gbps(arch, layout) * arch.devices
            if bw <= 0:  # partitioned memory with the table in PIM units: rows move over the bus
                bw = self.full_bandwidth_gbps(arch) * arch.devices
            t_ns = self.host.launch_overhead_ns + rows / bw
            parts = (rows * mem.external_energy_pj_per_bit * BITS_PER_BYTE,
                     rows * self.host.onchip_energy_pj_per_bit * BITS_PER_BYTE, 0.0, 0.0, 0.0)
            cost = self._embed[key] = make_cost(t_ns, parts)
        return cost


__all__ = ["ATTENTION_OPS", "COMPONENTS", "KIB", "PLACEABLE_OPS", "CostModel", "OpCost", "TensorBytes"]
