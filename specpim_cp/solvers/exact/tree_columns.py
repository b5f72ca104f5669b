"""[TREE-6] `solve` for a tree space beyond the exact menu: Dinkelbach steps over real and relaxed tree columns
(`tree_column_set.ColumnSearch`), relaxed classes refined until the optimum drafts a real profile, then the
canonical optimum over the real columns (`finish`)."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import NamedTuple

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.deadline import TimeLimitReached
from specpim_cp.solvers.exact.finish import explain_infeasible, finish
from specpim_cp.solvers.exact.guards import (
    ModelMismatch,
    check_capacity,
    check_capacity_rows,
    check_integer_range,
)
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION, Answer
from specpim_cp.solvers.exact.model import SpecModel, ub
from specpim_cp.solvers.exact.ratio import (
    FOCUS_SLACK,
    RatioObjective,
    capped,
    choice_sum,
    floor_bound,
    measure,
    prune_architectures,
)
from specpim_cp.solvers.exact.session import ProgressHook, SolverOptions, SolveSession
from specpim_cp.solvers.exact.starts import best_choice_for, best_known
from specpim_cp.solvers.exact.tree_column_set import ColumnSearch, chain_start_scenario, hardware
from specpim_cp.solvers.result import SolveResult, Status


class ColumnsRun(NamedTuple):
    """What `solve_columns` returns: the status, the best design, its objective and a proven bound, the
    session on a model of the real columns only, and the column search."""

    status: Status
    design: Design
    objective: Fraction
    bound: Fraction
    run: SolveSession
    search: ColumnSearch


class ColumnStep(NamedTuple):
    """One column step: its status, the solver (None without a solution), F at the solution and a proven
    lower bound on F (None: none)."""

    status: Status
    solver: cp_model.CpSolver | None
    f_val: int | None
    f_lb: int | None


def solve_by_columns(scenario: Scenario, catalog: Catalog, ev: Evaluator, objective: str, opts: SolverOptions,
                     hint: Design | None, on_progress: ProgressHook | None, t0: float) -> SolveResult:
    """[TREE-6] `solve` for a tree space beyond the exact menu: relaxed class columns refined until the
    optimum drafts a real profile; then the canonical optimum (OBJ-3) over the real columns."""
    status, design, obj, bound, run, search = solve_columns(scenario, catalog, ev, objective, opts, hint,
                                                            on_progress, t0)
    return finish(run, scenario, t0, objective, status, ev.evaluate(design), obj, bound,
                  more={"tree_columns": search.summary()})


def solve_columns(scenario: Scenario, catalog: Catalog, ev: Evaluator, objective: str, opts: SolverOptions,
                  hint: Design | None, on_progress: ProgressHook | None, t0: float) -> ColumnsRun:
    """[TREE-6] Dinkelbach with refinement over real and relaxed columns. OPTIMAL only when a step proves
    F >= 2 (no real design below the incumbent, no relaxed column reaching it)."""
    search = ColumnSearch(scenario, catalog, ev)
    search.add_design(hint)
    sm, relaxed = search.build()
    check_capacity(sm.prices)
    check_capacity_rows(sm.prices)
    check_integer_range(sm)
    run = SolveSession(sm, opts)
    run.t0 = t0
    run.on_progress = on_progress
    if objective == "energy":  # the energy steps' LP level, as in `minimize_ratio`
        run.linearization = ENERGY_LINEARIZATION
    ratio = RatioObjective(sm, objective)
    start = column_start(sm, ev, objective, hint, relaxed, scenario)
    if start is None:  # no baseline in the space: a first solution over the real columns
        first = first_real_design(run, search, objective, opts)
        incumbent = measure(run, ratio, first)
    else:
        incumbent = measure(run, ratio, start.design)
    scale = ratio.scale
    d_lo = spec.TOKENS_SCALE - 1  # every design commits at least one token per round
    bound = min(min(Fraction(lb, st.tokens_micro) for lb, st in zip(ratio.num_bounds, sm.stats)) * scale,
                ratio.value(*incumbent[:2]))
    status_out = Status.FEASIBLE
    focus: Fraction | None = bound / scale * (1 + FOCUS_SLACK)  # OBJ-1 focus: the cheapest-bounded columns first
    while True:
        n_prev, d_prev, design = incumbent
        lam = Fraction(n_prev, d_prev)
        if focus is not None and focus >= lam:
            focus = None
        if opts.expired:  # the command's deadline: no rebuild for a step that would not run
            break
        search.prune(sm, relaxed, ratio.num_bounds, n_prev, d_prev)
        sm, relaxed = search.build()
        check_integer_range(sm)
        run.sm = sm
        ratio = RatioObjective(sm, objective)
        run.hint = sm.decision_literals(design)
        run.stage = f"{objective}: tree classes {len(search.classes)}, profiles {len(search.profiles)}"
        if run.budget.remaining() <= 0 or (not opts.deterministic and time.perf_counter() - t0 > opts.time_limit_s):
            break
        status, solver, f_val, f_lb = column_step(run, objective, relaxed, n_prev, d_prev, focus)
        if focus is not None:  # a focused step bounds its columns only
            if status == Status.INFEASIBLE or (status == Status.OPTIMAL and f_val is not None and f_val >= 2):
                focus = None  # nothing below lambda among them: every column next
                continue
            f_lb = None
        if f_lb is not None:
            if f_lb >= 2:
                bound = max(bound, lam * scale)
            else:  # N >= lambda D - 1 + (F_lb - 1) / 2 for every design of the space
                bound = max(bound, (lam + Fraction(f_lb - 3, 2) / d_lo) * scale)
        run.progress(ratio, ratio.value(n_prev, d_prev), bound)
        if solver is None or f_val is None:  # no solution within the time limit
            break
        if f_val >= 2:
            if status == Status.OPTIMAL:
                status_out = Status.OPTIMAL
            break
        k = next(k for k, z in enumerate(sm.z) if solver.boolean_value(z))
        if k in relaxed and opts.expired:
            break
        if k in relaxed:  # refine the class on the solution's hardware; a real design found there is kept
            found = search.dive(hardware(sm, solver), relaxed[k], objective, n_prev, d_prev)
            if found is not None:
                incumbent = measure(run, ratio, found)
            continue
        incumbent = measure(run, ratio, run.remember(solver))
        if Fraction(incumbent[0], incumbent[1]) >= lam:
            raise ModelMismatch(f"a tree-column step found F = {f_val} but the evaluator prices the design at "
                                f"{ratio.value(incumbent[0], incumbent[1])}, not below {ratio.value(n_prev, d_prev)}")
    n_prev, d_prev, design = incumbent
    obj = ratio.value(n_prev, d_prev)
    if status_out == Status.OPTIMAL:
        bound = obj
    sm, _ = search.build(with_classes=False)  # every design at the optimum is a real column ([TREE-6])
    run.sm = sm
    run.linearization = None
    run.hint = sm.decision_literals(design)
    return ColumnsRun(status_out, design, obj, min(bound, obj), run, search)


def column_step(run: SolveSession, ratio_name: str, relaxed: dict, n_prev: int, d_prev: int,
                focus: Fraction | None = None) -> ColumnStep:
    """One step at lambda = n_prev / d_prev over real and relaxed columns ([TREE-6]): minimise F = 2 (N - L_c)
    + [c real], L_c = ceil(lambda D_c) - 1 (real) or floor(lambda D_c) (relaxed). The incumbent (F = 3) is in
    the model, so INFEASIBLE or OPTIMAL above 3 is a contradiction (the session's ladder, then ModelMismatch,
    as OBJ-1). `focus`: only the
    columns whose CUT-3 bound ratio is at most it (OBJ-1 focus; the incumbent may be left out, so no
    contradiction is read and the bound holds for those columns only)."""
    sm = run.sm
    num = sm.T if ratio_name == "latency" else sm.energy
    if ratio_name == "energy":  # [CUT-4], as in an energy Dinkelbach step
        sm.tighten_energy(Fraction(n_prev, d_prev))
    bounds = sm.choice_bounds[0 if ratio_name == "latency" else 1]
    d_max = max(st.tokens_micro for st in sm.stats)
    model, nvar = capped(sm, num, min(-(-n_prev * d_max // d_prev), ub(num)), "N", ratio_name == "latency")
    limits = []
    for k, (z, lb, st) in enumerate(zip(sm.z, bounds, sm.stats)):
        if lb * d_prev > n_prev * st.tokens_micro or (focus is not None and Fraction(lb, st.tokens_micro) > focus):
            model.add(model.get_bool_var_from_proto_index(z.index) == 0)  # OBJ-1 pruning (and focus)
        elif ratio_name == "energy":
            prune_architectures(model, sm, k, n_prev, d_prev, focus)
        if k in relaxed:
            limits.append(2 * (n_prev * st.tokens_micro // d_prev))
        else:
            limits.append(2 * (-(-n_prev * st.tokens_micro // d_prev) - 1) - 1)
    objective = 2 * nvar - choice_sum(model, sm, limits)
    model.minimize(objective)

    def contradicts(answer: Answer) -> bool:
        return answer.status == Status.INFEASIBLE or (answer.status == Status.OPTIMAL and answer.value > 3)

    answer = run.solve_with_ladder(model, lambda solver: int(solver.value(objective)),
                                   contradicts if focus is None else None)
    if focus is None and contradicts(answer):
        raise ModelMismatch("CP-SAT contradicts the incumbent (F = 3) in a tree-column step, also with its "
                            "default presolve and with none: a solver fault; no optimum is claimed")
    status, solver, f_val, _ = answer
    if status not in (Status.OPTIMAL, Status.FEASIBLE):
        return ColumnStep(status, None, None, None)
    f_lb = f_val if status == Status.OPTIMAL else min(f_val, floor_bound(solver.best_objective_bound))
    return ColumnStep(status, solver, f_val, f_lb)


def first_real_design(run: SolveSession, search: ColumnSearch, objective: str, opts: SolverOptions) -> Design:
    """Any design of the real columns (CP-SAT's first solution of the least numerator); ScenarioError naming the
    infeasible families when there is none (a tree changes no constraint but the round's: the chains decide)."""
    sm, _ = search.build(with_classes=False)
    run.sm = sm
    num = sm.T if objective == "latency" else sm.energy
    model, nvar = capped(sm, num, ub(num), "N")
    model.minimize(nvar)
    status, solver = run.solve(model, first_solution=True)
    if status == Status.INFEASIBLE:
        raise ScenarioError(explain_infeasible(sm, opts))
    if status not in (Status.OPTIMAL, Status.FEASIBLE):
        raise TimeLimitReached(f"no design found within the time limit ({opts.time_limit_s} s)")
    return sm.decode(solver.boolean_value)


def column_start(sm: SpecModel, ev: Evaluator, objective: str, hint: Design | None, relaxed: dict,
                  scenario: Scenario) -> Evaluation | None:
    """The best of the hint and the chain baselines (the scenario with trees off), with the best real column
    on its hardware (relaxed columns skipped: they are no designs)."""
    best = best_known(sm, ev, objective, hint, chain_start_scenario(scenario),
                      (ScenarioError, ValueError))  # ValueError: a draft not among the columns
    return None if best is None else best_choice_for(sm, ev, objective, best, exclude=relaxed, limit=None)
