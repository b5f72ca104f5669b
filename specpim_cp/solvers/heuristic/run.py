"""`run_heuristic`: budgets, warm starts, objectives, the final selection and the SolveResult.

Objectives. `search_objective` ranks candidates during the search; `select_objective` picks the
returned design among the best candidates found (the archive's designs within SELECT_TOLERANCE of the
best search value). SpecPIM guides by latency and selects by EDP; here both default to the scenario's
objective, because the returned SolveReport states the scenario objective of the returned design and
an EDP pick could be a few per cent slower than the best design found. Pass `select_objective="edp"`
(with `search_objective="latency"`) for the paper's behaviour.

Polish (an addition to the paper's explorer, on by default, `polish=False` turns it off): the best
candidate of every generation has its architectures re-searched with every MCTS leaf of every model,
then its genome hill-climbed one gene at a time at fixed architectures, repeated while it improves
(a memetic step; it closes most of the gap the quick budget leaves on the examples).

Not speculating ([NOSPEC]): the verifier alone is searched by the same explorer on the scenario without
drafters (its devices up to the whole budget, `ALONE_SHARE` of a time limit), and returned when it beats
every speculating design found; the best speculating design is then the result's `speculating` (an exact
solve's note starts its speculating side from it), else the verifier alone's best is the result's `alone`
(with `speculating`, the side an exact solve's optimum is likely on).

Warm start: the initial population holds GPU-SI (`baselines.gpu_si`, the best host-only design on
plain memory) and the fixed-recipe PIM designs (FC offload, attention offload, everything on PIM),
each projected into the scenario's restricted space, then random candidates.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

from specpim_cp import __version__
from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Metrics
from specpim_cp.problem.design import ArchConfig, DrafterChoice, SpecChoice
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.solvers.baselines import baseline_devices, gpu_si
from specpim_cp.solvers.deadline import Deadline
from specpim_cp.solvers.heuristic.fill import Filler, PoolFiller, SerialFiller
from specpim_cp.solvers.heuristic.ga import GeneticExplorer
from specpim_cp.solvers.heuristic.genes import Genome, SearchSpace
from specpim_cp.solvers.heuristic.pricing import INFEASIBLE, DesignKey, Pricer
from specpim_cp.solvers.result import SolveReport, SolveResult, Status, inputs_hash
from specpim_cp.solvers.shared_evaluator import shared_evaluator

OBJECTIVES = ("latency", "energy", "edp")
SELECT_TOLERANCE = 0.05  # select among designs within 5 % of the best search objective
FLOAT_SLACK = 1e-9  # relative: a search value's float is within one rounding of the exact ratio
#: The share of a time limit the search of the verifier alone takes (its space is a model's, not several).
ALONE_SHARE = 0.2


@dataclass(frozen=True)
class Budget:
    """Search effort: GA generations x population; MCTS leaves per model per dataflow candidate."""

    generations: int
    population: int
    mcts_leaves_per_model: int

    def __post_init__(self):
        if self.generations < 0 or self.population < 2 or self.mcts_leaves_per_model < 0:
            raise ScenarioError(f"budget: need generations >= 0, population >= 2, leaves >= 0, got {self}")

    def as_dict(self) -> dict:
        return asdict(self)


BUDGETS = {
    "quick": Budget(generations=12, population=24, mcts_leaves_per_model=3),
    "paper": Budget(generations=50, population=1000, mcts_leaves_per_model=10_000),
}


def resolve_budget(budget: str | Budget) -> Budget:
    if isinstance(budget, Budget):
        return budget
    if budget not in BUDGETS:
        raise ScenarioError(f"budget: unknown budget {budget!r} (known: {', '.join(BUDGETS)})")
    return BUDGETS[budget]


def _warm_starts(scenario: Scenario, catalog: Catalog, space: SearchSpace) -> list[tuple[Genome, tuple[int, ...]]]:
    """GPU-SI and the fixed PIM recipes, projected into the restricted space."""
    designs = []
    gammas = [opts[0].draft_length for opts in space.drafter_opts]
    if scenario.drafters:
        try:
            si = gpu_si(scenario, catalog).design
            designs.append(si)
            gammas = [d.draft_length for d in si.drafters]
        except ScenarioError:
            pass
    devices = baseline_devices(scenario)
    n = space.n_models
    for rule, memory, k_of_units in (("fc-offload", "hbm", 0.5), ("attention-offload", "hbm", 0.5),
                                     ("all-pim", "gddr", 1.0), ("host-only", "hbm", 0.0)):
        mem = memory if memory in scenario.memory_types else scenario.memory_types[0]
        k = round(catalog.memory(mem).units_per_group * k_of_units)
        archs = [ArchConfig(mem, k, d) for d in devices]
        choice = SpecChoice(tuple(DrafterChoice(g) for g in gammas), False)
        designs.append(space.design_space.build(archs, [rule_placement(rule, space.levels)] * n, choice))
    return [space.project(d) for d in designs]


def _contenders(archive: dict[DesignKey, tuple[float, float]], search: str, select: str) -> list[DesignKey]:
    """The archive's designs `_select` may pick, the only ones re-priced exactly: a search value is the float
    of the evaluator's exact ratio (correctly rounded, so in the same order), and only designs within
    SELECT_TOLERANCE of the best (only the best when select == search) can be picked; FLOAT_SLACK covers
    the rounding."""
    best = min(value for value, _ in archive.values())
    cut = best * (1 + (0 if select == search else SELECT_TOLERANCE)) * (1 + FLOAT_SLACK)
    return [key for key, (value, _) in archive.items() if value <= cut]


def _select(archive: dict[DesignKey, Metrics], search: str, select: str) -> DesignKey:
    """Best design by the search objective, or with another select objective the best of it among
    the designs within SELECT_TOLERANCE of the best search value; exact evaluator prices throughout."""
    ranked = sorted(archive, key=lambda key: (archive[key].objective(search), key))
    if select == search:
        return ranked[0]
    limit = archive[ranked[0]].objective(search) * (1 + Fraction(str(SELECT_TOLERANCE)))
    candidates = [key for key in ranked if archive[key].objective(search) <= limit]
    return min(candidates, key=lambda key: (archive[key].objective(select), archive[key].objective(search), key))


def _visited_hash(visited) -> str:
    """A fingerprint of the set of designs a run visited (the best completion of every candidate)."""
    blob = json.dumps(sorted(repr(k) for k in visited), separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_heuristic(scenario: Scenario, *, budget: str | Budget = "quick", seed: int = 0,
                  search_objective: str | None = None, select_objective: str | None = None,
                  catalog: Catalog | None = None, time_limit_s: float | None = None,
                  workers: int = 1, polish: bool = True, warm_start: bool = True,
                  clock: Callable[[], float] = time.monotonic,
                  on_generation: Callable[[int, int, float, int], None] | None = None) -> SolveResult:
    """SpecPIM's explorer: GA over dataflow, per-model MCTS over architecture; seeded and reproducible.

    `search_objective` and `select_objective` default to `scenario.objective` (see the module
    docstring). `polish` (not in the paper) refines the best candidate of every generation: every
    architecture of every model, then one-gene hill climbing, repeated; False gives the paper's
    GA + MCTS alone. `workers` > 1 fills candidates in that many processes; the result is the same as
    with one (only `unique_designs` counts a design once per process that priced it).
    `time_limit_s` stops between candidates (the result then depends on the machine), measured on
    `clock`. `warm_start=False` starts from random candidates only (no baseline recipes).
    `on_generation(generation, generations, best search value, evaluations)` is called after every
    generation (progress for the CLI; the search does not depend on it).
    Raises ScenarioError for an invalid option or when no design of the restricted space fits the
    scenario's devices.
    """
    t0 = time.perf_counter()
    deadline = None if time_limit_s is None else Deadline.after(time_limit_s, clock)  # setting up counts too
    catalog = catalog or scenario_catalog(scenario)
    bud = resolve_budget(budget)
    # request latency (formulations/prefill.md) is searched by latency per token, selected by itself
    search = search_objective or ("latency" if scenario.objective == "request" else scenario.objective)
    select = select_objective or scenario.objective
    for name, value, known in (("search_objective", search, OBJECTIVES),
                               ("select_objective", select, (*OBJECTIVES, "request"))):
        if value not in known:
            raise ScenarioError(f"{name}: unknown objective {value!r} (known: {', '.join(known)})")
    if not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"seed: need a non-negative integer, got {seed!r}")
    if workers < 1:
        raise ScenarioError(f"workers: need at least 1, got {workers}")
    space = SearchSpace(scenario, catalog)
    if scenario.shared_device and any(len(ids) > 1 for ids in space.model_archs):
        raise ScenarioError("heuristic: on a shared device the models' architectures are tied (formulations/edge.md "
                            "[EDGE-2]), which the genetic search does not keep; solve it exactly")
    alone = None
    if space.design_space.offers_no_spec:  # [NOSPEC] the verifier alone, searched on the scenario without drafters
        share = None if time_limit_s is None else time_limit_s * ALONE_SHARE
        alone = run_heuristic(scenario.model_copy(update={"drafters": []}), budget=bud, seed=seed,
                              search_objective=search, select_objective=select, catalog=catalog,
                              time_limit_s=share, workers=workers, polish=polish, warm_start=warm_start, clock=clock)
        time_limit_s = None if time_limit_s is None else time_limit_s - share
    pricer = Pricer(space, catalog, search, shared_evaluator(scenario, catalog))  # GPU-SI's prices, and the solve's
    if workers == 1:
        filler = SerialFiller(Filler(space, pricer, bud.mcts_leaves_per_model))
    else:
        filler = PoolFiller(workers, scenario, catalog, search, bud.mcts_leaves_per_model)
    explorer = GeneticExplorer(space, filler, np.random.default_rng(seed), seed, generations=bud.generations,
                               population=bud.population, deadline=deadline, polish=polish,
                               on_generation=on_generation)
    try:
        explorer.run(_warm_starts(scenario, catalog, space) if warm_start else [])
    finally:
        filler.close()
    if (explorer.best_value == INFEASIBLE or not explorer.archive) and alone is not None:
        return alone  # the time ran out (or nothing speculating fits): the verifier alone's search is the answer
    if explorer.best_value == INFEASIBLE or not explorer.archive:
        raise ScenarioError(f"heuristic: no design of scenario '{scenario.name}' within its [space] fits the "
                            "devices (every candidate priced was infeasible)")
    archive = pricer.metrics(_contenders(explorer.archive, search, select))  # exact prices, validated
    key = _select(archive, search, select)
    design = pricer.design(key)
    evaluator = pricer.evaluator  # the shared evaluator: its caches never change a price
    evaluation = evaluator.evaluate(design)
    speculating = alone_kept = None  # the other side's best design: speculating, or the verifier alone
    if alone is not None:
        alone_eval = evaluator.evaluate(alone.design)
        if (alone_eval.metrics.objective(select), alone_eval.metrics.objective(search)) < (evaluation.metrics.objective(select),
                                                                  evaluation.metrics.objective(search)):
            speculating = evaluation
            design, evaluation = alone.design, alone_eval
        else:
            alone_kept = alone_eval
    outside = space.violations(design)
    if outside:  # a bug, not a user error: the search only builds in-space designs
        raise AssertionError(f"heuristic returned a design outside the scenario's space: {outside}")
    objective: Fraction = evaluation.metrics.objective(scenario.objective)
    wall_s = time.perf_counter() - t0
    options = {"method": "heuristic", "budget": bud.as_dict(), "seed": seed, "search_objective": search,
               "select_objective": select, "time_limit_s": time_limit_s, "polish": polish, "warm_start": warm_start}
    extra = {
        "budget": bud.as_dict(),
        "search_objective": search,
        "select_objective": select,
        "workers": workers,
        "polish": polish,
        "evaluations": explorer.evaluations,
        "unique_designs": explorer.priced,
        "evaluations_per_s": explorer.evaluations / wall_s,
        "unique_designs_per_s": explorer.priced / wall_s,
        "mcts_leaves_priced": dict(zip(space.labels, explorer.leaves_priced)),
        "time_to_best_s": explorer.archive[key][1] if design.drafters or alone is None else
        alone.report.extra["time_to_best_s"],
        "best_search_value": explorer.best_value,
        "history": explorer.thinned_history(),
        "visited_hash": _visited_hash(explorer.visited),
        "stopped_by": explorer.stopped_by,
        "verifier_alone": None if alone is None else {
            "objective": float(alone.report.objective), "chosen": not design.drafters,
            "evaluations": alone.report.extra["evaluations"]},
    }
    report = SolveReport(
        method="heuristic", objective_name=scenario.objective, status=Status.HEURISTIC, objective=objective,
        bound=None, wall_s=wall_s, iterations=explorer.generations_run, seed=seed,
        solver_version=f"specpim-cp {__version__} heuristic", inputs_hash=inputs_hash(scenario, options),
        extra=extra)
    return SolveResult(evaluation, report, speculating=speculating, alone=alone_kept)
