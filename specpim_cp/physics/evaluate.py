"""The reference evaluator: Scenario x Design -> Metrics with a breakdown. No solver inside.

This is the single source of truth for pricing. The exact optimizer, the heuristic and the baselines
only choose designs; every one of their results is re-priced here. All quantities the optimizer sees
are integers (ns, nJ, KiB, scaled probabilities), and this module computes them with the same integer
rules, so an optimizer's claimed objective can be compared with the evaluator's exactly.

`Evaluator.evaluate` and `Evaluator.metrics` share one computation (`Evaluator._price`); `metrics` only
skips the breakdown, so a search that ranks by `metrics` (the heuristic) ranks by exactly these prices.

A model marked `spill` (`ModelDesign.spill`: fixed recipes only, FC-offload as SpecPIM ran it) may keep
more on its PIM side than its PIM units hold: the overflow is stored in its normal units (which must hold
it) and every pass of the model moves it into the PIM units over the external bus (`CostModel.spill_cost`,
formulations/baselines.md SPILL-1, SPILL-2), added to the pass time and energy and reported in the
breakdown (`ModelBreakdown.spill_ns`, `CapacityUse.spill_kib`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from specpim_cp.catalog import Catalog, ModelSpec
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.costs import COMPONENTS, KIB, CostModel, OpCost
from specpim_cp.physics.heads import merged_needs, shared_tensors, stored_kib, transfer_cost
from specpim_cp.physics.prefill import PrefillModel, PrefillPrice
from specpim_cp.physics.records import (
    GIB_IN_KIB,
    Breakdown,
    CapacityUse,
    DrafterBreakdown,
    ModelBreakdown,
    OperatorBreakdown,
    RoundBreakdown,
    StagingBreakdown,
)
from specpim_cp.physics.rounds import (
    Acceptance,
    RoundStats,
    draft2_tokens,
    drafter_cycle_tokens,
    round_stats,
    tree_pass_tokens,
    verifier_tokens,
)
from specpim_cp.physics.schedule import layer_schedule
from specpim_cp.physics.shared_device import check_joint_capacity, design_idle_powers_mw
from specpim_cp.problem.design import ArchConfig, Design, ModelDesign, Placement
from specpim_cp.problem.heads import with_heads
from specpim_cp.problem.operators import LAYER_OPS, PLACEABLE_OPS, is_chain, layer_order
from specpim_cp.problem.scenario import Scenario, require_catalog, scenario_catalog
from specpim_cp.problem.space import DesignSpace

LM_HEAD_INDEX = PLACEABLE_OPS.index("lm_head")  # the operator whose layout the input embedding table shares
CACHE_LIMIT = 50_000  # entries per Evaluator cache (pass prices, model pieces, drafter cycles): ~50 MB



# ------------------------------------------------------------------------------------------------
# Result types
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PassPrice:
    """One forward pass of a model over `tokens` tokens (embedding lookup, all layers, LM head)."""

    tokens: int
    time_ns: int
    energy_nj: int
    parts_nj: tuple[int, ...]  # energy per costs.COMPONENTS
    layer_makespan_ns: int
    op_time_ns: dict[str, int]
    op_energy_nj: dict[str, int]
    allreduce_ns: int
    embedding_ns: int
    starts_ns: dict[str, int] = field(default_factory=dict)
    spill_ns: int = 0  # a spilled model's transfers of its PIM overflow (`CostModel.spill_cost`), in time_ns


class CapacityTable(NamedTuple):
    """One model's tensors on one architecture: per PLACEABLE_OPS op and for the input embedding table,
    layout -> (PIM-side, normal-side) KiB (`CostModel.split_kib`); `CostModel.capacity_kib`; and per draft2
    model the split of its tensors (filled as draft2 models are asked for)."""

    ops: tuple[dict[str, tuple[int, int]], ...]
    embedding: dict[str, tuple[int, int]]
    capacity_kib: tuple[int, int]
    draft2: dict[str, tuple[int, int]]

    def tensor_split(self, op_index: int, layout: str) -> tuple[int, int]:
        """(PIM-side, normal-side) KiB that operator `PLACEABLE_OPS[op_index]` stores with this layout: its
        tensor and, for the LM head, the untied input embedding table beside it, each tensor split (and
        rounded) on its own. The one rule of CAP-1/CAP-2's per-operator needs: the evaluator, the exact
        model and the heuristic's capacity repair all read it."""
        pim, normal = self.ops[op_index][layout]
        if op_index == LM_HEAD_INDEX:
            emb_pim, emb_normal = self.embedding[layout]
            return pim + emb_pim, normal + emb_normal
        return pim, normal


class PassTable:
    """One model's costs on one architecture over one token count, by placement key (`Placement.key`):
    each operator's OpCost on every placement the architecture offers (a key not there is impossible),
    the layer-schedule node it makes, the all-reduce and the embedding lookup (by the LM head's layout)."""

    __slots__ = ("allreduce", "allreduce_layer_nj", "allreduce_layer_ns", "allreduce_nodes", "allreduces", "chain",
                 "embedding", "energy", "layers", "levels", "nodes", "ops", "parallel_block", "time")

    def __init__(self, costs: CostModel, model: ModelSpec, arch: ArchConfig, tokens: int):
        self.layers = model.layers
        self.parallel_block = model.parallel_block
        self.chain = is_chain(model.parallel_block)
        self.levels = levels = costs.share_levels
        self.allreduce = ar = costs.allreduce_cost(model, arch, tokens)
        names = [n for n in layer_order(model.parallel_block) if n.startswith("allreduce")]
        self.allreduces = 1 if model.parallel_block else 2
        self.allreduce_layer_ns = len(names) * ar.time_ns  # a chain's layer: every node one after another
        self.allreduce_layer_nj = self.allreduces * ar.energy_nj
        self.allreduce_nodes = tuple((n, ar.time_ns, 0, 0, 1) for n in names)
        offered = [p.key for p in costs.placements(arch)]
        ops = []
        for op in PLACEABLE_OPS:
            row = {}
            for key in offered:
                oc = costs.op_cost(model, op, key[0], key[1], arch, tokens, key[2])
                if oc is not None:
                    row[key] = oc
            ops.append(row)
        self.ops = tuple(ops)
        self.time = tuple({k: oc.time_ns for k, oc in row.items()} for row in ops)
        self.energy = tuple({k: oc.energy_nj for k, oc in row.items()} for row in ops)
        # schedule nodes: (name, duration, host demand, PIM demand, link demand); a host operator whose
        # channels it shares with the PIM units takes every PIM slot
        self.nodes = tuple(
            {k: ((op, oc.time_ns, 0, k[1], 0) if k[0] == "pim" else
                 (op, oc.time_ns, 1, levels if costs.host_contends_with_pim(arch, k[2]) else 0, 0))
             for k, oc in row.items()}
            for op, row in zip(LAYER_OPS, ops))
        self.embedding = {lay: costs.embedding_cost(model, arch, lay, tokens) for lay in ("normal", "spread", "pim")}

    def layer_nodes(self, keys: tuple[tuple[str, int, str], ...]) -> tuple[tuple[str, int, int, int, int], ...]:
        """The layer-schedule nodes of a placement (keys per PLACEABLE_OPS op; the LM head's is ignored)."""
        nodes = self.nodes
        return (nodes[0][keys[0]], nodes[1][keys[1]], nodes[2][keys[2]], nodes[3][keys[3]], nodes[4][keys[4]],
                nodes[5][keys[5]], *self.allreduce_nodes)


class DrafterCycle(NamedTuple):
    """One drafter's cycle: a plain drafting step, or (staged) gamma2 draft2 steps + one pass of the
    drafter over gamma2 + 1 tokens (`pass_tokens`). The round takes a random number of cycles
    (`staged`: its law's parameters (alpha2, gamma2); None: exactly draft_length cycles)."""

    time_ns: int
    energy_nj: int
    parts_nj: tuple[int, ...]
    pass_tokens: int
    staged: tuple[float, int] | None = None
    draft2_step_ns: int | None = None


@dataclass(frozen=True)
class Metrics:
    round_time_ns: int
    tokens_per_round_micro: int
    energy_nj_per_round: int
    batch_size: int
    # the prompt's prefill (physics/prefill.py): time to first token, its energy (batch total), and the
    # generated tokens a request decodes after it (the "request" objective)
    prefill_ns: int = 0
    prefill_energy_nj: int = 0
    generated_tokens: int = 0

    @property
    def tokens_per_round(self) -> float:
        return self.tokens_per_round_micro / spec.TOKENS_SCALE

    def latency_fraction(self) -> Fraction:
        """Exact latency per generated token (per sequence), ns."""
        return Fraction(self.round_time_ns * spec.TOKENS_SCALE, self.tokens_per_round_micro)

    def energy_fraction(self) -> Fraction:
        """Exact energy per generated token (all sequences of the batch share the round), nJ."""
        return Fraction(self.energy_nj_per_round * spec.TOKENS_SCALE,
                        self.tokens_per_round_micro * self.batch_size)

    def request_fraction(self) -> Fraction:
        """Exact end-to-end request latency, ns: time to first token + generated tokens x latency per token
        (formulations/prefill.md PRE-5)."""
        return self.prefill_ns + self.generated_tokens * self.latency_fraction()

    def objective(self, name: str) -> Fraction:
        if name == "latency":
            return self.latency_fraction()
        if name == "request":
            return self.request_fraction()
        if name == "energy":
            return self.energy_fraction()
        if name == "edp":
            return self.latency_fraction() * self.energy_fraction()
        raise ValueError(f"unknown objective {name!r}")

    @property
    def latency_ns_per_token(self) -> float:
        return float(self.latency_fraction())

    @property
    def throughput_tokens_per_s(self) -> float:
        return self.batch_size * self.tokens_per_round * 1e9 / self.round_time_ns

    @property
    def energy_pj_per_token(self) -> float:
        return float(self.energy_fraction()) * 1000.0

    @property
    def edp(self) -> float:
        """Energy-delay product per token: ns x nJ."""
        return float(self.latency_fraction() * self.energy_fraction())

    def as_dict(self) -> dict:
        return {
            "latency_ns_per_token": self.latency_ns_per_token,
            "throughput_tokens_per_s": self.throughput_tokens_per_s,
            "energy_pj_per_token": self.energy_pj_per_token,
            "edp": self.edp,
            "round_time_ns": self.round_time_ns,
            "tokens_per_round": self.tokens_per_round,
            "tokens_per_round_micro": self.tokens_per_round_micro,
            "energy_nj_per_round": self.energy_nj_per_round,
            "ttft_ns": self.prefill_ns,
            "prefill_energy_nj_per_request": self.prefill_energy_nj / self.batch_size,
            "request_latency_ns": float(self.request_fraction()),
        }


@dataclass(frozen=True)
class Evaluation:
    design: Design
    metrics: Metrics
    breakdown: Breakdown
    host_kernel_model: str = ""  # how the host's kernels were priced (HostSpec.kernel_model)
    catalog_files: tuple[str, ...] = ()  # user catalog files merged over the built-in one
    prefill: PrefillPrice | None = None  # the prompt's prefill, model by model (physics/prefill.py)

    def as_dict(self) -> dict:
        out = self.metrics.as_dict()
        out["host_kernel_model"] = self.host_kernel_model
        out["catalog_files"] = list(self.catalog_files)
        out["units"] = {"latency_ns_per_token": "ns per generated token per sequence",
                        "energy_pj_per_token": "pJ per generated token (batch total / tokens)",
                        "edp": "ns x nJ per token", "round_time_ns": "ns",
                        "ttft_ns": "ns from the request to its first token (the prompt's prefill)",
                        "prefill_energy_nj_per_request": "nJ per request (batch total / batch size)",
                        "request_latency_ns": "ns: ttft_ns + generated_tokens x latency_ns_per_token"}
        out["energy_pj_per_token_by_component"] = {
            k: v * 1000 * spec.TOKENS_SCALE / (self.metrics.tokens_per_round_micro * self.metrics.batch_size)
            for k, v in self.breakdown.round.energy_nj_by_component.items()}
        out["breakdown"] = self.breakdown.as_dict()
        if self.prefill is not None:
            out["prefill"] = self.prefill.as_dict(self.metrics.batch_size)
        out["design"] = self.design.model_dump(mode="json")
        return out


# ------------------------------------------------------------------------------------------------
# Evaluator
# ------------------------------------------------------------------------------------------------
class Evaluator:
    """Prices designs of one scenario.

    `evaluate` gives Metrics and a breakdown, `metrics` the Metrics alone.
    Per-model pieces are cached: pass prices, capacity uses and drafter cycles, keyed by the model's
    part of the design (model, architecture, placement, staging), and the tables they are summed from
    (`pass_table`: each operator's cost on every placement, per model, architecture and token count;
    `capacity_table`: each tensor's split per layout, per model and architecture). A search that prices
    designs from compact keys (the heuristic's Pricer) reads the tables with `pass_time_energy` (the
    totals `pass_price` reports) and `capacity_of` (what `capacity` computes). Each cache is bounded (emptied when
    it reaches `cache_limit` entries); `clear_cache` empties them all. Caching never changes a price.
    """

    def __init__(self, scenario: Scenario, catalog: Catalog | None = None, costs: CostModel | None = None,
                 cache_limit: int = CACHE_LIMIT):
        self.scenario = scenario
        self.catalog = with_heads(catalog or scenario_catalog(scenario), scenario)
        require_catalog(scenario, self.catalog)
        self.costs = costs or CostModel(scenario, self.catalog)
        self.space = DesignSpace.free(scenario, self.catalog)
        self.cache_limit = cache_limit
        self._pass_cache: dict[tuple, PassPrice] = {}
        self._capacity_cache: dict[tuple, CapacityUse] = {}
        self._cycle_cache: dict[tuple, tuple] = {}  # DrafterCycle fields as a plain tuple
        self._pass_tables: dict[tuple, PassTable] = {}  # by (model, architecture, tokens)
        self._capacity_tables: dict[tuple, CapacityTable] = {}  # by (model, architecture)
        self.acceptance = Acceptance.of(scenario, self.catalog)
        self._archs: dict[tuple, ArchConfig] = {}  # by (memory type, PIM units, devices, colocated)
        self._idle_mw: dict[tuple, int] = {}
        self.prefill = PrefillModel(scenario, self.catalog)

    def clear_cache(self) -> None:
        """Drop the cached per-model pieces (the cost model's tables are kept)."""
        for cache in (self._pass_cache, self._capacity_cache, self._cycle_cache, self._pass_tables,
                      self._capacity_tables):
            cache.clear()

    def _store(self, cache: dict, key, value):
        """cache[key] = value, emptying the cache first when it is full; returns value."""
        if len(cache) >= self.cache_limit:
            cache.clear()
        cache[key] = value
        return value

    # -- validation --------------------------------------------------------------------------
    def check(self, design: Design) -> None:
        """The design lies in the scenario's free space (ScenarioError naming the field otherwise)."""
        if not design.drafters and self.scenario.drafters:
            # autoregressive decoding (GPU-AR): check against the scenario without its drafters
            ar = self.scenario.model_copy(update={"drafters": []})
            DesignSpace.free(ar, self.catalog).check(design)
            return
        self.space.check(design)

    # -- per-model quantities ----------------------------------------------------------------
    def draft2_model(self, md: ModelDesign) -> ModelSpec | None:
        if md.staging is None or md.staging.draft2 in self.catalog.ngrams:
            return None
        return self.catalog.models[md.staging.draft2]

    @staticmethod
    def model_key(md: ModelDesign) -> tuple:
        """Hashable key of a model's part of a design without draft length and staging:
        (model, memory type, PIM units, devices, "engine:share:layout,..." over PLACEABLE_OPS, with
        ";spill" after it for a spilled model). (A string hashes once; the caches hash these keys on every
        lookup.)"""
        pl = md.placement
        places = ",".join([f"{pl[op].engine}:{pl[op].share}:{pl[op].layout}" for op in PLACEABLE_OPS])
        places += ";colocated" if md.colocated else ""
        return (md.model, md.memory_type, md.pim_units, md.devices, places + ";spill" if md.spill else places)

    def _arch(self, md: ModelDesign) -> ArchConfig:
        """`md.arch`, one object per architecture (cost-table keys then compare by identity)."""
        key = (md.memory_type, md.pim_units, md.devices, md.colocated)
        arch = self._archs.get(key)
        if arch is None:
            arch = self._archs[key] = md.arch
        return arch

    def capacity(self, md: ModelDesign, model_key: tuple | None = None) -> CapacityUse:
        """Capacity use of a model (`model_key`: `Evaluator.model_key(md)`, if the caller has it)."""
        key = (self.model_key(md) if model_key is None else model_key,
               None if md.staging is None else md.staging.draft2)
        cap = self._capacity_cache.get(key)
        if cap is None:
            cap = self._store(self._capacity_cache, key, self._capacity(md))
        return cap

    def _capacity(self, md: ModelDesign) -> CapacityUse:
        """Weights and KV cache at the maximum context by their layouts; an untied input embedding
        table is kept beside the LM head (same layout); a draft2 model with `CostModel.draft2_layout`."""
        d2 = self.draft2_model(md)
        return self.capacity_of(md.model, self._arch(md), tuple(md.placement[op].layout for op in PLACEABLE_OPS),
                                None if d2 is None else d2.name, md.spill)

    def capacity_of(self, model_name: str, arch: ArchConfig, layouts: tuple[str, ...],
                    draft2: str | None, spill: bool = False) -> CapacityUse:
        """`capacity` of model `model_name` on `arch` with these layouts (one per PLACEABLE_OPS op) and this
        draft2 model (a catalog model; None: none, or an n-gram model, which stores nothing): sums of the
        per-tensor splits of `capacity_table`. `spill`: the model is a spilled fixed recipe's."""
        tab = self.capacity_table(model_name, arch)
        pim_need = normal_need = 0
        for o, layout in zip(range(len(tab.ops)), layouts, strict=True):
            p, q = tab.tensor_split(o, layout)
            pim_need += p
            normal_need += q
        if draft2 is not None:
            p, q = self.draft2_split(model_name, arch, draft2)
            pim_need += p
            normal_need += q
        return CapacityUse(pim_need, normal_need, *tab.capacity_kib, spill)

    def draft2_split(self, model_name: str, arch: ArchConfig, draft2: str) -> tuple[int, int]:
        """(PIM-side, normal-side) KiB of catalog model `draft2` as the draft2 model of `model_name` on `arch`:
        it runs on the drafter's devices, on the host, all its tensors (`TensorBytes.total_kib`) laid out by
        `CostModel.draft2_layout` (cached in `capacity_table`). ScenarioError when the host may use no memory."""
        tab = self.capacity_table(model_name, arch)
        split = tab.draft2.get(draft2)
        if split is None:
            layout = self.costs.draft2_layout(arch)
            if layout is None:
                raise ScenarioError(f"{model_name}: its draft2 model {draft2} runs on the host, and "
                                    f"{arch.label()} leaves the host no memory it may use")
            kib = self.costs.tensor_bytes(self.catalog.models[draft2], arch.devices).total_kib()
            split = tab.draft2[draft2] = self.costs.split_kib(arch, layout, kib)
        return split

    def capacity_table(self, model_name: str, arch: ArchConfig) -> CapacityTable:
        """The (PIM-side, normal-side) KiB of each of the model's tensors in each layout, and what the
        architecture holds (cached per model and architecture)."""
        key = (model_name, arch)
        tab = self._capacity_tables.get(key)
        if tab is None:
            c = self.costs
            model = self.catalog.models[model_name]
            tb = c.tensor_bytes(model, arch.devices)
            shared = shared_tensors(model, arch.colocated)  # [HEAD-2] read from the verifier, not stored again
            layouts = ("normal", "spread", "pim")
            kib = [stored_kib(model, op, tb.op_kib[op], c.shapes(model), arch.colocated) for op in PLACEABLE_OPS]
            ops = tuple({lay: c.split_kib(arch, lay, k) for lay in layouts} for k in kib)
            embedding = {lay: c.split_kib(arch, lay, 0 if "embedding" in shared else tb.embedding_kib)
                         for lay in layouts}
            tab = self._store(self._capacity_tables, key, CapacityTable(ops, embedding, c.capacity_kib(arch), {}))
        return tab

    def check_capacity(self, label: str, md: ModelDesign, cap: CapacityUse) -> None:
        """ScenarioError naming the side that overflows and by how much."""
        over = cap.overflow()
        if over is not None:
            side, need, have = over
            where = f"{md.devices} device(s) of {md.memory_type} with pim_units={md.pim_units}"
            spilled = f", the PIM units' {cap.spill_kib / GIB_IN_KIB:.2f} GiB spill included" if cap.spill_kib else ""
            raise ScenarioError(
                f"{label} ({md.model}): the {side} must hold {need / GIB_IN_KIB:.2f} GiB (weights + KV cache "
                f"at context {self.scenario.max_context}, by the design's layouts{spilled}) but {where} have "
                f"{have / GIB_IN_KIB:.2f} GiB there: short by {(need - have) / GIB_IN_KIB:.2f} GiB")

    def pass_price(self, md: ModelDesign, tokens: int, host_only: bool = False,
                   model_name: str | None = None, model_key: tuple | None = None) -> PassPrice:
        """A forward pass of `tokens` tokens. `host_only` prices a draft2 model (`model_name`) on the
        drafter's host, its tensors laid out by `CostModel.draft2_layout`.
        `model_key`: `Evaluator.model_key(md)`, if the caller has it (not with host_only/model_name)."""
        if host_only or model_name is not None:
            name = model_name or md.model
            place_key = None if host_only else self.model_key(md)[4]
            key = (name, md.memory_type, md.pim_units, md.devices, place_key, tokens)
        else:
            key = (self.model_key(md) if model_key is None else model_key) + (tokens,)
        hit = self._pass_cache.get(key)
        if hit is not None:
            return hit
        name = model_name or md.model
        arch = self._arch(md)
        if host_only:
            layout = self.costs.draft2_layout(arch)
            if layout is None:
                raise ScenarioError(f"{name}: a draft2 model runs on the host, and {arch.label()} leaves the host "
                                    "no memory it may use")
            places = {op: Placement(engine="host", share=0, layout=layout) for op in PLACEABLE_OPS}
        else:
            places = md.placement
        tab = self.pass_table(name, arch, tokens)
        keys = tuple(places[op].key for op in PLACEABLE_OPS)
        op_cost: dict[str, OpCost] = {}
        for op, pkey, costs in zip(PLACEABLE_OPS, keys, tab.ops):
            oc = costs.get(pkey)
            if oc is None:
                p = places[op]
                raise ScenarioError(f"{name}: operator {op} cannot run on {p.engine} ({p.layout}) of {arch.label()}")
            op_cost[op] = oc
        makespan, starts = layer_schedule(tab.parallel_block, tab.layer_nodes(keys), tab.levels)
        emb, ar, n_ar = tab.embedding[keys[-1][2]], tab.allreduce, tab.allreduces
        layer_parts = [sum(op_cost[op].parts_nj[k] for op in LAYER_OPS) + n_ar * ar.parts_nj[k]
                       for k in range(len(COMPONENTS))]
        parts = tuple(tab.layers * layer_parts[k] + op_cost["lm_head"].parts_nj[k] + emb.parts_nj[k]
                      for k in range(len(COMPONENTS)))
        time_ns = emb.time_ns + tab.layers * makespan + op_cost["lm_head"].time_ns
        spill = None
        if md.spill and not host_only and name == md.model:  # [SPILL-2] a fixed recipe's overflow, every pass
            spill = self.costs.spill_cost(arch, self.capacity(md).spill_kib)
            time_ns += spill.time_ns
            parts = tuple(p + q for p, q in zip(parts, spill.parts_nj, strict=True))
        price = PassPrice(tokens, time_ns, sum(parts), parts, makespan,
                          {op: op_cost[op].time_ns for op in PLACEABLE_OPS},
                          {op: op_cost[op].energy_nj for op in PLACEABLE_OPS}, ar.time_ns, emb.time_ns, starts,
                          0 if spill is None else spill.time_ns)
        return self._store(self._pass_cache, key, price)

    def pass_table(self, model_name: str, arch: ArchConfig, tokens: int) -> PassTable:
        """The cost tables of a pass of model `model_name` on `arch` over `tokens` tokens (cached)."""
        key = (model_name, arch, tokens)
        tab = self._pass_tables.get(key)
        if tab is None:
            tab = self._store(self._pass_tables, key, PassTable(self.costs, self.catalog.models[model_name], arch,
                                                                tokens))
        return tab

    def layer_nodes(self, md: ModelDesign, tokens: int) -> tuple[tuple[str, int, int, int, int], ...]:
        """The layer-schedule nodes that `pass_price(md, tokens)` schedules: (name, duration_ns, host,
        PIM and link demand) per node (`schedule.Node`; the PIM units hold `costs.share_levels` slots).
        For pictures and checks of a pass's schedule; pricing never calls it."""
        tab = self.pass_table(md.model, self._arch(md), tokens)
        return tab.layer_nodes(tuple(md.placement[op].key for op in PLACEABLE_OPS))

    @staticmethod
    def pass_time_energy(tab: PassTable, keys: tuple[tuple[str, int, str], ...]) -> tuple[int, int]:
        """(time_ns, energy_nj) of `pass_price` for placement keys (`Placement.key`, one per PLACEABLE_OPS
        op) the architecture offers, without the breakdown: the same sums, with the energy's components
        added up first (integers, so the totals are equal)."""
        time, energy = tab.time, tab.energy
        if tab.chain:
            makespan = (time[0][keys[0]] + time[1][keys[1]] + time[2][keys[2]] + time[3][keys[3]]
                        + time[4][keys[4]] + time[5][keys[5]] + tab.allreduce_layer_ns)
        else:
            makespan = layer_schedule(tab.parallel_block, tab.layer_nodes(keys), tab.levels)[0]
        lm = keys[6]
        emb = tab.embedding[lm[2]]
        layer_nj = (energy[0][keys[0]] + energy[1][keys[1]] + energy[2][keys[2]] + energy[3][keys[3]]
                    + energy[4][keys[4]] + energy[5][keys[5]] + tab.allreduce_layer_nj)
        return (emb.time_ns + tab.layers * makespan + time[6][lm],
                emb.energy_nj + tab.layers * layer_nj + energy[6][lm])

    def draft2_step(self, md: ModelDesign) -> OpCost:
        """One draft2 step (one token per sequence) on the drafter's devices."""
        assert md.staging is not None
        batch = self.scenario.batch_size
        if md.staging.draft2 in self.catalog.ngrams:
            ng = self.catalog.ngrams[md.staging.draft2]
            e = ng.energy_nj_per_step * batch
            return OpCost(ng.step_ns, e, (0, e, 0, 0, 0))  # a CPU lookup: host compute energy
        p = self.pass_price(md, draft2_tokens(batch), host_only=True, model_name=md.staging.draft2)
        return OpCost(p.time_ns, p.energy_nj, p.parts_nj)

    def drafter_cycle(self, i: int, md: ModelDesign, model_key: tuple | None = None) -> DrafterCycle:
        """Drafter i's cycle (`md` its part of the design)."""
        mkey = self.model_key(md) if model_key is None else model_key
        st = md.staging
        key = (i, mkey, None if st is None else (st.draft2, st.draft_length), md.tree)
        cycle = self._cycle_cache.get(key)
        if cycle is None:
            # a plain tuple of plain values: the garbage collector stops tracking it (cheaper collections)
            cycle = self._store(self._cycle_cache, key, tuple(self._drafter_cycle(i, md, mkey)))
        return DrafterCycle._make(cycle)

    def _drafter_cycle(self, i: int, md: ModelDesign, mkey: tuple) -> DrafterCycle:
        choice = md.choice
        tokens = drafter_cycle_tokens(self.scenario.batch_size, choice)
        if choice.tree is not None and not self.acceptance.one_pass[i]:  # a token tree: passes, depth by depth
            passes = [self.pass_price(md, t, model_key=mkey) for t in tree_pass_tokens(self.scenario.batch_size, choice)]
            parts = tuple(sum(p.parts_nj[k] for p in passes) for k in range(len(COMPONENTS)))
            return DrafterCycle(sum(p.time_ns for p in passes), sum(parts), parts, tokens)
        step = self.pass_price(md, tokens, model_key=mkey)
        if md.staging is None:
            return DrafterCycle(step.time_ns, step.energy_nj, step.parts_nj, tokens)
        g2 = md.staging.draft_length
        d2 = self.draft2_step(md)
        parts = tuple(g2 * a + b for a, b in zip(d2.parts_nj, step.parts_nj, strict=True))
        time_ns, _ = staged_cycle(step.time_ns, step.energy_nj, d2.time_ns, d2.energy_nj, g2)
        return DrafterCycle(time_ns, sum(parts), parts, tokens, (self.alpha2(i, md.staging.draft2), g2), d2.time_ns)

    def idle_power_mw(self, md: ModelDesign) -> int:
        """Idle power of all the model's devices, mW (charged for the whole round; 0 under dynamic
        energy accounting)."""
        key = (md.memory_type, md.pim_units, md.devices, md.colocated)
        mw = self._idle_mw.get(key)
        if mw is None:
            mw = self._idle_mw[key] = self.costs.idle_power_mw(self._arch(md))
        return mw

    def alpha(self, i: int) -> float:
        return self.acceptance.drafters[i]

    def alpha2(self, i: int, draft2: str) -> float:
        return self.acceptance.alpha2(i, draft2)

    # -- the whole design --------------------------------------------------------------------
    def evaluate(self, design: Design, check: bool = True) -> Evaluation:
        """Metrics of a design with a breakdown (validated first unless check=False)."""
        priced = self._price(design, check, None)
        return Evaluation(design, priced.metrics, self._breakdown(design, priced), self.costs.host.kernel_model,
                          self.catalog.files, priced.prefill)

    def metrics(self, design: Design, check: bool = True, model_keys: Sequence[tuple] | None = None) -> Metrics:
        """`evaluate(design, check).metrics`, without building the breakdown. `model_keys`:
        `Evaluator.model_key` of each model of `design.models()`, if the caller has them cached."""
        return self._price(design, check, model_keys).metrics

    def _price(self, design: Design, check: bool, model_keys: Sequence[tuple] | None) -> _Priced:
        """The round's integer arithmetic: time, tokens and energy per round."""
        if check:
            self.check(design)
        batch = self.scenario.batch_size
        choice = design.choice
        drafters = design.drafters
        mds = [design.verifier, *drafters]
        keys = [self.model_key(md) for md in mds] if model_keys is None else model_keys
        caps = [self.capacity(md, key) for md, key in zip(mds, keys)]
        colocated = [md.colocated for md in mds]
        if any(colocated):  # [HEAD-2] heads on the verifier's devices share their capacity
            pim, normal = merged_needs([(c.pim_need_kib, c.normal_need_kib) for c in caps], colocated)
            caps[0] = CapacityUse(pim, normal, caps[0].pim_capacity_kib, caps[0].normal_capacity_kib, caps[0].spill)
        for j, (md, cap) in enumerate(zip(mds, caps)):
            if not cap.holds and not md.colocated:
                self.check_capacity("verifier" if j == 0 else f"drafters[{j - 1}]", md, cap)
        check_joint_capacity(self.scenario, mds, caps)  # [EDGE-2] an interleaved shared device
        stats = round_stats(choice, self.acceptance)
        verify = self.pass_price(design.verifier, verifier_tokens(batch, choice), model_key=keys[0])
        cycles = [self.drafter_cycle(i, md, keys[i + 1]) for i, md in enumerate(drafters)]
        sync = self.costs.host.sync_latency_ns if drafters else 0
        round_ns = spec.round_time_ns(stats.outcomes, [c.time_ns for c in cycles], verify.time_ns, sync,
                                      choice.pipeline, stats.q)
        xfer_ns, xfer_nj = self.head_transfer(drafters, stats.tokens_micro)
        round_ns += xfer_ns
        draft_nj = [drafting_energy_nj(stats, i, cycle.energy_nj) for i, cycle in enumerate(cycles)]
        powers = design_idle_powers_mw(self.costs, [self.idle_power_mw(md) for md in mds], colocated)  # [EDGE-3]
        idle_nj = sum(idle_energy_nj(p, round_ns) for p in powers)
        energy_nj = verify.energy_nj + sum(draft_nj) + idle_nj + xfer_nj
        prefill = self.prefill.price(design)
        metrics = Metrics(round_ns, stats.tokens_micro, energy_nj, batch, prefill.ttft_ns, prefill.energy_nj,
                          self.scenario.generated_tokens)
        return _Priced(metrics, caps, verify, cycles, stats, sync, draft_nj, idle_nj, prefill, xfer_ns, xfer_nj)

    def head_transfer(self, drafters: Sequence[ModelDesign], tokens_micro: int) -> tuple[int, int]:
        """[HEAD-4] (ns, nJ) per round of the hidden states sent to heads on devices of their own."""
        ns = nj = 0
        for md in drafters:
            if not md.colocated:
                t, e = transfer_cost(self.catalog.models[md.model], self.costs.host, self.scenario.batch_size,
                                     tokens_micro)
                ns, nj = ns + t, nj + e
        return ns, nj

    def _model_breakdown(self, md: ModelDesign, cap: CapacityUse, price: PassPrice) -> ModelBreakdown:
        ops = {op: OperatorBreakdown(md.placement[op].engine,
                                     md.placement[op].share if md.placement[op].engine == "pim" else None,
                                     md.placement[op].layout, price.op_time_ns[op], price.op_energy_nj[op])
               for op in PLACEABLE_OPS}
        return ModelBreakdown(md.model, md.memory_type, md.pim_units, md.devices, price.tokens, price.time_ns,
                              price.energy_nj, price.layer_makespan_ns, price.allreduce_ns, price.embedding_ns,
                              price.spill_ns, ops, cap)

    def _breakdown(self, design: Design, priced: _Priced) -> Breakdown:
        caps, verify, stats = priced.caps, priced.verify, priced.stats
        drafters = []
        components = [float(x) for x in verify.parts_nj]
        for i, md in enumerate(design.drafters):
            cycle = priced.cycles[i]
            base = self._model_breakdown(md, caps[i + 1], self.pass_price(md, cycle.pass_tokens))
            staging = None if md.staging is None else StagingBreakdown(
                md.staging.draft2, md.staging.draft_length, cycle.staged[0], cycle.draft2_step_ns)
            drafters.append(DrafterBreakdown(**vars(base), alpha=self.alpha(i), draft_length=md.draft_length,
                                             cycle_ns=cycle.time_ns, drafting_energy_nj_per_round=priced.draft_nj[i],
                                             staging=staging, tree=md.tree,
                                             tree_vector=None if md.tree is None else self.acceptance.tree(i)))
            weight = (stats.rounds_scaled[i] / spec.OUTCOME_SCALE) * (1 + stats.drafter_q[i] / spec.Q_SCALE)
            for k, e in enumerate(cycle.parts_nj):
                components[k] += weight * e
        components[COMPONENTS.index("transfer")] += priced.transfer_nj
        by_component = dict(zip(COMPONENTS, components, strict=True))
        by_component["idle"] = float(priced.idle_nj)
        rnd = RoundBreakdown(design.pipeline, verify.time_ns, priced.sync, stats.q / spec.Q_SCALE,
                             priced.idle_nj, verify.energy_nj, by_component, priced.transfer_ns)
        return Breakdown(self._model_breakdown(design.verifier, caps[0], verify), tuple(drafters), rnd)


# -- the round's integer rules, shared with the heuristic's inner loop (heuristic/pricing.py) ----------
def staged_cycle(pass_ns: int, pass_nj: int, step_ns: int, step_nj: int, gamma2: int) -> tuple[int, int]:
    """A staged drafter's cycle: gamma2 draft2 steps, then one pass of the drafter (time, energy)."""
    return gamma2 * step_ns + pass_ns, gamma2 * step_nj + pass_nj


def drafting_energy_nj(stats: RoundStats, i: int, cycle_nj: int) -> int:
    """Drafter i's energy per round: its expected cycles' energy, plus its wasted optimistic drafts
    (pipelined); two-stage rounding keeps every integer product inside the optimizer's int64 range."""
    expected = -(-(stats.rounds_scaled[i] * cycle_nj) // spec.OUTCOME_SCALE)
    return -(-(expected * (spec.Q_SCALE + stats.drafter_q[i])) // spec.Q_SCALE)


def idle_energy_nj(power_mw: int, round_ns: int) -> int:
    """Idle energy of one model's devices over the round (mW x ns = pJ; rounded up to nJ)."""
    return -(-power_mw * round_ns // 1000)


class _Priced(NamedTuple):
    """What `Evaluator._price` computes: the Metrics and the pieces the breakdown reports."""

    metrics: Metrics
    caps: list[CapacityUse]  # verifier, then drafters
    verify: PassPrice
    cycles: list[DrafterCycle]
    stats: RoundStats
    sync: int
    draft_nj: list[int]
    idle_nj: int
    prefill: PrefillPrice
    transfer_ns: int = 0  # [HEAD-4] hidden states to heads on devices of their own, in the round time
    transfer_nj: int = 0


def evaluate(scenario: Scenario, design: Design, catalog: Catalog | None = None) -> Evaluation:
    return Evaluator(scenario, catalog).evaluate(design)


__all__ = ["KIB", "CapacityUse", "DrafterCycle", "Evaluation", "Evaluator", "Metrics", "PassPrice", "evaluate"]
