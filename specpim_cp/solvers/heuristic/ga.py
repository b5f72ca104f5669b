"""Genetic algorithm over dataflow candidates; each candidate's architectures are filled by per-model MCTS.

One generation: keep the elite, breed the rest by tournament selection, uniform crossover and
per-gene mutation of the dataflow genes (each drafter's speculation option, pipeline, per-operator
engine, PIM share and host layout; architectures are inherited per model from either parent), then hand every new candidate
to the filler (`fill.Filler`: capacity repair, then per-model MCTS over architectures). The fitness
of a candidate is the search objective of its best completion. After the generation, the fills' MCTS
backups are merged into the persistent trees and their best designs into a bounded archive, from
which the final design is selected.

All randomness of the GA comes from one seeded numpy Generator; each fill gets its own generator
seeded by (seed, generation, index), so the run is reproducible and independent of the number of
worker processes.
"""

from __future__ import annotations

import time

import numpy as np

from specpim_cp.solvers.deadline import Deadline
from specpim_cp.solvers.heuristic.fill import FillJob, FillResult, Individual, SerialFiller
from specpim_cp.solvers.heuristic.genes import HOST, PIM, Genome, SearchSpace
from specpim_cp.solvers.heuristic.mcts import ArchTree
from specpim_cp.solvers.heuristic.pricing import INFEASIBLE, DesignKey

TOURNAMENT_SIZE = 3
CROSSOVER_RATE = 0.9
MUTATED_GENES = 1.5  # expected number of genes a child mutates
ELITE_FRACTION = 0.02
ARCHIVE_SIZE = 64
DUPLICATE_RETRIES = 3
MAX_HISTORY = 200
NEIGHBOUR_MOVE_PROBABILITY = 0.7  # a mutated speculation gene moves to a neighbouring option (else random)
POLISH_STREAM = 1 << 30  # random stream index of the elite's polish (fills use 0, 1, ...)


class GeneticExplorer:
    """The GA of one seeded run; `filler` (serial or a process pool) fills candidates' architectures."""

    def __init__(self, space: SearchSpace, filler, rng: np.random.Generator, seed: int, *, generations: int,
                 population: int, deadline: Deadline | None = None, polish: bool = True, on_generation=None):
        self.space = space
        self.on_generation = on_generation  # (generation, generations, best value, evaluations), for progress
        self.filler = filler
        self.rng = rng
        self.seed = seed
        self.generations = generations
        self.population = population
        self.deadline = deadline
        self.polish = polish
        self.start = time.perf_counter()
        self.trees = [ArchTree(space.model_archs[j], space.archs) for j in range(space.n_models)]
        self.leaves_priced = [0] * space.n_models
        self.evaluations = 0
        self.priced = 0
        self.best_value = INFEASIBLE
        self.best_key: DesignKey | None = None
        self.archive: dict[DesignKey, tuple[float, float]] = {}  # key -> (value, seconds when found)
        self._archive_cut = INFEASIBLE
        self.history: list[tuple[int, float]] = []
        self.visited: set[DesignKey] = set()  # best completion of every candidate filled
        self.generations_run = 0
        self.stopped_by = "budget"
        self._filled: dict[tuple[Genome, tuple[int, ...]], Individual] = {}
        self._polished: dict[tuple[Genome, tuple[int, ...]], Individual] = {}
        self._rate = MUTATED_GENES / max(1, space.mutable_genes)
        self._n_slots = space.n_drafters + 1 + 3 * space.n_models * len(space.engine_opts)

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.deadline.passed()

    # -- filling a batch of candidates -------------------------------------------------------
    def _fill(self, candidates: list[tuple[Genome, tuple[int, ...]]], generation: int) -> list[Individual | None]:
        """Individuals for candidates (None: not filled before the deadline), new ones filled as a batch."""
        todo: dict[tuple[Genome, tuple[int, ...]], int] = {}
        for c in candidates:
            if c not in self._filled and c not in todo:
                todo[c] = len(todo)
        jobs = [FillJob(g, a, (self.seed, generation, i)) for (g, a), i in todo.items()]
        stats = [t.stats() for t in self.trees]
        results = self.filler.run(jobs, stats, self.best_value, self.deadline)
        for c, result in zip(todo, results):
            if result is not None:
                self._merge(result)
                self._filled[c] = result.individual
        return [self._filled.get(c) for c in candidates]

    def _polish(self, ind: Individual, generation: int) -> Individual:
        """The elite's architectures re-searched with every MCTS leaf, sweeps until nothing changes."""
        key = (ind.genome, ind.archs)
        if not self.polish or key in self._polished or ind.key is None:
            return self._polished.get(key, ind)
        job = FillJob(ind.genome, ind.archs, (self.seed, generation, POLISH_STREAM), polish=True)
        result = self.filler.run([job], [t.stats() for t in self.trees], self.best_value, self.deadline)[0]
        if result is None:
            return ind
        self._merge(result)
        better = result.individual if result.individual.value <= ind.value else ind
        self._polished[key] = self._polished[(better.genome, better.archs)] = better
        return better

    def _merge(self, result: FillResult) -> None:
        for j, backups in enumerate(result.backups):
            tree = self.trees[j]
            for aid, reward in backups:
                tree.backup(aid, reward)
        for j, n in enumerate(result.leaves):
            self.leaves_priced[j] += n
        self.evaluations += result.evaluations
        self.priced += result.priced
        ind = result.individual
        if ind.key is not None:
            self.visited.add(ind.key)
        for value, key in result.candidates:
            self._record(key, value)

    def _record(self, key: DesignKey, value: float) -> None:
        if value < self.best_value:
            self.best_value, self.best_key = value, key
            self.history.append((self.evaluations, value))
        if key in self.archive or value >= self._archive_cut:
            return
        self.archive[key] = (value, time.perf_counter() - self.start)
        if len(self.archive) >= 2 * ARCHIVE_SIZE:  # keep the best ARCHIVE_SIZE, then admit only better
            kept = sorted(self.archive.items(), key=lambda kv: (kv[1][0], kv[0]))[:ARCHIVE_SIZE]
            self.archive = dict(kept)
            self._archive_cut = kept[-1][1][0]

    # -- variation ---------------------------------------------------------------------------
    def _tournament(self, pop: list[Individual]) -> Individual:
        picks = self.rng.integers(len(pop), size=TOURNAMENT_SIZE)
        return min((pop[int(i)] for i in picks), key=lambda ind: ind.value)

    @staticmethod
    def _flatten(g: Genome) -> list[int]:
        flat = list(g.drafts) + [int(g.pipeline)]
        for e in g.engines:
            flat += e
        for s in g.shares:
            flat += s
        for lay in g.layouts:
            flat += lay
        return flat

    def _unflatten(self, flat: list[int]) -> Genome:
        nd, n, k = self.space.n_drafters, self.space.n_models, len(self.space.engine_opts)
        engines_at, shares_at, layouts_at = nd + 1, nd + 1 + n * k, nd + 1 + 2 * n * k
        return Genome(tuple(flat[:nd]), bool(flat[nd]),
                      tuple(tuple(flat[engines_at + j * k: engines_at + (j + 1) * k]) for j in range(n)),
                      tuple(tuple(flat[shares_at + j * k: shares_at + (j + 1) * k]) for j in range(n)),
                      tuple(tuple(flat[layouts_at + j * k: layouts_at + (j + 1) * k]) for j in range(n)))

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
            if pos < nd:  # a drafter's speculation option: a neighbouring one, or a fresh one
                n_opts = len(sp.drafter_opts[pos])
                if n_opts > 1:
                    near = sp.design_space.drafter_neighbours(pos, flat[pos])
                    if near and rng.random() < NEIGHBOUR_MOVE_PROBABILITY:
                        flat[pos] = int(near[rng.integers(len(near))])
                    else:
                        flat[pos] = int(rng.integers(n_opts))
            elif pos == nd:
                if len(sp.pipeline_opts) > 1:
                    flat[pos] = 1 - flat[pos]
            elif pos < nd + 1 + n * k:
                if len(sp.engine_opts[(pos - nd - 1) % k]) > 1:
                    flat[pos] = PIM if flat[pos] == HOST else HOST
            elif pos < nd + 1 + 2 * n * k:
                flat[pos] = sp.random_share(rng)
            elif sp.layout_choice:
                flat[pos] = 1 - flat[pos]
        return self._unflatten(flat)

    def _children(self, pop: list[Individual], n: int, seen: set) -> list[tuple[Genome, tuple[int, ...]]]:
        out = []
        for _ in range(n):
            a, b = self._tournament(pop), self._tournament(pop)
            genome, archs = self._crossover(a, b) if self.rng.random() < CROSSOVER_RATE else (a.genome, a.archs)
            genome = self._mutate(genome)
            for _ in range(DUPLICATE_RETRIES):
                if (genome, archs) not in seen:
                    break
                genome = self._mutate(genome)
            seen.add((genome, archs))
            out.append((genome, archs))
        return out

    # -- the run -----------------------------------------------------------------------------
    def run(self, seeds: list[tuple[Genome, tuple[int, ...]]]) -> list[Individual]:
        initial = list(seeds[: self.population])
        while len(initial) < self.population:
            initial.append((self.space.random_genome(self.rng), self.space.random_archs(self.rng)))
        pop = [ind for ind in self._fill(initial, 0) if ind is not None]
        if self.on_generation is not None:
            self.on_generation(0, self.generations, self.best_value, self.evaluations)
        n_elite = max(1, round(ELITE_FRACTION * self.population))
        for generation in range(1, self.generations + 1):
            if self.out_of_time() or not pop:
                self.stopped_by = "time_limit"
                break
            pop.sort(key=lambda ind: ind.value)
            pop[0] = self._polish(pop[0], generation)
            elite = pop[:n_elite]
            children = self._children(pop, self.population - n_elite, {(i.genome, i.archs) for i in elite})
            filled = [ind for ind in self._fill(children, generation) if ind is not None]
            pop = elite + filled
            if len(filled) < len(children):
                self.stopped_by = "time_limit"
                break
            self.generations_run += 1
            if self.on_generation is not None:
                self.on_generation(generation, self.generations, self.best_value, self.evaluations)
        if pop and not self.out_of_time():
            pop.sort(key=lambda ind: ind.value)
            pop[0] = self._polish(pop[0], self.generations + 1)
        return pop

    def thinned_history(self) -> list[tuple[int, float]]:
        h = self.history + [(self.evaluations, self.best_value)]
        if len(h) <= MAX_HISTORY:
            return h
        step = (len(h) - 1) / (MAX_HISTORY - 1)
        return [h[round(i * step)] for i in range(MAX_HISTORY)]


__all__ = ["GeneticExplorer", "Individual", "SerialFiller"]
