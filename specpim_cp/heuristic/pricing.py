"""Pricing for the search: the reference evaluator behind caches, plus the capacity checker.

Every number the heuristic ranks by comes from `Evaluator.evaluate` (the single source of truth);
this module only avoids asking it twice. Three caches, from coarse to fine:

- design key -> Metrics: a design seen before is never re-priced (`evaluations` counts requests,
  `unique_designs` the pricings);
- (model, architecture, placement, draft length, staging) -> ModelDesign and its CapacityUse: the
  per-model pieces a design is assembled from, built once;
- the evaluator's own per-model pass-price cache (a drafter's pass is shared by every design that
  pairs it with any verifier).

During the search the evaluator skips the human-readable breakdown (`_SearchEvaluator`); the design
the heuristic returns is re-priced by a plain `Evaluator`, breakdown and validation included.

The capacity checker (DESIGN.md section 2, rule 3): a model whose weights and KV cache exceed its
devices' total capacity is infeasible (the candidate is discarded or its architecture repaired by the
caller); a model whose PIM side or normal side overflows is feasible but pays spill shuffling, and the
checker offers a re-placement that moves operators between host and PIM so each side fits. Both are
priced; the better one is kept.
"""

from __future__ import annotations

import math
from fractions import Fraction

from specpim_cp.catalog import Catalog
from specpim_cp.costs import ArchConfig, CostModel, OpCost
from specpim_cp.designs import build_design
from specpim_cp.errors import ScenarioError
from specpim_cp.evaluate import CapacityUse, Evaluator, Metrics
from specpim_cp.graph import PLACEABLE_OPS
from specpim_cp.heuristic.space import HOST, PIM, Genome, Place, SearchSpace
from specpim_cp.scenario import Design, ModelDesign, Placement

#: (pipeline, draft lengths, staging indices, architecture ids, placements): one concrete design.
DesignKey = tuple[bool, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[Place, ...]]

INFEASIBLE = math.inf


class _SearchCostModel(CostModel):
    """The scenario's cost tables with two more pure methods memoised (they build Fractions or
    interpolate a table on every call, and a search calls them for every new pass price)."""

    def __init__(self, scenario, catalog):
        super().__init__(scenario, catalog)
        self._spill_rates: dict[ArchConfig, tuple[Fraction, Fraction]] = {}
        self._allreduce: dict[tuple, OpCost] = {}

    def spill_rates(self, arch: ArchConfig) -> tuple[Fraction, Fraction]:
        rates = self._spill_rates.get(arch)
        if rates is None:
            rates = self._spill_rates[arch] = super().spill_rates(arch)
        return rates

    def allreduce_cost(self, model, arch: ArchConfig, tokens: int) -> OpCost:
        key = (model.name, arch, tokens)
        cost = self._allreduce.get(key)
        if cost is None:
            cost = self._allreduce[key] = super().allreduce_cost(model, arch, tokens)
        return cost


class _SearchEvaluator(Evaluator):
    """The reference evaluator without the per-design breakdown, capacities memoised per ModelDesign.

    Metrics are computed by the inherited `evaluate`, unchanged; only the breakdown dictionary (read
    by humans, not by the search) is skipped. The memo is keyed by object identity: the Pricer keeps
    every ModelDesign it hands in alive, so identities are never reused.
    """

    def __init__(self, scenario, catalog):
        super().__init__(scenario, catalog, _SearchCostModel(scenario, catalog))
        self._capacity_memo: dict[int, tuple[ModelDesign, CapacityUse]] = {}

    def capacity(self, md: ModelDesign) -> CapacityUse:
        hit = self._capacity_memo.get(id(md))
        if hit is not None and hit[0] is md:
            return hit[1]
        cap = super().capacity(md)
        self._capacity_memo[id(md)] = (md, cap)
        return cap

    def _breakdown(self, *args, **kwargs) -> dict:
        return {}


class Pricer:
    """Prices concrete designs of one SearchSpace under one objective, with caches and counters."""

    def __init__(self, space: SearchSpace, catalog: Catalog, objective: str):
        self.space = space
        self.objective = objective
        self.evaluator = _SearchEvaluator(space.scenario, catalog)
        self._placements = {0: Placement(engine="host", share=0)}
        self._placements.update({s: Placement(engine="pim", share=s) for s in range(1, space.levels + 1)})
        self._models = [catalog.models[name] for name in space.model_names]
        self._md: dict[tuple, ModelDesign] = {}
        self._cap: dict[tuple, CapacityUse] = {}
        self._fit: dict[tuple, Place | None] = {}
        self.metrics: dict[DesignKey, Metrics | None] = {}
        self.values: dict[DesignKey, float] = {}
        self.evaluations = 0

    @property
    def unique_designs(self) -> int:
        return len(self.values)

    # -- per-model pieces --------------------------------------------------------------------
    def model_design(self, j: int, arch_id: int, place: Place, gamma: int | None, stg: int) -> ModelDesign:
        key = (j, arch_id, place, gamma, stg)
        md = self._md.get(key)
        if md is None:
            arch = self.space.archs[arch_id]
            staging = self.space.staging_opts[j - 1][stg] if j > 0 else None
            md = ModelDesign.model_construct(
                model=self.space.model_names[j], memory_type=arch.memory_type, pim_units=arch.pim_units,
                devices=arch.devices, placement={op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)},
                draft_length=gamma, staging=staging)
            self._md[key] = md
        return md

    def capacity(self, j: int, arch_id: int, place: Place, stg: int, gamma: int | None = None) -> CapacityUse:
        """Capacity use of a piece (independent of the draft length, which only picks the
        ModelDesign the evaluator then sees first, so its memo hits when the design is priced)."""
        key = (j, arch_id, place, stg)
        cap = self._cap.get(key)
        if cap is None:
            cap = self.evaluator.capacity(self.model_design(j, arch_id, place, gamma, stg))
            self._cap[key] = cap
        return cap

    @staticmethod
    def holds(cap: CapacityUse) -> bool:
        """The model fits its devices in total (else infeasible, Evaluator.check_capacity)."""
        return cap.pim_need_kib + cap.host_need_kib <= cap.pim_capacity_kib + cap.normal_capacity_kib

    def arch_holds(self, genome: Genome, j: int, arch_id: int) -> bool:
        place = self.space.placement(genome, j, arch_id)
        return self.holds(self.capacity(j, arch_id, place, genome.staging[j - 1] if j > 0 else -1))

    def fit(self, j: int, arch_id: int, place: Place, stg: int, shares: tuple[int, ...]) -> Place | None:
        """Capacity repair: a re-placement without spill, moving as few bytes as possible, or None."""
        key = (j, arch_id, place, stg, shares)
        if key in self._fit:
            return self._fit[key]
        self._fit[key] = out = self._fit_uncached(j, arch_id, place, stg, shares)
        return out

    def _fit_uncached(self, j: int, arch_id: int, place: Place, stg: int, shares: tuple[int, ...]) -> Place | None:
        cap = self.capacity(j, arch_id, place, stg)
        if cap.spill_kib == 0 or not self.holds(cap):
            return None
        sp = self.space
        arch = sp.archs[arch_id]
        op_kib = self.evaluator.costs.tensor_bytes(self._models[j], arch.devices).op_kib
        if cap.pim_need_kib > cap.pim_capacity_kib:  # PIM side overflows: move operators to the host
            over, room, to = cap.pim_need_kib - cap.pim_capacity_kib, cap.normal_capacity_kib - cap.host_need_kib, HOST
            movable = [o for o, p in enumerate(place) if p > 0 and HOST in sp.engine_opts[o]]
            if not sp.host_possible(arch):
                return None
        else:  # normal side overflows: move operators to PIM
            over, room, to = cap.host_need_kib - cap.normal_capacity_kib, cap.pim_capacity_kib - cap.pim_need_kib, PIM
            movable = [o for o, p in enumerate(place) if p == 0 and PIM in sp.engine_opts[o]]
            if not sp.pim_possible(arch):
                return None
        sizes = {o: op_kib[PLACEABLE_OPS[o]] for o in movable}
        single = [o for o in movable if over <= sizes[o] <= room]
        if single:
            chosen = [min(single, key=lambda o: (sizes[o], o))]
        else:  # largest first until the overflow is gone
            chosen, moved = [], 0
            for o in sorted(movable, key=lambda o: (-sizes[o], o)):
                if moved >= over:
                    break
                if moved + sizes[o] <= room:
                    chosen.append(o)
                    moved += sizes[o]
        if not chosen:
            return None
        new = list(place)
        for o in chosen:
            new[o] = 0 if to == HOST else shares[o]
        new_place = tuple(new)
        return new_place if self.capacity(j, arch_id, new_place, stg).spill_kib == 0 else None

    # -- whole designs -----------------------------------------------------------------------
    def complete(self, genome: Genome, archs: tuple[int, ...]) -> tuple[float, DesignKey | None]:
        """Best priced completion of a genome on architectures `archs`: the genes' placements,
        repaired for each architecture, and (where a side overflows) the capacity checker's
        re-placement. (INFEASIBLE, None) when a model does not fit its devices at all."""
        sp = self.space
        places: list[Place] = []
        fitted: list[tuple[int, Place]] = []
        for j in range(sp.n_models):
            place = sp.placement(genome, j, archs[j])
            stg, gamma = (genome.staging[j - 1], genome.gammas[j - 1]) if j > 0 else (-1, None)
            cap = self.capacity(j, archs[j], place, stg, gamma)
            if not self.holds(cap):
                return INFEASIBLE, None
            if cap.spill_kib:
                alt = self.fit(j, archs[j], place, stg, genome.shares[j])
                if alt is not None:
                    fitted.append((j, alt))
            places.append(place)
        best_key: DesignKey = (genome.pipeline, genome.gammas, genome.staging, archs, tuple(places))
        best = self.price(best_key)
        for j, alt in fitted:
            trial = list(best_key[4])
            trial[j] = alt
            key = (genome.pipeline, genome.gammas, genome.staging, archs, tuple(trial))
            value = self.price(key)
            if value < best:
                best, best_key = value, key
        if best == INFEASIBLE:
            return INFEASIBLE, None
        return best, best_key

    def price(self, key: DesignKey) -> float:
        """Search objective of one concrete design (cached); INFEASIBLE if the evaluator rejects it."""
        self.evaluations += 1
        value = self.values.get(key)
        if value is not None:
            return value
        try:
            metrics = self.evaluator.evaluate(self._assemble(key), check=False).metrics
        except ScenarioError:
            metrics = None
        self.metrics[key] = metrics
        self.values[key] = value = INFEASIBLE if metrics is None else float(metrics.objective(self.objective))
        return value

    def _assemble(self, key: DesignKey) -> Design:
        pipeline, gammas, staging, archs, places = key
        mds = [self.model_design(0, archs[0], places[0], None, -1)]
        mds += [self.model_design(j, archs[j], places[j], gammas[j - 1], staging[j - 1])
                for j in range(1, self.space.n_models)]
        return Design.model_construct(pipeline=pipeline, verifier=mds[0], drafters=mds[1:])

    def design(self, key: DesignKey) -> Design:
        """The validated Design of a key (what the heuristic returns and the evaluator re-prices)."""
        sp = self.space
        pipeline, gammas, staging, archs, places = key
        return build_design(
            sp.scenario, [sp.archs[a] for a in archs],
            [{op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)} for place in places],
            list(gammas), [sp.staging_opts[i][s] for i, s in enumerate(staging)], pipeline)
