"""Genetic algorithm over dataflow candidates; each candidate's architectures are filled by per-model MCTS.

One generation: keep the elite, breed the rest by tournament selection, uniform crossover and
per-gene mutation of the dataflow genes (draft lengths, staging, pipeline, per-operator engine and
PIM share), and hand every child to `fill`, which

1. starts from the architectures the child inherits (per model, from either parent);
2. runs the capacity checker: a model that does not fit its devices gets the nearest architecture
   that holds it (same memory type and close k first, then more devices, then another memory type);
   a child that still cannot be held (or breaks the device budget) is discarded (infinite cost);
3. for each model in turn (verifier first), runs that model's MCTS over architectures, the other
   models fixed, each leaf completed with the child's placements repaired for the leaf's architecture
   and priced by the evaluator; the best architecture found is written back into the child
   (Lamarckian for architectures; placement genes stay as bred, their repair is a function of the
   architecture).

The fitness of a child is the search objective of its best completion. Every priced design also
enters a bounded archive of the best designs, from which the final design is selected.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from specpim_cp.heuristic.mcts import ArchTree
from specpim_cp.heuristic.pricing import INFEASIBLE, DesignKey, Pricer
from specpim_cp.heuristic.space import HOST, PIM, Genome, SearchSpace

TOURNAMENT_SIZE = 3
CROSSOVER_RATE = 0.9
MUTATED_GENES = 1.5  # expected number of genes a child mutates
ELITE_FRACTION = 0.02
ARCHIVE_SIZE = 64
DUPLICATE_RETRIES = 3


@dataclass(frozen=True)
class Individual:
    genome: Genome
    archs: tuple[int, ...]
    value: float  # search objective of the best completion (INFEASIBLE: discarded)
    key: DesignKey | None


class GeneticExplorer:
    """The GA + per-model MCTS explorer of one scenario (one seeded run)."""

    def __init__(self, space: SearchSpace, pricer: Pricer, rng: np.random.Generator, *, generations: int,
                 population: int, leaves_per_model: int, deadline: float | None = None):
        self.space = space
        self.pricer = pricer
        self.rng = rng
        self.generations = generations
        self.population = population
        self.leaves_per_model = leaves_per_model
        self.deadline = deadline
        self.start = time.perf_counter()
        self.trees = [ArchTree(space.model_archs[j], space.archs, rng) for j in range(space.n_models)]
        self.leaves_priced = [0] * space.n_models
        self.best_value = INFEASIBLE
        self.best_key: DesignKey | None = None
        self.archive: dict[DesignKey, tuple[float, float]] = {}  # key -> (value, seconds when first priced)
        self._archive_cut = INFEASIBLE
        self.history: list[tuple[int, float]] = []
        self.generations_run = 0
        self.stopped_by = "budget"
        self._fill_cache: dict[tuple[Genome, tuple[int, ...]], Individual] = {}
        n = space.n_models
        self._rate = MUTATED_GENES / max(1, space.mutable_genes)
        self._n_slots = 2 * space.n_drafters + 1 + 2 * n * len(space.engine_opts)

    # -- pricing and bookkeeping -------------------------------------------------------------
    def _price(self, genome: Genome, archs: tuple[int, ...]) -> tuple[float, DesignKey | None]:
        seen = self.pricer.unique_designs
        value, key = self.pricer.complete(genome, archs)
        if key is not None and self.pricer.unique_designs > seen:
            self._record(key, value)
        return value, key

    def _record(self, key: DesignKey, value: float) -> None:
        if key in self.archive:
            return
        if value < self.best_value:
            self.best_value, self.best_key = value, key
            self.history.append((self.pricer.evaluations, value))
        if value < self._archive_cut:
            self.archive[key] = (value, time.perf_counter() - self.start)
            if len(self.archive) >= 2 * ARCHIVE_SIZE:  # keep the best ARCHIVE_SIZE, then admit only better
                kept = sorted(self.archive.items(), key=lambda kv: (kv[1][0], kv[0]))[:ARCHIVE_SIZE]
                self.archive = dict(kept)
                self._archive_cut = kept[-1][1][0]

    def _reward(self, value: float) -> float:
        if value == INFEASIBLE:
            return 0.0
        return min(1.0, self.best_value / value)

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    # -- capacity checker: architecture repair -----------------------------------------------
    def _repair_archs(self, genome: Genome, archs: tuple[int, ...]) -> tuple[int, ...] | None:
        sp, pr = self.space, self.pricer
        out = list(archs)
        for j in range(sp.n_models):
            if not pr.arch_holds(genome, j, out[j]):
                holding = next((a for a in sp.nearest_archs(j, out[j]) if pr.arch_holds(genome, j, a)), None)
                if holding is None:
                    return None
                out[j] = holding
        for j in reversed(range(sp.n_models)):  # device budget: shrink drafters first
            if sp.devices_ok(out):
                break
            fewer = [a for a in sp.nearest_archs(j, out[j])
                     if sp.archs[a].devices < sp.archs[out[j]].devices and pr.arch_holds(genome, j, a)]
            if fewer:
                out[j] = min(fewer, key=lambda a: sp.archs[a].devices)
        return tuple(out) if sp.devices_ok(out) else None

    # -- the GA's call into the MCTS ----------------------------------------------------------
    def fill(self, genome: Genome, archs: tuple[int, ...]) -> Individual:
        """Architectures for one dataflow candidate: capacity repair, then per-model MCTS."""
        cache_key = (genome, archs)
        hit = self._fill_cache.get(cache_key)
        if hit is not None:
            return hit
        repaired = self._repair_archs(genome, archs)
        if repaired is None:
            ind = Individual(genome, archs, INFEASIBLE, None)
            self._fill_cache[cache_key] = ind
            return ind
        current = list(repaired)
        value, key = self._price(genome, repaired)
        sp = self.space
        for j in range(sp.n_models):
            best = [value, key, current[j]]
            tree = self.trees[j]
            tree.backup(current[j], self._reward(value))

            def price_leaf(aid: int, j: int = j, best: list = best) -> float:
                trial = tuple(current[:j] + [aid] + current[j + 1:])
                v, k = self._price(genome, trial)
                if v < best[0]:
                    best[0], best[1], best[2] = v, k, aid
                return self._reward(v)

            def allowed(aid: int, j: int = j) -> bool:
                return sp.devices_ok(current[:j] + [aid] + current[j + 1:])

            self.leaves_priced[j] += tree.search(self.leaves_per_model, price_leaf, allowed, solved=(current[j],))
            value, key, current[j] = best
        ind = Individual(genome, tuple(current), value, key)
        self._fill_cache[cache_key] = ind
        return ind

    # -- variation ---------------------------------------------------------------------------
    def _tournament(self, pop: list[Individual]) -> Individual:
        picks = self.rng.integers(len(pop), size=TOURNAMENT_SIZE)
        return min((pop[int(i)] for i in picks), key=lambda ind: ind.value)

    @staticmethod
    def _flatten(g: Genome) -> list[int]:
        flat = list(g.gammas) + list(g.staging) + [int(g.pipeline)]
        for e in g.engines:
            flat += e
        for s in g.shares:
            flat += s
        return flat

    def _unflatten(self, flat: list[int]) -> Genome:
        nd, n, k = self.space.n_drafters, self.space.n_models, len(self.space.engine_opts)
        engines_at, shares_at = 2 * nd + 1, 2 * nd + 1 + n * k
        return Genome(tuple(flat[:nd]), tuple(flat[nd:2 * nd]), bool(flat[2 * nd]),
                      tuple(tuple(flat[engines_at + j * k: engines_at + (j + 1) * k]) for j in range(n)),
                      tuple(tuple(flat[shares_at + j * k: shares_at + (j + 1) * k]) for j in range(n)))

    def _crossover(self, a: Individual, b: Individual) -> tuple[Genome, tuple[int, ...]]:
        fa, fb = self._flatten(a.genome), self._flatten(b.genome)
        take_b = self.rng.random(self._n_slots) < 0.5
        child = [y if t else x for x, y, t in zip(fa, fb, take_b)]
        arch_b = self.rng.random(self.space.n_models) < 0.5
        archs = tuple(y if t else x for x, y, t in zip(a.archs, b.archs, arch_b))
        return self._unflatten(child), archs

    def _mutate(self, genome: Genome) -> Genome:
        sp, rng = self.space, self.rng
        flat = self._flatten(genome)
        hits = np.flatnonzero(rng.random(self._n_slots) < self._rate)
        if hits.size == 0:
            return genome
        nd, n, k = sp.n_drafters, sp.n_models, len(sp.engine_opts)
        for pos in hits.tolist():
            if pos < nd:  # draft length: a step or a fresh value
                opts = sp.gamma_opts[pos]
                if len(opts) > 1:
                    i = opts.index(flat[pos])
                    i = (i + (1 if rng.random() < 0.5 else -1)) if rng.random() < 0.7 else int(rng.integers(len(opts)))
                    flat[pos] = opts[min(max(i, 0), len(opts) - 1)]
            elif pos < 2 * nd:
                flat[pos] = int(rng.integers(len(sp.staging_opts[pos - nd])))
            elif pos == 2 * nd:
                if len(sp.pipeline_opts) > 1:
                    flat[pos] = 1 - flat[pos]
            elif pos < 2 * nd + 1 + n * k:
                if len(sp.engine_opts[(pos - 2 * nd - 1) % k]) > 1:
                    flat[pos] = PIM if flat[pos] == HOST else HOST
            else:
                flat[pos] = int(rng.integers(1, sp.levels + 1))
        return self._unflatten(flat)

    # -- the run -----------------------------------------------------------------------------
    def initial_population(self, seeds: list[tuple[Genome, tuple[int, ...]]]) -> list[Individual]:
        pop = []
        for genome, archs in seeds[: self.population]:
            pop.append(self.fill(genome, archs))
        while len(pop) < self.population and not self.out_of_time():
            pop.append(self.fill(self.space.random_genome(self.rng), self.space.random_archs(self.rng)))
        return pop

    def run(self, seeds: list[tuple[Genome, tuple[int, ...]]]) -> list[Individual]:
        pop = self.initial_population(seeds)
        n_elite = max(1, round(ELITE_FRACTION * self.population))
        for _ in range(self.generations):
            if self.out_of_time():
                self.stopped_by = "time_limit"
                break
            pop.sort(key=lambda ind: ind.value)
            nxt = pop[:n_elite]
            seen = {(ind.genome, ind.archs) for ind in nxt}
            while len(nxt) < self.population:
                a, b = self._tournament(pop), self._tournament(pop)
                genome, archs = self._crossover(a, b) if self.rng.random() < CROSSOVER_RATE else (a.genome, a.archs)
                genome = self._mutate(genome)
                for _ in range(DUPLICATE_RETRIES):
                    if (genome, archs) not in seen:
                        break
                    genome = self._mutate(genome)
                seen.add((genome, archs))
                nxt.append(self.fill(genome, archs))
                if self.out_of_time():
                    break
            pop = nxt
            self.generations_run += 1
        if self.out_of_time():
            self.stopped_by = "time_limit"
        return pop

    def thinned_history(self, max_points: int = 200) -> list[tuple[int, float]]:
        h = self.history + [(self.pricer.evaluations, self.best_value)]
        if len(h) <= max_points:
            return h
        step = (len(h) - 1) / (max_points - 1)
        return [h[round(i * step)] for i in range(max_points)]
