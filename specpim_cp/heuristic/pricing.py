"""Pricing for the search: `Evaluator.metrics` behind a design cache, plus the capacity checker.

Every number the heuristic ranks by is `Evaluator.metrics` of the design (the single source of truth;
this module does no arithmetic of its own on prices). For speed,

- the evaluator caches its per-model pieces (pass prices, capacities, drafter cycles) and the pure
  speculation functions, and the cost model its tables, so a design that shares models with designs
  seen before is priced from cached pieces;
- `Pricer` caches whole designs: design key -> search objective, so a design seen before is never
  re-priced (`evaluations` counts requests, `unique_designs` the pricings), and each model's
  evaluator key (`Evaluator.model_key`) and capacity use per compact key.

The design the heuristic returns is re-priced by a plain `Evaluator`, breakdown and validation included.

The capacity checker (DESIGN.md section 2, rule 3): a model whose PIM units or normal units cannot hold
what its layouts put there is not a design; the checker offers a re-placement that fits, changing host
layouts first (normal <-> spread) and then moving operators between host and PIM, moving as few bytes
as it can. When no re-placement fits, the candidate is discarded or its architecture repaired by the
caller.
"""

from __future__ import annotations

import math

from specpim_cp.catalog import Catalog
from specpim_cp.design import Design, ModelDesign, Placement
from specpim_cp.errors import ScenarioError
from specpim_cp.evaluate import CapacityUse, Evaluator, Metrics
from specpim_cp.graph import PLACEABLE_OPS
from specpim_cp.heuristic.space import HOST, HOST_NORMAL, HOST_SPREAD, PIM, Genome, Place, SearchSpace

#: (speculation choice id (SearchSpace.choice_id), architecture ids, placements): one concrete design.
DesignKey = tuple[int, tuple[int, ...], tuple[Place, ...]]

INFEASIBLE = math.inf
MODEL_KEY_CACHE = 50_000  # Evaluator.model_key per (model, architecture, placement) (emptied when full)


class Pricer:
    """Prices concrete designs of one SearchSpace under one objective, with caches and counters."""

    def __init__(self, space: SearchSpace, catalog: Catalog, objective: str):
        self.space = space
        self.objective = objective
        self.evaluator = Evaluator(space.scenario, catalog)
        self._placements = {HOST_NORMAL: Placement(engine="host", share=0),
                             HOST_SPREAD: Placement(engine="host", share=0, layout="spread")}
        self._placements.update({s: Placement(engine="pim", share=s) for s in range(1, space.levels + 1)})
        self._models = [catalog.models[name] for name in space.model_names]
        self._model_keys: dict[tuple, tuple] = {}
        self._last: list[tuple | None] = [None] * space.n_models  # per model: (part, ModelDesign, model key)
        self._cap: dict[tuple, CapacityUse] = {}
        self._fit: dict[tuple, Place | None] = {}
        self.values: dict[DesignKey, float] = {}
        self.evaluations = 0
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
        Not cached (beyond each model's last one): long-lived objects make garbage collection costly."""
        arch = self.space.archs[arch_id]
        dc = self.space.drafter_opts[j - 1][draft] if j > 0 else None
        return ModelDesign.model_construct(
            model=self.space.model_names[j], memory_type=arch.memory_type, pim_units=arch.pim_units,
            devices=arch.devices, placement={op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)},
            draft_length=None if dc is None else dc.draft_length, staging=None if dc is None else dc.staging)

    def model_key(self, j: int, arch_id: int, place: Place, md: ModelDesign) -> tuple:
        """Evaluator.model_key(md) of `model_design(j, arch_id, place, ...)`, cached (the same for every
        draft length and staging)."""
        model_key = self._model_keys.get((j, arch_id, place))
        if model_key is None:
            if len(self._model_keys) >= MODEL_KEY_CACHE:
                self._model_keys.clear()
            model_key = self._model_keys[(j, arch_id, place)] = Evaluator.model_key(md)
        return model_key

    def capacity(self, j: int, arch_id: int, place: Place, draft: int) -> CapacityUse:
        key = (j, arch_id, place, self._draft2[j][draft] if j else None)
        cap = self._cap.get(key)
        if cap is None:
            md = self.model_design(j, arch_id, place, draft)
            cap = self._cap[key] = self.evaluator.capacity(md, self.model_key(j, arch_id, place, md))
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

    def _moves(self, j: int, arch_id: int, place: Place, shares: tuple[int, ...], to_pim: bool):
        """Single-operator changes that shift bytes toward the PIM side (`to_pim`) or the normal side:
        (bytes shifted, new code, operator), layout changes before engine changes."""
        sp = self.space
        arch = sp.archs[arch_id]
        costs = self.evaluator.costs
        tb = costs.tensor_bytes(self._models[j], arch.devices)
        host_codes = sp.host_codes(arch_id)
        layout_of = {HOST_NORMAL: "normal", HOST_SPREAD: "spread"}
        out = []
        for o, code in enumerate(place):
            op = PLACEABLE_OPS[o]
            kib = tb.op_kib[op] + (tb.embedding_kib if op == "lm_head" else 0)
            old = costs.split_kib(arch, "pim" if code > 0 else layout_of[code], kib)[0]
            targets = []
            if code <= 0:  # a host operator: the other layout, or PIM
                targets += [(0, c) for c in host_codes if c != code]
                if PIM in sp.engine_opts[o] and sp.pim_possible(arch_id):
                    targets.append((1, shares[o]))
            elif HOST in sp.engine_opts[o]:  # a PIM operator: the host
                targets += [(1, c) for c in host_codes]
            for rank, new in targets:
                pim_bytes = costs.split_kib(arch, "pim" if new > 0 else layout_of[new], kib)[0]
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
        (INFEASIBLE, None) when a model cannot be made to fit its devices."""
        sp = self.space
        places: list[Place] = []
        for j in range(sp.n_models):
            place = sp.placement(genome, j, archs[j])
            draft = genome.drafts[j - 1] if j > 0 else 0
            if not self.holds(self.capacity(j, archs[j], place, draft)):
                place = self.fit(j, archs[j], place, draft, genome.shares[j])
                if place is None:
                    return INFEASIBLE, None
            places.append(place)
        key: DesignKey = (sp.choice_id(genome), archs, tuple(places))
        value = self.price(key)
        return (INFEASIBLE, None) if value == INFEASIBLE else (value, key)

    def price(self, key: DesignKey) -> float:
        """Search objective of one concrete design (cached); INFEASIBLE if the evaluator rejects it."""
        self.evaluations += 1
        value = self.values.get(key)
        if value is not None:
            return value
        design, model_keys = self._assemble(key)
        try:
            metrics = self.evaluator.metrics(design, check=False, model_keys=model_keys)
        except ScenarioError:
            metrics = None
        self.values[key] = value = INFEASIBLE if metrics is None else float(metrics.objective(self.objective))
        return value

    def metrics(self, keys) -> dict[DesignKey, Metrics]:
        """Metrics of designs, validated (`design`, `Evaluator.check`): the final selection's prices."""
        return {key: self.evaluator.metrics(self.design(key)) for key in keys}

    def _assemble(self, key: DesignKey) -> tuple[Design, list[tuple]]:
        """The (unvalidated) Design of a key and the evaluator's model keys of its models."""
        cid, archs, places = key
        genome_drafts, pipeline = self.space.split_choice_id(cid)
        mds, model_keys = [], []
        for j in range(self.space.n_models):
            part = (archs[j], places[j], genome_drafts[j - 1] if j else 0)
            last = self._last[j]  # the search often changes one model at a time: reuse the others
            if last is None or last[0] != part:
                md = self.model_design(j, *part)
                last = self._last[j] = (part, md, self.model_key(j, archs[j], places[j], md))
            mds.append(last[1])
            model_keys.append(last[2])
        return Design.model_construct(pipeline=pipeline, verifier=mds[0], drafters=mds[1:]), model_keys

    def design(self, key: DesignKey) -> Design:
        """The validated Design of a key (what the heuristic returns and the evaluator re-prices)."""
        sp = self.space
        cid, archs, places = key
        return sp.design_space.build(
            [sp.archs[a] for a in archs],
            [{op: self._placements[p] for op, p in zip(PLACEABLE_OPS, place)} for place in places],
            sp.choice(cid))
