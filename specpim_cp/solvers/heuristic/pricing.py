"""Pricing for the search: the evaluator's prices behind a design cache, plus the capacity checker.

Every number the heuristic ranks by is the search objective of `Evaluator.metrics` (the single source of
truth). The search asks for tens of thousands of designs a second, so `Pricer` prices a design from its
compact key without building a `Design`: passes from the evaluator's cost tables (`Evaluator.pass_table`,
`Evaluator.pass_time_energy`), capacity from `Evaluator.capacity_of`, cycles from `Evaluator.draft2_step`
and `Evaluator.drafter_cycle`, round statistics from `physics/rounds.round_stats`. `_round_value` adds
them with `Evaluator._price`'s integer rules and divides as `Metrics.objective` does (a float of an exact
ratio of integers is the same however the ratio is reduced; tests/test_evaluator_speedpath.py checks it).
`Pricer` caches whole designs by key (`evaluations` counts requests, `unique_designs` the pricings) and,
per compact key, each model's passes, cycles and capacity use. The archive's designs the selection may pick
and the returned design are re-priced by `Evaluator.metrics` and `Evaluator.evaluate` on the validated `Design`.

The capacity checker (CAP-1, CAP-2, formulations/architecture_capacity.md): a model whose PIM units or
normal units cannot hold what its layouts put there is not a design; the checker offers a re-placement
that fits, changing host layouts first (normal <-> spread) and then moving operators between host and
PIM, moving as few bytes as it can. When none fits, the caller discards the candidate or repairs its
architecture.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import (
    CapacityUse,
    Evaluator,
    Metrics,
    PassTable,
    drafting_energy_nj,
    idle_energy_nj,
    staged_cycle,
)
from specpim_cp.physics.rounds import RoundStats, drafter_cycle_tokens, round_stats, verifier_tokens
from specpim_cp.problem.design import Design, ModelDesign, Placement
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.solvers.heuristic.genes import HOST, HOST_NORMAL, HOST_SPREAD, PIM, Genome, Place, SearchSpace

#: (speculation choice id (SearchSpace.choice_id), architecture ids, placements): one concrete design.
DesignKey = tuple[int, tuple[int, ...], tuple[Place, ...]]

INFEASIBLE = math.inf
MODEL_KEY_CACHE = 50_000  # Evaluator.model_key per (model, architecture, placement) (emptied when full)
PIECE_CACHE = 200_000  # passes, cycles, placement keys per compact key (each emptied when full)


class ChoiceRound(NamedTuple):
    """What pricing a round needs of one speculation choice (per choice id)."""

    allowed: bool  # DesignSpace.choice_allowed
    pipeline: bool
    drafts: tuple[int, ...]  # per drafter: index into its options
    plain: tuple[bool, ...]  # per drafter: an unstaged chain (its cycle is one pass of cycle_tokens)
    verify_tokens: int
    cycle_tokens: tuple[int, ...]
    stats: RoundStats
    sync_ns: int


class Pricer:
    """Prices concrete designs of one SearchSpace under one objective, with caches and counters."""

    def __init__(self, space: SearchSpace, catalog: Catalog, objective: str, evaluator: Evaluator | None = None):
        """`evaluator`: an Evaluator of the space's scenario and `catalog` whose caches to read and fill
        (`shared_evaluator`: the baselines' and the exact solve's); None: a fresh one."""
        self.space = space
        self.objective = objective
        self.evaluator = Evaluator(space.scenario, catalog) if evaluator is None else evaluator
        self._placements = {HOST_NORMAL: Placement(engine="host", share=0),
                             HOST_SPREAD: Placement(engine="host", share=0, layout="spread")}
        self._placements.update({s: Placement(engine="pim", share=s) for s in range(1, space.levels + 1)})
        self._model_keys: dict[tuple, tuple] = {}
        self._cap: dict[tuple, CapacityUse] = {}
        self._fit: dict[tuple, Place | None] = {}
        self._pim_kib_memo: dict[tuple[int, int], tuple[dict[str, int], ...]] = {}
        self.values: dict[DesignKey, float] = {}
        self.evaluations = 0
        self._rounds: dict[int, ChoiceRound] = {}
        self._tables: dict[tuple[int, int, int], PassTable] = {}  # (model, arch id, tokens)
        self._passes: dict[tuple, tuple[int, int]] = {}  # (model, arch id, place, tokens) -> (ns, nJ)
        self._cycles: dict[tuple, tuple[int, int]] = {}  # (drafter, arch id, place, option) -> (ns, nJ)
        self._draft2_steps: dict[tuple, tuple[int, int]] = {}  # (drafter, arch id, draft2) -> (ns, nJ)
        self._place_keys: dict[Place, tuple[tuple, tuple[str, ...]]] = {}  # -> (Placement.keys, layouts)
        self._idle_mw = [self.evaluator.costs.idle_power_mw(a) for a in space.archs]
        self._batch = space.scenario.batch_size
        # `complete`'s per-model placements of the last genome it completed, by architecture id
        self._genome: Genome | None = None
        self._genome_cid = 0
        self._genome_places: list[dict[int, Place | bool]] = []
        # per model, per drafter option: the draft2 model its staging loads (capacity depends on it)
        self._draft2 = [[None]] + [[None if o.staging is None else o.staging.draft2 for o in opts]
                                   for opts in space.drafter_opts]

    @property
    def unique_designs(self) -> int:
        return len(self.values)

    # -- per-model pieces --------------------------------------------------------------------
    def model_design(self, j: int, arch_id: int, place: Place, draft: int) -> ModelDesign:
        """Model j's part of a design (unvalidated: the pieces come from the restricted space); `draft`
        indexes drafter j-1's options (ignored for the verifier, j = 0).
        Not cached: long-lived objects make garbage collection costly."""
        arch = self.space.archs[arch_id]
        dc = self.space.drafter_opts[j - 1][draft] if j > 0 else None
        return ModelDesign.model_construct(
            model=self.space.model_names[j], memory_type=arch.memory_type, pim_units=arch.pim_units,
            devices=arch.devices, placement={op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)},
            draft_length=None if dc is None else dc.draft_length, staging=None if dc is None else dc.staging,
            tree=None if dc is None else dc.tree)

    def model_key(self, j: int, arch_id: int, place: Place, md: ModelDesign) -> tuple:
        """Evaluator.model_key(md) of `model_design(j, arch_id, place, ...)`, cached (the same for every
        draft length and staging)."""
        model_key = self._model_keys.get((j, arch_id, place))
        if model_key is None:
            if len(self._model_keys) >= MODEL_KEY_CACHE:
                self._model_keys.clear()
            model_key = self._model_keys[(j, arch_id, place)] = Evaluator.model_key(md)
        return model_key

    def place_keys(self, place: Place) -> tuple[tuple, tuple[str, ...]]:
        """(`Placement.key` per operator, layout per operator) of a placement (cached)."""
        hit = self._place_keys.get(place)
        if hit is None:
            if len(self._place_keys) >= PIECE_CACHE:
                self._place_keys.clear()
            ps = [self._placements[p] for p in place]
            hit = self._place_keys[place] = (tuple(p.key for p in ps), tuple(p.layout for p in ps))
        return hit

    def capacity(self, j: int, arch_id: int, place: Place, draft: int) -> CapacityUse:
        """`Evaluator.capacity` of model j's part of the design (cached by layouts: shares store nothing)."""
        draft2 = self._draft2[j][draft] if j else None
        layouts = self.place_keys(place)[1]
        key = (j, arch_id, layouts, draft2)
        cap = self._cap.get(key)
        if cap is None:
            if draft2 in self.evaluator.catalog.ngrams:
                draft2 = None  # an n-gram draft2 model stores nothing on the devices (Evaluator.draft2_model)
            cap = self._cap[key] = self.evaluator.capacity_of(self.space.model_names[j], self.space.archs[arch_id],
                                                              layouts, draft2)
        return cap

    @staticmethod
    def holds(cap: CapacityUse) -> bool:
        """Each side holds what the layouts put there (else Evaluator.check_capacity rejects it)."""
        return cap.holds

    def arch_holds(self, genome: Genome, j: int, arch_id: int) -> bool:
        """Model j fits `arch_id` with the genome's placement or the capacity checker's re-placement."""
        place = self.space.placement(genome, j, arch_id)
        draft = genome.drafts[j - 1] if j > 0 else 0
        return self.holds(self.capacity(j, arch_id, place, draft)) or \
            self.fit(j, arch_id, place, draft, genome.shares[j]) is not None

    def fit(self, j: int, arch_id: int, place: Place, draft: int, shares: tuple[int, ...]) -> Place | None:
        """Capacity repair of a placement that does not fit: a re-placement that fits, or None."""
        key = (j, arch_id, place, self._draft2[j][draft] if j else None, shares)
        if key in self._fit:
            return self._fit[key]
        self._fit[key] = out = self._fit_uncached(j, arch_id, place, draft, shares)
        return out

    def _pim_kib(self, j: int, arch_id: int) -> tuple[dict[str, int], ...]:
        """Per operator, layout -> KiB of its tensor in PIM units (the LM head's with the input embedding
        table beside it), as `CapacityTable.tensor_split` (cached per model and architecture)."""
        hit = self._pim_kib_memo.get((j, arch_id))
        if hit is None:
            tab = self.evaluator.capacity_table(self.space.model_names[j], self.space.archs[arch_id])
            hit = self._pim_kib_memo[(j, arch_id)] = tuple(
                {lay: tab.tensor_split(o, lay)[0] for lay in ("normal", "spread", "pim")}
                for o in range(len(PLACEABLE_OPS)))
        return hit

    def _moves(self, j: int, arch_id: int, place: Place, shares: tuple[int, ...], to_pim: bool):
        """Single-operator changes that shift bytes toward the PIM side (`to_pim`) or the normal side:
        (bytes shifted, new code, operator), layout changes before engine changes."""
        sp = self.space
        pim_kib = self._pim_kib(j, arch_id)
        host_codes = sp.host_codes(arch_id)
        layout_of = {HOST_NORMAL: "normal", HOST_SPREAD: "spread"}
        out = []
        for o, code in enumerate(place):
            old = pim_kib[o]["pim" if code > 0 else layout_of[code]]
            targets = []
            if code <= 0:  # a host operator: the other layout, or PIM
                targets += [(0, c) for c in host_codes if c != code]
                if PIM in sp.engine_opts[o] and sp.pim_possible(arch_id):
                    targets.append((1, shares[o]))
            elif HOST in sp.engine_opts[o]:  # a PIM operator: the host
                targets += [(1, c) for c in host_codes]
            for rank, new in targets:
                pim_bytes = pim_kib[o]["pim" if new > 0 else layout_of[new]]
                shift = pim_bytes - old if to_pim else old - pim_bytes
                if shift > 0:
                    out.append((rank, shift, new, o))
        return out

    def _fit_uncached(self, j: int, arch_id: int, place: Place, draft: int, shares: tuple[int, ...]) -> Place | None:
        cap = self.capacity(j, arch_id, place, draft)
        if cap.holds:
            return None
        to_pim = cap.normal_need_kib > cap.normal_capacity_kib
        over = (cap.normal_need_kib - cap.normal_capacity_kib) if to_pim else (cap.pim_need_kib - cap.pim_capacity_kib)
        room = (cap.pim_capacity_kib - cap.pim_need_kib) if to_pim else (cap.normal_capacity_kib - cap.normal_need_kib)
        if over > room:
            return None
        moves = self._moves(j, arch_id, place, shares, to_pim)
        single = [m for m in moves if over <= m[1] <= room]
        if single:
            chosen = [min(single, key=lambda m: (m[0], m[1], m[3]))]
        else:  # layout changes first, then the largest moves, until the overflow is gone
            chosen, moved, used = [], 0, set()
            for m in sorted(moves, key=lambda m: (m[0], -m[1], m[3])):
                if moved >= over:
                    break
                if m[3] not in used and moved + m[1] <= room:
                    chosen.append(m)
                    moved += m[1]
                    used.add(m[3])
        if not chosen:
            return None
        new = list(place)
        for _, _, code, o in chosen:
            new[o] = code
        new_place = tuple(new)
        return new_place if self.capacity(j, arch_id, new_place, draft).holds else None

    # -- whole designs -----------------------------------------------------------------------
    def complete(self, genome: Genome, archs: tuple[int, ...]) -> tuple[float, DesignKey | None]:
        """Priced completion of a genome on architectures `archs`: the genes' placements, repaired for
        each architecture and, where a side overflows, re-placed by the capacity checker.
        (INFEASIBLE, None) when a model cannot be made to fit its devices. (The placements of the last
        genome are kept per model and architecture: an MCTS search completes one genome many times.)"""
        if genome is not self._genome:  # a search completes one genome on many architectures
            self._genome = genome
            self._genome_cid = self.space.choice_id(genome)
            self._genome_places = [{} for _ in range(self.space.n_models)]
        cid = self._genome_cid
        if not self.choice_round(cid).allowed:
            return INFEASIBLE, None
        places: list[Place] = []
        for j, (fitted, arch_id) in enumerate(zip(self._genome_places, archs)):
            place = fitted.get(arch_id)
            if place is None:
                place = fitted[arch_id] = self._fitted_place(genome, j, arch_id)
            if place is False:
                return INFEASIBLE, None
            places.append(place)
        key: DesignKey = (cid, archs, tuple(places))
        value = self.price(key, fits=True)
        return (INFEASIBLE, None) if value == INFEASIBLE else (value, key)

    def _fitted_place(self, genome: Genome, j: int, arch_id: int) -> Place | bool:
        """Model j's placement on `arch_id` under the genome, re-placed by the capacity checker where a
        side overflows; False when no re-placement fits."""
        place = self.space.placement(genome, j, arch_id)
        draft = genome.drafts[j - 1] if j > 0 else 0
        if not self.holds(self.capacity(j, arch_id, place, draft)):
            place = self.fit(j, arch_id, place, draft, genome.shares[j])
        return False if place is None else place

    def price(self, key: DesignKey, fits: bool = False) -> float:
        """Search objective of one concrete design (cached); INFEASIBLE if the evaluator rejects it.
        `fits`: every model is known to fit its devices (the keys `complete` builds)."""
        self.evaluations += 1
        value = self.values.get(key)
        if value is None:
            try:
                value = self._round_value(key, fits)
            except ScenarioError:
                value = INFEASIBLE
            self.values[key] = value
        return value

    def choice_round(self, cid: int) -> ChoiceRound:
        """The ChoiceRound of a choice id (cached)."""
        rc = self._rounds.get(cid)
        if rc is None:
            sp = self.space
            choice = sp.choice(cid)
            drafts, pipeline = sp.split_choice_id(cid)
            allowed = sp.design_space.choice_allowed(choice)
            rc = self._rounds[cid] = ChoiceRound(
                allowed, pipeline, drafts, tuple(d.staging is None and d.tree is None for d in choice.drafters),
                verifier_tokens(self._batch, choice),
                tuple(drafter_cycle_tokens(self._batch, d) for d in choice.drafters),
                round_stats(choice, self.evaluator.acceptance),
                self.evaluator.costs.host.sync_latency_ns if choice.drafters else 0)
        return rc

    def pass_time_energy(self, j: int, arch_id: int, place: Place, tokens: int) -> tuple[int, int]:
        """(time_ns, energy_nj) of model j's pass over `tokens` tokens (`Evaluator.pass_time_energy`)."""
        key = (j, arch_id, place, tokens)
        hit = self._passes.get(key)
        if hit is None:
            tkey = (j, arch_id, tokens)
            tab = self._tables.get(tkey)
            if tab is None:
                tab = self._tables[tkey] = self.evaluator.pass_table(self.space.model_names[j],
                                                                     self.space.archs[arch_id], tokens)
            try:
                hit = Evaluator.pass_time_energy(tab, self.place_keys(place)[0])
            except KeyError:  # a placement the architecture lacks: Evaluator.pass_price rejects it too
                raise ScenarioError(f"{self.space.model_names[j]}: placement {place} is not offered") from None
            if len(self._passes) >= PIECE_CACHE:
                self._passes.clear()
            self._passes[key] = hit
        return hit

    def drafter_cycle(self, i: int, arch_id: int, place: Place, option: int) -> tuple[int, int]:
        """(time_ns, energy_nj) of a staged or tree drafter's cycle, as `Evaluator.drafter_cycle`: a staged
        chain is gamma2 draft2 steps (`Evaluator.draft2_step`) and one pass over gamma2 + 1 tokens per
        sequence; a tree is priced by the evaluator."""
        key = (i, arch_id, place, option)
        hit = self._cycles.get(key)
        if hit is None:
            dc = self.space.drafter_opts[i][option]
            if dc.tree is None and dc.staging is not None:
                step_ns, step_nj = self.pass_time_energy(i + 1, arch_id, place, drafter_cycle_tokens(self._batch, dc))
                d2_key = (i, arch_id, dc.staging.draft2)
                d2 = self._draft2_steps.get(d2_key)
                if d2 is None:
                    step = self.evaluator.draft2_step(self.model_design(i + 1, arch_id, place, option))
                    d2 = self._draft2_steps[d2_key] = (step.time_ns, step.energy_nj)
                hit = staged_cycle(step_ns, step_nj, d2[0], d2[1], dc.staging.draft_length)
            else:
                md = self.model_design(i + 1, arch_id, place, option)
                cycle = self.evaluator.drafter_cycle(i, md, self.model_key(i + 1, arch_id, place, md))
                hit = (cycle.time_ns, cycle.energy_nj)
            if len(self._cycles) >= PIECE_CACHE:
                self._cycles.clear()
            self._cycles[key] = hit
        return hit

    def _round_value(self, key: DesignKey, fits: bool = False) -> float:
        """The search objective of `Evaluator.metrics` of the key's design, from the pieces: the same
        integers as `Evaluator._price` (capacity, verification pass, drafter cycles, round time, energy
        per round with the drafting and idle energy) and the same float as `Metrics.objective`."""
        cid, archs, places = key
        rc = self._rounds.get(cid) or self.choice_round(cid)
        if not fits:
            for j, (arch_id, place) in enumerate(zip(archs, places)):
                if not self.capacity(j, arch_id, place, rc.drafts[j - 1] if j else 0).holds:
                    return INFEASIBLE
        passes = self._passes
        verify = passes.get((0, archs[0], places[0], rc.verify_tokens)) or \
            self.pass_time_energy(0, archs[0], places[0], rc.verify_tokens)
        cycles = []
        for i, plain in enumerate(rc.plain):
            j = i + 1
            if plain:
                cycles.append(passes.get((j, archs[j], places[j], rc.cycle_tokens[i])) or
                              self.pass_time_energy(j, archs[j], places[j], rc.cycle_tokens[i]))
            else:
                cycles.append(self.drafter_cycle(i, archs[j], places[j], rc.drafts[i]))
        stats = rc.stats
        round_ns = spec.round_time_ns_checked_args(stats.outcomes, [c[0] for c in cycles], verify[0], rc.sync_ns,
                                                   rc.pipeline, stats.q)
        tokens = stats.tokens_micro
        # Metrics.latency_fraction, energy_fraction and their product, as floats of the exact ratios
        if self.objective == "latency":
            return round_ns * spec.TOKENS_SCALE / tokens
        energy_nj = verify[1] + sum(drafting_energy_nj(stats, i, cycle[1]) for i, cycle in enumerate(cycles))
        idle = self._idle_mw
        for arch_id in archs:
            energy_nj += idle_energy_nj(idle[arch_id], round_ns)
        if self.objective == "energy":
            return energy_nj * spec.TOKENS_SCALE / (tokens * self._batch)
        return (round_ns * energy_nj * spec.TOKENS_SCALE * spec.TOKENS_SCALE) / (tokens * tokens * self._batch)

    def metrics(self, keys) -> dict[DesignKey, Metrics]:
        """Metrics of designs, validated (`design`, `Evaluator.check`): the final selection's prices."""
        return {key: self.evaluator.metrics(self.design(key)) for key in keys}

    def design(self, key: DesignKey) -> Design:
        """The validated Design of a key (what the heuristic returns and the evaluator re-prices)."""
        sp = self.space
        cid, archs, places = key
        return sp.design_space.build(
            [sp.archs[a] for a in archs],
            [{op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)} for place in places],
            sp.choice(cid))
