"""[OBJ-3] The canonical optimum: the lexicographic least design among those attaining the optimum (the
other metric, PIM units, devices, a fixed order), each level solved to proof with the earlier ones fixed, and
which levels another design also attains (`ties`); `check_levels` re-checks its claims against the evaluator."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.solvers.exact.guards import IntegerRangeError, ModelMismatch
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION, Answer, Part
from specpim_cp.solvers.exact.model import SpecModel, TieKey
from specpim_cp.solvers.exact.ratio import (
    RatioObjective,
    RatioRow,
    add_ratio_rows,
    minimize_ratio,
)
from specpim_cp.solvers.exact.session import SolveSession
from specpim_cp.solvers.result import Status

#: An OBJ-3 integer level that contradicts the design so far is solved again as one part per verifier
#: architecture the ratio rows leave when they leave at most this many (`CanonicalOptimum._per_verifier_arch`).
PER_ARCH_MAX = 16

#: Most one packed OBJ-3 objective spans: the product of its keys' sizes (a mixed-radix number); keys
#: beyond it are minimised by the next solve, with these fixed.
PACK_LIMIT = 1 << 40

#: The ratio levels of the canonical optimum, per objective: the objective, then the other metric
#: (EDP: the latency, then the energy, of the front points of least EDP).
RATIO_LEVELS = {"latency": ("latency", "energy"), "energy": ("energy", "latency"),
                "edp": ("edp", "latency", "energy")}


@dataclass
class TieLevel:
    """One level of the canonical optimum: its value at the returned design, whether CP-SAT proved it
    (OPTIMAL), and whether another design attains every level up to this one (None: not known)."""

    level: str  # latency | energy | edp | pim_units | devices | order
    value: Fraction | int | list[int] | None
    status: Status  # OPTIMAL | FEASIBLE | UNKNOWN | SKIPPED | FAULT (left out: CP-SAT contradicted a known design)
    ties: bool | None = None

    def as_dict(self) -> dict:
        out: dict = {"level": self.level, "status": self.status, "ties": self.ties}
        if isinstance(self.value, Fraction):
            out["value"] = float(self.value)
            out["exact"] = exact_text(self.value)
        else:
            out["value"] = self.value
        return out


def pack_keys(keys: Sequence[TieKey], limit: int = PACK_LIMIT) -> list[list[TieKey]]:
    """Consecutive keys grouped so that each group's mixed-radix number stays within `limit`."""
    groups: list[list[TieKey]] = []
    span = limit + 1
    for key in keys:
        if span * key.size > limit:
            groups.append([])
            span = 1
        groups[-1].append(key)
        span *= key.size
    return groups


def solve_key_groups(cano, groups: Sequence[list[TieKey]]) -> bool:
    """OBJ-3's integer levels on a tie-break (`CanonicalOptimum`, or the mix's MIX-13 `MixCanonical`): each
    packed group minimised by `cano._solve_group` with the earlier keys fixed (a group of one-valued keys
    is 0); False when one is not proven or the time limit came first (`cano.stop`, `cano.note` say which)."""
    for group in groups:
        first = len(cano.values)
        if all(k.size == 1 for k in group):  # a key with one value is 0
            cano.values += [0] * len(group)
            continue
        if cano.run.budget.remaining() <= 0:
            cano.stop = (first, Status.SKIPPED)
            cano.note = "the time limit was reached before the tie-break ended: the design is not canonical"
            return False
        if not cano._solve_group(group, first):
            return False
    return True


def level_before(keys: Sequence[TieKey], first: int, n_ratio: int) -> int:
    """The deepest tie-break level all of whose keys come before key `first` (levels counted after the
    `n_ratio` ratio levels; the last ratio level when no integer level is complete)."""
    names = list(dict.fromkeys(k.level for k in keys))
    done = [i for i, name in enumerate(names) if max(n for n, k in enumerate(keys) if k.level == name) < first]
    return n_ratio + max(done) if done else n_ratio - 1


def integer_entries(keys: Sequence[TieKey], values: Sequence[int], n_proven: int,
                    stop: tuple[int, str]) -> list[tuple[TieLevel, int]]:
    """The integer levels' entries at a design whose key values are `values`, each with the end of its keys:
    OPTIMAL when every key of the level is among the `n_proven` first, the unproven solve's status (`stop`:
    the end of its keys, its status) when a key of the level was in it, else SKIPPED."""
    end, status = stop
    out = []
    for name in dict.fromkeys(k.level for k in keys):
        idx = [n for n, k in enumerate(keys) if k.level == name]
        value = [values[n] for n in idx] if name == "order" else values[idx[0]]
        proven = max(idx) < n_proven
        out.append((TieLevel(name, value, Status.OPTIMAL if proven else status if min(idx) < end else Status.SKIPPED),
                    max(idx) + 1))
    return out


class CanonicalOptimum:
    """[OBJ-3] The lexicographic minimum, among the designs that attain the primary optimum, of: the
    other metric per token (EDP: latency, then energy), the PIM units over all devices, the devices, and
    the fixed order of `SpecModel.tie_break_keys`. Each level is solved to proof with the earlier ones
    fixed exactly, hinted by the design so far; then, from the first level not known to tie down, a
    feasibility solve asks whether another design attains the levels so far (formulations/objectives.md,
    OBJ-3). Under latency and energy, an optimum no other design attains is canonical at once."""

    def __init__(self, run: SolveSession, objective: str, best: Evaluation):
        self.run, self.sm, self.objective = run, run.sm, objective
        self.design = best.design
        self.rows: list[RatioRow] = []
        self.keys = self.sm.tie_break_keys()
        self.values: list[int] = []  # proven minima of keys[:len(values)]
        self.levels: list[TieLevel] = []
        self.scope: list[tuple[int, int]] = []  # per level: (ratio rows, keys) that fix it
        self.known: set[int] = set()  # levels another design attains (a later level changed the design)
        self.note: str | None = None
        self.several_points = False  # EDP: several front points of least EDP
        self.stop: tuple[int, str] = (0, Status.SKIPPED)  # (end of the unproven group's keys, its status)
        self.met: list[Design] = []  # other designs at the primary optimum a question found (`known_ties`)

    # -- the levels ------------------------------------------------------------------------------
    def only_design(self, best: Evaluation) -> bool:
        """Whether no other design attains the primary optimum (latency or energy; `ask_another` on level 0):
        then the design is the canonical optimum and every level is its value, proven, untied. A design
        found is a tie at level 0 (and `met`: `known_ties` reads how deep it ties once the levels are known)."""
        sm = self.sm
        if self.objective not in ("latency", "energy") or self.run.budget.remaining() <= 0:
            return False
        self.rows = [RatioRow.of(sm, self.objective, best.metrics)]
        other = RATIO_LEVELS[self.objective][1]
        found = self.ask_another(1, 0, self.objective)
        if isinstance(found, Design):
            self.known.add(0)
            self.met.append(found)
        if found is not False:
            return False
        self.rows.append(RatioRow.of(sm, other, best.metrics))
        self.levels = [TieLevel(name, best.metrics.objective(name), Status.OPTIMAL, False)
                       for name in (self.objective, other)]
        self.scope = [(1, 0), (2, 0)]
        self.values = list(sm.tie_key_values(self.design, self.keys))
        return True

    def ask_another(self, n_rows: int, n_keys: int, level: str) -> Design | bool | None:
        """A design other than the design so far with the first `n_rows` ratio rows and `n_keys` keys fixed
        (`level` names the question): the design found, False when none exists, None when not answered. Where
        the model keeps energy rows, INFEASIBLE is taken only when a second solve at CP-SAT's own presolve
        says it too (the 9.15 fault answered it wrongly on palm-62b-full-b32 under energy: objectives.md)."""
        sm, run = self.sm, self.run
        model, _ = self._clone(n_rows, n_keys)
        model.add_bool_or([~model.get_bool_var_from_proto_index(v.index)
                           for v, val in sm.decision_literals(self.design) if val])
        run.stage = f"tie-break: another design at {level}?"
        run.hint = sm.decision_literals(self.design)
        status, solver = (run.solve if self._latency_only(n_rows) else run.solve_confirmed)(model)
        if status in (Status.OPTIMAL, Status.FEASIBLE):
            return sm.decode(solver.boolean_value)
        return False if status == Status.INFEASIBLE else None

    def ratio_levels(self, best: Evaluation, front: list[Evaluation] | None) -> bool:
        """The primary level and the other metric(s), fixed as RatioRows; False when not proven."""
        sm, names = self.sm, RATIO_LEVELS[self.objective]
        if self.objective == "edp":  # the front is exact: the least-EDP points, the least latency first
            least = [p for p in front or [best] if p.metrics.objective("edp") == best.metrics.objective("edp")]
            self.several_points = len(least) > 1
            self.rows = [RatioRow.of(sm, "latency", best.metrics), RatioRow.of(sm, "energy", best.metrics)]
            for name in names:
                self.levels.append(TieLevel(name, best.metrics.objective(name), Status.OPTIMAL))
                self.scope.append((2, 0))
            return True
        self.rows = [RatioRow.of(sm, self.objective, best.metrics)]
        self.levels.append(TieLevel(self.objective, best.metrics.objective(self.objective), Status.OPTIMAL))
        self.scope.append((1, 0))
        other = names[1]
        self.run.stage = f"tie-break: {other}"
        try:
            status, design, value, _ = minimize_ratio(self.run, RatioObjective(sm, other),
                                                      lambda model: add_ratio_rows(sm, model, self.rows[:1]),
                                                      start=best, choices=self.rows[0].keeps(sm))
        except (ModelMismatch, IntegerRangeError) as exc:  # go on without this level, say why
            fault = isinstance(exc, ModelMismatch)
            self.levels.append(TieLevel(other, None, Status.FAULT if fault else Status.OUT_OF_RANGE))
            self.scope.append((1, 0))
            why = ("CP-SAT contradicted a known design at the {other} level (formulations/objectives.md, 'A CP-SAT "
                   "9.15 fault')" if fault else "the {other} level's rows exceed the exact model's 64-bit range "
                   f"({exc})").format(other=other)
            self.note = (f"{why}: the design is the least in ({self.objective}, PIM units, devices, fixed order) "
                         f"instead, its {other} not minimised; not canonical")
            return True
        if design is None:
            status, design, value = Status.UNKNOWN, best.design, best.metrics.objective(other)
        if design.key() != self.design.key():
            self.known.add(0)
        self.design = design
        self.levels.append(TieLevel(other, value, status))
        self.scope.append((2, 0))
        if status != Status.OPTIMAL:
            self.note = f"the {other} level is not proven ({status}): the design is not canonical"
            return False
        self.rows.append(RatioRow.of(sm, other, sm.ev.evaluate(design).metrics))
        return True

    def _latency_only(self, n_rows: int) -> bool:
        """Whether the first `n_rows` ratio rows fix only the latency (the energy rows then restrict nothing)."""
        return all(r.name == "latency" for r in self.rows[:n_rows])

    def _clone(self, n_rows: int, n_keys: int, minimise: list[TieKey] = ()):
        """A clone with the first `n_rows` ratio rows and `n_keys` keys fixed (and `minimise` minimised)."""
        sm = self.sm
        model = sm.working_copy(latency_only=self._latency_only(n_rows))  # without the energy rows if they can
        add_ratio_rows(sm, model, self.rows[:n_rows])
        return model, sm.add_tie_break(model, self.keys, self.values[:n_keys], minimise)

    def integer_levels(self) -> bool:
        """OBJ-3's PIM units, devices and fixed order, in packed solves; False when one is not proven."""
        return solve_key_groups(self, pack_keys(self.keys))

    def _solve_group(self, group: list[TieKey], first: int) -> bool:
        """Minimise one packed group of keys with the earlier ones fixed, hinted by the design so far."""
        sm, run = self.sm, self.run
        run.stage = "tie-break: " + ", ".join(dict.fromkeys(k.level for k in group))
        model, key_vars = self._clone(len(self.rows), first, group)
        weight = [math.prod(k.size for k in group[i + 1:]) for i in range(len(group))]
        at_design = sum(w * v for w, v in zip(weight, sm.tie_key_values(self.design, group)))
        run.hint = sm.decision_literals(self.design)

        def packed(solver: cp_model.CpSolver, keys) -> int:  # the objective in integers (CP-SAT reports a double)
            return sum(w * solver.value(v) for w, v in zip(weight, keys))

        def contradicts(answer: Answer) -> bool:  # the design so far is feasible here
            return answer.status == Status.INFEASIBLE or (answer.status == Status.OPTIMAL and answer.value > at_design)

        answer = run.solve_with_ladder(model, lambda solver: packed(solver, key_vars), contradicts,
                                       split=lambda: self._per_verifier_arch(group, first, packed), payload=key_vars)
        if contradicts(answer):
            self.note = ("CP-SAT contradicted the design of the previous level (formulations/objectives.md, "
                         "'A CP-SAT 9.15 fault'): the design is not canonical")
            return False
        status, solver, keys = answer.status, answer.solver, answer.payload  # keys: of the model `solver` solved
        if status in (Status.OPTIMAL, Status.FEASIBLE) and answer.value <= at_design:
            design = sm.decode(solver.boolean_value)
            if design.key() != self.design.key():
                self.known.add(level_before(self.keys, first, len(RATIO_LEVELS[self.objective])))
            self.design = design
        if status != Status.OPTIMAL:
            self.stop = (first + len(group), status)
            self.note = (f"the tie-break level {group[0].level} is not proven ({status}): "
                         "the design is not canonical")
            return False
        self.values += [solver.value(v) for v in keys]
        return True

    def _per_verifier_arch(self, group: list[TieKey], first: int, packed) -> Iterator[Part] | None:
        """The ladder's split of `_solve_group`'s solve, by the verifier's architecture: one part per
        architecture the ratio rows leave (`_live_verifier_archs`), x fixed; the least packed value over the
        parts is the group's minimum (the order keys include the architecture's index). None (no split) when
        more than `PER_ARCH_MAX` are left."""
        sm = self.sm
        archs = self._live_verifier_archs()
        if len(archs) > PER_ARCH_MAX:
            return None

        def parts() -> Iterator[Part]:
            for a in archs:
                model, key_vars = self._clone(len(self.rows), first, group)
                model.add(model.get_bool_var_from_proto_index(sm.x[0][a].index) == 1)
                yield Part(f"verifier on {a.label()}", model, lambda solver, kv=key_vars: packed(solver, kv), key_vars)

        return parts()

    def _live_verifier_archs(self) -> list[ArchConfig]:
        """The verifier's architectures a design at the fixed ratio levels can have: for some choice the rows
        keep, the architecture is one of the choice's (one a verifier alone may take only without speculating,
        NOSPEC-2) and CUT-4's per-architecture energy bound (where priced) is not above the energy level."""
        sm = self.sm
        kept = set(range(len(sm.z)))
        for r in self.rows:
            kept &= r.keeps(sm)

        def alive(a: ArchConfig, k: int) -> bool:
            if sm.choices[k].speculates and sm.space.alone_only(0, a):
                return False
            lb = sm.arch_energy_bounds.get(k, {}).get((0, a))
            return all(lb is None or r.name != "energy" or r.admits(lb, sm.stats[k].tokens_micro)
                       for r in self.rows)
        return [a for a in sm.x[0] if any(alive(a, k) for k in kept)]

    def add_integer_entries(self) -> None:
        """The integer levels' entries at the design (`integer_entries`), each with the rows and keys that fix it."""
        values = self.sm.tie_key_values(self.design, self.keys)
        for level, end in integer_entries(self.keys, values, len(self.values), self.stop):
            self.levels.append(level)
            self.scope.append((len(self.rows), end))

    # -- ties ------------------------------------------------------------------------------------
    def known_ties(self) -> None:
        """The levels the designs in `met` attain with the returned design (the evaluator's metrics and the
        keys' values, level by level until one differs) join `known`: two designs attain them."""
        sm = self.sm
        mine = sm.tie_key_values(self.design, self.keys)
        for other in self.met:
            if other.key() == self.design.key():
                continue
            metrics, theirs = sm.ev.evaluate(other).metrics, sm.tie_key_values(other, self.keys)
            for i, lv in enumerate(self.levels):
                if lv.level in RATIO_LEVELS:
                    same = lv.value is not None and metrics.objective(lv.level) == lv.value
                else:
                    same = all(theirs[n] == mine[n] for n, k in enumerate(self.keys) if k.level == lv.level)
                if not same:
                    break
                self.known.add(i)

    def another_design(self, level: int) -> bool | None:
        """Whether a design other than the canonical one attains levels 0..`level` (None: not known)."""
        if self.run.budget.remaining() <= 0:
            return None
        found = self.ask_another(*self.scope[level], self.levels[level].level)
        return True if isinstance(found, Design) else found

    def find_ties(self) -> None:
        """Ties are a prefix (a design that attains level i attains every earlier one): from the level after
        the deepest known tie down, one feasibility solve each, until one finds no other design (then no
        later level has one: an optimum without ties costs one solve) or is not answered. The order level
        has none (its keys fix every decision)."""
        last = len(self.levels) - 1
        self.levels[last].ties = False
        first_checked = 2 if self.objective == "edp" else 0  # EDP: latency and energy name the same set
        deepest = max(self.known, default=-1)
        for i in range(max(deepest + 1, first_checked), last):
            found = self.another_design(i)
            self.levels[i].ties = found
            if not found:
                break
            deepest = i
        for i in range(deepest + 1):
            self.levels[i].ties = True
        untied = next((i for i in range(last + 1) if self.levels[i].ties is False), last)
        for lv in self.levels[untied:]:  # no other design at level i: none at any later level either
            lv.ties = False
        if self.objective == "edp":
            self.levels[1].ties = self.levels[2].ties
            self.levels[0].ties = True if self.several_points else self.levels[2].ties

    def report(self) -> dict:
        return {"tie_break": [lv.as_dict() for lv in self.levels],
                "canonical": self.note is None, **({"tie_break_note": self.note} if self.note else {})}


def canonical_optimum(run: SolveSession, objective: str, best: Evaluation,
                      front: list[Evaluation] | None = None) -> tuple[Design, dict]:
    """[OBJ-3] The canonical optimum for a proven optimum `best` (EDP: its exact `front`), and the
    tie-break's report for SolveReport.extra (levels, values, statuses, ties; `canonical`)."""
    t0, dtime = time.perf_counter(), run.deterministic_time
    cano = CanonicalOptimum(run, objective, best)
    hook, run.on_progress = run.on_progress, None  # progress reports the primary objective only
    try:
        with run.lp_level(ENERGY_LINEARIZATION):  # the levels keep energy rows
            # a design no other attains is canonical at once (OBJ-3, "The only design")
            unique = front is None and cano.only_design(best)
            proven = unique or (cano.ratio_levels(best, front) and cano.integer_levels())
    finally:
        run.on_progress = hook
    cano.add_integer_entries()
    for lv in cano.levels:  # a level left out after a fault: its value at the returned design
        if lv.value is None:
            lv.value = sm_objective(cano.sm, cano.design, lv.level)
    cano.known_ties()
    if unique:
        for lv in cano.levels:
            lv.ties = False
    elif proven and cano.note is None:
        cano.find_ties()
    else:  # no uniqueness is claimed, but two designs seen at the levels applied are a fact
        for lv in cano.levels[:max(cano.known, default=-1) + 1]:
            lv.ties = True if lv.status not in (Status.FAULT, Status.OUT_OF_RANGE) else None
    out = cano.report()
    out["tie_break_cost"] = {"wall_s": round(time.perf_counter() - t0, 3),
                             "deterministic_time": round(run.deterministic_time - dtime, 3)}
    return cano.design, out


def sm_objective(sm: SpecModel, design: Design, name: str) -> Fraction:
    """The evaluator's value of objective `name` for `design`."""
    return sm.ev.evaluate(design).metrics.objective(name)


def skipped_tie_break(status: str | None) -> dict:
    """The tie-break's report when it did not run: the objective not proven (`status`), or not asked (None)."""
    why = "not asked: only the optimum's value was wanted" if status is None else \
        f"skipped: the objective is not proven optimal ({status})"
    return {"tie_break": [], "canonical": False, "tie_break_note": why}


def check_levels(evaluation: Evaluation, obj: Fraction, objective: str, tie: dict) -> None:
    """The evaluator's price of the returned design is the claimed objective and every ratio level's value."""
    if evaluation.metrics.objective(objective) != obj:
        raise ModelMismatch(f"the evaluator prices {objective} {evaluation.metrics.objective(objective)} for the "
                            f"returned design, the solve claims {obj}")
    for lv in tie["tie_break"]:
        if lv["level"] in RATIO_LEVELS and lv["status"] == Status.OPTIMAL and \
                lv["exact"] != exact_text(evaluation.metrics.objective(lv["level"])):
            raise ModelMismatch(f"the tie-break's {lv['level']} level claims {lv['exact']}, the evaluator prices "
                                f"{exact_text(evaluation.metrics.objective(lv['level']))}")


def exact_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"
