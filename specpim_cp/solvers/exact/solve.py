"""`solve`: the optimum of a scenario's space for latency, energy, EDP or request latency, with its proof or gap.

The pipeline: build the model (guards.py refuses what it cannot hold), start from the best known design
(starts.py), minimise the ratio by Dinkelbach (ratio.py) or, for EDP, sweep the front's part that can hold
the least EDP (fronts.py); a tree space beyond the exact menu goes to tree_columns.py. Every solve ends in
finish.py: the canonical optimum (canonical.py), the evaluator's re-check of the claim, the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.space import TreeMenuTooLarge
from specpim_cp.solvers.deadline import TimeLimitReached, check
from specpim_cp.solvers.exact import no_spec
from specpim_cp.solvers.exact.finish import explain_infeasible, finish
from specpim_cp.solvers.exact.fronts import epsilon_front
from specpim_cp.solvers.exact.guards import build_model, check_options
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.ratio import RatioObjective, minimize_ratio
from specpim_cp.solvers.exact.request import solve_request
from specpim_cp.solvers.exact.session import ProgressHook, SolverOptions, SolveSession
from specpim_cp.solvers.exact.settled import keep_settled
from specpim_cp.solvers.exact.starts import best_start
from specpim_cp.solvers.exact.tree_column_set import columns_refusal
from specpim_cp.solvers.exact.tree_columns import solve_by_columns
from specpim_cp.solvers.result import SolveResult, Status
from specpim_cp.solvers.shared_evaluator import shared_evaluator


def solve(scenario: Scenario, *, objective: str | None = None, options: SolverOptions | None = None,
          hint: Design | Callable[[], Design | None] | None = None, catalog: Catalog | None = None,
          on_progress: ProgressHook | None = None, canonical: bool = True,
          start_baselines: bool = True) -> SolveResult:
    """The optimum of the scenario's (restricted) space for `objective`, with its proof or gap.

    `options`: CP-SAT's time limit, workers, seed and determinism (default `SolverOptions()`: 60 s, one
    worker, seed 0). `on_progress` is called with a SolveProgress after every Dinkelbach iteration
    (incumbent, bound). `canonical=False` skips the canonical tie-break [OBJ-3] where only the optimum's
    value is used (the design is then one optimum, not the canonical one). `start_baselines=False` starts
    from the hint and the verifier alone's settled designs without pricing the baselines (the front door's
    choice when the hint is the heuristic's design searched for the same objective; starts.py). A `hint` given
    as a function is asked for only when the first incumbent is chosen, after the model is built and the verifier
    alone settled (the front door's warm start, searched meanwhile in another process); when it gives none,
    the baselines are priced whatever `start_baselines` says.
    """
    t0 = time.perf_counter()
    opts = (options or SolverOptions()).with_deadline()  # the command's deadline, unless started above
    check_options(opts.time_limit_s, opts.workers)
    check(opts.deadline, f"solving '{scenario.name}'")  # a solve started after the command's deadline
    catalog = catalog or scenario_catalog(scenario)
    objective = objective or scenario.objective
    ev = shared_evaluator(scenario, catalog)  # the baselines of the first incumbent price with it too
    try:
        sm = build_model(scenario, catalog, ev)
    except TreeMenuTooLarge as exc:  # [TREE-6] relaxed tree classes, refined, where they apply
        why = columns_refusal(scenario, catalog, objective)
        if why is not None:
            raise TreeMenuTooLarge(f"{exc}; the tree-class refinement [TREE-6] does not apply: {why}") from None
        hint = hint() if callable(hint) else hint
        return solve_by_columns(scenario, catalog, ev, objective, opts, hint, on_progress, t0)
    run = SolveSession(sm, opts)
    run.t0 = t0  # progress and trajectory times count from the call, model building included
    run.on_progress = on_progress
    run.canonical = canonical
    run.start_baselines = start_baselines
    # [NOSPEC] the verifier alone's proven bounds the objective's search needs, and its best designs
    alone = no_spec.settle(sm, run, no_spec.settle_levels(objective))
    keep_settled(scenario, catalog, sm)  # `ranges` of the same scenario starts from it
    if callable(hint):  # a warm start searched meanwhile: wanted from here on
        hint = hint()
        run.start_baselines = start_baselines or hint is None
    if objective == "request":  # [PRE-5] prefill + G x latency per token, by prefill thresholds
        return solve_request(sm, run, scenario, hint, t0)
    if objective == "edp":
        return solve_edp(sm, run, scenario, hint, t0, alone)
    start = better_start(ev, objective, best_start(sm, ev, objective, hint, run.start_baselines), alone)
    status, design, obj, bound = minimize_ratio(run, RatioObjective(sm, objective), start=start)
    if status == Status.INFEASIBLE:
        raise ScenarioError(explain_infeasible(sm, opts))
    if design is None:
        raise TimeLimitReached(f"no design found within the time limit ({opts.time_limit_s} s)")
    return finish(run, scenario, t0, objective, status, ev.evaluate(design), obj, bound)


def better_start(ev: Evaluator, objective: str, start: Evaluation | None, others: list[Design]) -> Evaluation | None:
    """The best of `start` and `others` (designs of the space) by `objective`, priced by the evaluator."""
    for design in others:
        cand = ev.evaluate(design)
        if start is None or cand.metrics.objective(objective) < start.metrics.objective(objective):
            start = cand
    return start


def solve_edp(sm: SpecModel, run: SolveSession, scenario: Scenario, hint: Design | None, t0: float,
              alone: list[Design] = ()) -> SolveResult:
    """[EDP-1] The least EDP: the part of the latency-energy front that can hold it (`epsilon_front`,
    starting from the best known design by energy, the verifier alone's `alone` included), its least-EDP
    point of least latency, then `finish`."""
    opts = run.opts
    start = better_start(sm.ev, "energy", best_start(sm, sm.ev, "energy", hint, run.start_baselines), list(alone))
    front, status, _, _ = epsilon_front(sm, run, edp=True, start=start)
    if status == Status.INFEASIBLE:
        raise ScenarioError(explain_infeasible(sm, opts))
    if not front:
        raise TimeLimitReached(f"no design found within the time limit ({opts.time_limit_s} s)")
    # the least EDP, then the least latency (the front is exact: both are compared as Fractions)
    best = min(front, key=lambda e: (e.metrics.objective("edp"), e.metrics.latency_fraction()))
    obj = best.metrics.objective("edp")
    status = Status.OPTIMAL if status == Status.OPTIMAL else Status.FEASIBLE
    return finish(run, scenario, t0, "edp", status, best, obj, obj if status == Status.OPTIMAL else None,
                  front=front, details=lambda claim: {"pareto_points": len(front),
                                                      "deterministic_time": round(run.deterministic_time, 3),
                                                      "solves": run.solve_log})
