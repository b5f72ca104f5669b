"""The end of every exact solve: the canonical optimum when the objective is proven (else the tie-break
skipped), the evaluator's re-check of the claim (`verify`: CP-SAT's tight price of the design must equal the
evaluator's), the tie levels' re-check and the SolveReport (`finish`); `explain_infeasible` when none is found."""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.deadline import cap_seconds
from specpim_cp.solvers.exact.canonical import canonical_optimum, check_levels, skipped_tie_break
from specpim_cp.solvers.exact.guards import ModelMismatch, cap_detail
from specpim_cp.solvers.exact.model import SpecModel, ub
from specpim_cp.solvers.exact.session import SolverOptions, SolveSession
from specpim_cp.solvers.result import SolveReport, SolveResult, Status, inputs_hash, solver_version

#: Largest value a lexicographic (round ns, energy nJ) objective packed into one integer may reach (CP-SAT's
#: objective is a 64-bit integer; a margin below 2^63).
PACKED_LIMIT = 1 << 61


def tight_claim(sm: SpecModel, design: Design, opts: SolverOptions, spent: list[float] | None = None,
                expect: tuple[int, int] | None = None) -> tuple[int, int, int]:
    """(round ns, energy nJ, tokens micro) that CP-SAT computes for `design` with every decision fixed: the least
    round time, then the least energy at it (the wall seconds of its CP-SAT solves appended to `spent`).

    With `expect` (the evaluator's round ns t and energy nJ e) one solve checks it: T <= t, E' = min(E, e + 1)
    and T x (e + 2) + E' minimised. Any design price with T < t lies in that box and scores lower whatever its
    energy, so an answer of exactly (t, e) means the least T is t and the least E at it is e: the claim two
    unboxed solves find. Any other answer (a lower price, or none in the box) is found again without the box,
    so that the claim reported is CP-SAT's own. Without `expect`, or when the packed objective could pass
    PACKED_LIMIT: T minimised, then E at that T (one solve when ub(T) x ub(E) fits)."""
    if expect is not None and _confirms(sm, design, opts, spent, *expect):
        return expect[0], expect[1], sm.stats[sm.choice_index(design)].tokens_micro
    model, T, E = _fixed_design_model(sm, design)
    # lexicographic in one objective: T first, then energy (T's weight exceeds any energy value)
    packed = ub(sm.energy) * ub(sm.T) < PACKED_LIMIT
    model.minimize(T * (ub(sm.energy) + 1) + E) if packed else model.minimize(T)
    solver = _claim_solver(opts)
    status = solver.solve(model)
    if spent is not None:
        spent.append(solver.wall_time)
    if status != cp_model.OPTIMAL:
        raise ModelMismatch(f"the CP-SAT model rejects its own design ({solver.status_name(status)})")
    t, e = solver.value(T), solver.value(E)
    if not packed:  # energy not minimised above: minimise it with T fixed
        model.add(T == t)
        model.minimize(E)
        status = solver.solve(model)
        if spent is not None:
            spent.append(solver.wall_time)
        e = solver.value(E)
    k = sm.choice_index(design)
    return t, e, sm.stats[k].tokens_micro


def _confirms(sm: SpecModel, design: Design, opts: SolverOptions, spent: list[float] | None, t_ev: int,
              e_ev: int) -> bool:
    """Whether one boxed solve (`tight_claim`'s docstring) finds exactly (t_ev, e_ev); False when the packed
    objective could pass PACKED_LIMIT or T's domain does not reach t_ev (the unboxed solves answer then)."""
    if t_ev * (e_ev + 2) + e_ev + 1 >= PACKED_LIMIT:
        return False
    model, T, E = _fixed_design_model(sm, design)
    domain = model.proto.variables[T.index].domain
    if len(domain) != 2 or domain[0] > t_ev:
        return False
    domain[1] = min(domain[1], t_ev)  # T <= t as its domain: the objective's range then fits
    over = model.new_bool_var("claim_over")  # E above the evaluator's energy: E' = e + 1
    capped = model.new_int_var(0, e_ev + 1, "claim_energy")
    model.add(E >= e_ev + 1).only_enforce_if(over)
    model.add(E <= e_ev).only_enforce_if(~over)
    model.add(capped == E).only_enforce_if(~over)
    model.add(capped == e_ev + 1).only_enforce_if(over)
    model.minimize(T * (e_ev + 2) + capped)
    solver = _claim_solver(opts)
    status = solver.solve(model)
    if spent is not None:
        spent.append(solver.wall_time)
    return status == cp_model.OPTIMAL and (solver.value(T), solver.value(capped)) == (t_ev, e_ev)


def _fixed_design_model(sm: SpecModel, design: Design):
    """(a clone of the model with every family enforced and every decision fixed to `design`, its T, its E)."""
    model = sm.m.clone()
    sm.enforce_families(model)
    for v, val in sm.decision_literals(design):
        model.add(model.get_bool_var_from_proto_index(v.index) == val)
    return model, model.get_int_var_from_proto_index(sm.T.index), model.get_int_var_from_proto_index(sm.energy.index)


def _claim_solver(opts: SolverOptions) -> cp_model.CpSolver:
    """The solver of a fixed design's price: one worker, the run's seed, the presolve-bug workaround."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = opts.seed
    solver.parameters.presolve_inclusion_work_limit = 0
    solver.parameters.max_time_in_seconds = 60.0
    return solver


def verify(run: SolveSession, design: Design) -> tuple[Evaluation, dict]:
    """Re-price with the evaluator and require exact agreement with the CP-SAT model of `run` (whose
    `cp_sat_s` counts the check's CP-SAT seconds)."""
    evaluation = run.sm.ev.evaluate(design)
    spent: list[float] = []
    m = evaluation.metrics
    t, e, tok = tight_claim(run.sm, design, run.opts, spent, expect=(m.round_time_ns, m.energy_nj_per_round))
    run.cp_sat_s += sum(spent)
    claim = {"round_time_ns": t, "energy_nj_per_round": e, "tokens_per_round_micro": tok}
    actual = {"round_time_ns": m.round_time_ns, "energy_nj_per_round": m.energy_nj_per_round,
              "tokens_per_round_micro": m.tokens_per_round_micro}
    if claim != actual:
        raise ModelMismatch(f"CP-SAT claims {claim} but the evaluator prices {actual} for {design.key()}")
    return evaluation, claim


def explain_infeasible(sm: SpecModel, opts: SolverOptions) -> str:
    """Name the constraint families that make the scenario infeasible (CP-SAT assumptions)."""
    model = sm.m.clone()
    lits = {name: model.get_bool_var_from_proto_index(v.index) for name, v in sm.assumption_families.items()}
    model.add_assumptions(list(lits.values()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.presolve_inclusion_work_limit = 0  # works around a presolve bug of OR-Tools 9.15
    solver.parameters.max_time_in_seconds = cap_seconds(max(10.0, opts.time_limit_s), opts.deadline)
    status = solver.solve(model)
    if status != cp_model.INFEASIBLE:
        return "no design satisfies the scenario within the time limit"
    core = set(solver.sufficient_assumptions_for_infeasibility())
    names = [name for name, v in lits.items() if v.index in core]
    if not names:
        return "the [space] restrictions leave no valid design (mapping rule vs PIM units)"
    details = []
    for name in names:
        if name.startswith("CAP "):
            j = next(j for j, d in enumerate(sm.data) if f"{d.label} ({d.spec.name})" in name)
            details.append(cap_detail(sm, j, name))
        else:
            details.append(f"[{name}]")
    return "infeasible: " + "; ".join(details)


def run_details(run: SolveSession, claim: dict) -> dict:
    """The report's fields of a Dinkelbach solve: the claim, the model's size, the trajectory, the solves."""
    return {"claimed": claim, "model_size": {"variables": len(run.sm.m.proto.variables),
                                             "constraints": len(run.sm.m.proto.constraints)},
            "trajectory": run.trajectory, "deterministic_time": round(run.deterministic_time, 3),
            "solves": run.solve_log}


def finish(run: SolveSession, scenario: Scenario, t0: float, objective: str, status: Status, best: Evaluation,
           obj: Fraction, bound: Fraction | None, *, front: list[Evaluation] | None = None,
           details: Callable[[dict], dict] | None = None, more: dict | None = None) -> SolveResult:
    """The end of a solve whose best design is `best` (objective `obj`, proven `bound`): the canonical optimum
    [OBJ-3] when `status` is OPTIMAL (EDP: over its exact `front`), the evaluator's re-check of the claim and
    of every tie level, and the report; its extra fields are `details(claim)` (default `run_details`), then
    `more`, then the tie-break's (none when `run.canonical` is off: only the optimum's value is wanted), then
    `cp_sat_s`: the wall seconds spent inside CP-SAT, every solve summed (the evaluator's re-check too)."""
    if status == Status.OPTIMAL and run.canonical:
        design, tie = canonical_optimum(run, objective, best, front)
    else:
        design, tie = best.design, skipped_tie_break(status if run.canonical else None)
    evaluation, claim = verify(run, design)
    check_levels(evaluation, obj, objective, tie)
    extra = {**(details or (lambda c: run_details(run, c)))(claim), **(more or {}), **tie,
             "cp_sat_s": round(run.cp_sat_s, 3)}
    rep = SolveReport(method="cp-sat", objective_name=objective, status=status, objective=obj, bound=bound,
                      wall_s=time.perf_counter() - t0, iterations=run.iterations, seed=run.opts.seed,
                      solver_version=solver_version(), inputs_hash=inputs_hash(scenario, run.opts.as_dict()),
                      extra=extra)
    return SolveResult(evaluation, rep)
