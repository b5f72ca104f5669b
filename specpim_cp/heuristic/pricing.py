"""Pricing for the search: the reference evaluator's pieces behind caches, plus the capacity checker.

Every number the heuristic ranks by is built from the evaluator (the single source of truth): the
per-model pass prices (`Evaluator.pass_price`), capacities (`Evaluator.capacity`), draft2 steps and
acceptance rates, combined into `Metrics` by `Pricer.metrics_of`, which follows `Evaluator.evaluate`
line by line (same speculation functions, same integer rounding) but

- memoises the pure speculation functions (joint draft outcomes, expected tokens, fail probability),
  which `evaluate` recomputes for every design, and skips the human-readable breakdown;
- caches per-model pieces: (model, architecture, placement, staging) -> capacity use and drafter
  cycle; (architecture, placement, tokens) -> verifier pass (the evaluator's own pass cache is then
  redundant and dropped now and then to bound memory);
- caches whole designs: design key -> search objective, so a design seen before is never re-priced
  (`evaluations` counts requests, `unique_designs` the pricings).

Guards, so a change in evaluate.py cannot silently desynchronise the search: the first
SELF_TEST_DESIGNS designs of a run are priced both ways and any difference switches the run to
`Evaluator.evaluate` for every design (`Pricer.fast` False, reported in the SolveReport); the final
selection re-prices the archive of best designs with a plain `Evaluator` and ranks by those prices;
the tests compare both ways on random designs of every example. The design the heuristic returns is
priced by a plain `Evaluator`, breakdown and validation included.

The capacity checker (DESIGN.md section 2, rule 3): a model whose weights and KV cache exceed its
devices' total capacity is infeasible (the candidate is discarded or its architecture repaired by the
caller); a model whose PIM side or normal side overflows is feasible but pays spill shuffling, and the
checker offers a re-placement that moves operators between host and PIM so each side fits. Both are
priced; the better one is kept.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

from specpim_cp import speculation as spec
from specpim_cp.catalog import Catalog
from specpim_cp.costs import ArchConfig, CostModel, OpCost, TensorBytes
from specpim_cp.designs import build_design
from specpim_cp.errors import ScenarioError
from specpim_cp.evaluate import CapacityUse, Evaluator, Metrics
from specpim_cp.graph import PLACEABLE_OPS
from specpim_cp.heuristic.space import HOST, PIM, Genome, Place, SearchSpace
from specpim_cp.scenario import Design, ModelDesign, Placement

#: (pipeline, draft lengths, staging indices, architecture ids, placements): one concrete design.
DesignKey = tuple[bool, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[Place, ...]]

INFEASIBLE = math.inf
SELF_TEST_DESIGNS = 32  # designs priced both ways at the start of a run
RENEW_EVALUATOR_AFTER = 20_000  # pieces priced before the evaluator's pass cache is dropped (memory)


class _SearchCostModel(CostModel):
    """The scenario's cost tables with three more pure methods memoised (they build Fractions, sum
    tensor sizes or interpolate a table on every call, and a search calls them for every new piece)."""

    def __init__(self, scenario, catalog):
        super().__init__(scenario, catalog)
        self._spill_rates: dict[ArchConfig, tuple[Fraction, Fraction]] = {}
        self._allreduce: dict[tuple, OpCost] = {}
        self._tensor_bytes: dict[tuple[str, int], TensorBytes] = {}

    def tensor_bytes(self, model, devices: int) -> TensorBytes:
        tb = self._tensor_bytes.get((model.name, devices))
        if tb is None:
            tb = self._tensor_bytes[(model.name, devices)] = super().tensor_bytes(model, devices)
        return tb

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
    """The reference evaluator on the memoising cost model (its pricing code is unchanged)."""

    def __init__(self, scenario, catalog, costs: CostModel | None = None):
        super().__init__(scenario, catalog, costs or _SearchCostModel(scenario, catalog))


# Pure speculation functions, memoised (arguments as tuples).
_draft_outcomes = lru_cache(maxsize=65_536)(spec.draft_outcomes)
_expected_tokens_micro = lru_cache(maxsize=65_536)(spec.expected_tokens_micro)
_fail_q = lru_cache(maxsize=65_536)(spec.fail_q)
_staged_rounds_int = lru_cache(maxsize=65_536)(spec.staged_rounds_int)


class Pricer:
    """Prices concrete designs of one SearchSpace under one objective, with caches and counters."""

    def __init__(self, space: SearchSpace, catalog: Catalog, objective: str):
        self.space = space
        self.objective = objective
        self.evaluator = _SearchEvaluator(space.scenario, catalog)
        self._placements = {0: Placement(engine="host", share=0)}
        self._placements.update({s: Placement(engine="pim", share=s) for s in range(1, space.levels + 1)})
        self._models = [catalog.models[name] for name in space.model_names]
        self._cap: dict[tuple, CapacityUse] = {}
        self._fit: dict[tuple, Place | None] = {}
        self._verify: dict[tuple, tuple[int, int]] = {}
        self._drafter: dict[tuple, tuple[int, int, tuple[float, int] | None]] = {}
        self._alphas = tuple(self.evaluator.alpha(i) for i in range(space.n_drafters))
        self._static_mw = [self.evaluator.costs.static_power_mw(a) for a in space.archs]
        self.values: dict[DesignKey, float] = {}
        self.evaluations = 0
        self.fast = True  # compose Metrics from cached pieces (False: call Evaluator.evaluate per design)
        self.fast_disagreement: str | None = None
        self._self_tested = 0
        self._piece_misses = 0

    @property
    def unique_designs(self) -> int:
        return len(self.values)

    # -- per-model pieces --------------------------------------------------------------------
    def model_design(self, j: int, arch_id: int, place: Place, gamma: int | None, stg: int) -> ModelDesign:
        """Model j's part of a design (unvalidated: the pieces come from the restricted space)."""
        arch = self.space.archs[arch_id]
        return ModelDesign.model_construct(
            model=self.space.model_names[j], memory_type=arch.memory_type, pim_units=arch.pim_units,
            devices=arch.devices, placement={op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)},
            draft_length=gamma, staging=self.space.staging_opts[j - 1][stg] if j > 0 else None)

    def capacity(self, j: int, arch_id: int, place: Place, stg: int) -> CapacityUse:
        key = (j, arch_id, place, stg)
        cap = self._cap.get(key)
        if cap is None:
            cap = self._cap[key] = self.evaluator.capacity(self.model_design(j, arch_id, place, None, stg))
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
            stg = genome.staging[j - 1] if j > 0 else -1
            cap = self.capacity(j, archs[j], place, stg)
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
            metrics = self._metrics(key)
        except ScenarioError:
            metrics = None
        self.values[key] = value = INFEASIBLE if metrics is None else float(metrics.objective(self.objective))
        return value

    def _metrics(self, key: DesignKey) -> Metrics:
        """The fast composition, self-tested against Evaluator.evaluate on the first designs of a run;
        on any disagreement the run falls back to Evaluator.evaluate for good."""
        if not self.fast:
            return self.evaluator.evaluate(self._assemble(key), check=False).metrics
        metrics = self.metrics_of(key)
        if self._self_tested < SELF_TEST_DESIGNS:
            self._self_tested += 1
            reference = self.evaluator.evaluate(self._assemble(key), check=False).metrics
            if reference != metrics:
                self.fast = False
                self.fast_disagreement = f"{metrics} != Evaluator.evaluate's {reference}"
                return reference
        return metrics

    def metrics_of(self, key: DesignKey) -> Metrics:
        """Evaluator.evaluate's Metrics of a design (check=False), composed from cached pieces.

        Mirrors `Evaluator.evaluate` step by step; `cross_check` verifies the two agree exactly.
        """
        ev, sc = self.evaluator, self.space.scenario
        pipeline, gammas, staging, archs, places = key
        batch = sc.batch_size
        caps = []
        for j in range(self.space.n_models):
            stg, gamma = (staging[j - 1], gammas[j - 1]) if j > 0 else (-1, None)
            cap = self.capacity(j, archs[j], places[j], stg)
            if not self.holds(cap):
                ev.check_capacity(self.space.labels[j], self.model_design(j, archs[j], places[j], gamma, stg), cap)
            caps.append(cap)
        tokens = batch * (sum(gammas) + 1)
        vkey = (archs[0], places[0], tokens)
        verify = self._verify.get(vkey)
        if verify is None:
            vpass = ev.pass_price(self.model_design(0, archs[0], places[0], None, -1), tokens, caps[0].spill_kib)
            verify = self._verify[vkey] = (vpass.time_ns, vpass.energy_nj)
            self._piece_misses += 1
        dists, cycles, cycle_energy = [], [], []
        for i in range(self.space.n_drafters):
            j = i + 1
            dkey = (j, archs[j], places[j], staging[i])
            piece = self._drafter.get(dkey)
            if piece is None:
                piece = self._drafter[dkey] = self._drafter_cycle(i, archs[j], places[j], staging[i], caps[j])
                self._piece_misses += 1
            cycle_ns, cycle_nj, staged = piece
            if staged is None:
                dists.append(((gammas[i], spec.OUTCOME_SCALE),))
            else:
                dists.append(_staged_rounds_int(staged[0], staged[1], gammas[i]))
            cycles.append(cycle_ns)
            cycle_energy.append(cycle_nj)
        outcomes = _draft_outcomes(tuple(dists))
        q = _fail_q(self._alphas, gammas) if pipeline else 0
        sync = ev.costs.host.sync_latency_ns if self.space.n_drafters else 0
        round_ns = spec.round_time_ns(outcomes, cycles, verify[0], sync, pipeline, q)
        tokens_micro = _expected_tokens_micro(self._alphas, gammas)
        draft_nj = 0
        for i in range(self.space.n_drafters):  # two-stage rounding, as the evaluator
            # pipeline: a drafter whose own draft fails wastes its optimistic drafting and resyncs
            waste_q = _fail_q((self._alphas[i],), (gammas[i],)) if pipeline else 0
            expected = -(-(spec.expected_rounds_scaled(dists[i]) * cycle_energy[i]) // spec.OUTCOME_SCALE)
            draft_nj += -(-(expected * (spec.Q_SCALE + waste_q)) // spec.Q_SCALE)
        static_nj = sum(-(-self._static_mw[a] * round_ns // 1000) for a in archs)  # per model, rounded up
        if self._piece_misses >= RENEW_EVALUATOR_AFTER:  # the pieces are cached here: drop the evaluator's
            self._piece_misses = 0                       # own pass cache (shared cost tables are kept)
            self.evaluator = _SearchEvaluator(sc, ev.catalog, ev.costs)
        return Metrics(round_ns, tokens_micro, verify[1] + draft_nj + static_nj, batch)

    def _drafter_cycle(self, i: int, arch_id: int, place: Place, stg: int,
                       cap: CapacityUse) -> tuple[int, int, tuple[float, int] | None]:
        """(cycle ns, cycle nJ, (alpha2, gamma2) if staged) of drafter i, as Evaluator.evaluate has it."""
        ev, batch = self.evaluator, self.space.scenario.batch_size
        md = self.model_design(i + 1, arch_id, place, None, stg)
        if md.staging is None:
            step = ev.pass_price(md, batch, cap.spill_kib)
            return step.time_ns, step.energy_nj, None
        g2 = md.staging.draft_length
        d2 = ev.draft2_step(md)
        vpass = ev.pass_price(md, batch * (g2 + 1), cap.spill_kib)
        a2 = ev.alpha2(i, md.staging.draft2)
        return g2 * d2.time_ns + vpass.time_ns, g2 * d2.energy_nj + vpass.energy_nj, (a2, g2)

    def reference_metrics(self, keys) -> dict[DesignKey, Metrics]:
        """Metrics of designs priced by a plain Evaluator (fresh caches, plain cost model, validation)."""
        reference = Evaluator(self.space.scenario, self.evaluator.catalog)
        return {key: reference.evaluate(self.design(key)).metrics for key in keys}

    def cross_check(self, keys, reference: dict[DesignKey, Metrics] | None = None) -> list[DesignKey]:
        """Designs whose search price differs from a plain Evaluator's (empty when all agree)."""
        reference = reference if reference is not None else self.reference_metrics(keys)
        return [key for key, metrics in reference.items() if self._metrics(key) != metrics]

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
