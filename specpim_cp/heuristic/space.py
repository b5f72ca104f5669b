"""The heuristic's view of a scenario's restricted design space: gene domains, genomes, projection.

A *genome* is the GA's dataflow candidate: draft length and staging choice per drafter, pipeline
on/off, and per model and placeable operator an engine gene (host/PIM) plus a latent PIM share gene
(kept while the operator sits on the host, so a later flip back to PIM restores it). The
architecture of each model is not in the genome: the per-model MCTS fills it in. Architectures are
handled as integer ids into `SearchSpace.archs` for fast hashing.

Everything here respects the scenario's `[space]` restrictions (mapping rule, fixed memory type, PIM
units, pipeline, draft lengths, staging), so every design the heuristic builds lies in that space.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specpim_cp.catalog import Catalog
from specpim_cp.costs import ArchConfig
from specpim_cp.designs import (
    arch_options,
    gamma_options,
    model_entries,
    pipeline_options,
    rule_allows,
    staging_options,
)
from specpim_cp.errors import ScenarioError
from specpim_cp.graph import PLACEABLE_OPS
from specpim_cp.scenario import Design, Scenario, Staging

HOST, PIM = 0, 1
N_OPS = len(PLACEABLE_OPS)
FULL_SHARE_PROBABILITY = 0.5

#: A phenotype placement of one model: per operator 0 (host) or the PIM share 1..share_levels.
Place = tuple[int, ...]


class Genome(NamedTuple):
    """A dataflow candidate (hashable; tuples all the way down)."""

    gammas: tuple[int, ...]  # draft length per drafter
    staging: tuple[int, ...]  # index into SearchSpace.staging_opts[i] per drafter
    pipeline: bool
    engines: tuple[tuple[int, ...], ...]  # per model, per operator: HOST or PIM
    shares: tuple[tuple[int, ...], ...]  # per model, per operator: PIM share 1..share_levels (latent on host)


class SearchSpace:
    """Gene domains and architecture options of one scenario, restricted by its `[space]`."""

    def __init__(self, scenario: Scenario, catalog: Catalog):
        self.scenario = scenario
        self.catalog = catalog
        sp = scenario.space
        self.levels = sp.share_levels
        self.rule = sp.mapping
        self.labels = [label for label, _ in model_entries(scenario)]
        self.model_names = [e.model for _, e in model_entries(scenario)]
        self.n_models = len(self.labels)
        self.n_drafters = self.n_models - 1
        self.gamma_opts = [tuple(gamma_options(scenario, i)) for i in range(self.n_drafters)]
        self.staging_opts: list[list[Staging | None]] = [staging_options(scenario, i)
                                                         for i in range(self.n_drafters)]
        self.pipeline_opts = tuple(pipeline_options(scenario))
        # engines the mapping rule allows per operator (same for every model)
        self.engine_opts = tuple(tuple(code for code, name in ((HOST, "host"), (PIM, "pim"))
                                       if rule_allows(self.rule, op, name)) for op in PLACEABLE_OPS)
        self.device_budget = scenario.device_budget
        # architecture ids: one table for all models; per model the ids the rule can use
        self.archs: list[ArchConfig] = []
        self._arch_id: dict[ArchConfig, int] = {}
        self.model_archs: list[tuple[int, ...]] = []
        for j in range(self.n_models):
            ids = []
            for arch in arch_options(scenario, catalog, j):
                if not self._rule_fits_arch(arch):
                    continue
                if arch not in self._arch_id:
                    self._arch_id[arch] = len(self.archs)
                    self.archs.append(arch)
                ids.append(self._arch_id[arch])
            if not ids:
                raise ScenarioError(
                    f"{self.labels[j]}: no architecture in the space can run mapping '{self.rule}' "
                    f"(space.memory_type={sp.memory_type}, space.pim_units={sp.pim_units})")
            self.model_archs.append(tuple(ids))
        # engines each architecture offers (an operator whose engine is missing takes the other one)
        self._offered = [(HOST,) if not self.pim_possible(a) else (PIM,) if not self.host_possible(a) else (HOST, PIM)
                         for a in self.archs]
        self._place_memo: dict[tuple, Place] = {}
        self._nearest: dict[tuple[int, int], list[int]] = {}
        self.mutable_genes = (sum(len(g) > 1 for g in self.gamma_opts)
                              + sum(len(s) > 1 for s in self.staging_opts)
                              + (len(self.pipeline_opts) > 1)
                              + self.n_models * sum(len(e) > 1 for e in self.engine_opts)
                              + (self.n_models * N_OPS if self.levels > 1 else 0))

    # -- architectures -----------------------------------------------------------------------
    def units(self, arch: ArchConfig) -> int:
        return self.catalog.memory(arch.memory_type).units_per_group

    def host_possible(self, arch: ArchConfig) -> bool:
        return arch.pim_units < self.units(arch)

    def pim_possible(self, arch: ArchConfig) -> bool:
        return arch.pim_units > 0

    def _rule_fits_arch(self, arch: ArchConfig) -> bool:
        """Every operator has an engine the rule allows and the architecture offers."""
        offered = {HOST} if not self.pim_possible(arch) else {PIM} if not self.host_possible(arch) else {HOST, PIM}
        return all(offered.intersection(opts) for opts in self.engine_opts)

    def arch_id(self, arch: ArchConfig) -> int | None:
        return self._arch_id.get(arch)

    def devices_ok(self, arch_ids: tuple[int, ...] | list[int]) -> bool:
        if self.device_budget is None:
            return True
        return sum(self.archs[a].devices for a in arch_ids) <= self.device_budget

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
        """Model j's placement on `arch_id`: the genes, with engines the architecture lacks flipped."""
        engines, shares = genome.engines[j], genome.shares[j]
        offered = self._offered[arch_id]
        key = (engines, shares, offered)
        place = self._place_memo.get(key)
        if place is None:
            out = []
            for e, s in zip(engines, shares):
                if e not in offered:
                    e = offered[0]
                out.append(s if e == PIM else 0)
            place = self._place_memo[key] = tuple(out)
        return place

    # -- local search ------------------------------------------------------------------------
    def normalized(self, genome: Genome, archs: tuple[int, ...]) -> Genome:
        """The genome with each engine gene set to the engine its operator runs on with `archs` (same
        designs on `archs`; on other architectures it keeps the placement rather than latent genes)."""
        engines = tuple(tuple(HOST if p == 0 else PIM for p in self.placement(genome, j, archs[j]))
                        for j in range(self.n_models))
        return genome._replace(engines=engines)

    def neighbours(self, genome: Genome, archs: tuple[int, ...]) -> list[Genome]:
        """Genomes one gene away whose designs on `archs` differ: a draft length one step away, another
        staging option, the other pipeline mode, an operator's other engine, a PIM operator's other
        shares."""
        out = []
        for i, opts in enumerate(self.gamma_opts):
            at = opts.index(genome.gammas[i])
            for k in (at - 1, at + 1):
                if 0 <= k < len(opts):
                    out.append(genome._replace(gammas=_set(genome.gammas, i, opts[k])))
        for i, opts in enumerate(self.staging_opts):
            for k in range(len(opts)):
                if k != genome.staging[i]:
                    out.append(genome._replace(staging=_set(genome.staging, i, k)))
        if len(self.pipeline_opts) > 1:
            out.append(genome._replace(pipeline=not genome.pipeline))
        for j in range(self.n_models):
            offered = self._offered[archs[j]]
            place = self.placement(genome, j, archs[j])
            for o in range(N_OPS):
                flipped = PIM if place[o] == 0 else HOST
                if flipped in offered and flipped in self.engine_opts[o]:
                    out.append(genome._replace(engines=_set(genome.engines, j, _set(genome.engines[j], o, flipped))))
                if place[o] > 0:
                    for share in range(1, self.levels + 1):
                        if share != place[o]:
                            out.append(genome._replace(shares=_set(genome.shares, j, _set(genome.shares[j], o, share))))
        return out

    # -- random individuals ------------------------------------------------------------------
    def random_genome(self, rng: np.random.Generator) -> Genome:
        gammas = tuple(int(g[rng.integers(len(g))]) for g in self.gamma_opts)
        staging = tuple(int(rng.integers(len(s))) for s in self.staging_opts)
        pipeline = bool(self.pipeline_opts[rng.integers(len(self.pipeline_opts))])
        engines = tuple(tuple(int(opts[rng.integers(len(opts))]) for opts in self.engine_opts)
                        for _ in range(self.n_models))
        shares = tuple(tuple(self.random_share(rng) for _ in range(N_OPS)) for _ in range(self.n_models))
        return Genome(gammas, staging, pipeline, engines, shares)

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
        gammas, staging = [], []
        for i, md in enumerate(models[1:]):
            opts = self.gamma_opts[i]
            gammas.append(min(opts, key=lambda g: (abs(g - (md.draft_length or 1)), g)))
            stg = self.staging_opts[i]
            staging.append(stg.index(md.staging) if md.staging in stg else 0)
        pipeline = design.pipeline if design.pipeline in self.pipeline_opts else self.pipeline_opts[0]
        engines, shares, archs = [], [], []
        for j, md in enumerate(models):
            eng, sh = [], []
            for o, op in enumerate(PLACEABLE_OPS):
                p = md.placement[op]
                code = PIM if p.engine == "pim" else HOST
                eng.append(code if code in self.engine_opts[o] else self.engine_opts[o][0])
                sh.append(min(max(p.share, 1), self.levels) if p.engine == "pim" else self.levels)
            engines.append(tuple(eng))
            shares.append(tuple(sh))
            arch = ArchConfig(md.memory_type, md.pim_units, md.devices)
            aid = self.arch_id(arch)
            if aid is None or aid not in self.model_archs[j]:
                aid = min(self.model_archs[j], key=lambda b: (
                    self.archs[b].memory_type != arch.memory_type, abs(self.archs[b].pim_units - arch.pim_units),
                    abs(self.archs[b].devices - arch.devices), b))
            archs.append(aid)
        genome = Genome(tuple(gammas), tuple(staging), bool(pipeline), tuple(engines), tuple(shares))
        return genome, tuple(archs)

    # -- membership (tests and a final assertion) ---------------------------------------------
    def violations(self, design: Design) -> list[str]:
        """Why `design` is outside the scenario's restricted space (empty when it is inside)."""
        out = []
        models = [md for _, md in design.models()]
        if design.pipeline not in self.pipeline_opts:
            out.append(f"pipeline={design.pipeline} not allowed")
        for j, md in enumerate(models):
            aid = self.arch_id(ArchConfig(md.memory_type, md.pim_units, md.devices))
            if aid is None or aid not in self.model_archs[j]:
                out.append(f"{self.labels[j]}: architecture {md.memory_type}-k{md.pim_units}-x{md.devices}")
            for o, op in enumerate(PLACEABLE_OPS):
                code = PIM if md.placement[op].engine == "pim" else HOST
                if code not in self.engine_opts[o]:
                    out.append(f"{self.labels[j]}.placement.{op}: {md.placement[op].engine} breaks '{self.rule}'")
            if j > 0:
                if md.draft_length not in self.gamma_opts[j - 1]:
                    out.append(f"{self.labels[j]}.draft_length={md.draft_length}")
                if md.staging not in self.staging_opts[j - 1]:
                    out.append(f"{self.labels[j]}.staging={md.staging}")
        if self.device_budget is not None and sum(md.devices for md in models) > self.device_budget:
            out.append("device budget exceeded")
        return out


def _set(t: tuple, i: int, v) -> tuple:
    return t[:i] + (v,) + t[i + 1:]
