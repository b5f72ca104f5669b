"""[NOSPEC] Not speculating as a decision of the exact model (formulations/speculation_rounds.md [NOSPEC]).

The verifier decoding alone is one more speculation choice, `NO_SPEC` (a SpecChoice without drafters), with
its own literal z_0 among the z's: SPEC-1 (one choice), the Dinkelbach rows (OBJ-1, its D = one token per
sequence) and the tie-break treat it like any other. These functions write the rows that differ when z_0 = 1:
every drafter is absent (no architecture, no placement, no energy), the verifier may take the drafters'
devices, and the round has no sync. `SpecModel` calls them at the families they amend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ortools.sat.python import cp_model

from specpim_cp.problem.design import SpecChoice
from specpim_cp.solvers.exact.choice_bounds import choice_device_bounds
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION


def no_spec_literal(choices: Sequence[SpecChoice], z: Sequence[cp_model.IntVar]) -> cp_model.IntVar | None:
    """z_0: the literal of the choice without drafters, None when the space does not offer it."""
    return next((lit for c, lit in zip(choices, z) if not c.speculates), None)


def add_one_or_absent(m: cp_model.CpModel, lits, j: int, no_spec: cp_model.IntVar | None) -> None:
    """ARCH-1 / MAP-1 amended by NOSPEC-1: exactly one of `lits` for the verifier, and for a drafter exactly
    one when speculating and none when not (sum = 1 - z_0)."""
    if j == 0 or no_spec is None:
        m.add_exactly_one(lits)
    else:
        m.add(sum(lits) + no_spec == 1)


def add_alone_devices(sm) -> None:
    """NOSPEC-2: a verifier architecture on more devices than the budget leaves after one device per drafter
    is taken only when not speculating (ARCH-2 implies it; stated so it holds with ARCH-2 switched off)."""
    if sm.no_spec is None:
        return
    for a, xa in sm.x[0].items():
        if sm.space.alone_only(0, a):
            sm.m.add_implication(xa, sm.no_spec)


def round_floor_sync(sm) -> int | cp_model.LinearExpr:
    """RND-4's sync term: the host's sync latency when speculating, 0 for the verifier alone (NOSPEC-3)."""
    sync = sm.prices.round_sync_ns
    return sync if sm.no_spec is None else sync - sync * sm.no_spec


def choice_sync(sm, c: SpecChoice) -> int:
    """RND-3's sync of choice c: none for the verifier alone (NOSPEC-3, as the evaluator prices it)."""
    return sm.prices.round_sync_ns if c.speculates else 0


def add_absent_energy(sm, j: int, idle: cp_model.IntVar) -> None:
    """NOSPEC-4: an absent drafter's idle energy is 0 (it has no devices); an energy row (`drop_energy_rows`)."""
    if j > 0 and sm.no_spec is not None:
        sm.energy_rows.append(sm.m.add(idle == 0).only_enforce_if(sm.no_spec).index)


def idle_relief(sm, j: int, power_mw: int) -> int | cp_model.LinearExpr:
    """NOSPEC-4's term of EN-2's idle floor and EN-4's cut of model j, 1000 I_j >= P T + ... - relief: 0 for
    the verifier, P x ub(V) x z_0 for a drafter (when not speculating T = V <= ub(V), so the row asks
    nothing of its idle energy, which is 0). A linear row rather than one enforced on not z_0, so the LP
    relaxation keeps the floor (CP-SAT leaves most enforced rows out of it)."""
    if j == 0 or sm.no_spec is None:
        return 0
    return power_mw * ub_of(sm.pass_time[0]) * sm.no_spec


def ub_of(var: cp_model.IntVar) -> int:
    """Upper bound of a variable's domain."""
    dom = list(var.proto.domain)
    return dom[len(dom) - 1]


def no_spec_bounds(sm, c: SpecChoice, st, per_n: list, b: int) -> list[tuple[tuple[int, ...], int, int]]:
    """CUT-3 of the verifier alone: per verifier device count n, (n,) with its round-time and energy bounds
    (the drafters take no device, the round no sync)."""
    tuples = [(n,) for n in sorted(per_n[0])]
    bounds = choice_device_bounds(c, st, tuples, per_n[:1], [], b, 0)
    return [(tup, *bound) for tup, bound in zip(tuples, bounds) if bound is not None]


def arch_energy_bounds(sm, pt_cut: dict, pe_cut: dict) -> dict:
    """NOSPEC-5 per verifier architecture a (CUT-4's `arch_energy_bounds` of the verifier alone): its energy
    per round is at least CUT-1's pass energy bound at b tokens plus its idle power over CUT-1's pass time
    bound (the round is the pass; no drafter idles). `pt_cut`, `pe_cut`: CUT-1's bounds at b tokens."""
    b = sm.scenario.batch_size
    power = sm.prices.models[0].idle_power_mw
    return {(0, a): pe_cut[a][b] + power[a] * pt_cut[a][b] // 1000 for a in sm.data[0].archs}


#: The levels `settle` settles: 0 the verifier alone's least round time, 1 its least energy per round.
ROUND_TIME, ENERGY = 0, 1

#: The levels a search of each objective needs settled: a latency search (its Dinkelbach steps, OBJ-3's
#: levels, `ranges` under latency) runs on copies without the energy rows or finds the least energy among
#: the latency optima, where the least round time's bound is what keeps z_0 from staying alive; the energy
#: bound pays only where energy is minimised (formulations/speculation_rounds.md, NOSPEC-6).
SETTLE_LEVELS = {"latency": (ROUND_TIME,), "energy": (ROUND_TIME, ENERGY), "edp": (ROUND_TIME, ENERGY),
                 "request": (ROUND_TIME, ENERGY)}


def settle_levels(objective: str) -> tuple[int, ...]:
    """The levels `settle` settles before a search of `objective` (both for an objective it does not name)."""
    return SETTLE_LEVELS.get(objective, (ROUND_TIME, ENERGY))


def settle(sm, run, levels: tuple[int, ...] = (ROUND_TIME, ENERGY)) -> list:
    """NOSPEC-6: the verifier alone's least round time and least energy per round (`levels`, each once per
    model), each minimised on a clone with z_0 = 1 (its tokens per round are the constant 10⁶, so each is a
    plain minimisation, and the drafters vanish in presolve), raise its CUT-3 bounds to the proven values
    (CP-SAT's bound when the time runs out): CUT-1's pass bound ignores capacity and can be several times
    below the verifier's real pass, which leaves z_0 alive in every Dinkelbach step and canonical level.
    Returns the designs found so far (a start for the search). An INFEASIBLE answer changes nothing (the
    Dinkelbach steps settle it with their ladder). A model settled once (a solve's, reused by `ranges`)
    keeps its rows: only the levels not yet settled are solved."""
    if sm.no_spec is None:
        return []
    todo = [level for level in levels if level not in sm.settled_levels]
    if not todo:
        return list(sm.settled)
    k = next(i for i, c in enumerate(sm.choices) if not c.speculates)
    bounds = [list(sm.choice_bounds[0]), list(sm.choice_bounds[1])]
    found = list(sm.settled)
    stage = run.stage
    for level in todo:
        var = sm.T if level == ROUND_TIME else sm.energy
        model = sm.working_copy(latency_only=level == ROUND_TIME)
        model.add(model.get_bool_var_from_proto_index(sm.no_spec.index) == 1)
        model.minimize(model.get_int_var_from_proto_index(var.index))
        run.stage = f"no speculation: least {'round time' if level == ROUND_TIME else 'energy'}"
        try:  # the energy solve at the energy steps' LP level: at CP-SAT's default the idle rows' LP stalls
            with run.lp_level(ENERGY_LINEARIZATION if level == ENERGY else run.linearization):
                solved = run.solve(model)
        finally:
            run.stage = stage
        sm.settled_levels.add(level)
        if solved.status not in ("OPTIMAL", "FEASIBLE"):  # INFEASIBLE is left to the search itself: an
            continue  # answer the ladder does not re-check is no proof (objectives.md, 'A CP-SAT 9.15 fault')
        bounds[level][k] = max(bounds[level][k], math.floor(solved.solver.best_objective_bound))
        found.append(sm.decode(solved.solver.boolean_value))
    if ROUND_TIME in todo:
        sm.m.add(sm.T >= bounds[0][k] * sm.no_spec)
    if ENERGY in todo:
        sm.energy_rows.append(sm.m.add(sm.energy >= bounds[1][k] * sm.no_spec).index)
    sm.choice_bounds = (tuple(bounds[0]), tuple(bounds[1]))
    sm.settled = found
    return list(found)
