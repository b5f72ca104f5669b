"""The GA's call into the MCTS: architectures for one dataflow candidate, in-process or in workers.

`Filler.fill(genome, archs, seed)`:

1. starts from the architectures the candidate inherits (per model, from either parent);
2. runs the capacity checker: a model that does not fit its devices gets the nearest architecture
   that holds it (same memory type and close k first, then more devices, then another memory type);
   a candidate that still cannot be held (or breaks the device budget) is discarded (infinite cost);
3. for each model in turn (verifier first), runs that model's MCTS over architectures, the other
   models fixed, each leaf completed with the candidate's placements repaired for the leaf's
   architecture and priced; the best architecture found is kept (Lamarckian for architectures;
   placement genes stay as bred, their repair is a function of the architecture).

A fill is a pure function of (candidate, statistics at the start of the generation, incumbent, seed):
the pricing caches only make it faster. So fills can run in worker processes (`PoolFiller`) and the
run's result does not depend on the number of workers.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass

import numpy as np

from specpim_cp.catalog import Catalog
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.deadline import Deadline
from specpim_cp.solvers.heuristic.genes import Genome, SearchSpace
from specpim_cp.solvers.heuristic.mcts import ArchTree
from specpim_cp.solvers.heuristic.pricing import INFEASIBLE, DesignKey, Pricer

FILL_CANDIDATES = 4  # best designs of each fill handed to the archive
MAX_POLISH_SWEEPS = 4  # architecture sweeps over the models in one polish round
MAX_POLISH_ROUNDS = 3  # rounds of (hill climbing on the genome, architecture sweeps)
MAX_CLIMB_STEPS = 8

Stats = list[tuple[list[int], list[float]]]


@dataclass(frozen=True)
class Individual:
    genome: Genome
    archs: tuple[int, ...]
    value: float  # search objective of the best completion (INFEASIBLE: discarded)
    key: DesignKey | None


@dataclass(frozen=True)
class FillResult:
    individual: Individual
    backups: tuple[tuple[tuple[int, float], ...], ...]  # per model: (arch id, reward) in search order
    candidates: tuple[tuple[float, DesignKey], ...]  # best designs priced, best first
    evaluations: int  # designs requested from the pricer
    priced: int  # designs this process priced for the first time
    leaves: tuple[int, ...] = ()  # MCTS leaves priced per model


@dataclass(frozen=True)
class FillJob:
    genome: Genome
    archs: tuple[int, ...]
    seed: tuple[int, ...]  # seeds the fill's own random generator (UCT tie-breaks)
    polish: bool = False  # every leaf of every model, sweeps repeated until no architecture changes


class Filler:
    """Capacity repair + per-model MCTS for dataflow candidates, on one Pricer's caches."""

    def __init__(self, space: SearchSpace, pricer: Pricer, leaves_per_model: int):
        self.space = space
        self.pricer = pricer
        self.leaves_per_model = leaves_per_model
        self.trees = [ArchTree(space.model_archs[j], space.archs) for j in range(space.n_models)]
        self.stats: Stats = [t.stats() for t in self.trees]  # MCTS statistics when the generation began
        self.incumbent = INFEASIBLE  # best search value when the generation began

    def begin_generation(self, stats: Stats, incumbent: float) -> None:
        self.stats = stats
        self.incumbent = incumbent

    # -- capacity checker: architecture repair -----------------------------------------------
    def repair_archs(self, genome: Genome, archs: tuple[int, ...]) -> tuple[int, ...] | None:
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

    # -- one candidate -----------------------------------------------------------------------
    def fill(self, job: FillJob) -> FillResult:
        sp, pr = self.space, self.pricer
        evaluations0, priced0 = pr.evaluations, pr.unique_designs
        repaired = self.repair_archs(job.genome, job.archs)
        if repaired is None:
            return FillResult(Individual(job.genome, job.archs, INFEASIBLE, None), ((),) * sp.n_models, (), 0, 0)
        if job.polish:
            job = FillJob(sp.normalized(job.genome, repaired), job.archs, job.seed, job.polish)
        run = _Fill(self, job, repaired)
        leaves = max(t.n_leaves for t in self.trees) if job.polish else self.leaves_per_model
        run.search_archs(leaves, MAX_POLISH_SWEEPS if job.polish else 1)
        if job.polish:
            for _ in range(MAX_POLISH_ROUNDS):
                if not run.climb() or not run.search_archs(leaves, MAX_POLISH_SWEEPS):
                    break
        top = sorted((v, k) for k, v in run.found.items() if v < INFEASIBLE)[:FILL_CANDIDATES]
        return FillResult(Individual(run.genome, tuple(run.archs), run.value, run.key), tuple(run.backups),
                          tuple(top), pr.evaluations - evaluations0, pr.unique_designs - priced0,
                          tuple(run.leaves))

    def fill_all(self, jobs: list[FillJob], deadline: Deadline | None) -> list[FillResult | None]:
        out: list[FillResult | None] = []
        for job in jobs:
            out.append(None if deadline is not None and deadline.passed() else self.fill(job))
        return out


class _Fill:
    """The state of one fill: the candidate, its architectures, the best completion so far."""

    def __init__(self, filler: Filler, job: FillJob, archs: tuple[int, ...]):
        self.filler = filler
        self.sp, self.pricer = filler.space, filler.pricer
        self.rng = np.random.default_rng(list(job.seed))
        self.best_seen = filler.incumbent
        self.found: dict[DesignKey, float] = {}
        self.genome = job.genome
        self.archs = list(archs)
        n = self.sp.n_models
        self.backups: list[tuple[tuple[int, float], ...]] = [() for _ in range(n)]
        self.leaves = [0] * n
        for j, tree in enumerate(filler.trees):
            tree.set_stats(filler.stats[j])
        self.value, self.key = self.price(self.genome, archs)

    def price(self, genome: Genome, archs: tuple[int, ...]) -> tuple[float, DesignKey | None]:
        value, key = self.pricer.complete(genome, archs)
        if key is not None:
            self.found[key] = value
            self.best_seen = min(self.best_seen, value)
        return value, key

    def reward(self, value: float) -> float:
        return 0.0 if value == INFEASIBLE else min(1.0, self.best_seen / value)

    def search_archs(self, leaves: int, sweeps: int) -> bool:
        """Per model (verifier first), MCTS over its architecture with the others fixed; repeated up to
        `sweeps` times while an architecture changes. True if any changed."""
        sp, current, genome = self.sp, self.archs, self.genome
        start = tuple(current)
        for _ in range(sweeps):
            before = tuple(current)
            for j in range(sp.n_models):
                tree = self.filler.trees[j]
                inherited = (current[j], self.reward(self.value))
                tree.backup(*inherited)
                best = [self.value, self.key, current[j]]

                def price_leaf(aid: int, j: int = j, best: list = best) -> float:
                    v, k = self.price(genome, tuple(current[:j] + [aid] + current[j + 1:]))
                    if v < best[0]:
                        best[0], best[1], best[2] = v, k, aid
                    return self.reward(v)

                done = tree.search(self.rng, leaves, price_leaf, solved=(current[j],),
                                   max_devices=sp.device_room(current, j))
                self.backups[j] += (inherited, *done)
                self.leaves[j] += len(done)
                self.value, self.key, current[j] = best
            if tuple(current) == before:
                break
        return tuple(current) != start

    def climb(self) -> bool:
        """Best-improvement hill climbing over one-gene neighbours at fixed architectures (the elite's
        polish). True if the genome improved."""
        improved = False
        archs = tuple(self.archs)
        for _ in range(MAX_CLIMB_STEPS):
            best = None
            for genome in self.sp.neighbours(self.genome, archs):
                v, k = self.price(genome, archs)
                if v < (self.value if best is None else best[0]):
                    best = (v, k, genome)
            if best is None:
                break
            self.value, self.key, self.genome = best
            improved = True
        return improved


class SerialFiller:
    """Fills candidates in this process."""

    def __init__(self, filler: Filler):
        self.filler = filler

    def run(self, jobs: list[FillJob], stats: Stats, incumbent: float,
            deadline: Deadline | None) -> list[FillResult | None]:
        self.filler.begin_generation(stats, incumbent)
        return self.filler.fill_all(jobs, deadline)

    def close(self) -> None:
        pass


# -- worker processes -------------------------------------------------------------------------
_worker_filler: Filler | None = None  # one per worker process, set by the pool initializer


def _init_worker(scenario: Scenario, catalog: Catalog, objective: str, leaves_per_model: int) -> None:
    global _worker_filler
    space = SearchSpace(scenario, catalog)
    _worker_filler = Filler(space, Pricer(space, catalog, objective), leaves_per_model)


def _fill_chunk(args: tuple[Stats, float, Deadline | None, list[FillJob]]) -> list[FillResult | None]:
    stats, incumbent, deadline, jobs = args
    assert _worker_filler is not None
    _worker_filler.begin_generation(stats, incumbent)
    return _worker_filler.fill_all(jobs, deadline)


class PoolFiller:
    """Fills candidates in `workers` processes, each with its own pricing caches (kept across
    generations); results come back in job order."""

    CHUNKS_PER_WORKER = 4

    def __init__(self, workers: int, scenario: Scenario, catalog: Catalog, objective: str, leaves_per_model: int):
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.workers = workers
        self.pool = ctx.Pool(workers, initializer=_init_worker,
                             initargs=(scenario, catalog, objective, leaves_per_model))

    def run(self, jobs: list[FillJob], stats: Stats, incumbent: float,
            deadline: Deadline | None) -> list[FillResult | None]:
        if not jobs:
            return []
        size = max(1, -(-len(jobs) // (self.workers * self.CHUNKS_PER_WORKER)))
        chunks = [(stats, incumbent, deadline, jobs[i:i + size]) for i in range(0, len(jobs), size)]
        return [r for part in self.pool.map(_fill_chunk, chunks) for r in part]

    def close(self) -> None:
        self.pool.close()
        self.pool.join()
