"""The heuristic's view of a scenario's restricted design space: gene domains, genomes, projection.

A *genome* is the GA's dataflow candidate: per drafter an index into its speculation options
(`DesignSpace.drafter_options`: draft and staging), pipeline on/off, and per model and placeable
operator an engine gene (host/PIM), a latent PIM share gene (kept while the operator sits on the host,
so a later flip back to PIM restores it) and a latent host layout gene (normal or spread: where a host
operator's tensor lives). The architecture of each model is not in the genome:
the per-model MCTS fills it in. Architectures are handled as integer ids into `SearchSpace.archs`
for fast hashing.

Every option comes from the scenario's `DesignSpace` (restricted by its `[space]` table), and
membership is `DesignSpace.violations`, so every design the heuristic builds lies in that space.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specpim_cp.catalog import Catalog
from specpim_cp.physics.costs import CostModel
from specpim_cp.problem.design import ArchConfig, Design, SpecChoice
from specpim_cp.problem.mapping_rules import rule_allows
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.space import DesignSpace

HOST, PIM = 0, 1
N_OPS = len(PLACEABLE_OPS)
FULL_SHARE_PROBABILITY = 0.5

NORMAL, SPREAD = 0, 1  # host layout genes
#: A phenotype placement of one model: per operator HOST_NORMAL (0), HOST_SPREAD (-1) or the PIM share.
Place = tuple[int, ...]
HOST_NORMAL, HOST_SPREAD = 0, -1
LAYOUT_CODE = {"normal": HOST_NORMAL, "spread": HOST_SPREAD}


class Genome(NamedTuple):
    """A dataflow candidate (hashable; tuples all the way down)."""

    drafts: tuple[int, ...]  # per drafter: index into DesignSpace.drafter_options[i]
    pipeline: bool
    engines: tuple[tuple[int, ...], ...]  # per model, per operator: HOST or PIM
    shares: tuple[tuple[int, ...], ...]  # per model, per operator: PIM share 1..share_levels (latent on host)
    layouts: tuple[tuple[int, ...], ...]  # per model, per operator: NORMAL or SPREAD (latent on PIM)


class SearchSpace:
    """Gene domains and architecture options of one scenario, restricted by its `[space]`."""

    def __init__(self, scenario: Scenario, catalog: Catalog):
        self.scenario = scenario
        self.catalog = catalog
        self.design_space = ds = DesignSpace(scenario, catalog)
        sp = scenario.space
        self.levels = sp.share_levels
        self.rule = sp.mapping
        self.labels = [m.label for m in ds.models]
        self.model_names = ds.model_names
        self.n_models = ds.n_models
        self.n_drafters = ds.n_drafters
        self.drafter_opts = ds.drafter_options
        self.pipeline_opts = ds.pipeline_options
        self._choices: dict[int, SpecChoice] = {}
        # engines the mapping rule allows per operator (same for every model)
        self.engine_opts = tuple(tuple(code for code, name in ((HOST, "host"), (PIM, "pim"))
                                       if rule_allows(self.rule, op, name)) for op in PLACEABLE_OPS)
        self.device_budget = scenario.device_budget
        # architecture ids: one table for all models; per model the ids the rule can use
        self.archs: list[ArchConfig] = []
        self._arch_id: dict[ArchConfig, int] = {}
        self.model_archs: list[tuple[int, ...]] = []
        for opts in ds.models:
            ids = []
            for arch in opts.archs:
                if ds.alone_only(opts.index, arch):  # the verifier alone's devices: `run_heuristic` searches it
                    continue
                if arch not in self._arch_id:
                    self._arch_id[arch] = len(self.archs)
                    self.archs.append(arch)
                ids.append(self._arch_id[arch])
            self.model_archs.append(tuple(ids))
        self.arch_devices = tuple(a.devices for a in self.archs)  # devices of each architecture id
        # engines and host layouts each architecture offers (a missing one is replaced by one offered)
        costs = CostModel(scenario, catalog)
        self._offered: list[tuple[int, ...]] = []
        self._layouts_offered: list[tuple[int, ...]] = []
        for a in self.archs:
            physical = costs.placements(a)
            host = tuple(LAYOUT_CODE[p.layout] for p in physical if p.engine == "host")
            self._layouts_offered.append(host)
            self._offered.append(((HOST,) if host else ()) + ((PIM,) if a.pim_units > 0 else ()))
        self.layout_choice = any(len(h) > 1 for h in self._layouts_offered)
        self._place_memo: dict[tuple, Place] = {}
        self._nearest: dict[tuple[int, int], list[int]] = {}
        self.mutable_genes = (sum(len(o) > 1 for o in self.drafter_opts)
                              + (len(self.pipeline_opts) > 1)
                              + self.n_models * sum(len(e) > 1 for e in self.engine_opts)
                              + (self.n_models * N_OPS if self.levels > 1 else 0)
                              + (self.n_models * N_OPS if self.layout_choice else 0))

    # -- speculation -------------------------------------------------------------------------
    def choice_id(self, genome: Genome) -> int:
        """The genome's speculation genes as one integer (mixed radix over the drafters' option counts,
        then the pipeline): the same in every process, so design keys travel between workers."""
        cid = self.pipeline_opts.index(genome.pipeline)
        for opts, k in zip(self.drafter_opts, genome.drafts):
            cid = cid * len(opts) + k
        return cid

    def split_choice_id(self, cid: int) -> tuple[tuple[int, ...], bool]:
        """(per-drafter option indices, pipeline) of a choice id."""
        drafts = []
        for opts in reversed(self.drafter_opts):
            cid, k = divmod(cid, len(opts))
            drafts.append(k)
        return tuple(reversed(drafts)), self.pipeline_opts[cid]

    def choice(self, cid: int) -> SpecChoice:
        """The SpecChoice of a choice id (cached)."""
        choice = self._choices.get(cid)
        if choice is None:
            drafts, pipeline = self.split_choice_id(cid)
            choice = self._choices[cid] = SpecChoice(
                tuple(o[k] for o, k in zip(self.drafter_opts, drafts)), pipeline)
        return choice

    def draft2(self, genome: Genome, j: int) -> str | None:
        """The draft2 model of model j's staging under the genome (None: verifier or unstaged)."""
        if j == 0:
            return None
        st = self.drafter_opts[j - 1][genome.drafts[j - 1]].staging
        return None if st is None else st.draft2

    # -- architectures -----------------------------------------------------------------------
    def units(self, arch: ArchConfig) -> int:
        return self.catalog.memory(arch.memory_type).units_per_group

    def pim_possible(self, arch_id: int) -> bool:
        return PIM in self._offered[arch_id]

    def host_codes(self, arch_id: int) -> tuple[int, ...]:
        """Host placement codes (HOST_NORMAL, HOST_SPREAD) the architecture offers."""
        return self._layouts_offered[arch_id]

    def arch_id(self, arch: ArchConfig) -> int | None:
        return self._arch_id.get(arch)

    def devices_ok(self, arch_ids: tuple[int, ...] | list[int]) -> bool:
        if self.device_budget is None:
            return True
        return sum(map(self.arch_devices.__getitem__, arch_ids)) <= self.device_budget

    def device_room(self, arch_ids: tuple[int, ...] | list[int], j: int) -> int | None:
        """The most devices model j may take with the other models on `arch_ids` (None: no budget)."""
        if self.device_budget is None:
            return None
        devices = self.arch_devices
        return self.device_budget - sum(map(devices.__getitem__, arch_ids)) + devices[arch_ids[j]]

    def nearest_archs(self, j: int, arch_id: int) -> list[int]:
        """Model j's architecture ids, nearest to `arch_id` first (same memory, close k, close devices)."""
        hit = self._nearest.get((j, arch_id))
        if hit is not None:
            return hit
        a = self.archs[arch_id]

        def distance(b_id: int) -> tuple:
            b = self.archs[b_id]
            return (b.memory_type != a.memory_type, abs(b.pim_units - a.pim_units),
                    abs(b.devices.bit_length() - a.devices.bit_length()), b_id)

        out = self._nearest[(j, arch_id)] = sorted(self.model_archs[j], key=distance)
        return out

    # -- placement repair --------------------------------------------------------------------
    def placement(self, genome: Genome, j: int, arch_id: int) -> Place:
        """Model j's placement on `arch_id`: the genes, with an engine or host layout the architecture
        lacks replaced by one it offers."""
        engines, shares, layouts = genome.engines[j], genome.shares[j], genome.layouts[j]
        offered, host_layouts = self._offered[arch_id], self._layouts_offered[arch_id]
        key = (engines, shares, layouts, offered, host_layouts)
        place = self._place_memo.get(key)
        if place is None:
            out = []
            for e, s, lay in zip(engines, shares, layouts):
                if e not in offered:
                    e = offered[0]
                if e == PIM:
                    out.append(s)
                else:
                    code = HOST_SPREAD if lay == SPREAD else HOST_NORMAL
                    out.append(code if code in host_layouts else host_layouts[0])
            place = self._place_memo[key] = tuple(out)
        return place

    # -- local search ------------------------------------------------------------------------
    def normalized(self, genome: Genome, archs: tuple[int, ...]) -> Genome:
        """The genome with each engine gene set to the engine its operator runs on with `archs` (same
        designs on `archs`; on other architectures it keeps the placement rather than latent genes)."""
        places = [self.placement(genome, j, archs[j]) for j in range(self.n_models)]
        engines = tuple(tuple(HOST if p <= 0 else PIM for p in place) for place in places)
        layouts = tuple(tuple(SPREAD if p == HOST_SPREAD else lay for p, lay in zip(place, genome.layouts[j]))
                        for j, place in enumerate(places))
        return genome._replace(engines=engines, layouts=layouts)

    def neighbours(self, genome: Genome, archs: tuple[int, ...]) -> list[Genome]:
        """Genomes one gene away whose designs on `archs` differ: a neighbouring speculation option of
        one drafter (`DesignSpace.drafter_neighbours`), the other pipeline mode, an operator's other
        engine, a PIM operator's other shares, a host operator's other layout."""
        out = []
        for i in range(self.n_drafters):
            for k in self.design_space.drafter_neighbours(i, genome.drafts[i]):
                out.append(genome._replace(drafts=_set(genome.drafts, i, k)))
        if len(self.pipeline_opts) > 1:
            out.append(genome._replace(pipeline=not genome.pipeline))
        for j in range(self.n_models):
            offered = self._offered[archs[j]]
            place = self.placement(genome, j, archs[j])
            for o in range(N_OPS):
                flipped = PIM if place[o] <= 0 else HOST
                if flipped in offered and flipped in self.engine_opts[o]:
                    out.append(genome._replace(engines=_set(genome.engines, j, _set(genome.engines[j], o, flipped))))
                if place[o] > 0:
                    for share in range(1, self.levels + 1):
                        if share != place[o]:
                            out.append(genome._replace(shares=_set(genome.shares, j, _set(genome.shares[j], o, share))))
                elif len(self._layouts_offered[archs[j]]) > 1:
                    other = NORMAL if place[o] == HOST_SPREAD else SPREAD
                    out.append(genome._replace(layouts=_set(genome.layouts, j, _set(genome.layouts[j], o, other))))
        return out

    # -- random individuals ------------------------------------------------------------------
    def random_genome(self, rng: np.random.Generator) -> Genome:
        drafts = tuple(int(rng.integers(len(o))) for o in self.drafter_opts)
        pipeline = bool(self.pipeline_opts[rng.integers(len(self.pipeline_opts))])
        engines = tuple(tuple(int(opts[rng.integers(len(opts))]) for opts in self.engine_opts)
                        for _ in range(self.n_models))
        shares = tuple(tuple(self.random_share(rng) for _ in range(N_OPS)) for _ in range(self.n_models))
        layouts = tuple(tuple(int(rng.integers(2)) if self.layout_choice else NORMAL for _ in range(N_OPS))
                        for _ in range(self.n_models))
        return Genome(drafts, pipeline, engines, shares, layouts)

    def random_share(self, rng: np.random.Generator) -> int:
        """A PIM share: all units half of the time (an operator alone on PIM wants them all; smaller
        shares pay off only when PIM operators overlap), otherwise uniform."""
        return self.levels if rng.random() < FULL_SHARE_PROBABILITY else int(rng.integers(1, self.levels + 1))

    def random_archs(self, rng: np.random.Generator) -> tuple[int, ...]:
        """One architecture per model, within the device budget."""
        out = [int(ids[rng.integers(len(ids))]) for ids in self.model_archs]
        for j in rng.permutation(self.n_models):
            if self.devices_ok(out):
                break
            out[j] = min(self.nearest_archs(j, out[j]), key=lambda a: self.archs[a].devices)
        return tuple(out)

    # -- projection of an outside design (warm starts) ---------------------------------------
    def project(self, design: Design) -> tuple[Genome, tuple[int, ...]]:
        """The nearest genome and architectures in the restricted space (warm-starting with baselines)."""
        models = [md for _, md in design.models()]
        drafts = tuple(self.design_space.nearest_drafter_option(i, md.choice) for i, md in enumerate(models[1:]))
        pipeline = design.pipeline if design.pipeline in self.pipeline_opts else self.pipeline_opts[0]
        engines, shares, layouts, archs = [], [], [], []
        for j, md in enumerate(models):
            eng, sh, lay = [], [], []
            for o, op in enumerate(PLACEABLE_OPS):
                p = md.placement[op]
                code = PIM if p.engine == "pim" else HOST
                eng.append(code if code in self.engine_opts[o] else self.engine_opts[o][0])
                sh.append(min(max(p.share, 1), self.levels) if p.engine == "pim" else self.levels)
                lay.append(SPREAD if p.layout == "spread" else NORMAL)
            engines.append(tuple(eng))
            shares.append(tuple(sh))
            layouts.append(tuple(lay))
            arch = md.arch
            aid = self.arch_id(arch)
            if aid is None or aid not in self.model_archs[j]:
                aid = min(self.model_archs[j], key=lambda b: (
                    self.archs[b].memory_type != arch.memory_type, abs(self.archs[b].pim_units - arch.pim_units),
                    abs(self.archs[b].devices - arch.devices), b))
            archs.append(aid)
        genome = Genome(drafts, bool(pipeline), tuple(engines), tuple(shares), tuple(layouts))
        return genome, tuple(archs)

    # -- membership (tests and a final assertion) ---------------------------------------------
    def violations(self, design: Design) -> list[str]:
        """Why `design` is outside the scenario's restricted space (empty when it is inside)."""
        return self.design_space.violations(design)


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1:]
