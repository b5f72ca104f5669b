"""[MIX-13] One canonical mix optimum (formulations/mix.md, "One canonical mix optimum").

After the mix model proves its rounded objective optimal, `canonical_mix` returns the lexicographic
minimum, over every mix design of the space, of: the objective (regret: the regret, then the weighted
latency), the other metric's weighted mean, the PIM units and the devices of the shared hardware, and a
fixed order (the shared architectures, then per cell its placements and speculation choice). Every
level is solved to proof on a clone of the mix model with the earlier levels fixed, hinted with the
design so far; a level that is not proven ends the tie-break with a note, and the design returned still
attains the proven primary optimum. The weighted levels are the model's rounded units (MIX-5/6) at the
finest scale at which the design at that level fits the 64-bit rows (`MixModel.plan`); the report
states each scale.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.physics.mix import mix_value
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.solvers.exact.canonical import (
    TieLevel,
    integer_entries,
    level_before,
    pack_keys,
    solve_key_groups,
)
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION
from specpim_cp.solvers.exact.model import TieKey
from specpim_cp.solvers.mix.arch_bounds import ArchBounds, units
from specpim_cp.solvers.mix.cell_solves import cell_kind
from specpim_cp.solvers.mix.cpsat_model import (
    REGRET_SCALE,
    ROW_LIMIT,
    MixModel,
    ObjectivePlan,
    ceil_div,
    cell_units,
)
from specpim_cp.solvers.mix.records import HardwareResult, MixStage

#: The weighted levels of the canonical mix optimum, per mix objective.
MIX_RATIO_LEVELS = {"latency": ("latency", "energy"), "energy": ("energy", "latency"),
                    "regret": ("regret", "latency", "energy")}

#: Most one packed objective of the mix's integer levels spans (the mix's row limit, model.ROW_LIMIT: keys
#: are small integers, so the objective's terms stay below 2^53 like every other mix row).
MIX_PACK_LIMIT = ROW_LIMIT
#: Most seconds spent completing the design so far into a full hint (all its decisions fixed): CP-SAT
#: completes that far sooner than a hint of the decisions only.
HINT_SECONDS = 30.0


@dataclass(frozen=True)
class _Row:
    """A weighted level fixed at its proven minimum: `value` in the units of `plan` (regret: R)."""

    name: str  # latency | energy | regret
    plan: ObjectivePlan
    value: int


def mix_tie_keys(mm: MixModel) -> list[TieKey]:
    """[MIX-13] The integer keys, in their lexicographic order: the shared hardware's PIM units over all
    devices and its devices (cell 0's OBJ-3 keys; x is shared), every model's architecture index, then
    per cell (in the mix's order) each model's placement indices and the speculation choice index."""
    first = mm.cells[0].tie_break_keys()
    keys = [k for k in first if k.level != "order" or k.name.startswith("arch[")]
    for c, sm in enumerate(mm.cells):
        for k in sm.tie_break_keys():
            if k.level == "order" and not k.name.startswith("arch["):
                keys.append(TieKey(k.level, f"cell[{c}].{k.name}", k.terms, k.size))
    return keys


def tie_key_values(mm: MixModel, designs: Sequence[Design], keys: Sequence[TieKey]) -> list[int]:
    """Every key's value at a mix design (its decision literals summed with the keys' coefficients)."""
    value = {v.index: val for v, val in mm.decision_literals(designs)}
    return [sum(c * value[v.index] for c, v in key.terms) for key in keys]


def compress_keys(mm: MixModel, keys: Sequence[TieKey], archs: Sequence[ArchConfig]) -> list[TieKey]:
    """Cell keys of `mm` over only the placements `archs` allow (in the same order): on that hardware the
    same design is their lexicographic minimum, with keys of a few values instead of every architecture's."""
    out = []
    for k in keys:
        c, rest = k.name.removeprefix("cell[").split("].", 1)
        if not rest.startswith("placement["):
            out.append(k)
            continue
        sm = mm.cells[int(c)]
        j, op = rest.removeprefix("placement[").rstrip("]").split("][")
        ys = sm.y[int(j)][op]
        valid = [lit for p, lit in ys.items() if sm.valid(int(j), archs[int(j)], op, p)]
        out.append(TieKey(k.level, k.name, tuple((r, lit) for r, lit in enumerate(valid) if r), max(1, len(valid))))
    return out


def translate_keys(keys: Sequence[TieKey], full: MixModel, small: MixModel,
                   cells: Sequence[int] | None = None) -> list[TieKey]:
    """Cell keys of `full` (compressed: the placements one architecture allows) over the literals of
    `small`, the mix model of that hardware alone (all cells, or the cells `cells` in that order): the
    same placements and choices with the same coefficients, so the same lexicographic order."""
    out = []
    for k in keys:
        c, rest = k.name.removeprefix("cell[").split("].", 1)
        fsm = full.cells[int(c)]
        ssm = small.cells[int(c) if cells is None else list(cells).index(int(c))]
        if rest == "choice":
            index = {z.index: n for n, z in enumerate(fsm.z)}
            terms = tuple((r, ssm.z[index[lit.index]]) for r, lit in k.terms)
        else:
            j, op = rest.removeprefix("placement[").rstrip("]").split("][")
            place = {lit.index: p for p, lit in fsm.y[int(j)][op].items()}
            terms = tuple((r, ssm.y[int(j)][op][place[lit.index]]) for r, lit in k.terms)
        out.append(TieKey(k.level, k.name, terms, k.size))
    return out


def hardware_floor(mm: MixModel, hr: HardwareResult, plan: ObjectivePlan) -> int | None:
    """A lower bound of the weighted units sum_c W_c L_c (N_c) over every mix design on `hr`'s hardware,
    from its proven exact value v: each L_c >= sigma m_c, so the sum >= sigma sum W v; None when the
    hardware holds no mix design (INFEASIBLE), so nothing there can tie."""
    if hr.status == "INFEASIBLE" or hr.value is None:
        return None
    return ceil_div(Fraction(plan.scale, 10 ** 6) * sum(mm.weights) * hr.value, 1)


class MixCanonical:
    """The levels of [MIX-13] on one `session.MixRun` (its budget and stage log), from a proven optimum."""

    def __init__(self, run, objective: str, design: list[Design], lows: Sequence[Fraction],
                 own: Sequence[Fraction]):
        self.run, self.mm, self.objective = run, run.mm, objective
        self.design = design
        self.lows, self.own = lows, own
        self.rows: list[_Row] = []
        self.keys = mix_tie_keys(self.mm)
        self.values: list[int] = []
        self.levels: list[TieLevel] = []
        self.scales: dict[str, int] = {}
        self.nogoods: list[tuple[ArchConfig, ...]] = []
        #: the hardware tuples the mix may use (None: every one); the decomposition ([MIX-17]) proves which
        #: tuples attain the primary level, and only they can hold a canonical design
        self.hardware: list[tuple[ArchConfig, ...]] | None = None
        #: per cell a proven lower bound of the other metric on that hardware (None: 0), MIX-7's floor of
        #: the later weighted level (its caps, and so the finest scale whose rows fit, depend on it)
        self.other_lows: list[Fraction] | None = None
        #: the decomposition's solved nodes that attain the primary level (MIX-19), pinning every cell's
        #: metric of that level; None: not known
        self.leaves: list | None = None
        #: builds the mix model of one hardware tuple (its cells' levels are solved there once the hardware
        #: is decided: a fraction of the whole model's rows); None: keep the whole model
        self.narrow = None
        self.full = run.mm  # the whole model: the hardware levels and the ties are asked of it
        self._n_hw = 0
        self._narrow_hw: tuple[list[TieKey], list[int]] | None = None
        self.note: str | None = None
        self.known: set[int] = set()  # levels another design attains (a later level changed the design)
        self.stop: tuple[int, str] = (0, "SKIPPED")
        self._bounds: dict[str, ArchBounds] = {}
        self._hint: tuple[tuple[int, ...], list[tuple[int, int]]] | None = None  # (decisions, base values)
        self._minimising_energy = False  # the level being solved keeps the energy rows

    # -- models ----------------------------------------------------------------------------------
    def plan_for(self, name: str) -> ObjectivePlan:
        """The units of a weighted level at the design so far (regret: with the cells' own optima)."""
        kind = "energy" if name == "energy" else "latency"
        if kind == cell_kind(self.objective):
            lows = self.lows
        else:
            lows = self.other_lows if self.other_lows is not None else [Fraction(0)] * len(self.lows)
        return self.mm.plan(kind, self.run.metrics(self.design), lows, self.own if name == "regret" else None)

    def clone(self, rows: Sequence[_Row], minimise: _Row | None = None):
        """A clone of the mix model with `rows` fixed (each level's variable at most its value) and the
        hardware no-goods; with `minimise`, also that level's variable (returned)."""
        mm = self.mm
        model = mm.m.clone()
        levels = [*rows, *([minimise] if minimise else [])]
        if all(r.name != "energy" for r in levels):
            for sm in mm.cells:
                sm.drop_energy_rows(model)
        mm.add_hardware_nogoods(model, self.nogoods)
        if self.hardware is not None:
            mm.add_hardware_choice(model, self.hardware)
        leaves = None if self.leaves is None else [leaf for leaf in self.leaves if self.hardware is None
                                                   or leaf.archs in self.hardware]
        var = None
        for r in levels:  # each level its own per-cell metric variables, in its plan's units
            kind = "energy" if r.name == "energy" else "latency"
            metric = [mm.add_cell_metric(model, c, kind, r.plan) for c in range(len(mm.cells))]
            if leaves is not None and self.rows and r is self.rows[0]:
                mm.add_leaf_choice(model, leaves, metric)
            if mm.bounds is not None and (self.hardware is None or len(self.hardware) > 1):
                # MIX-10/11 for this metric (the energy level's LP bound needs them; nothing on one tuple)
                mm.add_arch_cuts(model, metric, r.plan, self.arch_bounds(kind))
            v = (mm.add_regret(model, metric, r.plan) if r.name == "regret"
                 else mm.add_weighted_objective(model, metric, r.plan))
            if r is minimise:
                var = v
            else:
                model.add(v <= r.value)
        return model, var

    def arch_bounds(self, kind: str) -> ArchBounds:
        """MIX-10/11's per-architecture bounds of a metric (the mix model's own for its kind)."""
        if kind == cell_kind(self.objective):
            return self.mm.bounds
        if kind not in self._bounds:
            self._bounds[kind] = ArchBounds(self.mm.cells, kind)
        return self._bounds[kind]

    def full_hint(self, model: cp_model.CpModel) -> list[tuple[cp_model.IntVar, int]]:
        """Every variable's value at the design so far (a hint CP-SAT need not complete): the clone with the
        design's decisions fixed, solved at once (its schedule is then the only freedom); the decisions
        alone when that does not finish. The base model's values are kept while the design stays the same:
        a later level's clone differs only in its own level variables, which the base ones determine."""
        energy_rows = any(r.name == "energy" for r in self.rows) or self._minimising_energy
        key = (energy_rows, *(val for _, val in self.mm.decision_literals(self.design)))
        if self._hint is not None and self._hint[0] == key:
            return [(model.get_int_var_from_proto_index(i), v) for i, v in self._hint[1]]
        fixed = model.clone()
        decisions = self.mm.decision_literals(self.design)
        for v, val in decisions:
            fixed.add(fixed.get_bool_var_from_proto_index(v.index) == val)
        fixed.clear_objective()
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = min(HINT_SECONDS, max(self.run.budget.remaining(), 0.01))
        solver.parameters.presolve_inclusion_work_limit = 0  # the presolve workaround, as every solve here
        status = solver.solve(fixed)
        self.run.budget.charge(solver)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return decisions
        values = [(i, solver.value(fixed.get_int_var_from_proto_index(i))) for i in range(len(model.proto.variables))]
        self._hint = (key, values[:len(self.mm.m.proto.variables)])
        return [(model.get_int_var_from_proto_index(i), v) for i, v in values]

    def linearization(self, row: _Row | None = None) -> int | None:
        """CP-SAT's LP level for a level's solve: 0 once the energy rows are in (as OBJ-1's energy steps,
        ENERGY_LINEARIZATION: energy levels prove fastest there), else CP-SAT's default. `row`: the level
        being minimised."""
        levels = [*self.rows, *([row] if row else [])]
        return ENERGY_LINEARIZATION if any(r.name == "energy" for r in levels) else None

    def units(self, row: _Row, designs: Sequence[Design]) -> int:
        """A level's value at a mix design in its plan's units (what the model's rows compute)."""
        metrics = self.run.metrics(designs)
        kind = "energy" if row.name == "energy" else "latency"
        cells = [cell_units(m, kind, row.plan.scale) for m in metrics]
        if row.name == "regret":
            return max(ceil_div(u * REGRET_SCALE, o) for u, o in zip(cells, row.plan.opt_units, strict=True))
        return sum(w * u for w, u in zip(self.mm.weights, cells, strict=True))

    # -- the levels ------------------------------------------------------------------------------
    def ratio_levels(self, primary_value: int | None, primary_scale: int | None,
                     tried: Sequence[HardwareResult]) -> bool:
        """The weighted levels, each proven with the earlier ones fixed; False when one is not proven. The
        primary level reuses the mix model's proven optimum when it is at the same scale and no hardware
        it excluded (MIX-12) could reach it."""
        for i, name in enumerate(MIX_RATIO_LEVELS[self.objective]):
            plan = self.plan_for(name)
            self.scales[name] = plan.scale
            row = _Row(name, plan, 0)
            if i == 0:
                self.nogoods, exact = self._nogoods(tried, plan, primary_value)
                reuse = (primary_value is not None and plan.scale == primary_scale and exact
                         and self.units(row, self.design) == primary_value)
                if reuse:
                    self.rows.append(_Row(name, plan, primary_value))
                    self.levels.append(TieLevel(name, primary_value, "OPTIMAL"))
                    if self.hardware is None:  # else only the hardware that attains the level is left
                        self.nogoods += self.floor_nogoods(self.rows[0])
                    continue
            status, value = self._solve_ratio(row)
            self.levels.append(TieLevel(name, value, status))
            if status != "OPTIMAL":
                self.stop = (0, "SKIPPED")
                self.note = self.note or (f"the {name} level is not proven ({status}): the design is not canonical")
                return False
            self.rows.append(_Row(name, plan, value))
            if i == 0 and self.hardware is None:
                self.nogoods += self.floor_nogoods(self.rows[0])
        return True

    def floor_nogoods(self, row: _Row) -> list[tuple[ArchConfig, ...]]:
        """Every architecture tuple whose MIX-10/11 floor (per cell the largest of its separable and pairwise
        bounds and MIX-7's own optimum, in the row's units) is above the primary level's proven minimum:
        no design on it attains the level, so excluding it removes nothing the later levels compare (on
        the OPT-13B mix, 184 of 196 tuples)."""
        bounds, mm = self.mm.bounds, self.mm
        if bounds is None:
            return []
        archs = [list(xs) for xs in mm.x]
        scale = row.plan.scale
        out = []
        for idx in itertools.product(*(range(len(a)) for a in archs)):
            cells = []
            for c in range(len(mm.cells)):
                b = max(units(bounds.separable[c][j][k], scale) for j, k in enumerate(idx))
                for i in range(1, len(idx)):
                    b = max(b, units(bounds.pairwise[c][i - 1][idx[0], idx[i]], scale))
                cells.append(max(b, row.plan.lo[c]))
            if row.name == "regret":
                floor = max(ceil_div(REGRET_SCALE * b, o) for b, o in zip(cells, row.plan.opt_units, strict=True))
            else:
                floor = sum(w * b for w, b in zip(mm.weights, cells, strict=True))
            if floor > row.value:
                out.append(tuple(archs[j][k] for j, k in enumerate(idx)))
        return out

    def _nogoods(self, tried: Sequence[HardwareResult], plan: ObjectivePlan,
                 primary: int | None) -> tuple[list[tuple[ArchConfig, ...]], bool]:
        """The hardware solved exactly that cannot reach the primary level (its floor above it), to exclude;
        and whether every hardware the mix model excluded (MIX-12) is known not to go below that level."""
        if self.objective == "regret":
            return ([hr.archs for hr in tried if hr.status == "INFEASIBLE"],
                    not any(hr.status in ("OPTIMAL", "INFEASIBLE") for hr in tried))
        out, exact = [], True
        for hr in tried:
            if hr.status not in ("OPTIMAL", "INFEASIBLE"):
                continue
            floor = hardware_floor(self.mm, hr, plan)
            if floor is None or (primary is not None and floor > primary):
                out.append(hr.archs)
            elif primary is None or floor < primary:
                exact = False  # the mix model excluded it, but it might go below
        return out, exact

    def _solve_ratio(self, row: _Row) -> tuple[str, int | None]:
        """Minimise one weighted level with the earlier rows fixed, hinted with the design so far."""
        run, mm = self.run, self.mm
        model, var = self.clone(self.rows, row)
        at_design = self.units(row, self.design)
        run.say(f"tie-break: {row.name} ({len(model.proto.variables):,} variables)")
        t0 = time.perf_counter()
        self._minimising_energy = row.name == "energy"
        hint = self.full_hint(model)
        self._minimising_energy = False
        status, solver = run.run(model, var, hint, known_feasible=True,  # the design so far is feasible here
                                 linearization=self.linearization(row), one_worker=True,
                                 above=lambda s: s.value(var) > at_design)
        name = solver.status_name(status)
        self._log(f"tie-break: {row.name}", t0, name)
        if status == cp_model.OPTIMAL and solver.value(var) > at_design:
            self.note = (f"CP-SAT contradicted the design so far at the {row.name} level (formulations/objectives.md,"
                         " 'A CP-SAT 9.15 fault'): the design is not canonical")
            return "FAULT", at_design
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return name, at_design
        value = solver.value(var)
        if value < at_design:
            self._adopt(mm.decode(solver.boolean_value), len(self.levels) - 1)
            self.rows.append(_Row(row.name, row.plan, value))  # the key counts the level's rows
            self._keep_hint(solver, model)
            self.rows.pop()
        return name, value

    def integer_levels(self) -> bool:
        """The PIM units, devices and fixed order, in packed solves (OBJ-3's `solve_key_groups`): the
        hardware's keys first; with them fixed, every cell's placement keys count only the placements its
        fixed architecture allows (`compress`), so each solve packs more of them."""
        n_hw = self._n_hw = sum(not k.name.startswith("cell[") for k in self.keys)
        if self.hardware is not None:  # a few tuples are left: the first in key order that holds a design
            if not self.hardware_keys(self.keys[:n_hw]):
                return False
        elif not solve_key_groups(self, pack_keys(self.keys[:n_hw], MIX_PACK_LIMIT)):
            return False
        if self.narrow is not None and self.hardware is not None and len(self.hardware) == 1:
            compressed = self.compress(self.keys[n_hw:])  # on the whole model, whose literals they name
            self.mm = self.narrow(self.hardware[0])
            self._hint = None
            keys = mix_tie_keys(self.mm)
            self.keys[n_hw:] = translate_keys(compressed, self.full, self.mm)
            # its own hardware keys (constants there; the architecture indices are 0) fix nothing more
            self._narrow_hw = (keys[:n_hw], tie_key_values(self.mm, self.design, keys[:n_hw]))
        else:
            self.keys[n_hw:] = self.compress(self.keys[n_hw:])
        return solve_key_groups(self, pack_keys(self.keys[n_hw:], MIX_PACK_LIMIT))

    def hardware_keys(self, keys: Sequence[TieKey]) -> bool:
        """The hardware's keys (PIM units, devices, each model's architecture index: functions of the tuple)
        over the tuples left (`hardware`): in their key order, the first tuple on which a design attains
        every level so far, each tuple asked with the hardware fixed (one feasibility solve, none for the
        design so far's own tuple); the hardware is then fixed to it. False when a solve is not decided."""
        mm = self.mm
        own = tuple(md.arch for _, md in self.design[0].models())

        def value(h) -> list[int]:
            on = {v.index for v, val in mm.arch_literals(h) if val}
            return [sum(c for c, v in k.terms if v.index in on) for k in keys]

        left = list(self.hardware)
        for h in sorted(left, key=value):
            if h == own:
                break
            self.hardware = [h]
            model, _ = self.clone(self.rows)
            t0 = time.perf_counter()
            status, solver = self.run.run(model, None, None, first_solution=True,
                                          linearization=self.linearization(), one_worker=True)
            self._log(f"tie-break: hardware {', '.join(a.label() for a in h)}?", t0, solver.status_name(status))
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                self._adopt(mm.decode(solver.boolean_value), len(MIX_RATIO_LEVELS[self.objective]) - 1)
                break
            if status != cp_model.INFEASIBLE:
                self.hardware = left
                self.stop = (len(self.values), solver.status_name(status))
                self.note = f"the tie-break's hardware is not decided ({solver.status_name(status)}): not canonical"
                return False
        else:
            h = own
        self.hardware = [h]
        self.values += value(h)
        return True

    def compress(self, keys: list[TieKey]) -> list[TieKey]:
        """The cells' placement keys over the placements the (now fixed) architecture allows, in the same
        order: the same design is their lexicographic minimum, and their sizes shrink (about 5 instead of
        every architecture's placements)."""
        return compress_keys(self.mm, keys, [md.arch for _, md in self.design[0].models()])

    def model_keys(self) -> tuple[list[TieKey], list[int]]:
        """The keys and proven values in the terms of the model being solved (a narrowed model has its own
        hardware keys)."""
        if self._narrow_hw is None or self.mm is self.full:
            return self.keys, self.values
        keys, values = self._narrow_hw
        return keys + self.keys[len(keys):], values + self.values[len(keys):]

    def _solve_group(self, group: list[TieKey], first: int) -> bool:
        run, mm = self.run, self.mm
        model, _ = self.clone(self.rows)
        keys, values = self.model_keys()
        key_vars = mm.cells[0].add_tie_break(model, keys, values[:first], group)
        weight = [math.prod(k.size for k in group[i + 1:]) for i in range(len(group))]
        at_design = sum(w * v for w, v in zip(weight, tie_key_values(mm, self.design, group), strict=True))

        def packed(solver: cp_model.CpSolver) -> int:
            return sum(w * solver.value(v) for w, v in zip(weight, key_vars, strict=True))

        t0 = time.perf_counter()
        status, solver = run.run(model, None, self.full_hint(model), known_feasible=True,
                                 linearization=self.linearization(), one_worker=True,
                                 above=lambda s: packed(s) > at_design)
        name = solver.status_name(status)
        levels = ", ".join(dict.fromkeys(k.level for k in group))
        self._log(f"tie-break: {levels}", t0, name)
        if status in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID) or (
                status == cp_model.OPTIMAL and packed(solver) > at_design):
            self.note = ("CP-SAT contradicted the design so far (formulations/objectives.md, 'A CP-SAT 9.15 "
                         "fault'): the design is not canonical")
            self.stop = (first, "FAULT")
            return False
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) and packed(solver) < at_design:
            self._adopt(mm.decode(solver.boolean_value),
                        level_before(self.keys, first, len(MIX_RATIO_LEVELS[self.objective])))
            self._keep_hint(solver, model)
        if status != cp_model.OPTIMAL:
            self.stop = (first + len(group), name)
            self.note = f"the tie-break level {group[0].level} is not proven ({name}): the design is not canonical"
            return False
        self.values += [solver.value(v) for v in key_vars]
        return True

    def _keep_hint(self, solver: cp_model.CpSolver, model: cp_model.CpModel) -> None:
        """The solution a level found is the next levels' full hint: it satisfies every row they keep (its
        own level's at its minimum), so no solve is needed to complete the adopted design."""
        energy_rows = any(r.name == "energy" for r in self.rows)
        key = (energy_rows, *(val for _, val in self.mm.decision_literals(self.design)))
        self._hint = (key, [(i, solver.value(model.get_int_var_from_proto_index(i)))
                            for i in range(len(self.mm.m.proto.variables))])

    def _adopt(self, designs: list[Design], tied_level: int) -> None:
        """A later level found a better design: it attains every level up to `tied_level` as well."""
        self.run.metrics(designs)  # the tensor-copy rule holds (ScenarioError otherwise: a model defect)
        self.design = designs
        if tied_level >= 0:
            self.known.add(tied_level)

    def add_integer_entries(self) -> None:
        n_hw = self._n_hw or len(self.keys)
        values = (tie_key_values(self.full, self.design, self.keys[:n_hw])
                  + tie_key_values(self.mm, self.design, self.keys[n_hw:]))
        self.levels += [level for level, _ in integer_entries(self.keys, values, len(self.values), self.stop)]

    # -- ties ------------------------------------------------------------------------------------
    def another_design(self, level: int) -> bool | None:
        """Whether a mix design other than the canonical one attains levels 0..`level` (None: not known)."""
        run, mm = self.run, self.mm
        if run.budget.remaining() <= 0:
            return None
        n_ratio = len(MIX_RATIO_LEVELS[self.objective])
        rows = self.rows[:level + 1]
        model, _ = self.clone(rows)
        if level >= n_ratio:
            names = list(dict.fromkeys(k.level for k in self.keys))[:level - n_ratio + 1]
            n_keys = max(n for n, k in enumerate(self.keys) if k.level in names) + 1
            mm.cells[0].add_tie_break(model, self.keys, self.values[:n_keys])
        model.add_bool_or([~model.get_bool_var_from_proto_index(v.index)
                           for v, val in mm.decision_literals(self.design) if val])
        t0 = time.perf_counter()
        status, solver = run.run(model, None, mm.decision_literals(self.design), linearization=self.linearization(),
                                 one_worker=True)
        self._log(f"tie-break: another design at {self.levels[level].level}?", t0, solver.status_name(status))
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return True
        return False if status == cp_model.INFEASIBLE else None

    def find_ties(self) -> None:
        """Ties form a prefix: from the deepest level up, one feasibility solve each, until one finds
        another design or a known tie is reached (the order level has none: its keys fix every decision).
        Asked of the whole model, over every tuple that attains the primary level."""
        self.mm, self.hardware, self._hint = self.full, self._all_hardware, None
        last = len(self.levels) - 1
        self.levels[last].ties = False
        deepest = max(self.known, default=-1)
        for i in range(last - 1, deepest, -1):
            found = self.another_design(i)
            self.levels[i].ties = found
            if found:
                deepest = i
                break
            if found is None:
                break
        for i in range(deepest + 1):
            self.levels[i].ties = True
        untied = next((i for i in range(last + 1) if self.levels[i].ties is False), last)
        for lv in self.levels[untied:]:
            lv.ties = False

    def _log(self, stage: str, t0: float, status: str) -> None:
        self.run.stages.append(MixStage(stage, round(time.perf_counter() - t0, 3), status))

    def report(self) -> dict:
        return {"tie_break": [lv.as_dict() for lv in self.levels], "tie_break_scales": dict(self.scales),
                "canonical": self.note is None, **({"tie_break_note": self.note} if self.note else {})}


def canonical_mix(run, objective: str, design: list[Design], lows: Sequence[Fraction], own: Sequence[Fraction],
                  primary_value: int | None, primary_scale: int | None,
                  tried: Sequence[HardwareResult],
                  hardware: Sequence[tuple[ArchConfig, ...]] | None = None,
                  other_lows: Sequence[Fraction] | None = None,
                  leaves: Sequence | None = None, narrow=None) -> tuple[list[Design], dict]:
    """[MIX-13] The canonical mix optimum from a proven one (`design` attains the mix model's optimum
    `primary_value` at `primary_scale`), and the tie-break's report for the mix report's `extra`.
    `hardware`: the only tuples that attain the primary level (the decomposition's proof), or None;
    `other_lows`: per cell a lower bound of the other weighted metric on that hardware, or None; `leaves`:
    the decomposition's solved nodes that attain the primary level (MIX-19), or None; `narrow`: builds the
    mix model of one hardware tuple (`MixModel(..., archs=)`), for the cell levels, or None."""
    t0 = time.perf_counter()
    cano = MixCanonical(run, objective, design, lows, own)
    if hardware is not None:
        cano.hardware = list(hardware)
    cano._all_hardware = cano.hardware
    cano.narrow = narrow
    if other_lows is not None:
        cano.other_lows = list(other_lows)
    if leaves is not None:
        cano.leaves = list(leaves)
    proven = cano.ratio_levels(primary_value, primary_scale, tried) and cano.integer_levels()
    cano.add_integer_entries()
    if proven and cano.note is None:
        cano.find_ties()
    else:
        for lv in cano.levels[:max(cano.known, default=-1) + 1]:
            lv.ties = True
    metrics = run.metrics(cano.design)  # weighted levels: their exact values at the returned design
    units = {}
    for lv in cano.levels[:len(MIX_RATIO_LEVELS[objective])]:
        units[lv.level] = lv.value
        lv.value = mix_value(run.mm.mix, metrics, lv.level, own)
    out = cano.report()
    out["tie_break_units"] = units
    out["tie_break_cost"] = {"wall_s": round(time.perf_counter() - t0, 3)}
    return cano.design, out


def skipped_mix_tie_break(status: str, proven: bool = False) -> dict:
    """The report's tie-break fields when it did not run: the objective unproven (`status`), or (`proven`)
    proven but `status` says why the tie-break was skipped."""
    note = f"skipped: {status}" if proven else f"skipped: the mix objective is not proven optimal ({status})"
    return {"tie_break": [], "canonical": False, "tie_break_note": note}
