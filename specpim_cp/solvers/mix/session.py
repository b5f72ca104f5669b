"""One solve-mix session's shared machinery: the CP-SAT runs of a mix model on one budget with their stage
log (`MixRun`), the seconds per phase (`Phases`), and the verification of a mix design's claims against the
evaluator (`verify_mix`, `tight_claims`). Both drivers use it: the mix model's (cpsat.py) and the
decomposition's (decomposition.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.physics.evaluate import Evaluation, Metrics
from specpim_cp.physics.mix import check_mix_capacity
from specpim_cp.problem.design import Design
from specpim_cp.solvers.deadline import cap_seconds
from specpim_cp.solvers.exact.guards import ModelMismatch
from specpim_cp.solvers.exact.ladder import NO_PRESOLVE, Solved, solve_with_ladder
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.session import SolverOptions, TimeBudget
from specpim_cp.solvers.mix.cell_solves import cell_kind
from specpim_cp.solvers.mix.cpsat_model import MixModel, ObjectivePlan
from specpim_cp.solvers.mix.records import CellClaim, MixStage, StageSolve
from specpim_cp.solvers.result import Status

StageHook = Callable[[str], None]


@dataclass
class Stage:
    status: str  # CP-SAT's status name, or UNKNOWN
    designs: list[Design] | None
    cp_objective: int | None
    cp_bound: int | None
    plan: ObjectivePlan | None


class MixRun:
    """One solve-mix session: the model, the budget of its CP-SAT solves, the stage log."""

    def __init__(self, mm: MixModel, opts: SolverOptions, on_stage: StageHook | None):
        self.mm = mm
        self.opts = opts
        self.budget = TimeBudget(opts)
        self.on_stage = on_stage
        self.stages: list[MixStage] = []
        self.last_status = ""

    def say(self, text: str) -> None:
        if self.on_stage is not None:
            self.on_stage(text)

    def metrics(self, designs: Sequence[Design]) -> list[Metrics]:
        check_mix_capacity(self.mm.mix, self.mm.evaluators, designs)
        return [ev.metrics(d) for ev, d in zip(self.mm.evaluators, designs, strict=True)]

    def run(self, model: cp_model.CpModel, objective_var, hint: Sequence[tuple] | None,
            first_solution: bool = False, limit: float | None = None,
            known_feasible: bool = False, linearization: int | None = None,
            one_worker: bool = False,
            above: Callable[[cp_model.CpSolver], bool] | None = None) -> tuple[int, cp_model.CpSolver]:
        """One CP-SAT solve on the session's budget. `known_feasible`: the model holds a design known to be
        feasible (the incumbent it is capped by), so INFEASIBLE can only be a solver error; `above`: whether an
        OPTIMAL answer lies above that design (a solver error too). Either climbs the retry ladder. `linearization`:
        CP-SAT's LP level (default: CP-SAT's own); `one_worker`: one CP-SAT worker whatever the options."""
        invalid = model.validate()
        if invalid:
            raise ModelMismatch(f"CP-SAT rejects the mix model: {invalid}")
        if objective_var is not None:
            model.minimize(objective_var)
        model.clear_hints()
        for v, val in hint or ():
            model.add_hint(model.get_int_var_from_proto_index(v.index), val)
        solver = cp_model.CpSolver()
        self.budget.configure(solver)
        # the mix model keeps CP-SAT's default presolve effort (but the presolve workaround): with the lighter
        # single-scenario settings (one presolve pass, probing level 0) CP-SAT 9.15 declared a mix model
        # INFEASIBLE although its incumbent is feasible (formulations/mix.md, "Solver settings")
        default = cp_model.CpSolver().parameters
        solver.parameters.max_presolve_iterations = default.max_presolve_iterations
        solver.parameters.cp_model_probing_level = default.cp_model_probing_level
        solver.parameters.linearization_level = default.linearization_level if linearization is None else linearization
        if one_worker:
            solver.parameters.num_workers = 1
        if limit is not None:  # a share of the budget (screening stages), same units as the budget
            p = solver.parameters
            if self.opts.deterministic:
                p.max_deterministic_time = min(p.max_deterministic_time, limit)
            else:
                p.max_time_in_seconds = min(p.max_time_in_seconds, limit)

        if first_solution:
            solver.parameters.stop_after_first_solution = True
        last: list[int] = []

        def rung(m: cp_model.CpModel, cautious: bool | str, part: str | None = None) -> Solved:
            if cautious == NO_PRESOLVE:
                if last[-1] == cp_model.INFEASIBLE:
                    self.stages.append(MixStage("CP-SAT returned INFEASIBLE on a model with a known feasible "
                                                "design; re-solved without presolve", round(solver.wall_time, 3)))
                solver.parameters.cp_model_presolve = False
            last.append(solver.solve(m))
            self.budget.charge(solver)
            return Solved(Status.of_cp_sat(solver, last[-1]), solver)

        # the one retry ladder (a CP-SAT presolve error, mix.md): its first solve already has CP-SAT's own
        # presolve effort, so an INFEASIBLE answer for a model with a known design climbs to no presolve
        def contradicts(a) -> bool:
            return (known_feasible and a.status == Status.INFEASIBLE) or (
                above is not None and a.status == Status.OPTIMAL and above(a.solver))

        solve_with_ladder(rung, model, lambda _solver: 0, contradicts, rungs=(NO_PRESOLVE,))
        return last[-1], solver

    def first_incumbent(self, extra=None) -> list[Design] | None:
        """Any feasible mix design (the first solution of minimising the cells' summed round times); None
        when there is none (`last_status` says INFEASIBLE) or none was found in time."""
        model = self.mm.m.clone()
        if extra is not None:
            extra(model)
        total = sum(model.get_int_var_from_proto_index(sm.T.index) for sm in self.mm.cells)
        status, solver = self.run(model, total, None, first_solution=True)
        self.stages.append(MixStage("first feasible mix design", round(solver.wall_time, 3),
                                    solver.status_name(status)))
        self.last_status = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        return self.mm.decode(solver.boolean_value)

    def stage(self, name: str, objective: str, incumbent: list[Design], lows: Sequence[Fraction],
              optima: Sequence[Fraction] | None, extra=None, regret_stage2: bool = False,
              limit: float | None = None) -> Stage:
        """One CP-SAT solve of an objective model, capped by the feasible `incumbent` (which must satisfy
        `extra`: an INFEASIBLE answer is then a solver error, re-solved without presolve) and hinted with
        it."""
        t0 = time.perf_counter()
        plan = self.mm.plan(cell_kind(objective), self.metrics(incumbent), lows,
                            optima if objective == "regret" else None, regret_stage2)
        model, obj, _ = self.mm.objective_model(objective, plan, regret_stage2)
        if extra is not None:
            extra(model)
        self.say(f"{name}: CP-SAT ({len(model.proto.variables):,} variables, {len(model.proto.constraints):,} "
                 "constraints)")
        status, solver = self.run(model, obj, self.mm.decision_literals(incumbent), limit=limit,
                                  known_feasible=True)
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        numbers = StageSolve(round(solver.wall_time, 3), round(solver.deterministic_time, 3), plan.scale,
                             len(model.proto.variables), len(model.proto.constraints),
                             solver.value(obj) if found else None,
                             int(solver.best_objective_bound) if found else None)
        self.stages.append(MixStage(name, round(time.perf_counter() - t0, 3), solver.status_name(status), numbers))
        if not found:
            return Stage(solver.status_name(status), None, None, None, plan)
        return Stage(solver.status_name(status), self.mm.decode(solver.boolean_value), solver.value(obj),
                      int(solver.best_objective_bound), plan)


def tight_claims(mm: MixModel, designs: Sequence[Design], opts: SolverOptions,
                 cell_model: Callable[[int], SpecModel] | None = None, whole: bool = True) -> list[CellClaim]:
    """Per cell, (round ns, energy nJ, tokens micro) the mix model computes for `designs` with every
    decision fixed: round times minimised first, then energies (as `solve.tight_claim` per scenario).
    The layer schedules are still free then; when the whole mix model does not prove its tight values in
    time, each cell's claim is taken from the cell's own single-scenario model (`cell_model(c)`, the same
    SpecModel code the mix's cell copies are built with; the tensor-copy capacity is checked separately)
    with the design fixed. `whole=False` goes
    to the cells' own models at once (`cell_model` is then required). Cell by cell, the claims stop once the
    command's deadline has passed: the first cells' claims only (the evaluator prices every cell anyway)."""
    try:
        if whole or cell_model is None:
            return _tight_claims_whole(mm, designs, opts)
    except ModelMismatch:
        if cell_model is None:
            raise
    from specpim_cp.solvers.exact.finish import tight_claim

    out = []
    for c, d in enumerate(designs):
        if opts.expired:
            break
        out.append(CellClaim(*tight_claim(cell_model(c), d, opts)))
    return out


def _tight_claims_whole(mm: MixModel, designs: Sequence[Design], opts: SolverOptions) -> list[CellClaim]:
    model = mm.m.clone()
    for v, val in mm.decision_literals(designs):
        model.add(model.get_bool_var_from_proto_index(v.index) == val)
    T = [model.get_int_var_from_proto_index(sm.T.index) for sm in mm.cells]
    E = [model.get_int_var_from_proto_index(sm.energy.index) for sm in mm.cells]
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = opts.seed
    solver.parameters.presolve_inclusion_work_limit = 0  # objectives.md, "Presolve workaround"
    solver.parameters.max_time_in_seconds = cap_seconds(60.0, opts.deadline)  # unproven: the cells' own models
    model.minimize(sum(T))
    status = solver.solve(model)
    if status != cp_model.OPTIMAL:
        raise ModelMismatch(f"the mix model rejects its own design ({solver.status_name(status)})")
    ts = [solver.value(t) for t in T]
    for t, v in zip(T, ts, strict=True):
        model.add(t == v)
    model.minimize(sum(E))
    status = solver.solve(model)
    if status != cp_model.OPTIMAL:
        raise ModelMismatch(f"the mix model rejects its own design's energy ({solver.status_name(status)})")
    return [CellClaim(t, solver.value(e), sm.stats[sm.choice_index(d)].tokens_micro)
            for t, e, sm, d in zip(ts, E, mm.cells, designs, strict=True)]


def verify_mix(mm: MixModel, designs: Sequence[Design], opts: SolverOptions,
               cell_model: Callable[[int], SpecModel] | None = None,
               whole: bool = True) -> tuple[list[Evaluation], list[CellClaim]]:
    """Re-price every cell with the evaluator and require exact agreement with the mix model's claims;
    check the tensor-copy capacity independently (`physics.mix.check_mix_capacity`). Past the command's
    deadline the claims of the cells left are not checked (`tight_claims`): fewer claims than cells."""
    check_mix_capacity(mm.mix, mm.evaluators, designs)
    evaluations = [ev.evaluate(d) for ev, d in zip(mm.evaluators, designs, strict=True)]
    claims = tight_claims(mm, designs, opts, cell_model, whole)
    for c, (e, claim) in enumerate(zip(evaluations, claims)):
        actual = CellClaim.of(e.metrics)
        if claim != actual:
            raise ModelMismatch(f"mix.cells[{c}]: the mix model claims {claim.as_dict()} but the evaluator prices "
                                f"{actual.as_dict()}")
    return evaluations, claims


def unchecked_claims(claims: Sequence[CellClaim], designs: Sequence[Design]) -> dict:
    """The report's `claims_unchecked_cells` when the deadline cut the cross-check short (`tight_claims`)."""
    if len(claims) >= len(designs):
        return {}
    return {"claims_unchecked_cells": list(range(len(claims), len(designs)))}


class Phases:
    """Seconds per phase of a solve, each from the end of the previous one (the report's `phases_s`)."""

    def __init__(self, t0: float):
        self.last = t0
        self.seconds: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.last, 3)
        self.last = now
