"""Ratio objectives N(x)/D(x) per token (latency = round time / tokens, energy = energy / tokens) and
Dinkelbach's method that minimises them [OBJ-1]: per-choice scaled rows, CUT-3/CUT-4 pruning, the focus,
the settled shortcut (OBJ-1s); and the rows that fix a ratio at its optimum (`RatioRow`, OBJ-3)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from ortools.sat.python import cp_model

from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import Design
from specpim_cp.solvers.exact.guards import ModelMismatch, guarded_numerator
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION, Answer, Part
from specpim_cp.solvers.exact.model import SpecModel, ub
from specpim_cp.solvers.exact.session import SolveSession
from specpim_cp.solvers.result import Status

#: OBJ-1 focus: the first Dinkelbach solves see only the choices whose CUT-3 bound ratio is at most
#: (1 + FOCUS_SLACK) x the least one (formulations/objectives.md).
FOCUS_SLACK = Fraction(1, 50)
#: A contradicted Dinkelbach step is solved again as one plain minimisation per choice it leaves when it
#: leaves at most this many (`per_choice_parts`).
PER_CHOICE_MAX = 4


class RatioObjective:
    """A ratio objective N(x)/D(x) over the model: latency = T/E, energy = energy/E (per round)."""

    def __init__(self, sm: SpecModel, name: str):
        self.sm = sm
        self.name = name
        self.num = sm.T if name == "latency" else sm.energy
        self.den = sm.tokens_micro
        self.scale = Fraction(spec.TOKENS_SCALE, 1 if name == "latency" else sm.scenario.batch_size)

    @property
    def num_bounds(self) -> tuple[int, ...]:
        """CUT-3's bound of N per choice (CUT-4's for energy where `SpecModel.tighten_energy` raised it)."""
        return self.sm.choice_bounds[0 if self.name == "latency" else 1]

    def value(self, num: int, den: int) -> Fraction:
        """Objective in the evaluator's units (ns or nJ per token)."""
        return Fraction(num, den) * self.scale


class Incumbent(NamedTuple):
    """A design priced by the evaluator: its numerator (round ns or nJ per round) and tokens per round x
    TOKENS_SCALE."""

    n: int
    d: int
    design: Design


class RatioRun(NamedTuple):
    """What `minimize_ratio` returns, in evaluator units: OPTIMAL, FEASIBLE, INFEASIBLE or UNKNOWN, the best
    design (None without one), its objective and a proven lower bound."""

    status: Status
    design: Design | None
    objective: Fraction | None
    bound: Fraction


def capped(sm: SpecModel, var, cap: int, name: str, latency_only: bool = False
           ) -> tuple[cp_model.CpModel, cp_model.IntVar]:
    """A working copy of the model (`latency_only`: its energy rows emptied) with a copy of `var` whose
    domain is [0, cap] (keeps objectives in int64)."""
    model = sm.working_copy(latency_only)
    return model, cap_copy(model, var, cap, name)


def cap_copy(model: cp_model.CpModel, var, cap: int, name: str) -> cp_model.IntVar:
    """A variable equal to `var` (of the original model) with domain [0, cap]: products with it stay in int64."""
    capped = model.new_int_var(0, max(0, cap), name)
    model.add(capped == model.get_int_var_from_proto_index(var.index))
    return capped


def measure(run: SolveSession, ratio: RatioObjective, design: Design) -> Incumbent:
    """A solution priced by the evaluator (tight, exact), recorded in the session's trajectory."""
    mt = run.sm.ev.evaluate(design).metrics
    n = guarded_numerator(run.sm, ratio.name, mt)
    run.trajectory.append((time.perf_counter() - run.t0, float(ratio.value(n, mt.tokens_per_round_micro))))
    return Incumbent(n, mt.tokens_per_round_micro, design)


def ratio_limits(sm: SpecModel, n: int, d: int, strict: bool) -> list[int]:
    """[OBJ-1] Per speculation choice c (expected tokens D_c): the largest integer N with N / D_c <= n / d,
    floor(n D_c / d), or with N / D_c < n / d (`strict`), ceil(n D_c / d) - 1. Exactly one choice literal
    is 1, so `N <= sum_c limit_c z_c` is the ratio row N * d <= n * D(x) (or < ) with coefficients the size
    of N, not of n x D (which reach 10^17 for energy and strain CP-SAT's LP: objectives.md, 'Scaled rows')."""
    if strict:
        return [-(-n * st.tokens_micro // d) - 1 for st in sm.stats]
    return [n * st.tokens_micro // d for st in sm.stats]


def choice_sum(model: cp_model.CpModel, sm: SpecModel, coeffs: Sequence[int]):
    """sum_c coeffs[c] * z_c on a clone."""
    return sum(c * model.get_bool_var_from_proto_index(z.index) for c, z in zip(coeffs, sm.z) if c)


def minimize_ratio(run: SolveSession, ratio: RatioObjective, extra=None, start: Evaluation | None = None,
                   choices: Collection[int] | None = None) -> RatioRun:
    """Dinkelbach iterations [OBJ-1]: min N(x)/D(x) (+ optional extra constraints on a clone).

    `choices`: the speculation choices the extra rows can leave (default all): CUT-4 prices only these.
    """
    keeps_energy = ratio.name == "energy" or extra is not None  # extra rows may read the energy (OBJ-2, OBJ-3)
    with run.lp_level(ENERGY_LINEARIZATION if keeps_energy else run.linearization):
        return dinkelbach(run, ratio, extra, start, choices)


def first_incumbent(run: SolveSession, ratio: RatioObjective, prepare: Callable, start: Evaluation | None,
                    latency_only: bool = False) -> Incumbent | Status:
    """The starting point: `start` when given (a known feasible design: the evaluator's integers are the
    model's), else CP-SAT's first solution of the least N; INFEASIBLE or UNKNOWN without one."""
    sm = run.sm
    if start is not None:
        run.hint = sm.decision_literals(start.design)
        return measure(run, ratio, start.design)
    model, nvar = capped(sm, ratio.num, ub(ratio.num), "N", latency_only)
    prepare(model)
    model.minimize(nvar)
    status, solver = run.solve(model, first_solution=True)
    if status == Status.INFEASIBLE:
        return Status.INFEASIBLE
    if status not in (Status.OPTIMAL, Status.FEASIBLE):
        return Status.UNKNOWN
    return measure(run, ratio, run.remember(solver))


def dinkelbach(run: SolveSession, ratio: RatioObjective, extra, start: Evaluation | None,
               choices: Collection[int] | None = None) -> RatioRun:
    sm = run.sm
    d_min = sm.min_tokens_micro()
    d_max = max(st.tokens_micro for st in sm.stats)
    # a latency solve with no extra rows never reads an energy: drop the rows that only define them
    latency_only = ratio.name == "latency" and extra is None

    def prepare(model: cp_model.CpModel) -> None:
        if extra is not None:
            extra(model)

    incumbent = first_incumbent(run, ratio, prepare, start, latency_only)
    if isinstance(incumbent, Status):
        return RatioRun(incumbent, None, None, Fraction(0))
    if ratio.name == "energy":  # [CUT-4] time-priced energy bounds of the choices that can beat the incumbent
        sm.tighten_energy(Fraction(incumbent.n, incumbent.d), choices)
    # OBJ-1 focus: search first only the choices whose CUT-3 bound ratio is within FOCUS_SLACK of the least
    bound_ratio = [Fraction(lb, st.tokens_micro) for lb, st in zip(ratio.num_bounds, sm.stats)]
    least = min(bound_ratio)
    focus = least * (1 + FOCUS_SLACK) if extra is None else None
    # a proven bound before any step: every design's N is at least its choice's CUT-3 bound (OBJ-1)
    bound = min(least * ratio.scale, ratio.value(incumbent.n, incumbent.d))
    # Dinkelbach, scaled: G(lambda) = min N(x) - (ceil(lambda D(x)) - 1), lambda = N_prev / D_prev; 1 at the optimum
    while True:
        n_prev, d_prev, _ = incumbent
        focused = focus is not None and focus < Fraction(n_prev, d_prev)  # narrower than the pruning below
        cap = -(-n_prev * d_max // d_prev)  # any x with ratio <= lambda has N <= lambda * D_max
        model, nvar = capped(sm, ratio.num, cap, "N", latency_only)
        prepare(model)
        # OBJ-1 pruning: a choice whose CUT-3 bound ratio exceeds lambda cannot give F < 0 (the
        # incumbent's own choice stays: its bound is at most its ratio)
        kept = []  # the choices this step leaves
        for k, (z, num_lb, st, br) in enumerate(zip(sm.z, ratio.num_bounds, sm.stats, bound_ratio)):
            if num_lb * d_prev > n_prev * st.tokens_micro or (focused and br > focus):
                model.add(model.get_bool_var_from_proto_index(z.index) == 0)
                continue
            kept.append(k)
            if ratio.name == "energy":
                prune_architectures(model, sm, k, n_prev, d_prev, focus if focused else None)
        # G(x) = N(x) - (ceil(lambda D(x)) - 1): G <= 0 iff N/D < lambda; the incumbent has G = 1
        limits = ratio_limits(sm, n_prev, d_prev, strict=True)
        objective = nvar - choice_sum(model, sm, limits)
        model.minimize(objective)
        if run.budget.remaining() <= 0:
            return RatioRun(Status.FEASIBLE, incumbent.design, ratio.value(n_prev, d_prev), bound)
        # an unfocused step keeps its incumbent (G = 1): INFEASIBLE or OPTIMAL above 1 contradicts it
        answer = run.solve_with_ladder(model, lambda solver, g=objective: int(solver.value(g)),
                                       None if focused else contradicts_incumbent,
                                       split=lambda k=kept, lim=limits: per_choice_parts(run, ratio, prepare, k, lim,
                                                                                      latency_only))
        status, solver, f_val = answer.status, answer.solver, answer.value
        if not focused and contradicts_incumbent(answer):
            said = "INFEASIBLE" if status == Status.INFEASIBLE else f"OPTIMAL with F = {f_val}"
            raise ModelMismatch(
                f"CP-SAT reports {said} for a Dinkelbach step whose incumbent has G = 1, also with its default "
                "presolve and with none: a solver fault (formulations/objectives.md, 'A CP-SAT 9.15 fault'); no optimum is "
                "claimed")
        if focused and (status == Status.INFEASIBLE or (status == Status.OPTIMAL and f_val >= 1)):
            focus = None  # nothing better among the focused choices: search every choice the pruning leaves
            continue
        if f_val is None:
            return RatioRun(Status.FEASIBLE, incumbent.design, ratio.value(n_prev, d_prev), bound)
        # OPTIMAL: the bound is the (exact) optimum; else CP-SAT's bound, a double, rounded down with margin
        f_lb = f_val if status == Status.OPTIMAL else min(f_val, floor_bound(solver.best_objective_bound))
        lam = Fraction(n_prev, d_prev)
        if not focused:  # a focused solve bounds only its choices: N >= lambda D - 1 + G_min everywhere
            lb = lam + Fraction(min(f_lb - 1, 0), d_min)
            bound = max(bound, lb * ratio.scale, Fraction(0))
        run.progress(ratio, ratio.value(n_prev, d_prev), bound)
        if f_val <= 0:
            incumbent = measure(run, ratio, run.remember(solver))
            if Fraction(incumbent.n, incumbent.d) >= lam:  # the evaluator's price must be below lambda
                raise ModelMismatch(f"a Dinkelbach step found G = {f_val} <= 0 but the evaluator prices the design at "
                                    f"{ratio.value(incumbent.n, incumbent.d)}, not below the incumbent's "
                                    f"{ratio.value(n_prev, d_prev)}")
            n1, d1, design = incumbent
            if status == Status.OPTIMAL and not focused and settled(sm, ratio, kept, limits, f_val, n1, d1):
                run.progress(ratio, ratio.value(n1, d1), ratio.value(n1, d1))
                return RatioRun(Status.OPTIMAL, design, ratio.value(n1, d1), ratio.value(n1, d1))
            if status != Status.OPTIMAL and run.budget.remaining() <= 0:
                return RatioRun(Status.FEASIBLE, design, ratio.value(n1, d1), bound)
            continue
        obj = ratio.value(n_prev, d_prev)
        if focused:  # stopped early with no improvement among the focused choices (budget spent)
            return RatioRun(Status.FEASIBLE, incumbent.design, obj, min(bound, obj))
        if status == Status.OPTIMAL and f_lb >= 1:
            return RatioRun(Status.OPTIMAL, incumbent.design, obj, obj)
        return RatioRun(Status.FEASIBLE, incumbent.design, obj, min(bound, obj))


def contradicts_incumbent(answer: Answer) -> bool:
    """Whether an unfocused Dinkelbach step's answer contradicts its incumbent, a design the step keeps (the
    cap and the OBJ-1 pruning keep it, the extra rows hold for it) with G = 1: INFEASIBLE, or OPTIMAL above 1."""
    return answer.status == Status.INFEASIBLE or (answer.status == Status.OPTIMAL and answer.value > 1)


def settled(sm: SpecModel, ratio: RatioObjective, kept: Sequence[int], limits: Sequence[int], g_min: int,
            n1: int, d1: int) -> bool:
    """[OBJ-1s] Whether an unfocused Dinkelbach step proven OPTIMAL at value `g_min` <= 0 already proves
    its design (N = n1 per D = d1 tokens) optimal, so the confirming step is not solved. Every design of a
    choice k the step kept has G = N - limits[k] >= g_min, and N at least the choice's CUT-3/CUT-4 bound;
    the choices and architectures the step pruned and the cap's designs are above the step's lambda, which
    is above n1 / d1. So when max(bound_k, g_min + limits[k]) / D_k >= n1 / d1 for every kept choice, no
    design beats n1 / d1."""
    for k in kept:
        tokens = sm.stats[k].tokens_micro
        if max(ratio.num_bounds[k], g_min + limits[k]) * d1 < n1 * tokens:
            return False
    return True


def per_choice_parts(run: SolveSession, ratio: RatioObjective, prepare, kept: Sequence[int],
                     limits: Sequence[int], latency_only: bool = False) -> Iterator[Part] | None:
    """[OBJ-1] The ladder's split of a Dinkelbach step, per speculation choice: with z_k fixed the tokens per
    round are the constant D_k, so min G = min over the choices k left of (min N given z_k) - limits[k].
    Each part is the base model with the step's extra rows (`prepare`) and z_k = 1, minimising N itself: no
    capped copy of N, no pruning rows (a step that one model answers wrongly at every presolve setting can be
    answered this way). None (no split) when more than `PER_CHOICE_MAX` choices are left."""
    if len(kept) > PER_CHOICE_MAX:
        return None
    sm = run.sm

    def parts() -> Iterator[Part]:
        for k in kept:
            sub = sm.working_copy(latency_only)
            prepare(sub)
            sub.add(sub.get_bool_var_from_proto_index(sm.z[k].index) == 1)
            n_k = sub.get_int_var_from_proto_index(ratio.num.index)
            sub.minimize(n_k)
            yield Part(f"choice {k}", sub, lambda solver, n_k=n_k, k=k: int(solver.value(n_k)) - limits[k])

    return parts()


def prune_architectures(model: cp_model.CpModel, sm: SpecModel, k: int, n_prev: int, d_prev: int,
                        focus: Fraction | None = None) -> None:
    """[CUT-4] in an energy step at lambda = n_prev / d_prev, z_k => not x_ja for every (model, architecture)
    whose bound with choice k exceeds lambda (or the focus, in a focused step): no such design beats lambda."""
    tokens = sm.stats[k].tokens_micro
    z = model.get_bool_var_from_proto_index(sm.z[k].index)
    for (j, a), lb in sm.arch_energy_bounds.get(k, {}).items():
        if lb * d_prev > n_prev * tokens or (focus is not None and Fraction(lb, tokens) > focus):
            model.add_implication(z, model.get_bool_var_from_proto_index(sm.x[j][a].index).Not())


def floor_bound(bound: float) -> int:
    """An integer at most CP-SAT's objective bound, a double that may be off by its last bits."""
    return math.floor(bound - abs(bound) * 1e-15) - 1


@dataclass(frozen=True)
class RatioRow:
    """A ratio level fixed at its optimum n/d [OBJ-3]: N(x)/D(x) <= n/d, written N'·d <= n·D(x)."""

    name: str  # latency | energy
    n: int  # round ns or energy nJ per round of a design at the optimum (the evaluator's)
    d: int  # its expected tokens per round x TOKENS_SCALE

    @classmethod
    def of(cls, sm: SpecModel, name: str, metrics) -> RatioRow:
        return cls(name, guarded_numerator(sm, name, metrics), metrics.tokens_per_round_micro)

    def admits(self, n: int, d: int) -> bool:
        """Whether the ratio n/d (round ns or nJ per round, expected tokens x TOKENS_SCALE) is at most this
        level, cross-multiplied in integers as the row is."""
        return n * self.d <= self.n * d

    def keeps(self, sm: SpecModel) -> set[int]:
        """The choices whose CUT-3 bound ratio can reach this level (`add_ratio_rows` fixes the others to 0)."""
        bounds = sm.choice_bounds[0 if self.name == "latency" else 1]
        return {k for k, (lb, st) in enumerate(zip(bounds, sm.stats)) if self.admits(lb, st.tokens_micro)}


def add_ratio_rows(sm: SpecModel, model: cp_model.CpModel, rows: list[RatioRow]) -> None:
    """OBJ-3: on a clone, every ratio level of `rows` at most its optimum (so equal to it), as exact
    cross-multiplied rows on capped copies (int64-safe like OBJ-2's); a choice whose CUT-3 bound ratio
    exceeds a level cannot reach it and is fixed to 0."""
    if not rows:
        return
    d_max = max(st.tokens_micro for st in sm.stats)
    for r in rows:
        var = sm.T if r.name == "latency" else sm.energy
        capped_var = cap_copy(model, var, -(-r.n * d_max // r.d), f"{r.name}_fixed")
        model.add(capped_var <= choice_sum(model, sm, ratio_limits(sm, r.n, r.d, strict=False)))
        keep = r.keeps(sm)
        for k, z in enumerate(sm.z):
            if k not in keep:
                model.add(model.get_bool_var_from_proto_index(z.index) == 0)
