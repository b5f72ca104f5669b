"""Numeric safety of the exact model: how close each linear row of a solve comes to CP-SAT's int64 limit.

Measurement only: nothing here changes a model that a solve solves. For a built model,
`solve_rows` adds to a clone the rows a solve of one objective adds (the OBJ-1 Dinkelbach step and, for
EDP, the OBJ-2 epsilon rows, formulations/objectives.md) at the worst incumbent the model admits, and
`row_magnitudes` reads every linear expression of the proto with its variables' domains:

  activity  sum_i |c_i| * max(|lo_i|, |hi_i|) (+ |offset|): the largest |value| the row can take;
  checker   max(sum of the positive, -sum of the negative c_i * {lo_i, hi_i}): CP-SAT's own test
            (cp_model_checker.cc, PossibleIntegerOverflow), which refuses the model above 2^62;
  cross     max over i != j of |c_i| * max|b_j|: a coefficient times another variable's bound, the
            product that wrapped past 2^63 in the 9.15 fault (objectives.md, "A CP-SAT 9.15 fault");
            the mix keeps its rows below 2^53 (`solvers/mix/cpsat_model.ROW_LIMIT`) for that reason.

The worst incumbent of OBJ-1 is (N, D) = (ub(N), D_min): N the model's own bound on round time or
energy, D the fewest expected tokens (x TOKENS_SCALE), which gives the largest cap ceil(N*D_max/D); the
tokens variable reaches D_max. `ratio.measure` refuses an incumbent with N*D_max + D_max > 2^62,
so `guarded_numerator` is the largest N a solve can actually carry into these rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.scenario import Scenario, parse_scenario, scenario_catalog
from specpim_cp.problem.space import TreeMenuTooLarge
from specpim_cp.solvers.exact.guards import INT_LIMIT, build_model
from specpim_cp.solvers.exact.model import SpecModel, ub
from specpim_cp.solvers.exact.ratio import cap_copy, choice_sum, ratio_limits
from specpim_cp.solvers.exact.tree_column_set import ColumnSearch, columns_refusal

#: The objectives a scenario can be solved for, and the assumption profiles (memory model, energy accounting).
OBJECTIVES = ("latency", "energy", "edp")
PROFILES = (("time-shared", "total"), ("time-shared", "dynamic"), ("partitioned", "total"),
            ("partitioned", "dynamic"))
#: The mix's row limit (`solvers/mix/cpsat_model.ROW_LIMIT`): 2^9 of headroom below CP-SAT's 2^62 for its internal products.
FAULT_HEADROOM = 2 ** 53


@dataclass(frozen=True)
class RowMagnitude:
    """The worst-case size of one linear expression (a row, a lin_max's expressions, an objective)."""

    index: int  # constraint index in the proto; -1 for an objective
    family: str  # formulations/ ID of the row (`row_family`)
    activity: int  # sum_i |c_i| * max|b_i|, the worst-case |activity| of the row
    checker: int  # CP-SAT's PossibleIntegerOverflow sum: max(positive part, -negative part)
    cross: int  # max_{i != j} |c_i| * max|b_j|: a coefficient times another variable's bound
    coeff: int  # largest |coefficient|
    coeff_var: str  # its variable
    bound: int  # largest max|b| of a variable of the row
    bound_var: str
    enforced: bool

    @property
    def log2(self) -> float:
        return math.log2(self.activity) if self.activity > 0 else 0.0

    @property
    def cross_log2(self) -> float:
        return math.log2(self.cross) if self.cross > 0 else 0.0

    def describe(self) -> str:
        return (f"[{self.family}] row {self.index}: activity 2^{self.log2:.2f}, cross 2^{self.cross_log2:.2f} "
                f"(coefficient {self.coeff:.3g} on {self.coeff_var}, bound {self.bound:.3g} of {self.bound_var})")


def _bounds(proto) -> list[tuple[int, int]]:
    """(lower, upper) of every variable's domain (positive indices only: OR-Tools 9.15's proto wrapper
    returns a wrong value for `domain[-1]`)."""
    out = []
    for v in proto.variables:
        dom = list(v.domain)
        out.append((dom[0], dom[len(dom) - 1]))
    return out


def _magnitude(index: int, family: str, terms: Iterable[tuple[int, int]], offset: int, bounds, names,
               enforced: bool) -> RowMagnitude:
    """`terms`: (variable reference, coefficient) pairs, a negative reference meaning the negation."""
    activity = pos = abs(offset)
    neg = -abs(offset)
    per_var: list[tuple[int, int, int]] = []  # (|coefficient|, max|bound|, variable)
    for ref, coeff in terms:
        idx = ref if ref >= 0 else -ref - 1
        k = coeff if ref >= 0 else -coeff
        lo, hi = bounds[idx]
        activity += abs(k) * max(abs(lo), abs(hi))
        pos += max(0, k * lo, k * hi)
        neg += min(0, k * lo, k * hi)
        per_var.append((abs(k), max(abs(lo), abs(hi)), idx))
    cross = 0
    if len(per_var) > 1:
        by_bound = sorted(per_var, key=lambda t: -t[1])
        for k, _b, idx in per_var:
            other = by_bound[0] if by_bound[0][2] != idx else by_bound[1]
            cross = max(cross, k * other[1])
    big_c = max(per_var, default=(0, 0, -1))
    big_b = max(per_var, key=lambda t: t[1], default=(0, 0, -1))
    return RowMagnitude(index, family, activity, max(pos, -neg), cross, big_c[0],
                        names[big_c[2]] if big_c[2] >= 0 else "", big_b[1], names[big_b[2]] if big_b[2] >= 0 else "",
                        enforced)


def row_magnitudes(proto, first: int = 0, skip: Collection[int] = ()) -> list[RowMagnitude]:
    """Per linear row (and per lin_max constraint, its largest expression) of a CP-SAT model proto from
    constraint `first` on, rows in `skip` left out: the worst-case magnitudes of `RowMagnitude`.
    `proto` is `CpModel.proto` (ortools 9.15's wrapper, read field by field)."""
    bounds = _bounds(proto)
    names = [v.name for v in proto.variables]
    out = []
    constraints = proto.constraints
    for i in range(first, len(constraints)):
        if i in skip:
            continue
        c = constraints[i]
        enforced = len(c.enforcement_literal) > 0
        if c.has_linear():
            lin = c.linear
            vars_, coeffs = list(lin.vars), list(lin.coeffs)
            if not vars_:
                continue
            family = row_family(names, bounds, vars_, c.enforcement_literal)
            out.append(_magnitude(i, family, zip(vars_, coeffs), 0, bounds, names, enforced))
        elif c.has_lin_max():
            lm = c.lin_max
            exprs = [lm.target, *lm.exprs]
            rows = [_magnitude(i, "", zip(list(e.vars), list(e.coeffs)), e.offset, bounds, names, enforced)
                    for e in exprs]
            worst = max(rows, key=lambda r: (r.activity, r.cross))
            all_vars = [v for e in exprs for v in e.vars]
            family = row_family(names, bounds, all_vars, c.enforcement_literal)
            out.append(RowMagnitude(worst.index, family, worst.activity, worst.checker, worst.cross, worst.coeff,
                                    worst.coeff_var, worst.bound, worst.bound_var, worst.enforced))
    return out


def objective_magnitude(proto, family: str) -> RowMagnitude | None:
    """The model's objective as a row (CP-SAT checks it as one), or None without an objective."""
    if not proto.has_objective():
        return None
    obj = proto.objective
    return _magnitude(-1, family, zip(list(obj.vars), list(obj.coeffs)), int(obj.offset), _bounds(proto),
                      [v.name for v in proto.variables], False)


# -- families -------------------------------------------------------------------------------------
#: Variable name prefix -> family, in the order a row is recognised by (the first prefix present wins).
_PREFIX_FAMILY = (
    ("E_eps", "OBJ-2 energy cap E'*d_last <= e_last*D - 1"),
    ("T_eps", "OBJ-2 latency cap T'*d_1 <= t_1*D"),
    ("N", "OBJ-1 cap copy N' = N"),
    ("tokens_micro", "OBJ-1 expected tokens D = sum E_mu(c) z_c"),
    ("draft_nj", "EN-1 drafting energy (waste)"),
    ("draft_expected_nj", "EN-1 expected drafting energy"),
    ("idle_nj", "EN-2 idle energy"),
)


def row_family(names: Sequence[str], bounds, refs: Iterable[int], enforcement: Iterable[int] = ()) -> str:
    """The formulations/ family of a row, from its variables' names (model.py names every variable)."""
    prefixes = set()
    for ref in refs:
        idx = ref if ref >= 0 else -ref - 1
        if bounds[idx][1] > 1 or bounds[idx][0] < 0:
            prefixes.add(re.split(r"[\[@#]", names[idx])[0])
    if prefixes & {"E_eps", "T_eps"} and prefixes & {"energy_nj", "round_ns"}:
        return "OBJ-2 cap copy E' = E or T' = T"
    if "energy_nj" in prefixes and len(prefixes) > 1 and not prefixes & {"E_eps", "N"}:
        return "EN-3 energy per round"
    for prefix, family in _PREFIX_FAMILY:
        if prefix in prefixes:
            return family
    rest = prefixes
    if "energy_nj" in rest:
        return "CUT-3 energy bound per choice"
    if "round_ns" in rest:
        if "R" in rest:
            return "RND-3 expected round time"
        return "RND-4 round >= verification pass" if "pass_ns" in rest else "CUT-3 round-time bound per choice"
    for prefix, family in (("R", "RND-2 outcome round time"), ("maxDV", "RND-2 max(D, V)"),
                           ("D", "RND-1 drafting phase"), ("cycle_ns", "CYC-1 cycle time"),
                           ("cycle_nj", "CYC-1 cycle energy")):
        if prefix in rest:
            return family
    if "pass_ns" in rest:
        return "PASS-1 pass time" if len(rest) > 1 else "CUT-1/2 pass-time bound"
    if "pass_nj" in rest:
        return "PASS-2 pass energy" if len(rest) > 1 else "CUT-1/2 pass-energy bound"
    if rest & {"makespan", "e", "s", "w"}:
        return "SCH layer schedule"
    for prefix, family in (("en", "DUR-1 operator energy"), ("dur", "DUR-1 operator time"),
                           ("ar_en", "DUR-2 all-reduce energy"), ("ar", "DUR-2 all-reduce time"),
                           ("emb_en", "DUR-3 embedding energy"), ("emb", "DUR-3 embedding time")):
        if prefix in rest:
            return family
    for ref in enforcement:
        if names[ref if ref >= 0 else -ref - 1].startswith("assume[CAP]"):
            return "CAP-1/2 capacity (KiB)"
    return "Boolean rows (ARCH, MAP, SPEC, ...)"


# -- the rows a solve adds ------------------------------------------------------------------------
def guarded_numerator(sm: SpecModel) -> int:
    """The largest incumbent numerator (round ns or energy nJ) `ratio.measure` lets into the OBJ-1/2 rows:
    N*D_max + D_max <= 2^62."""
    d_max = max(st.tokens_micro for st in sm.stats)
    return (INT_LIMIT - d_max) // d_max


OBJ1 = "OBJ-1 Dinkelbach objective N' - sum_c (ceil(n D_c / d) - 1) z_c"


def _dinkelbach_step(model: cp_model.CpModel, sm: SpecModel, num, n_prev: int, d_prev: int) -> object:
    """OBJ-1's cap copy N' in [0, ceil(n*D_max/d)] and its scaled objective (ratio.minimize_ratio)."""
    d_max = max(st.tokens_micro for st in sm.stats)
    nvar = cap_copy(model, num, -(-n_prev * d_max // d_prev), "N")
    return nvar - choice_sum(model, sm, ratio_limits(sm, n_prev, d_prev, strict=True))


def solve_rows(sm: SpecModel, objective: str, numerator: str = "model") -> tuple[cp_model.CpModel, int, list]:
    """A clone of the model with the rows a solve of `objective` adds at the worst incumbent: (model, index
    of the first added row, (family, objective expression) pairs). `numerator`: "model" takes ub(T) and
    ub(energy) as the incumbent's N; "guarded" clips them at `guarded_numerator` (what `ratio.measure` admits).
    Mirrors ratio.py: `capped`/`cap_copy` and the scaled rows (`ratio_limits`) of `minimize_ratio`, the OBJ-2 rows of
    fronts.py's `sweep` (energy cap, latency cap) and `tight_claim`'s objective; the OBJ-1 pruning rows
    (z_c = 0) are single Booleans and left out."""
    model = sm.m.clone()
    sm.enforce_families(model)
    first = len(model.proto.constraints)
    d_min = sm.min_tokens_micro()
    d_max = max(st.tokens_micro for st in sm.stats)
    limit = guarded_numerator(sm) if numerator == "guarded" else None
    n_t, n_e = ub(sm.T), ub(sm.energy)
    if limit is not None:
        n_t, n_e = min(n_t, limit), min(n_e, limit)
    objectives = []
    stage = " (EDP latency stage)" if objective == "edp" else ""
    if objective in ("latency", "edp"):
        objectives.append((OBJ1 + stage, _dinkelbach_step(model, sm, sm.T, n_t, d_min)))
    stage = " (EDP energy stage)" if objective == "edp" else ""
    if objective in ("energy", "edp"):
        objectives.append((OBJ1 + stage, _dinkelbach_step(model, sm, sm.energy, n_e, d_min)))
    if objective == "edp":  # OBJ-2: below the last point's energy, within the latency stage's time
        e_cap = cap_copy(model, sm.energy, -(-n_e * d_max // d_min), "E_eps")
        model.add(e_cap <= choice_sum(model, sm, ratio_limits(sm, n_e, d_min, strict=True)))
        t_cap = cap_copy(model, sm.T, -(-n_t * d_max // d_min), "T_eps")
        model.add(t_cap <= choice_sum(model, sm, ratio_limits(sm, n_t, d_min, strict=False)))
    T = model.get_int_var_from_proto_index(sm.T.index)  # tight_claim's lexicographic objective
    E = model.get_int_var_from_proto_index(sm.energy.index)
    objectives.append(("VERIFY tight_claim objective T*(ub(E)+1) + E",
                       T * (ub(sm.energy) + 1) + E if ub(sm.energy) * ub(sm.T) < (1 << 61) else T))
    return model, first, objectives


def solve_magnitudes(sm: SpecModel, objective: str, base: Sequence[RowMagnitude] | None = None,
                     numerator: str = "model") -> list[RowMagnitude]:
    """Every row a solve of `objective` sees, with its magnitudes: the base model's rows (without the
    energy rows a latency solve empties, `SpecModel.drop_energy_rows`), the rows `solve_rows` adds and
    its objectives, in that order. `base`: the base rows the solve keeps, if the caller has them."""
    if base is None:
        dropped = set(sm.energy_rows) if objective == "latency" else set()
        base = [r for r in row_magnitudes(sm.m.proto) if r.index not in dropped]
    rows = list(base)
    model, first, objectives = solve_rows(sm, objective, numerator)
    rows += row_magnitudes(model.proto, first=first)
    for family, expr in objectives:
        model.minimize(expr)
        mag = objective_magnitude(model.proto, family)
        if mag is not None:
            rows.append(mag)
    return rows


# -- reports --------------------------------------------------------------------------------------
#: The families of the rows a solve adds that depend on the incumbent (OBJ-1 and OBJ-2).
INCUMBENT_FAMILIES = ("OBJ-1", "OBJ-2")


@dataclass(frozen=True)
class NumericReport:
    """How close one scenario x objective x assumption profile comes to CP-SAT's limit, or why no model
    was built (`refused`). "Model" figures take the model's own ub(N) as the incumbent, "guarded" ones
    the largest incumbent `ratio.measure` admits (the same when ub(N) is within the guard)."""

    scenario: str
    objective: str
    profile: str  # "memory_model/energy_accounting"
    rows: int = 0
    base_worst: RowMagnitude | None = None  # largest activity among the base model's rows the solve keeps
    solve_worst: RowMagnitude | None = None  # largest activity among the rows and objectives a solve adds
    worst_cross: RowMagnitude | None = None  # largest coefficient x another variable's bound
    checker_over: tuple[RowMagnitude, ...] = ()  # rows CP-SAT would refuse at the model's worst incumbent
    guarded_worst: RowMagnitude | None = None  # largest CP-SAT checker sum at the guarded incumbent
    guarded_solve_worst: RowMagnitude | None = None  # largest activity a solve adds at the guarded incumbent
    guard_refuses: bool = False  # ub(N)*D_max + D_max > 2^62: `ratio.measure` refuses an incumbent that large
    cross_wraps: int = 0  # rows with a coefficient x another variable's bound >= 2^63
    cross_wraps_base: int = 0  # of them, rows of the base model
    above_headroom: int = 0  # rows with activity above 2^53 (the mix's headroom)
    refused: str = ""  # build_model's ScenarioError, if it refused the scenario
    solve_refuses: bool = False  # `refused` is the one-line error `solve` gives for this objective ([TREE-6])

    @property
    def worst(self) -> RowMagnitude | None:
        rows = [r for r in (self.base_worst, self.solve_worst) if r is not None]
        return max(rows, key=lambda r: r.activity) if rows else None

    @property
    def log2(self) -> float:
        return self.worst.log2 if self.worst is not None else 0.0


def with_profile(scenario: Scenario, memory_model: str, energy_accounting: str) -> Scenario:
    """The scenario under another assumption profile (validated like a file)."""
    data = scenario.model_dump(mode="python")
    data["assumptions"] = {"memory_model": memory_model, "energy_accounting": energy_accounting}
    return parse_scenario(data)


def _numerators(sm: SpecModel, objective: str) -> list[int]:
    return {"latency": [ub(sm.T)], "energy": [ub(sm.energy)], "edp": [ub(sm.T), ub(sm.energy)]}[objective]


def objective_report(sm: SpecModel, objective: str, base: Sequence[RowMagnitude]) -> NumericReport:
    """The `NumericReport` of one objective on a built model; `base`: `row_magnitudes(sm.m.proto)`."""
    dropped = set(sm.energy_rows) if objective == "latency" else set()
    kept = [r for r in base if r.index not in dropped]
    rows = solve_magnitudes(sm, objective, kept, "model")
    added = rows[len(kept):]
    guard_refuses = any(n > guarded_numerator(sm) for n in _numerators(sm, objective))
    guarded = solve_magnitudes(sm, objective, kept, "guarded") if guard_refuses else rows
    profile = f"{sm.scenario.assumptions.memory_model}/{sm.scenario.assumptions.energy_accounting}"
    return NumericReport(
        sm.scenario.name, objective, profile, len(rows),
        base_worst=max(kept, key=lambda r: r.activity), solve_worst=max(added, key=lambda r: r.activity),
        worst_cross=max(rows, key=lambda r: r.cross),
        checker_over=tuple(r for r in rows if r.checker > INT_LIMIT),
        guarded_worst=max(guarded, key=lambda r: r.checker),
        guarded_solve_worst=max(guarded[len(kept):], key=lambda r: r.activity),
        guard_refuses=guard_refuses,
        cross_wraps=sum(r.cross >= 1 << 63 for r in rows), cross_wraps_base=sum(r.cross >= 1 << 63 for r in kept),
        above_headroom=sum(r.activity > FAULT_HEADROOM for r in rows))


def profile_reports(scenario: Scenario, objectives: Sequence[str] = OBJECTIVES) -> list[NumericReport]:
    """One `NumericReport` per objective for the scenario as given (its own assumption profile)."""
    catalog = scenario_catalog(scenario)
    ev = Evaluator(scenario, catalog)
    profile = f"{scenario.assumptions.memory_model}/{scenario.assumptions.energy_accounting}"
    try:
        sm = build_model(scenario, catalog, ev)
    except TreeMenuTooLarge as exc:  # [TREE-6]: the tree-class model `solve` starts from, where it applies
        return _column_reports(scenario, catalog, ev, objectives, profile, str(exc))
    except ScenarioError as exc:
        return [NumericReport(scenario.name, o, profile, refused=str(exc)) for o in objectives]
    base = row_magnitudes(sm.m.proto)
    return [objective_report(sm, objective, base) for objective in objectives]


def _column_reports(scenario: Scenario, catalog, ev: Evaluator, objectives: Sequence[str], profile: str,
                    menu_refusal: str) -> list[NumericReport]:
    """A tree space beyond the exact menu: the first column model of [TREE-6] (depth-1 profiles and one
    relaxed column per (depth, nodes) class: the largest token counts and statistics any refinement has) for
    the objectives it solves; the others carry `solve`'s own refusal."""
    sm = None
    out = []
    for objective in objectives:
        why = columns_refusal(scenario, catalog, objective)
        if why is not None:
            out.append(NumericReport(scenario.name, objective, profile, solve_refuses=True,
                                     refused=f"{menu_refusal}; the tree-class refinement [TREE-6] does not apply: "
                                             f"{why}"))
            continue
        if sm is None:
            sm, _ = ColumnSearch(scenario, catalog, ev).build()
            base = row_magnitudes(sm.m.proto)
        out.append(objective_report(sm, objective, base))
    return out


def scenario_reports(scenario: Scenario, objectives: Sequence[str] = OBJECTIVES) -> list[NumericReport]:
    """`profile_reports` under every assumption profile of `PROFILES`."""
    out = []
    for memory_model, accounting in PROFILES:
        out += profile_reports(with_profile(scenario, memory_model, accounting), objectives)
    return out
