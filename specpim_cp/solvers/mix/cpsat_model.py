"""The CP-SAT model of a workload mix (formulations/mix.md has the mathematics).

One CP-SAT model, the deterministic equivalent of the two-stage problem: the architecture one-hots
x[j][a] are shared by every cell, and every cell has a full copy of the single-scenario model
(`SpecModel` built into the same CpModel with `shared_x`): placements, speculation choice, schedule,
passes, cycles, round time and energy. Per cell, tokens per round are a constant per speculation
choice, so the cell's latency (energy) per token is one exact integer ceiling per choice literal and
the weighted mean is linear: no Dinkelbach iterations are needed. Each cell's coefficients come from its
`PriceTable` (solvers/exact/prices.py), built once from its evaluator and read by the cell's copy and by
the mix's own rows (MIX-3/4).

Families (formulations/mix.md), one `add_*` method each:
MIX-1 add_shared_architecture, MIX-2 add_weight_copies, MIX-3/4 add_capacity,
MIX-5..7 add_cell_metric, MIX-8 add_weighted_objective, MIX-9 add_regret, MIX-10/11 add_arch_cuts,
MIX-12 add_hardware_nogoods, MIX-18 add_hardware_choice, MIX-19 add_leaf_choice. The driver is `cpsat.py`;
latency and regret mixes are solved by decomposition (`branch_bound.py`, MIX-14..17), this model then
serves the canonical tie-break and the verification.
"""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator, Metrics
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.problem.mix import KV_OPS, WEIGHT_OPS, Mix
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.deadline import Deadline, check
from specpim_cp.solvers.exact.model import SpecModel, add_ceil, ub
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.mix.arch_bounds import ArchBounds, units

#: Resolutions tried for the per-cell metric units, finest first: L_c = ceil(metric x S / 10^6), so
#: S = 10^9 counts picoseconds (picojoules) per token; a coarser S only when 64-bit rows need it.
SCALES = tuple(10 ** e for e in range(9, 2, -1))
#: Largest term or sum a mix row may reach: 2^53, not CP-SAT's 2^62 (`solve.INT_LIMIT`), leaving 2^9 of
#: headroom for products CP-SAT forms internally (coefficient x a variable's bound): 9.15 answers
#: INFEASIBLE for feasible models where such a product wraps past 2^63 (formulations/objectives.md).
ROW_LIMIT = 2 ** 53
#: Regret resolution: R = ceil(max_c L_c / O_c x REGRET_SCALE).
REGRET_SCALE = 10 ** 6

# ------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectivePlan:
    """Integer units of one objective model: the scale, per cell the metric domain [lo, hi] and the cap of
    the metric's numerator variable (round ns or nJ), and for regret the cells' optima in units."""

    scale: int
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    num_cap: tuple[int, ...]
    opt_units: tuple[int, ...] = ()
    r_hi: int = 0


class MixModel:
    """The mix's CP-SAT base model (cells on shared architecture one-hots, weight copies, capacity);
    objective rows are added to clones (`objective_model`). `prices[c]`: cell c's price table (built once
    from `evaluators[c]`; its model copy and the mix's rows read only it)."""

    def __init__(self, mix: Mix, catalog: Catalog, evaluators: Sequence[Evaluator],
                 archs: Sequence[ArchConfig] | None = None, deadline: Deadline | None = None):
        """`archs`: one architecture per model, the model of that fixed hardware only (the canonical
        tie-break's cell levels once its hardware is known); None: every architecture of the space.
        `deadline`: the command's; building stops between cells once it has passed (`TimeLimitReached`)."""
        self.mix = mix
        self.catalog = catalog
        self.evaluators = list(evaluators)
        self.m = cp_model.CpModel()
        self.prices: list[PriceTable] = []
        self.cells: list[SpecModel] = []
        for c, cell in enumerate(mix.cells):
            check(deadline, f"building the mix model, cell {c + 1} of {len(mix.cells)}")
            shared = None if c == 0 else self.cells[0].x
            space = DesignSpace(cell.scenario, catalog)
            if archs is not None:
                space = space.with_archs(archs)
            self.prices.append(PriceTable.build(self.evaluators[c], space))
            self.cells.append(SpecModel(cell.scenario, catalog, self.evaluators[c], model=self.m,
                                        shared_x=shared, tag=f"#c{c}", capacity=False, prices=self.prices[c]))
        self.x = self.cells[0].x
        self.weights = mix.integer_weights()
        self.bounds: ArchBounds | None = None  # MIX-10/11 constants, when set
        self.add_shared_architecture()
        self.add_weight_copies()
        self.add_capacity()

    # -- families ------------------------------------------------------------------------------
    def add_shared_architecture(self) -> None:
        """[MIX] MIX-1 one architecture per model for the whole mix: every cell's copy is built on the first
        cell's one-hots x[j][a] (ARCH-1, ARCH-2 once); the cells' assumption literals are switched on."""
        first = self.cells[0].data
        for c, sm in enumerate(self.cells):
            if [d.archs for d in sm.data] != [d.archs for d in first]:
                raise ScenarioError(f"mix.cells[{c}]: its architecture options differ from cell 0's (a mix shares "
                                    "the hardware, so every cell must offer the same architectures)")
            for lit in sm.assumption_families.values():
                self.m.add(lit == 1)

    def add_weight_copies(self) -> None:
        """[MIX] MIX-2 u[j][o][l] = OR over cells of `layout_literal` (model j keeps a copy of operator o's
        weights in layout l iff some cell places o with layout l); exact, by a max equality."""
        m = self.m
        self.u: list[dict[str, dict[str, cp_model.IntVar]]] = []
        for j in range(len(self.x)):
            per_op = {}
            for op in WEIGHT_OPS:
                layouts = sorted({p.layout for sm in self.cells for p in sm.y[j][op]})
                per_op[op] = {}
                for lay in layouts:
                    v = m.new_bool_var(f"copy[{j}][{op}]={lay}")
                    m.add_max_equality(v, [sm.layout_literal(j, op, lay) for sm in self.cells])
                    per_op[op][lay] = v
            self.u.append(per_op)

    def add_capacity(self) -> None:
        """[MIX] per cell c, model j and architecture a (enforced on x[j][a]): MIX-3 the PIM units hold every
        weight copy (and an untied embedding beside each LM-head copy) + cell c's KV cache by its own
        layouts + its draft2 model; MIX-4 the normal units likewise. Coefficients from the cell's price
        table (`Evaluator.capacity_table`'s `tensor_split`: an LM-head copy carries the untied embedding;
        `Evaluator.draft2_split`), as `mix.mix_capacity` counts them."""
        m = self.m
        for c, sm in enumerate(self.cells):
            for j in range(len(sm.data)):
                pm = self.prices[c].models[j]
                for a, xa in self.x[j].items():
                    pim, normal = [], []
                    for op in PLACEABLE_OPS:
                        if op in WEIGHT_OPS:
                            for lay, u in self.u[j][op].items():
                                pk, nk = pm.tensor_kib[(a, op, lay)]
                                pim.append(pk * u)
                                normal.append(nk * u)
                        else:
                            assert op in KV_OPS
                            for lay in sorted({p.layout for p in sm.y[j][op]}):
                                lit = sm.layout_literal(j, op, lay)
                                pk, nk = pm.tensor_kib[(a, op, lay)]
                                pim.append(pk * lit)
                                normal.append(nk * lit)
                    if j > 0:
                        for st, lit in sm.stage_lit[j - 1].items():
                            if st is None:
                                continue
                            split = pm.draft2_kib[(a, st.draft2)]  # (0, 0) for an n-gram model
                            if split is None:  # CYC-2 excludes this (architecture, staging) pair
                                continue
                            pim.append(split[0] * lit)
                            normal.append(split[1] * lit)
                    pim_cap, normal_cap = pm.capacity_kib[a]
                    m.add(sum(pim) <= pim_cap).only_enforce_if(xa)        # MIX-3
                    m.add(sum(normal) <= normal_cap).only_enforce_if(xa)  # MIX-4

    def add_cell_metric(self, model: cp_model.CpModel, c: int, kind: str, plan: ObjectivePlan) -> cp_model.IntVar:
        """[MIX] cell c's metric per token in units of 10^6/S ns (nJ), exact per choice literal z_k:
        MIX-5 latency L_c = ceil(T_c S / tok_k); MIX-6 energy N_c = ceil(E_c S / (tok_k b_c)) (both by
        `add_ceil`, on a copy of T_c or E_c capped at what the incumbent allows); MIX-7 L_c (N_c) >= the
        cell's own optimum, or its proven bound, in the same units (a valid cut)."""
        sm = self.cells[c]
        num = sm.T if kind == "latency" else sm.energy
        capped = model.new_int_var(0, min(ub(num), plan.num_cap[c]), f"{'T' if kind == 'latency' else 'E'}cap#c{c}")
        model.add(capped == model.get_int_var_from_proto_index(num.index))
        var = model.new_int_var(0, plan.hi[c], f"{'L' if kind == 'latency' else 'N'}#c{c}")
        mult = 1 if kind == "latency" else sm.scenario.batch_size
        for st, z in zip(sm.stats, sm.z):
            add_ceil(model, var, plan.scale * capped, st.tokens_micro * mult, model.get_bool_var_from_proto_index(z.index))
        model.add(var >= plan.lo[c])  # MIX-7
        return var

    def add_weighted_objective(self, model: cp_model.CpModel, metric: Sequence[cp_model.IntVar],
                               plan: ObjectivePlan) -> cp_model.IntVar:
        """[MIX] MIX-8 the weighted sum sum_c W_c L_c (N_c) with the user's weights scaled exactly to coprime
        integers W_c; minimised, it is the weighted mean up to the rounding bound of MIX-5/6."""
        hi = sum(w * h for w, h in zip(self.weights, plan.hi, strict=True))
        obj = model.new_int_var(0, hi, "mix_objective")
        model.add(obj == sum(w * v for w, v in zip(self.weights, metric, strict=True)))
        return obj

    def add_regret(self, model: cp_model.CpModel, latency: Sequence[cp_model.IntVar], plan: ObjectivePlan) -> cp_model.IntVar:
        """[MIX] MIX-9 worst-case regret: R O_c >= REGRET_SCALE L_c for every cell, O_c the cell's own optimum
        in L units (a constant, ceil(opt_c S / 10^6)); minimised, R = ceil(REGRET_SCALE max_c L_c / O_c)."""
        r = model.new_int_var(0, plan.r_hi, "regret")
        for o, v in zip(plan.opt_units, latency, strict=True):
            model.add(o * r >= REGRET_SCALE * v)
        return r

    def add_arch_cuts(self, model: cp_model.CpModel, metric: Sequence[cp_model.IntVar], plan: ObjectivePlan,
                      bounds: ArchBounds | None = None) -> None:
        """[MIX] valid cuts from per-architecture bounds (`mix_bounds.ArchBounds`: CUT-1's pass bounds through
        the round arithmetic, other models at their best): MIX-10 per cell and model j,
        L_c >= sum_a B_c(j, a) x[j][a]; MIX-11 per cell and drafter i, L_c >= sum B_c(a0, ai) p_i[a0][ai] over
        pair literals p_i (p_i[a0][ai] = x[0][a0] and x[i][ai], linked by row and column sums). `bounds`: of
        the metric's kind (default `self.bounds`, the objective's)."""
        bounds = bounds or self.bounds
        assert bounds is not None
        xs = [{a: model.get_bool_var_from_proto_index(v.index) for a, v in per.items()} for per in self.x]
        archs = [list(per) for per in xs]
        pairs = []
        for i in range(1, len(xs)):
            p = {(a0, ai): model.new_bool_var(f"pair[{i}][{a0.label()}][{ai.label()}]")
                 for a0 in archs[0] for ai in archs[i]}
            for a0 in archs[0]:
                model.add(sum(p[(a0, ai)] for ai in archs[i]) == xs[0][a0])
            for ai in archs[i]:
                model.add(sum(p[(a0, ai)] for a0 in archs[0]) == xs[i][ai])
            pairs.append(p)
        for c, var in enumerate(metric):
            for j, per in enumerate(xs):  # MIX-10
                sep = bounds.separable[c][j]
                model.add(var >= sum(units(sep[k], plan.scale) * per[a] for k, a in enumerate(archs[j])))
            for i, p in enumerate(pairs, start=1):  # MIX-11
                pair = bounds.pairwise[c][i - 1]
                model.add(var >= sum(units(pair[k0, ki], plan.scale) * p[(a0, ai)]
                                     for k0, a0 in enumerate(archs[0]) for ki, ai in enumerate(archs[i])))

    def add_hardware_nogoods(self, model: cp_model.CpModel, hardware: Sequence[Sequence[ArchConfig]]) -> None:
        """[MIX] MIX-12 a hardware on which the driver solved every cell's dataflow to proven optimality, with a
        mix objective no better than the incumbent's, is excluded: sum_j x[j][a_j] <= n_models - 1 (the
        reported bound is then the smaller of CP-SAT's and those hardwares' exact values)."""
        for archs in hardware:
            model.add(sum(model.get_bool_var_from_proto_index(self.x[j][a].index) for j, a in enumerate(archs))
                      <= len(archs) - 1)

    def add_hardware_choice(self, model: cp_model.CpModel, hardware: Sequence[Sequence[ArchConfig]]) -> None:
        """[MIX] MIX-18 the shared hardware is one of `hardware` (the tuples the decomposition proved can
        attain a level, the decomposition's search): one Boolean per tuple, exactly one true, and each architecture literal
        the sum of the tuples that use it (the equality also excludes every other tuple)."""
        xs = [{a: model.get_bool_var_from_proto_index(v.index) for a, v in per.items()} for per in self.x]
        if len(hardware) == 1:
            for j, a in enumerate(hardware[0]):
                model.add(xs[j][a] == 1)
            return
        pick = [model.new_bool_var(f"hardware[{n}]") for n in range(len(hardware))]
        model.add_exactly_one(pick)
        for j, per in enumerate(xs):
            for a, x in per.items():
                model.add(x == sum(p for p, h in zip(pick, hardware, strict=True) if h[j] == a))

    def add_leaf_choice(self, model: cp_model.CpModel, leaves: Sequence, metric: Sequence[cp_model.IntVar]) -> None:
        """[MIX] MIX-19 the mix design lies in one of `leaves` (the solved nodes of the decomposition that
        attain a level, the decomposition's search: hardware, per model the state of each weight copy, each
        cell's metric in
        the level's units): one Boolean per leaf, exactly one true; it fixes the hardware, its stored
        (banned) copies to 1 (0), and each cell's metric `metric[c]` to the leaf's. Every design attaining
        the level lies in such a leaf with exactly those cell metrics (formulations/mix.md)."""
        from specpim_cp.solvers.mix.pass_tables import LAYOUTS

        pick = [model.new_bool_var(f"leaf[{n}]") for n in range(len(leaves))]
        model.add_exactly_one(pick)
        xs = [{a: model.get_bool_var_from_proto_index(v.index) for a, v in per.items()} for per in self.x]
        for j, per in enumerate(xs):
            for a, x in per.items():
                model.add(x == sum(p for p, leaf in zip(pick, leaves, strict=True) if leaf.archs[j] == a))
        for p, leaf in zip(pick, leaves, strict=True):
            for j, states in enumerate(leaf.copies):
                for (w, lay), state in states.items():
                    u = self.u[j][WEIGHT_OPS[w]].get(LAYOUTS[lay])
                    if u is None or state not in (0, 1):  # open, or a layout no cell can place
                        continue
                    model.add(model.get_bool_var_from_proto_index(u.index) == state).only_enforce_if(p)
        for c, var in enumerate(metric):
            model.add(var == sum(leaf.latency[c] * p for p, leaf in zip(pick, leaves, strict=True)))

    # -- objective models ----------------------------------------------------------------------
    def plan(self, kind: str, incumbent: Sequence[Metrics], lows: Sequence[Fraction],
             optima: Sequence[Fraction] | None, regret_stage2: bool = False) -> ObjectivePlan:
        """Units and caps: the finest scale whose rows stay in int64 (CP-SAT's overflow rule), with every
        cell's metric capped at the largest value a design no worse than the incumbent can have (regret
        stage 2: no worse in regret and in the weighted sum)."""
        for scale in SCALES:
            p = self._plan_at(scale, kind, incumbent, lows, optima, regret_stage2)
            if p is not None:
                return p
        raise ScenarioError("mix too large for the exact model's 64-bit integer rows (kept below "
                            f"2^53 = {ROW_LIMIT:.3g} so CP-SAT's internal products stay in int64, "
                            "formulations/mix.md): fewer cells, smaller weight ratios or shorter contexts")

    def _plan_at(self, scale: int, kind: str, incumbent: Sequence[Metrics], lows: Sequence[Fraction],
                 optima: Sequence[Fraction] | None, regret_stage2: bool) -> ObjectivePlan | None:
        w = self.weights
        mult = [1 if kind == "latency" else sm.scenario.batch_size for sm in self.cells]
        inc = [cell_units(m, kind, scale) for m in incumbent]
        lo = [min(ceil_div(lb * scale, 10 ** 6), u) for lb, u in zip(lows, inc, strict=True)]
        opt_units: tuple[int, ...] = ()
        r_hi = 0
        if optima is not None:  # regret: the incumbent's regret caps every cell
            opt_units = tuple(max(1, ceil_div(o * scale, 10 ** 6)) for o in optima)
            r_hi = max(ceil_div(u * REGRET_SCALE, o) for u, o in zip(inc, opt_units, strict=True))
            hi = [r_hi * o // REGRET_SCALE for o in opt_units]
            if regret_stage2:  # also no worse than the incumbent's weighted sum
                v_inc = sum(wc * u for wc, u in zip(w, inc, strict=True))
                rest = sum(wc * lc for wc, lc in zip(w, lo, strict=True))
                hi = [min(h, (v_inc - rest + wc * lc) // wc) for h, wc, lc in zip(hi, w, lo, strict=True)]
        else:
            v_inc = sum(wc * u for wc, u in zip(w, inc, strict=True))
            rest = sum(wc * lc for wc, lc in zip(w, lo, strict=True))
            hi = [(v_inc - rest + wc * lc) // wc for wc, lc in zip(w, lo, strict=True)]
        hi = [max(h, lc) for h, lc in zip(hi, lo, strict=True)]
        tok_max = [max(st.tokens_micro for st in sm.stats) for sm in self.cells]
        num_cap = [h * t * k // scale for h, t, k in zip(hi, tok_max, mult, strict=True)]
        for c, sm in enumerate(self.cells):
            num = sm.T if kind == "latency" else sm.energy
            cap = min(ub(num), num_cap[c])
            if max(hi[c] * tok_max[c] * mult[c] + tok_max[c] * mult[c], scale * cap) > ROW_LIMIT:
                return None
            if opt_units and max(opt_units[c] * r_hi, REGRET_SCALE * hi[c]) > ROW_LIMIT:
                return None
        if sum(wc * h for wc, h in zip(w, hi, strict=True)) > ROW_LIMIT:
            return None
        return ObjectivePlan(scale, tuple(lo), tuple(hi), tuple(num_cap), opt_units, r_hi)

    def objective_model(self, objective: str, plan: ObjectivePlan, regret_stage2: bool = False
                        ) -> tuple[cp_model.CpModel, cp_model.IntVar, list[cp_model.IntVar]]:
        """A clone with the objective's rows: (model, objective variable, per-cell metric variables)."""
        kind = "energy" if objective == "energy" else "latency"
        model = self.m.clone()
        if kind == "latency":  # no latency row reads an energy: drop the rows that only define them (their
            for sm in self.cells:  # large coefficients are where CP-SAT 9.15's fault lives, objectives.md)
                sm.drop_energy_rows(model)
        metric = [self.add_cell_metric(model, c, kind, plan) for c in range(len(self.cells))]
        if self.bounds is not None:
            self.add_arch_cuts(model, metric, plan)
        if objective == "regret":
            r = self.add_regret(model, metric, plan)
            if not regret_stage2:
                return model, r, metric
        return model, self.add_weighted_objective(model, metric, plan), metric

    # -- designs -------------------------------------------------------------------------------
    def decode(self, value) -> list[Design]:
        return [sm.decode(value) for sm in self.cells]

    def decision_literals(self, designs: Sequence[Design]) -> list[tuple[cp_model.IntVar, int]]:
        """(variable, value) of every decision Boolean of every cell (shared x once)."""
        out: dict[int, tuple[cp_model.IntVar, int]] = {}
        for c, (sm, d) in enumerate(zip(self.cells, designs, strict=True)):
            try:
                lits = sm.decision_literals(d)
            except ScenarioError as exc:
                raise ScenarioError(f"mix.cells[{c}]: {exc}") from None
            for v, val in lits:
                out.setdefault(v.index, (v, val))
        return list(out.values())

    def arch_literals(self, archs: Sequence[ArchConfig]) -> list[tuple[cp_model.IntVar, int]]:
        return [(v, int(a == archs[j])) for j, xs in enumerate(self.x) for a, v in xs.items()]


def ceil_div(num, den) -> int:
    """ceil(num / den) for integers or Fractions."""
    q = Fraction(num) / Fraction(den)
    return -(-q.numerator // q.denominator)


def cell_units(m: Metrics, kind: str, scale: int) -> int:
    """A cell metric in the model's units: ceil(T S / tok) or ceil(E S / (tok b)) (MIX-5/6)."""
    if kind == "latency":
        return ceil_div(m.round_time_ns * scale, m.tokens_per_round_micro)
    return ceil_div(m.energy_nj_per_round * scale, m.tokens_per_round_micro * m.batch_size)
