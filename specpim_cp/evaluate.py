"""The reference evaluator: Scenario x Design -> Metrics with a breakdown. No solver inside.

This is the single source of truth for pricing. The exact optimizer, the heuristic and the baselines
only choose designs; every one of their results is re-priced here. All quantities the optimizer sees
are integers (ns, nJ, KiB, scaled probabilities), and this module computes them with the same integer
rules, so an optimizer's claimed objective can be compared with the evaluator's exactly.

`Evaluator.evaluate` and `Evaluator.metrics` share one computation (`Evaluator._price`); `metrics` only
skips the breakdown, so a search that ranks by `metrics` (the heuristic) ranks by exactly these prices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import NamedTuple

from specpim_cp import speculation as spec
from specpim_cp.catalog import Catalog, ModelSpec, default_catalog
from specpim_cp.costs import COMPONENTS, KIB, CostModel, OpCost
from specpim_cp.design import ArchConfig, Design, ModelDesign, Placement
from specpim_cp.errors import ScenarioError
from specpim_cp.graph import LAYER_OPS, PLACEABLE_OPS, layer_order
from specpim_cp.passes import (
    Acceptance,
    RoundStats,
    draft2_tokens,
    drafter_cycle_tokens,
    round_stats,
    verifier_tokens,
)
from specpim_cp.scenario import Scenario
from specpim_cp.schedule import layer_schedule
from specpim_cp.space import DesignSpace

GIB_IN_KIB = 1 << 20
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


@dataclass(frozen=True)
class CapacityUse:
    """Bytes a model keeps in its PIM units and in its normal units, against what each side holds."""

    pim_need_kib: int
    normal_need_kib: int
    pim_capacity_kib: int
    normal_capacity_kib: int

    @property
    def holds(self) -> bool:
        """Each side holds what the layouts put there (DESIGN.md rule 3: capacity-checked layouts)."""
        return self.pim_need_kib <= self.pim_capacity_kib and self.normal_need_kib <= self.normal_capacity_kib


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

    def objective(self, name: str) -> Fraction:
        if name == "latency":
            return self.latency_fraction()
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
        }


@dataclass(frozen=True)
class OperatorBreakdown:
    engine: str
    share: int | None  # PIM share (None on the host)
    layout: str
    time_ns: int
    energy_nj: int


@dataclass(frozen=True)
class ModelBreakdown:
    """One model's pass as priced: the pass the round uses (verification, or the drafter's cycle pass)."""

    model: str
    memory_type: str
    pim_units: int
    devices: int
    pass_tokens: int
    pass_time_ns: int
    pass_energy_nj: int
    layer_makespan_ns: int
    allreduce_ns: int
    embedding_ns: int
    operators: dict[str, OperatorBreakdown]
    capacity: CapacityUse

    def as_dict(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k not in ("operators", "capacity")}
        out["operators"] = {op: asdict(o) for op, o in self.operators.items()}
        cap = self.capacity
        out["capacity"] = {"pim_need_gib": cap.pim_need_kib / GIB_IN_KIB,
                           "normal_need_gib": cap.normal_need_kib / GIB_IN_KIB,
                           "pim_capacity_gib": cap.pim_capacity_kib / GIB_IN_KIB,
                           "normal_capacity_gib": cap.normal_capacity_kib / GIB_IN_KIB}
        return out


@dataclass(frozen=True)
class StagingBreakdown:
    draft2: str
    draft_length: int
    alpha2: float
    draft2_step_ns: int


@dataclass(frozen=True)
class DrafterBreakdown(ModelBreakdown):
    alpha: float
    draft_length: int
    cycle_ns: int
    drafting_energy_nj_per_round: int
    staging: StagingBreakdown | None

    def as_dict(self) -> dict:
        out = super().as_dict()
        for k in ("alpha", "draft_length", "cycle_ns", "drafting_energy_nj_per_round"):
            out[k] = getattr(self, k)
        out["staging"] = None if self.staging is None else asdict(self.staging)
        return out


@dataclass(frozen=True)
class RoundBreakdown:
    pipeline: bool
    verify_ns: int
    sync_ns: int
    fail_probability: float  # P(a pipelined round fails) (0 without a pipeline)
    idle_energy_nj: int  # idle power of every device for the round (0 under dynamic accounting)
    verifier_energy_nj: int
    energy_nj_by_component: dict[str, float]  # expected nJ per round, costs.COMPONENTS + "idle"


@dataclass(frozen=True)
class Breakdown:
    verifier: ModelBreakdown
    drafters: tuple[DrafterBreakdown, ...]
    round: RoundBreakdown

    def models(self) -> list[tuple[str, ModelBreakdown]]:
        return [("verifier", self.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(self.drafters)]

    def as_dict(self) -> dict:
        return {"verifier": self.verifier.as_dict(), "drafters": [d.as_dict() for d in self.drafters],
                "round": asdict(self.round)}


@dataclass(frozen=True)
class Evaluation:
    design: Design
    metrics: Metrics
    breakdown: Breakdown

    def as_dict(self) -> dict:
        out = self.metrics.as_dict()
        out["units"] = {"latency_ns_per_token": "ns per generated token per sequence",
                        "energy_pj_per_token": "pJ per generated token (batch total / tokens)",
                        "edp": "ns x nJ per token", "round_time_ns": "ns"}
        out["energy_pj_per_token_by_component"] = {
            k: v * 1000 * spec.TOKENS_SCALE / (self.metrics.tokens_per_round_micro * self.metrics.batch_size)
            for k, v in self.breakdown.round.energy_nj_by_component.items()}
        out["breakdown"] = self.breakdown.as_dict()
        out["design"] = self.design.model_dump(mode="json")
        return out


# ------------------------------------------------------------------------------------------------
# Evaluator
# ------------------------------------------------------------------------------------------------
class Evaluator:
    """Prices designs of one scenario.

    `evaluate` gives Metrics and a breakdown, `metrics` the Metrics alone (the search's hot path).
    Per-model pieces are cached: pass prices, capacity uses and drafter cycles, keyed by the model's
    part of the design (model, architecture, placement, staging). Each cache is bounded (emptied when
    it reaches `cache_limit` entries); `clear_cache` empties them all. Caching never changes a price.
    """

    def __init__(self, scenario: Scenario, catalog: Catalog | None = None, costs: CostModel | None = None,
                 cache_limit: int = CACHE_LIMIT):
        self.scenario = scenario
        self.catalog = catalog or default_catalog()
        self.costs = costs or CostModel(scenario, self.catalog)
        self.space = DesignSpace.free(scenario, self.catalog)
        self.cache_limit = cache_limit
        self._pass_cache: dict[tuple, PassPrice] = {}
        self._capacity_cache: dict[tuple, CapacityUse] = {}
        self._cycle_cache: dict[tuple, tuple] = {}  # DrafterCycle fields as a plain tuple
        self.acceptance = Acceptance.of(scenario, self.catalog)
        self._archs: dict[tuple[str, int, int], ArchConfig] = {}  # by (memory type, PIM units, devices)
        self._idle_mw: dict[tuple[str, int, int], int] = {}

    def clear_cache(self) -> None:
        """Drop the cached per-model pieces (the cost model's tables are kept)."""
        for cache in (self._pass_cache, self._capacity_cache, self._cycle_cache):
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
        (model, memory type, PIM units, devices, "engine:share:layout,..." over PLACEABLE_OPS).
        (A string hashes once; the caches hash these keys on every lookup.)"""
        pl = md.placement
        return (md.model, md.memory_type, md.pim_units, md.devices,
                ",".join([f"{pl[op].engine}:{pl[op].share}:{pl[op].layout}" for op in PLACEABLE_OPS]))

    def _arch(self, md: ModelDesign) -> ArchConfig:
        """`md.arch`, one object per architecture (cost-table keys then compare by identity)."""
        key = (md.memory_type, md.pim_units, md.devices)
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
        model = self.catalog.models[md.model]
        arch = self._arch(md)
        c = self.costs
        tb = c.tensor_bytes(model, arch.devices)
        pim_need = normal_need = 0
        tensors = [(kib, md.placement[op].layout) for op, kib in tb.op_kib.items()]
        tensors.append((tb.embedding_kib, md.placement["lm_head"].layout))
        d2 = self.draft2_model(md)
        if d2 is not None:  # a draft2 model runs on the drafter's devices, on the host
            layout = c.draft2_layout(arch)
            if layout is None:
                raise ScenarioError(f"{md.model}: its draft2 model {d2.name} runs on the host, and {arch.label()} "
                                    "leaves the host no memory it may use")
            tensors.append((c.tensor_bytes(d2, arch.devices).total_kib(), layout))
        for kib, layout in tensors:
            p, q = c.split_kib(arch, layout, kib)
            pim_need += p
            normal_need += q
        pim_cap, normal_cap = c.capacity_kib(arch)
        return CapacityUse(pim_need, normal_need, pim_cap, normal_cap)

    def check_capacity(self, label: str, md: ModelDesign, cap: CapacityUse) -> None:
        """ScenarioError naming the side that overflows and by how much."""
        where = (f"{md.devices} device(s) of {md.memory_type} with pim_units={md.pim_units}")
        for side, need, have in (("PIM units", cap.pim_need_kib, cap.pim_capacity_kib),
                                 ("normal units", cap.normal_need_kib, cap.normal_capacity_kib)):
            if need > have:
                raise ScenarioError(
                    f"{label} ({md.model}): the {side} must hold {need / GIB_IN_KIB:.2f} GiB (weights + KV cache "
                    f"at context {self.scenario.max_context}, by the design's layouts) but {where} have "
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
        model = self.catalog.models[name]
        arch = self._arch(md)
        c = self.costs
        if host_only:
            layout = c.draft2_layout(arch)
            if layout is None:
                raise ScenarioError(f"{name}: a draft2 model runs on the host, and {arch.label()} leaves the host "
                                    "no memory it may use")
            places = {op: Placement(engine="host", share=0, layout=layout) for op in PLACEABLE_OPS}
        else:
            places = md.placement
        levels = c.share_levels
        op_cost: dict[str, OpCost] = {}
        nodes = []
        for op in PLACEABLE_OPS:
            p = places[op]
            oc = c.placement_cost(model, op, p, arch, tokens)
            if oc is None:
                raise ScenarioError(f"{name}: operator {op} cannot run on {p.engine} ({p.layout}) of {arch.label()}")
            op_cost[op] = oc
            if op in LAYER_OPS:
                if p.engine == "pim":
                    nodes.append((op, oc.time_ns, 0, p.share, 0))
                else:
                    nodes.append((op, oc.time_ns, 1, levels if c.host_contends_with_pim(arch, p.layout) else 0, 0))
        ar = c.allreduce_cost(model, arch, tokens)
        for n in layer_order(model.parallel_block):
            if n.startswith("allreduce"):
                nodes.append((n, ar.time_ns, 0, 0, 1))
        makespan, starts = layer_schedule(model.parallel_block, tuple(nodes), levels)
        n_ar = 1 if model.parallel_block else 2
        emb = c.embedding_cost(model, arch, places["lm_head"].layout, tokens)
        layer_parts = [sum(op_cost[op].parts_nj[k] for op in LAYER_OPS) + n_ar * ar.parts_nj[k]
                       for k in range(len(COMPONENTS))]
        parts = tuple(model.layers * layer_parts[k] + op_cost["lm_head"].parts_nj[k] + emb.parts_nj[k]
                      for k in range(len(COMPONENTS)))
        time_ns = emb.time_ns + model.layers * makespan + op_cost["lm_head"].time_ns
        price = PassPrice(tokens, time_ns, sum(parts), parts, makespan,
                          {op: op_cost[op].time_ns for op in PLACEABLE_OPS},
                          {op: op_cost[op].energy_nj for op in PLACEABLE_OPS}, ar.time_ns, emb.time_ns, starts)
        return self._store(self._pass_cache, key, price)

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
        key = (i, mkey, None if st is None else (st.draft2, st.draft_length))
        cycle = self._cycle_cache.get(key)
        if cycle is None:
            # a plain tuple of plain values: the garbage collector stops tracking it (cheaper collections)
            cycle = self._store(self._cycle_cache, key, tuple(self._drafter_cycle(i, md, mkey)))
        return DrafterCycle._make(cycle)

    def _drafter_cycle(self, i: int, md: ModelDesign, mkey: tuple) -> DrafterCycle:
        tokens = drafter_cycle_tokens(self.scenario.batch_size, md.choice)
        step = self.pass_price(md, tokens, model_key=mkey)
        if md.staging is None:
            return DrafterCycle(step.time_ns, step.energy_nj, step.parts_nj, tokens)
        g2 = md.staging.draft_length
        d2 = self.draft2_step(md)
        parts = tuple(g2 * a + b for a, b in zip(d2.parts_nj, step.parts_nj, strict=True))
        return DrafterCycle(g2 * d2.time_ns + step.time_ns, sum(parts), parts, tokens,
                            (self.alpha2(i, md.staging.draft2), g2), d2.time_ns)

    def idle_power_mw(self, md: ModelDesign) -> int:
        """Idle power of all the model's devices, mW (charged for the whole round; 0 under dynamic
        energy accounting)."""
        key = (md.memory_type, md.pim_units, md.devices)
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
        return Evaluation(design, priced.metrics, self._breakdown(design, priced))

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
        caps = []
        for j, (md, key) in enumerate(zip(mds, keys)):
            cap = self.capacity(md, key)
            if not cap.holds:
                self.check_capacity("verifier" if j == 0 else f"drafters[{j - 1}]", md, cap)
            caps.append(cap)
        stats = round_stats(choice, self.acceptance)
        verify = self.pass_price(design.verifier, verifier_tokens(batch, choice), model_key=keys[0])
        cycles = [self.drafter_cycle(i, md, keys[i + 1]) for i, md in enumerate(drafters)]
        sync = self.costs.host.sync_latency_ns if drafters else 0
        round_ns = spec.round_time_ns(stats.outcomes, [c.time_ns for c in cycles], verify.time_ns, sync,
                                      choice.pipeline, stats.q)
        # energy per round: verifier pass + drafting (+ wasted optimistic drafts) + idle power
        draft_nj = []
        for i, cycle in enumerate(cycles):
            # two-stage rounding keeps every integer product inside the optimizer's int64 range
            expected = -(-(stats.rounds_scaled[i] * cycle.energy_nj) // spec.OUTCOME_SCALE)
            draft_nj.append(-(-(expected * (spec.Q_SCALE + stats.drafter_q[i])) // spec.Q_SCALE))
        # idle power of every device of every model for the whole round (mW x ns = pJ), per model
        idle_nj = sum(-(-self.idle_power_mw(md) * round_ns // 1000) for md in mds)
        energy_nj = verify.energy_nj + sum(draft_nj) + idle_nj
        metrics = Metrics(round_ns, stats.tokens_micro, energy_nj, batch)
        return _Priced(metrics, caps, verify, cycles, stats, sync, draft_nj, idle_nj)

    def _model_breakdown(self, md: ModelDesign, cap: CapacityUse, price: PassPrice) -> ModelBreakdown:
        ops = {op: OperatorBreakdown(md.placement[op].engine,
                                     md.placement[op].share if md.placement[op].engine == "pim" else None,
                                     md.placement[op].layout, price.op_time_ns[op], price.op_energy_nj[op])
               for op in PLACEABLE_OPS}
        return ModelBreakdown(md.model, md.memory_type, md.pim_units, md.devices, price.tokens, price.time_ns,
                              price.energy_nj, price.layer_makespan_ns, price.allreduce_ns, price.embedding_ns,
                              ops, cap)

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
                                             staging=staging))
            weight = (stats.rounds_scaled[i] / spec.OUTCOME_SCALE) * (1 + stats.drafter_q[i] / spec.Q_SCALE)
            for k, e in enumerate(cycle.parts_nj):
                components[k] += weight * e
        by_component = dict(zip(COMPONENTS, components, strict=True))
        by_component["idle"] = float(priced.idle_nj)
        rnd = RoundBreakdown(design.pipeline, verify.time_ns, priced.sync, stats.q / spec.Q_SCALE,
                             priced.idle_nj, verify.energy_nj, by_component)
        return Breakdown(self._model_breakdown(design.verifier, caps[0], verify), tuple(drafters), rnd)


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


def evaluate(scenario: Scenario, design: Design, catalog: Catalog | None = None) -> Evaluation:
    return Evaluator(scenario, catalog).evaluate(design)


__all__ = ["KIB", "CapacityUse", "DrafterCycle", "Evaluation", "Evaluator", "Metrics", "PassPrice", "evaluate"]
