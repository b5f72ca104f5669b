"""Decision ranges [OBJ-4]: the values each decision takes over the designs within a tolerance of the
optimum, each value proven reached (a design within the tolerance that takes it, re-priced by the
evaluator) or proven out of reach (CP-SAT: INFEASIBLE), or said to be unknown when the time ran out.

The tolerance is a row on the ratio objective, N(x)/D(x) <= (1 + within) x F*, written like OBJ-3's
fixed levels (`RatioRow`) with the numerator rounded down to a whole ns (nJ) per round at the optimum's
expected tokens, so every design counted is within the tolerance (formulations/objectives.md, OBJ-4).
A decision with a small domain (memory type, PIM units, devices, an operator's engine, draft length,
draft shape, staging, pipeline, speculation on/off) is checked value by value, skipping values a design already found takes;
a decision with a large domain (tree nodes) by its minimum and maximum, each solved to proof. Before the
decisions one by one: one question for all of them, then (when a design answers it) the designs near the
witnesses priced by the evaluator (`harvest`) and one question per model, until each is INFEASIBLE.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import ArchConfig, Design, Placement
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.space import ModelOptions, model_labels
from specpim_cp.solvers.exact import no_spec
from specpim_cp.solvers.exact.guards import ModelMismatch, build_model
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.ratio import RatioRow, add_ratio_rows
from specpim_cp.solvers.exact.session import SolverOptions, SolveSession
from specpim_cp.solvers.exact.settled import settled_model
from specpim_cp.solvers.exact.solve import solve
from specpim_cp.solvers.result import SolveResult, Status, inputs_hash, solver_version
from specpim_cp.solvers.shared_evaluator import shared_evaluator

__all__ = ["ENUMERATE_LIMIT", "RANGE_OBJECTIVES", "DecisionRange", "RangesResult", "decision_ranges"]

#: The objectives a tolerance applies to (both ratios per token; EDP is a product of two ratios).
RANGE_OBJECTIVES = ("latency", "energy")
#: A decision with at most this many values is checked value by value; a larger one by its ends.
ENUMERATE_LIMIT = 24
#: Most designs `_Ranges.harvest` prices (designs a few decisions from the optimum) before CP-SAT is asked.
NEIGHBOUR_LIMIT = 400

Literal = cp_model.IntVar


@dataclass
class Decision:
    """One decision of one model: its values, each with the decision literals that take it (`values`), or
    (large domains) one integer expression over literals (`terms`) whose minimum and maximum are solved."""

    model: str  # verifier | drafters[i] | design
    name: str  # memory_type | pim_units | devices | engine[op] | draft_length | draft_shape | ... | pipeline
    of: Callable[[Design], object]  # its value in a design
    values: dict[object, list[Literal]] = field(default_factory=dict)
    terms: list[tuple[int, Literal]] | None = None


@dataclass
class DecisionRange:
    """A decision's range over the designs within the tolerance: the values proven reached, proven out of
    reach and unknown (set decisions), or the proven (or bounded) minimum and maximum (interval ones)."""

    model: str
    decision: str
    at_optimum: object
    reached: list = field(default_factory=list)
    excluded: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    low: int | None = None  # interval decisions: the least value, its status and CP-SAT's bound
    high: int | None = None
    low_status: str = ""
    high_status: str = ""
    low_bound: int | None = None
    high_bound: int | None = None

    @property
    def interval(self) -> bool:
        return self.low_status != ""

    @property
    def proven(self) -> bool:
        if self.interval:
            return self.low_status == self.high_status == "OPTIMAL"
        return not self.unknown

    @property
    def forced(self) -> bool | None:
        """One value within the tolerance (None: not proven either way)."""
        if self.interval:
            if self.low == self.high and self.proven:
                return True
            return False if self.low != self.high else None
        if len(self.reached) > 1:
            return False
        return True if self.proven else None

    def as_dict(self) -> dict:
        out = {"model": self.model, "decision": self.decision, "at_optimum": self.at_optimum,
               "forced": self.forced, "proven": self.proven}
        if self.interval:
            out.update({"min": self.low, "max": self.high, "min_status": self.low_status,
                        "max_status": self.high_status, "min_bound": self.low_bound, "max_bound": self.high_bound})
        else:
            out.update({"reached": self.reached, "excluded": self.excluded, "unknown": self.unknown})
        return out


@dataclass
class RangesResult:
    """The optimum (canonical, `solve`), the tolerance and every decision's range."""

    scenario: Scenario
    objective: str
    within_pct: Fraction
    optimum: SolveResult
    limit: Fraction  # the largest objective counted (evaluator units per token)
    ranges: list[DecisionRange]
    solves: int
    wall_s: float
    deterministic_time: float
    options: SolverOptions
    cp_sat_s: float = 0.0  # seconds inside CP-SAT of the ranges' questions (the optimum's solve not counted)

    @property
    def proven(self) -> bool:
        return self.optimum.report.status == "OPTIMAL" and all(r.proven for r in self.ranges)

    def as_dict(self) -> dict:
        rep = self.optimum.report
        return {"scenario": self.scenario.name, "objective": self.objective,
                "within_pct": str(self.within_pct), "optimum": float(rep.objective),
                "optimum_status": rep.status, "limit": float(self.limit),
                "limit_exact": f"{self.limit.numerator}/{self.limit.denominator}",
                "objective_unit": rep.UNITS.get(self.objective, ""), "optimum_gap": rep.gap,
                "proven": self.proven, "design": self.optimum.evaluation.design.model_dump(mode="json"),
                "ranges": [r.as_dict() for r in self.ranges],
                "solves": self.solves, "wall_s": round(self.wall_s, 3), "cp_sat_s": round(self.cp_sat_s, 3),
                "deterministic_time": round(self.deterministic_time, 3),
                "seed": self.options.seed, "solver_version": solver_version(),
                "inputs_hash": inputs_hash(self.scenario, {**self.options.as_dict(),
                                                           "within_pct": str(self.within_pct)})}


# -- the decisions -------------------------------------------------------------------------------------
def _grouped(pairs) -> dict[object, list[Literal]]:
    out: dict[object, list[Literal]] = {}
    for value, lit in pairs:
        out.setdefault(value, []).append(lit)
    return dict(sorted(out.items(), key=lambda kv: (str(type(kv[0])), kv[0])))


def _shape(dc) -> str:
    return "chain" if dc.tree is None else "tree"


def _staging(dc) -> str:
    return "unstaged" if dc.staging is None else f"{dc.staging.draft2} x{dc.staging.draft_length}"


#: A drafter's value in a design that does not speculate ([NOSPEC]: it has no devices, no draft).
ABSENT = "none"


def _part_value(j: int, get: Callable) -> Callable[[Design], object]:
    """Model j's value of a decision in a design (`ABSENT` for a drafter of a design without drafters)."""
    def of(design: Design):
        models = design.models()
        return get(models[j][1]) if j < len(models) else ABSENT
    return of


def _draft_value(i: int, get: Callable, absent: object = ABSENT) -> Callable[[Design], object]:
    """Drafter i's value of a speculation decision (`absent` when the design does not speculate)."""
    return lambda d: get(d.choice.drafters[i]) if d.choice.speculates else absent


def model_decisions(sm: SpecModel) -> list[Decision]:
    """Every decision of the space, per model (verifier first), then the design's pipeline and whether it
    speculates at all ([NOSPEC]; a drafter's decisions then take the value `ABSENT`)."""
    out: list[Decision] = []
    alone = [] if sm.no_spec is None else [(ABSENT, sm.no_spec)]  # a drafter's values when not speculating
    for j, (label, _) in enumerate(model_labels(sm.scenario)):
        extra = alone if j else []
        xs = sm.x[j].items()
        out.append(Decision(label, "memory_type", _part_value(j, lambda md: md.memory_type),
                            _grouped([(a.memory_type, v) for a, v in xs] + extra)))
        out.append(Decision(label, "pim_units", _part_value(j, lambda md: md.pim_units),
                            _grouped([(a.pim_units, v) for a, v in xs] + extra)))
        out.append(Decision(label, "devices", _part_value(j, lambda md: md.devices),
                            _grouped([(a.devices, v) for a, v in xs] + extra)))
        for op in PLACEABLE_OPS:
            out.append(Decision(label, f"engine[{op}]", _part_value(j, lambda md, op=op: md.placement[op].engine),
                                _grouped([(q.engine, v) for q, v in sm.y[j][op].items()] + extra)))
    for i in range(len(sm.scenario.drafters)):
        label = f"drafters[{i}]"
        pick = [(c.drafters[i], z) for c, z in zip(sm.choices, sm.z) if c.speculates]
        out.append(Decision(label, "draft_length", _draft_value(i, lambda dc: dc.draft_length),
                            _grouped([(dc.draft_length, z) for dc, z in pick] + alone)))
        out.append(Decision(label, "draft_shape", _draft_value(i, _shape),
                            _grouped([(_shape(dc), z) for dc, z in pick] + alone)))
        nodes = _grouped([(dc.nodes, z) for dc, z in pick] + [(0, z) for _, z in alone])
        of_nodes = _draft_value(i, lambda dc: dc.nodes, 0)  # no draft: 0 nodes
        if len(nodes) > ENUMERATE_LIMIT:
            out.append(Decision(label, "draft_nodes", of_nodes, terms=[(dc.nodes, z) for dc, z in pick]))
        else:
            out.append(Decision(label, "draft_nodes", of_nodes, nodes))
        out.append(Decision(label, "staging", _draft_value(i, _staging),
                            _grouped([(_staging(dc), z) for dc, z in pick] + alone)))
    out.append(Decision("design", "pipeline", lambda d: d.choice.pipeline,
                        _grouped((c.pipeline, z) for c, z in zip(sm.choices, sm.z))))
    if sm.no_spec is not None:
        out.append(Decision("design", "speculation", lambda d: d.choice.speculates,
                            _grouped((c.speculates, z) for c, z in zip(sm.choices, sm.z))))
    return out


def _nearest(options: ModelOptions, arch: ArchConfig, op: str, p: Placement) -> Placement | None:
    """`p` when `arch` allows it for `op`, else the allowed placement on the same engine and layout (else the
    same engine, else any) with the nearest share; None when `arch` allows none."""
    allowed = options.allowed(arch, op)
    if p in allowed:
        return p
    pool = ([q for q in allowed if (q.engine, q.layout) == (p.engine, p.layout)]
            or [q for q in allowed if q.engine == p.engine] or list(allowed))
    return min(pool, key=lambda q: (abs(q.share - p.share), q.share, q.key)) if pool else None


def neighbours(sm: SpecModel, design: Design) -> Iterator[Design]:
    """The designs one decision away from `design`, in a fixed order: per model another architecture (each
    operator's placement kept, or its nearest allowed), per operator another placement, then another
    speculation choice on the same hardware. Not checked: some lie outside the space or do not fit."""
    models = design.models()
    archs = [md.arch for _, md in models]
    places = [dict(md.placement) for _, md in models]
    choice = design.choice
    for j in range(len(models)):
        options = sm.data[j]
        for a in options.archs:
            if a == archs[j]:
                continue
            moved = {op: _nearest(options, a, op, p) for op, p in places[j].items()}
            if None not in moved.values():
                yield sm.space.build([*archs[:j], a, *archs[j + 1:]], [*places[:j], moved, *places[j + 1:]], choice)
        for op, p in places[j].items():
            for q in options.allowed(archs[j], op):
                if q != p:
                    yield sm.space.build(archs, [*places[:j], {**places[j], op: q}, *places[j + 1:]], choice)
    for c in sm.choices:
        if c != choice and c.speculates == choice.speculates:
            yield sm.space.build(archs, places, c)


# -- the search ----------------------------------------------------------------------------------------
class _Ranges:
    """The solves behind the ranges: a base model with the tolerance row, witnesses (designs found within
    the tolerance, each re-priced by the evaluator), one feasibility or optimisation solve per question."""

    def __init__(self, sm: SpecModel, run: SolveSession, objective: str, row: RatioRow, limit: Fraction,
                 optimum: Design, on_stage: Callable[[str], None] | None = None):
        self.sm, self.run, self.objective, self.row, self.limit = sm, run, objective, row, limit
        self.optimum = optimum
        self.on_stage = on_stage
        self.witnesses: list[Design] = [optimum]
        self._base: cp_model.CpModel | None = None
        self.closed: set[str] = set()  # models no design within the tolerance takes a value no witness has of
        self._seen: set[str] = {optimum.key()}  # keys of the witnesses and of the designs `harvest` priced
        self._reached: dict[tuple[str, str], tuple[int, set]] = {}  # `reached`: witnesses read, their values

    def base(self) -> cp_model.CpModel:
        """A copy of the model with the tolerance row (latency: its energy rows emptied), built once."""
        if self._base is None:
            sm = self.sm
            self._base = sm.working_copy(latency_only=self.objective == "latency")
            add_ratio_rows(sm, self._base, [self.row])  # only the latency is bounded: energy rows restrict nothing
        return self._base.clone()

    def witness(self, solver: cp_model.CpSolver) -> Design:
        """The solution's design, which the evaluator must price within the tolerance."""
        design = self.sm.decode(solver.boolean_value)
        value = self.sm.ev.evaluate(design).metrics.objective(self.objective)
        if value > self.limit:
            raise ModelMismatch(f"CP-SAT found {design.key()} within the tolerance ({float(self.limit):.6g}) but "
                                f"the evaluator prices {self.objective} {float(value):.6g}")
        self._keep(design)
        return design

    def _keep(self, design: Design) -> None:
        """`design` (within the tolerance) is a witness."""
        self.witnesses.append(design)
        self._seen.add(design.key())

    def _solve(self, model: cp_model.CpModel, stage: str, first_solution: bool = False, confirmed: bool = False):
        self.run.stage = stage
        if self.on_stage is not None:
            self.on_stage(stage)
        self.run.hint = self.sm.decision_literals(self.optimum)
        return (self.run.solve_confirmed if confirmed else self.run.solve)(model, first_solution)

    def reached(self, decision: Decision) -> set:
        """The decision's values some witness takes (kept per decision, read from the witnesses added since)."""
        key = (decision.model, decision.name)
        count, values = self._reached.get(key, (0, set()))
        values.update(decision.of(w) for w in self.witnesses[count:])
        self._reached[key] = (len(self.witnesses), values)
        return values

    def unreached(self, decision: Decision) -> list:
        """The decision's values no witness takes."""
        reached = self.reached(decision)
        return [v for v in decision.values if v not in reached]

    def _ask(self, lits: Sequence[Literal], stage: str, confirmed: bool = False):
        """A design within the tolerance that sets any of `lits` (the model's literals): the first solution of a
        copy of the base model, or INFEASIBLE (`confirmed`: at CP-SAT's own presolve too)."""
        model = self.base()
        model.add_bool_or([model.get_bool_var_from_proto_index(v.index) for v in lits])
        return self._solve(model, stage, True, confirmed)

    def within(self, design: Design) -> bool:
        """Whether `design` (of the model's space, priced by the evaluator) satisfies the tolerance row as CP-SAT
        reads it (round time or energy x the optimum's tokens <= the row's numerator x its own tokens) and the
        evaluator's limit: a witness found without a solve. False for a design outside the space or infeasible."""
        if self.sm.space.violations(design):  # the model's (restricted) space, within the evaluator's free one
            return False
        try:
            metrics = self.sm.ev.metrics(design, check=False)
            own = RatioRow.of(self.sm, self.objective, metrics)
        except ScenarioError:  # does not fit the devices (or beyond the rows' integer range)
            return False
        return self.row.admits(own.n, own.d) and metrics.objective(self.objective) <= self.limit

    def harvest(self, decisions: Sequence[Decision], start: Sequence[Design] | None = None,
                limit: int | None = None) -> None:
        """Witnesses without CP-SAT: the designs one decision away (`neighbours`), breadth-first from `start`
        (default: every witness), each kept when it lies within the tolerance (`within`), at most `limit`
        (default `NEIGHBOUR_LIMIT`) priced; a design priced once is not priced again. A kept design that takes
        a value no witness had is a witness; the search goes on from every kept design (a value two decisions
        away, such as fewer PIM units once an operator left PIM)."""
        limit = NEIGHBOUR_LIMIT if limit is None else limit
        if limit and self.on_stage is not None:
            self.on_stage("ranges: designs near the witnesses")
        queue = list(self.witnesses if start is None else start)
        priced = 0
        while queue and priced < limit and self.run.budget.remaining() > 0:  # the command's deadline holds
            for cand in neighbours(self.sm, queue.pop(0)):
                key = cand.key()
                if key in self._seen:
                    continue
                self._seen.add(key)
                priced += 1
                if self.within(cand):
                    if any(d.of(cand) not in self.reached(d) for d in decisions if d.terms is None):
                        self._keep(cand)
                    queue.append(cand)
                if priced >= limit:
                    break

    def close(self, decisions: Sequence[Decision], model: str | None = None) -> bool:
        """One question for the value-by-value decisions (of `model`, a model's label or "design"; None: all at
        once): a design within the tolerance with any of their values no witness has. INFEASIBLE (under energy:
        also at CP-SAT's own presolve) excludes all of those values (`closed` gets their models: no decision of
        theirs then asks a question of its own); a design found is one more witness (True)."""
        asked = [d for d in decisions if d.terms is None and model in (None, d.model)]
        left = [lit for d in asked for v in self.unreached(d) for lit in d.values[v]]
        if not left:
            self.closed.update(d.model for d in asked)
            return False
        if self.run.budget.remaining() <= 0:
            return False
        status, solver = self._ask(left, f"ranges: any {'' if model is None else model + ' '}decision off the "
                                         "values found?", confirmed=self.objective == "energy")  # energy rows kept
        if status in (Status.OPTIMAL, Status.FEASIBLE):
            self.witness(solver)
            return True
        if status == Status.INFEASIBLE:
            self.closed.update(d.model for d in asked)
        return False

    def close_all(self, decisions: Sequence[Decision]) -> None:
        """The questions before the decisions' own: one for every decision at once, INFEASIBLE the common case at
        a small tolerance. When it finds a design, the designs near the witnesses (`harvest`), then one question
        per model (and one for the design's own decisions), asked again after each design found (the designs
        near it harvested first) until INFEASIBLE closes the model's decisions. A model left open (the time ran
        out) asks decision by decision (`reach`)."""
        if not self.close(decisions):
            return
        self.harvest(decisions)
        for model in dict.fromkeys(d.model for d in decisions if d.terms is None):
            while model not in self.closed and self.close(decisions, model):
                self.harvest(decisions, self.witnesses[-1:], NEIGHBOUR_LIMIT // 4)

    def reach(self, decision: Decision) -> dict[object, str]:
        """Per value of the decision, REACHED | EXCLUDED | UNKNOWN: whether a design within the tolerance
        takes it. One question asks for a design with any value no witness has: a design found reaches its
        value (and the question is asked again of the values left), INFEASIBLE excludes every value left."""
        left = self.unreached(decision)
        verdict: dict[object, str] = {v: "REACHED" for v in decision.values if v not in left}
        if decision.model in self.closed:
            verdict.update(dict.fromkeys(left, "EXCLUDED"))
            left = []
        while left:
            if self.run.budget.remaining() <= 0:
                verdict.update(dict.fromkeys(left, "UNKNOWN"))
                break
            asked = f"= {left[0]}" if len(left) == 1 else "in {" + ", ".join(map(str, left)) + "}"
            status, solver = self._ask([lit for v in left for lit in decision.values[v]],
                                       f"ranges: {decision.model}.{decision.name} {asked}?")
            if status in (Status.OPTIMAL, Status.FEASIBLE):
                value = decision.of(self.witness(solver))
                if value not in left:  # the row asked for one of `left`: the model and the decoder disagree
                    raise ModelMismatch(f"CP-SAT found a design with {decision.name} = {value}, asked for one of {left}")
                verdict[value] = "REACHED"
                left = [v for v in left if v != value]
                continue
            verdict.update(dict.fromkeys(left, "EXCLUDED" if status == Status.INFEASIBLE else "UNKNOWN"))
            break
        return verdict

    def end(self, decision: Decision, sign: int) -> tuple[int, str, int | None]:
        """(value, status, CP-SAT's bound) of the least (sign 1) or largest (sign -1) value."""
        seen = [decision.of(w) for w in self.witnesses]
        best = min(seen) if sign > 0 else max(seen)
        if self.run.budget.remaining() <= 0:
            return best, "UNKNOWN", None
        model = self.base()
        expr = sum(c * model.get_bool_var_from_proto_index(v.index) for c, v in decision.terms)
        model.minimize(sign * expr)
        status, solver = self._solve(model, f"ranges: {'least' if sign > 0 else 'largest'} "
                                            f"{decision.model}.{decision.name}")
        if status not in (Status.OPTIMAL, Status.FEASIBLE):
            return best, status, None
        found = decision.of(self.witness(solver))
        best = min(best, found) if sign > 0 else max(best, found)
        bound = sign * math.ceil(solver.best_objective_bound - 1e-9)  # the objective is an integer
        return best, status, bound

    def decision_range(self, decision: Decision) -> DecisionRange:
        out = DecisionRange(decision.model, decision.name, decision.of(self.optimum))
        if decision.terms is not None:
            out.low, out.low_status, out.low_bound = self.end(decision, 1)
            out.high, out.high_status, out.high_bound = self.end(decision, -1)
            return out
        verdict = self.reach(decision)
        for value in decision.values:
            {"REACHED": out.reached, "EXCLUDED": out.excluded, "UNKNOWN": out.unknown}[verdict[value]].append(value)
        return out


def tolerance_row(sm: SpecModel, objective: str, best: Evaluation, within_pct: Fraction) -> tuple[RatioRow, Fraction]:
    """[OBJ-4] The tolerance as a RatioRow: N * d <= floor(n * (1 + within)) * D(x), and the objective value
    it admits at most (evaluator units per token)."""
    row = RatioRow.of(sm, objective, best.metrics)
    n = math.floor(row.n * (1 + within_pct / 100))
    opt = best.metrics.objective(objective)
    return RatioRow(objective, n, row.d), opt * Fraction(n, row.n)


def decision_ranges(scenario: Scenario, *, within_pct: Fraction | int = 1, objective: str | None = None,
                    options: SolverOptions | None = None, catalog: Catalog | None = None,
                    optimum: SolveResult | None = None,
                    on_stage: Callable[[str], None] | None = None) -> RangesResult:
    """Every decision's range over the designs within `within_pct` percent of the optimum of `objective`
    (latency or energy per token): the canonical optimum first (`solve`, or `optimum` when the caller has
    it), then the range questions on the same time limit (`options.time_limit_s`, spent again); with
    wall-clock options both within the command's deadline (a question left when it passes is UNKNOWN).
    `on_stage` is called with each question before CP-SAT answers it (a CLI status line)."""
    t0 = time.perf_counter()
    within = Fraction(within_pct)  # exact: an int or a Fraction (the CLI parses --within)
    objective = objective or scenario.objective
    if objective not in RANGE_OBJECTIVES:
        raise ScenarioError(f"objective: decision ranges take a tolerance on latency or energy per token, not "
                            f"'{objective}' (EDP is a product of the two); use --objective latency or energy")
    opts = (options or SolverOptions()).with_deadline(2.0)  # the optimum and the ranges share it
    catalog = catalog or scenario_catalog(scenario)
    res = optimum or solve(scenario, objective=objective, options=opts, catalog=catalog)
    if res.report.objective_name != objective:
        raise ScenarioError(f"optimum: solved for {res.report.objective_name}, ranges asked for {objective}")
    sm = settled_model(scenario, catalog) or build_model(scenario, catalog, shared_evaluator(scenario, catalog))
    run = SolveSession(sm, opts)
    # [NOSPEC-6] the verifier alone's proven bounds (those the solve's model kept are not solved again)
    no_spec.settle(sm, run, no_spec.settle_levels(objective))
    if objective == "energy":  # the energy rows stay: CP-SAT's LP stalls on them (objectives.md, 'Scaled rows')
        run.linearization = ENERGY_LINEARIZATION
    row, limit = tolerance_row(sm, objective, res.evaluation, within)
    search = _Ranges(sm, run, objective, row, limit, res.evaluation.design, on_stage)
    decisions = model_decisions(sm)
    search.close_all(decisions)
    ranges = [search.decision_range(d) for d in decisions]
    return RangesResult(scenario, objective, within, res, limit, ranges, run.iterations,
                        time.perf_counter() - t0, run.deterministic_time, opts, run.cp_sat_s)
