"""[MIX-13] The canonical latency mix optimum cell by cell, where the hardware that attains it decomposes
(formulations/mix.md, "Cell by cell").

Every design that attains the least latency (in the mix model's units) lies in one of the decomposition's
tied leaves, with every cell's latency the leaf's (MIX-19). Per *variant* (a tuple and the cells' latencies
of one of its leaves) the level's designs are the combinations of each cell's designs at its latency there
that fit together under the tensor-copy rule. Charging each cell only its own copies relaxes that, and the
relaxation is tight where its cells' designs fit together, or where they always do (every weight copy every
model can store fits beside every cell's largest KV cache and draft2 model: `copies_never_bind`). Then
MIX-13's levels split into one-cell problems, each a small CP-SAT model of one cell on one hardware
(`MixModel` of a one-cell mix, `archs=`, its capacity the cell's own):

- the weighted energy of a variant is (at least) the sum of each cell's least energy at its pinned latency,
  and the energy level is the least over the variants, decided when every variant at or below it is tight;
- the hardware keys (PIM units, devices, the architectures' indices) are functions of the tuple: the least
  among the variants of least energy;
- the cells' keys in the mix's order are each cell's own lexicographic minimum with its latency and energy
  pinned, where the chosen variant's designs always fit together;
- a level ties when another variant attains it, or a cell has another design at its pinned values.
Where any of this does not hold, `CellwiseCanonical.solve` answers None and the whole mix model settles
the levels (canonical.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

from ortools.sat.python import cp_model

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.mix import mix_value
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.solvers.exact.canonical import TieLevel, pack_keys
from specpim_cp.solvers.exact.guards import ModelMismatch
from specpim_cp.solvers.exact.ladder import ENERGY_LINEARIZATION
from specpim_cp.solvers.mix.canonical import MIX_PACK_LIMIT, mix_tie_keys, translate_keys
from specpim_cp.solvers.mix.cpsat_model import MixModel, ObjectivePlan, cell_units
from specpim_cp.solvers.mix.records import MixStage

#: Most seconds (deterministic units with --deterministic) one one-cell solve may take; the first that does
#: not finish hands the levels to the whole mix model.
CELL_SOLVE_LIMIT = 1.0


def one_cell_plan(plan: ObjectivePlan, c: int) -> ObjectivePlan:
    """Cell c's part of a plan (its units, floor, cap and numerator cap), for a one-cell model."""
    return ObjectivePlan(plan.scale, (plan.lo[c],), (plan.hi[c],), (plan.num_cap[c],))


class CellwiseCanonical:
    """MIX-13's levels of a latency mix over the variants of `leaves` (the solved nodes that attain the
    latency level `value` in the units of `latency_plan`), one cell at a time (see the module docstring)."""

    def __init__(self, run, mm: MixModel, leaves: Sequence, latency_plan: ObjectivePlan, value: int,
                 energy_plan: ObjectivePlan, never_binds):
        """`never_binds(h)`: whether the tensor-copy rule binds no design on tuple h."""
        self.run, self.mm = run, mm
        self.never_binds = never_binds
        #: variant (tuple, cells' latencies) -> a mix design of it (its first leaf's), in the order they came
        self.variants: dict = {}
        for leaf in leaves:
            self.variants.setdefault((leaf.archs, tuple(leaf.latency)), leaf.designs)
        self.latency_plan, self.value, self.energy_plan = latency_plan, value, energy_plan
        self.n = len(mm.cells)
        self._models: dict[tuple, MixModel] = {}
        self.solves = 0
        self.unsure = False  # a variant not settled exactly may tie the energy level

    # -- one-cell models --------------------------------------------------------------------------
    def model(self, c: int, h: tuple[ArchConfig, ...]) -> MixModel:
        key = (c, h)
        if key not in self._models:
            mix = self.mm.mix
            self._models[key] = MixModel(replace(mix, cells=(mix.cells[c],)), self.mm.catalog,
                                         [self.mm.evaluators[c]], archs=h)
        return self._models[key]

    def pinned(self, c: int, variant, energy_cap: int | None) -> tuple[MixModel, cp_model.CpModel, cp_model.IntVar]:
        """Cell c's model on the variant's tuple with its latency pinned to the variant's (and its energy at
        most `energy_cap`), and its energy variable in the energy plan's units."""
        h, latency = variant
        small = self.model(c, h)
        model = small.m.clone()
        lat = small.add_cell_metric(model, 0, "latency", one_cell_plan(self.latency_plan, c))
        model.add(lat == latency[c])
        en = small.add_cell_metric(model, 0, "energy", one_cell_plan(self.energy_plan, c))
        if energy_cap is not None:
            model.add(en <= energy_cap)
        return small, model, en

    def _solve(self, model: cp_model.CpModel, objective, hint, stop_first: bool = False):
        self.solves += 1
        return self.run.run(model, objective, hint, first_solution=stop_first, linearization=ENERGY_LINEARIZATION,
                            one_worker=True, limit=CELL_SOLVE_LIMIT)

    # -- levels -----------------------------------------------------------------------------------
    def least_energy(self, variant, known: Sequence[Design] | None) -> tuple[int | None, list[int], list[Design]] | None:
        """Each cell's least energy in a variant at its pinned latency (units), their weighted sum and
        designs; (None, ...) when some cell has none under the plan's caps (no design there beats the
        design so far); None when a solve is not decided. `known`: a design of the variant (its cells are
        hints, and a cell that has none contradicts it)."""
        return self.least_energies([(variant, known)])[0]

    def least_energies(self, asks) -> list:
        """`least_energy` of every (variant, known) of `asks`, one after another (CP-SAT's one-cell solves
        gain nothing from two threads)."""

        def one(task):
            (variant, known), c = task
            small, model, en = self.pinned(c, variant, None)
            start = known if known is not None else self.variants[variant]
            hint = small.decision_literals([start[c]]) if start else None
            status, solver = self._solve(model, en, hint)
            if status != cp_model.OPTIMAL:
                return status, None, None
            return status, solver.value(en), small.decode(solver.boolean_value)[0]

        answers = []
        for ask in asks:
            for c in range(self.n):
                answers.append(one((ask, c)))
                if answers[-1][0] not in (cp_model.OPTIMAL, cp_model.INFEASIBLE):
                    return [None] * len(asks)  # not decided in time: give up at once
        out = []
        for a, (_, known) in enumerate(asks):
            cells = answers[a * self.n:(a + 1) * self.n]
            if any(st == cp_model.INFEASIBLE for st, _, _ in cells) and known is None:
                out.append((None, [], []))
            elif any(st != cp_model.OPTIMAL for st, _, _ in cells):
                out.append(None)
            else:
                values = [v for _, v, _ in cells]
                out.append((sum(w * v for w, v in zip(self.mm.weights, values, strict=True)), values,
                            [d for _, _, d in cells]))
        return out

    def another(self, variant, c: int, design: Design, energy: int | None) -> bool | None:
        """Whether cell c has in the variant a design other than `design` at its pinned latency (and energy)."""
        small, model, _ = self.pinned(c, variant, energy)
        model.add_bool_or([~model.get_bool_var_from_proto_index(v.index)
                           for v, val in small.decision_literals([design]) if val])
        status, _ = self._solve(model, None, None, stop_first=True)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return True
        return False if status == cp_model.INFEASIBLE else None

    def cell_keys(self, c: int, variant, energy: int, design: Design, keys_full) -> tuple[list[int], Design] | None:
        """Cell c's keys in the variant, lexicographically least at its pinned latency and energy (packed
        solves, each hinted by the design so far), and the design attaining them; None when a solve is not
        decided."""
        small = self.model(c, variant[0])
        keys = translate_keys(keys_full, self.mm, small, cells=[c])
        values: list[int] = []
        for group in pack_keys(keys, MIX_PACK_LIMIT):
            if all(k.size == 1 for k in group):
                values += [0] * len(group)
                continue
            _, model, _ = self.pinned(c, variant, energy)
            key_vars = small.cells[0].add_tie_break(model, keys, values, group)
            weight = [math.prod(k.size for k in group[i + 1:]) for i in range(len(group))]
            at_design = sum(w * v for w, v in zip(weight, small.cells[0].tie_key_values(design, group), strict=True))
            status, solver = self._solve(model, None, small.decision_literals([design]))
            if status != cp_model.OPTIMAL:
                return None
            packed = sum(w * solver.value(v) for w, v in zip(weight, key_vars, strict=True))
            if packed > at_design:
                raise ModelMismatch(f"mix.cells[{c}]: CP-SAT contradicted the design so far at its keys")
            if packed < at_design:
                design = small.decode(solver.boolean_value)[0]
            values += [solver.value(v) for v in key_vars]
        return values, design

    # -- the whole tie-break ----------------------------------------------------------------------
    def solve(self, design: list[Design], keys_cells) -> tuple[list[Design], dict] | None:
        """MIX-13 from a design that attains the latency level; `keys_cells(c, h)`: cell c's keys of the
        whole model compressed to hardware h (the fixed order). Returns the canonical design and the report's
        entries, or None where the cells do not decompose (see the module docstring)."""
        t0 = time.perf_counter()
        mm = self.mm
        hw_keys = [k for k in mix_tie_keys(mm) if not k.name.startswith("cell[")]

        def hw_value(h) -> list[int]:
            on = {v.index for v, val in mm.arch_literals(h) if val}
            return [sum(c for c, v in k.terms if v.index in on) for k in hw_keys]

        def order(v) -> tuple:
            return hw_value(v[0]), v[1]

        own = (tuple(md.arch for _, md in design[0].models()),
               tuple(cell_units(m, "latency", self.latency_plan.scale) for m in self.run.metrics(design)))
        energies, tight = {}, {}
        variants = sorted(self.variants, key=order)
        for variant, got in zip(variants, self.least_energies([(v, design if v == own else None) for v in variants]),
                                strict=True):
            if got is None:
                return None  # a one-cell solve not decided in time: the whole mix model settles the levels
            energies[variant] = got
            tight[variant] = got[0] is not None and (self.never_binds(variant[0]) or self._fit(got[2]))
        exact = [v for v in energies if tight[v]]
        if not exact:
            return None
        v_e = min(energies[v][0] for v in exact)
        least = [v for v in exact if energies[v][0] == v_e]
        variant = min(least, key=order)
        relaxed = [v for v in energies if not tight[v] and energies[v][0] is not None and energies[v][0] <= v_e]
        if any(energies[v][0] < v_e or hw_value(v[0]) < hw_value(variant[0]) for v in relaxed):
            return None  # a relaxed variant could go below the level or come first: the whole model decides
        self.unsure = bool(relaxed)  # variants that may tie the level, not settled
        h = variant[0]
        if not self.never_binds(h):
            return None  # its cells' keys would not be independent
        self._log(f"tie-break: energy per cell in {len(self.variants)} variant(s) ({self.solves} one-cell solves)", t0)
        _, n_e, designs = energies[variant]
        values = []
        t1 = time.perf_counter()
        for c in range(self.n):
            got = self.cell_keys(c, variant, n_e[c], designs[c], keys_cells(c, h))
            if got is None:
                return designs, self._unproven(f"cell {c}'s order", t0)
            values += got[0]
            designs[c] = got[1]
        self._log(f"tie-break: order per cell on {', '.join(a.label() for a in h)}", t1)
        metrics = self.run.metrics(designs)  # the tensor-copy rule holds (ScenarioError otherwise: a defect)
        if weighted_units(mm, metrics, "latency", self.latency_plan.scale) != self.value or \
                weighted_units(mm, metrics, "energy", self.energy_plan.scale) != v_e:
            raise ModelMismatch("the cell-by-cell tie-break's design does not price at its levels")
        ties = self._ties(variant, least, hw_value, designs, n_e)
        hw = hw_value(h)
        order = hw[2:] + values
        levels = [TieLevel("latency", mix_value(mm.mix, metrics, "latency"), "OPTIMAL", ties[0]),
                  TieLevel("energy", mix_value(mm.mix, metrics, "energy"), "OPTIMAL", ties[1]),
                  TieLevel("pim_units", hw[0], "OPTIMAL", ties[2]), TieLevel("devices", hw[1], "OPTIMAL", ties[3]),
                  TieLevel("order", order, "OPTIMAL", False)]
        return designs, {"tie_break": [lv.as_dict() for lv in levels],
                         "tie_break_scales": {"latency": self.latency_plan.scale, "energy": self.energy_plan.scale},
                         "canonical": True, "tie_break_units": {"latency": self.value, "energy": v_e},
                         "tie_break_cost": {"wall_s": round(time.perf_counter() - t0, 3),
                                            "one_cell_solves": self.solves}}

    def _ties(self, variant, least, hw_value, designs, n_e) -> list[bool | None]:
        """Ties at (latency, energy, PIM units, devices), a prefix: another tight variant at the levels so far
        (the same tuple counts: another variant there holds other designs), or a cell with another design at
        its pinned values on the chosen variant's tuple, where designs always fit (deepest level first). A
        relaxed variant (not tight) at the latency level leaves that level's tie unknown unless found."""
        hw = hw_value(variant[0])
        others = [v for v in least if v != variant]
        dev = any(hw_value(v[0])[:2] == hw[:2] for v in others) or self._any_cell(variant, designs, n_e)
        if dev:
            return [True, True, True, True]
        pim = any(hw_value(v[0])[0] == hw[0] for v in others)
        energy = pim or bool(others) or (None if self.unsure else False)
        if energy:
            return [True, True, pim, False]
        latency = len(self.variants) > 1 or self._any_cell(variant, designs, None)
        return [latency, energy, False, False]

    def _fit(self, designs: Sequence[Design]) -> bool:
        """Whether these cells' designs fit together under the tensor-copy rule."""
        try:
            self.run.metrics(designs)
        except ScenarioError:
            return False
        return True

    def _any_cell(self, variant, designs, energy) -> bool | None:
        unknown = False
        for c in range(self.n):
            found = self.another(variant, c, designs[c], None if energy is None else energy[c])
            if found:
                return True
            unknown = unknown or found is None
        return None if unknown else False

    def _unproven(self, what: str, t0: float) -> dict:
        self._log(f"tie-break: {what} not decided", t0, "UNKNOWN")
        return {"tie_break": [], "canonical": False,
                "tie_break_note": f"{what} of the tie-break is not proven within the time limit: not canonical"}

    def _log(self, stage: str, t0: float, status: str = "OPTIMAL") -> None:
        self.run.stages.append(MixStage(stage, round(time.perf_counter() - t0, 3), status))


def weighted_units(mm: MixModel, metrics, kind: str, scale: int) -> int:
    """sum_c W_c x cell c's metric in the model's units (MIX-5/6)."""
    return sum(w * cell_units(m, kind, scale) for w, m in zip(mm.weights, metrics, strict=True))


__all__ = ["CellwiseCanonical", "one_cell_plan", "weighted_units"]
