"""The prompt's prefill (formulations/prefill.md): time to first token and prefill energy of a design.

Before decoding, every model of the design runs one forward pass over its batch's prompts on its host
(PRE-1): the verifier, each drafter (its own KV cache; a staged drafter's draft2 model after it on the same
devices), every model on its own devices at the same time. Each operator is a host kernel priced by the
cost model the decode uses (`CostModel.op_cost`: the host's measured kernel table or derated roofline, the
tensor-parallel split over the model's devices, its all-reduces), over prompt_tokens x batch tokens; the
attention operators read the prompt's causal keys (PRE-2, capped by a sliding window); the LM head reads
only each prompt's last position. The PIM units are in normal mode: tensors are read at the devices' full
external bandwidth, whatever the decode's layouts (PRE-3), so a model's prefill depends only on its
architecture. TTFT is the longest model's prefill (PRE-4); the energy adds the devices' idle power over it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specpim_cp.catalog import Catalog, ModelSpec
from specpim_cp.kernels.linear import MAX_TOKENS
from specpim_cp.physics.costs import COMPONENTS, CostModel, OpCost
from specpim_cp.physics.shared_device import design_idle_powers_mw
from specpim_cp.problem.context import prefill_attended
from specpim_cp.problem.design import ArchConfig, Design, ModelDesign
from specpim_cp.problem.operators import ATTENTION_OPS, LAYER_OPS, layer_order
from specpim_cp.problem.scenario import Assumptions, Scenario

CACHE_LIMIT = 50_000  # designs' prefills kept (`PrefillModel.price`), as the evaluator bounds its caches


@dataclass(frozen=True)
class ModelPrefill:
    """One model's prefill on its devices (a staged drafter's includes its draft2 model's)."""

    model: str
    time_ns: int
    energy_nj: int  # its kernels' energy (idle power is charged once for the phase, `PrefillPrice`)


@dataclass(frozen=True)
class PrefillPrice:
    """A design's prefill: `ttft_ns` the longest model's prefill (they run at the same time on their own
    devices); `energy_nj` every model's kernels plus every device's idle power over `ttft_ns` (batch total)."""

    ttft_ns: int
    energy_nj: int
    models: tuple[ModelPrefill, ...]  # verifier first, then the drafters

    def as_dict(self, batch_size: int) -> dict:
        return {"ttft_ns": self.ttft_ns, "energy_nj": self.energy_nj,
                "energy_nj_per_request": self.energy_nj / batch_size,
                "models": [vars(m) for m in self.models]}


class PrefillModel:
    """Prices prefills of one scenario, memoised per (model, architecture, draft2 model)."""

    def __init__(self, scenario: Scenario, catalog: Catalog):
        self.scenario = scenario
        self.catalog = catalog
        # [PRE-3] the PIM units in normal mode: the time-shared rules read every tensor at full bandwidth
        shared = scenario.model_copy(update={"assumptions": Assumptions(
            memory_model="time-shared", energy_accounting=scenario.assumptions.energy_accounting)})
        self.costs = CostModel(shared, catalog)
        self._cache: dict[tuple, OpCost] = {}
        self._designs: dict[tuple, PrefillPrice] = {}

    def model_pass(self, model: ModelSpec, arch: ArchConfig) -> OpCost:
        """[PRE-1] One model's prefill pass over the batch's prompts on `arch` (memoised)."""
        key = (model.name, arch)
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = self._model_pass(model, arch)
        return cost

    def _model_pass(self, model: ModelSpec, arch: ArchConfig) -> OpCost:
        c, sc = self.costs, self.scenario
        layout = "spread" if arch.pim_units else "normal"  # [PRE-3] full external bandwidth either way
        total = sc.prompt_tokens * sc.batch_size
        chunks = -(-total // MAX_TOKENS)  # kernels are priced at most MAX_TOKENS tokens at a time
        tokens = -(-total // chunks)
        # [PRE-2] keys per query: the prompt's causal keys (at most the window) over its queries, rounded up
        keys = -(-prefill_attended(sc.prompt_tokens, model.sliding_window) // sc.prompt_tokens)
        parts = [0] * len(COMPONENTS)
        layer_ns = 0
        for op in LAYER_OPS:
            oc = c.op_cost(model, op, "host", 0, arch, tokens, layout, keys if op in ATTENTION_OPS else None)
            if oc is None:  # pragma: no cover - time-shared memory always offers the host this layout
                raise ValueError(f"{model.name}: {op} cannot run on the host of {arch.label()}")
            layer_ns += oc.time_ns
            parts = [p + q for p, q in zip(parts, oc.parts_nj, strict=True)]
        ar = c.allreduce_cost(model, arch, tokens)
        n_ar = sum(1 for n in layer_order(model.parallel_block) if n.startswith("allreduce"))
        layer_ns += n_ar * ar.time_ns
        parts = [chunks * model.layers * (p + n_ar * q) for p, q in zip(parts, ar.parts_nj, strict=True)]
        emb = c.embedding_cost(model, arch, layout, tokens)
        head = c.op_cost(model, "lm_head", "host", 0, arch, sc.batch_size, layout)  # each prompt's last position
        assert head is not None
        parts = [p + chunks * e + h for p, e, h in zip(parts, emb.parts_nj, head.parts_nj, strict=True)]
        time_ns = chunks * (emb.time_ns + model.layers * layer_ns) + head.time_ns
        return OpCost(time_ns, sum(parts), tuple(parts))

    def model_prefill(self, md: ModelDesign) -> ModelPrefill:
        """One model of a design: its prefill, then (staged) its draft2 model's on the same devices."""
        arch = md.arch
        cost = self.model_pass(self.catalog.models[md.model], arch)
        time_ns, energy = cost.time_ns, cost.energy_nj
        if md.staging is not None and md.staging.draft2 in self.catalog.models:  # an n-gram table: no pass
            d2 = self.model_pass(self.catalog.models[md.staging.draft2], arch)
            time_ns, energy = time_ns + d2.time_ns, energy + d2.energy_nj
        return ModelPrefill(md.model, time_ns, energy)

    def price(self, design: Design) -> PrefillPrice:
        """[PRE-4] The design's prefill: TTFT = the longest model's; energy = kernels + idle over TTFT
        (memoised by the models' architectures and draft2 models, all it depends on)."""
        mds = [md for _, md in design.models()]
        key = tuple((md.model, md.memory_type, md.pim_units, md.devices,
                     None if md.staging is None else md.staging.draft2) for md in mds)
        price = self._designs.get(key)
        if price is None:
            models = tuple(self.model_prefill(md) for md in mds)
            ttft = max(m.time_ns for m in models)
            powers = design_idle_powers_mw(self.costs, [self.costs.idle_power_mw(md.arch) for md in mds],
                                           [md.colocated for md in mds])  # [EDGE-3]
            idle = sum(-(-p * ttft // 1000) for p in powers)
            price = PrefillPrice(ttft, sum(m.energy_nj for m in models) + idle, models)
            if len(self._designs) >= CACHE_LIMIT:
                self._designs.clear()
            self._designs[key] = price
        return price


__all__ = ["ModelPrefill", "PrefillModel", "PrefillPrice"]
