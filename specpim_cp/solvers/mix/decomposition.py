"""The latency and regret optimum of a workload mix by decomposition (formulations/mix.md, "The
decomposition", MIX-14..18): pass tables, a bound for every shared hardware tuple, a best-first branch
and bound over the hardware tuples and the weight copies, then the canonical optimum among the designs of
least objective (MIX-13, on the CP-SAT mix model restricted to the hardware that attains it), every
claim verified against the evaluator.

`solve_mix` (solve.py) calls `solve_decomposed` for the latency and regret objectives; the energy
objective keeps the CP-SAT mix model (its cells' energies depend on the round time through idle power,
so a model's least pass time is not its best choice there).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.mix import check_mix_capacity, mix_value
from specpim_cp.problem.design import Design
from specpim_cp.problem.mix import Mix, median_cell
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.exact.guards import ModelMismatch
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.mix import comparisons as mix_compare
from specpim_cp.solvers.mix.arch_bounds import ArchBounds
from specpim_cp.solvers.mix.branch_bound import (
    BANNED,
    Goal,
    Search,
    Solved,
    best_first,
    open_copies,
    root_tuples,
)
from specpim_cp.solvers.mix.canonical import canonical_mix, compress_keys, mix_tie_keys, skipped_mix_tie_break
from specpim_cp.solvers.mix.canonical_cells import CellwiseCanonical
from specpim_cp.solvers.mix.cpsat_model import REGRET_SCALE, MixModel, ObjectivePlan
from specpim_cp.solvers.mix.pass_tables import MixTables
from specpim_cp.solvers.mix.records import (
    Comparison,
    HardwareResult,
    HowFound,
    MixOptions,
    MixReport,
    MixResult,
    MixSolveLog,
    MixStage,
)
from specpim_cp.solvers.mix.session import MixRun, Phases, unchecked_claims, verify_mix
from specpim_cp.solvers.result import SolveReport, SolveResult, inputs_hash, solver_version

#: Node evaluations one search may make in deterministic mode (no wall-clock deadline there, so that the
#: answer does not depend on the machine): far above what the built-in mixes need (4,244 for llama-32.5b).
DETERMINISTIC_MAX_NODES = 1_000_000
#: Largest share of the time limit the searches may use before the canonical tie-break and the
#: verification (CP-SAT solves on the same budget).
SEARCH_SHARE = 0.5
#: Node evaluations comparison (b)'s search may make on one hardware tuple (it is a reference, not the
#: answer: its own budget, so that it does not depend on how long the solve before it took).
MEDIAN_MAX_NODES = 20_000
METHOD = "mix decomposition"


class _Clock:
    """The search's stopping rule: a wall-clock deadline, or (deterministic) a node budget."""

    def __init__(self, options: MixOptions, t0: float):
        s = options.solver
        self.deadline = None if s.deterministic else t0 + SEARCH_SHARE * s.time_limit_s
        if s.deadline is not None:  # the command's deadline, in perf_counter seconds (the search's clock)
            left = time.perf_counter() + s.deadline.remaining() * (1.0 if s.deterministic else SEARCH_SHARE)
            self.deadline = left if self.deadline is None else min(self.deadline, left)
        self.max_nodes = DETERMINISTIC_MAX_NODES if s.deterministic else None

    def search(self, search: Search, tuples, incumbent=None, keep_ties: bool = False) -> Solved:
        return best_first(search, tuples, incumbent, self.deadline, keep_ties, self.max_nodes)


def _own_optima(tables: MixTables, search: Search, grid: np.ndarray, mix: Mix, t0: float) -> list[SolveResult]:
    """Each cell's own optimum (its best latency on any hardware): the root relaxation of a tuple is the
    cell's problem on that hardware with its own capacity (exact), tried in the order of the cells' bounds
    until the best exact value found is at most the next bound."""
    archs = tables.archs
    out = []
    for c, cell in enumerate(mix.cells):
        order = np.argsort(grid[c], axis=None, kind="stable")
        best = None
        for f in order:
            low = float(grid[c].flat[f])
            if not np.isfinite(low) or (best is not None and low >= float(best[0])):
                break
            h = tuple(archs[j][int(i)] for j, i in enumerate(np.unravel_index(int(f), grid[c].shape)))
            node = search.evaluate(h, search.root_states(h), cells=[c])
            if not node.feasible:
                continue
            value = Fraction(int(node.round_ns[0]) * 10 ** 6, int(node.tokens[0]))
            if best is None or value < best[0]:
                best = (value, h, node)
        if best is None:
            raise ScenarioError(f"mix.cells[{c}] ({cell.label}): no design fits any hardware of the space")
        value, h, node = best
        design = search.designs(h, node)[0]
        evaluation = tables.evaluators[c].evaluate(design)
        if evaluation.metrics.latency_fraction() != value:
            raise ScenarioError(f"mix.cells[{c}]: the pass tables price {float(value)} ns/token but the evaluator "
                                f"{float(evaluation.metrics.latency_fraction())} (a defect)")
        report = SolveReport(objective_name="latency", status="OPTIMAL", objective=value, bound=value,
                             wall_s=round(time.perf_counter() - t0, 3), seed=None, solver_version=solver_version(),
                             inputs_hash=inputs_hash(cell.scenario, {"method": METHOD}), method=METHOD, iterations=0)
        out.append(SolveResult(evaluation, report))
    return out


def _incumbent(mm: MixModel, refs: Sequence[Comparison], goal: Goal, search: Search) -> tuple | None:
    """The best reference mix design inside the mix's space (value under `goal`, hardware, designs)."""
    best = None
    for ref in refs:
        if ref.evaluations is None:
            continue
        designs = [e.design for e in ref.evaluations]
        try:
            mm.decision_literals(designs)
            check_mix_capacity(mm.mix, mm.evaluators, designs)
        except ScenarioError:
            continue
        lat = [goal.cell_latency(e.metrics.round_time_ns, e.metrics.tokens_per_round_micro) for e in ref.evaluations]
        if not goal.fits(lat):
            continue
        value = goal.value(lat)
        if best is None or value < best[0]:
            best = (value, tuple(md.arch for _, md in designs[0].models()), designs)
    return best


def _median_hardware(search: Search, grid: np.ndarray, mix: Mix, objective: str,
                     own: Sequence[Fraction]) -> HardwareResult | None:
    """Comparison (b): the weighted-median cell's best hardware that holds the whole mix (its own optimum's,
    else the next by its bound), every cell's dataflow optimal on it for the objective (the search on that
    one tuple)."""
    c = median_cell(mix).index
    archs = search.tables.archs
    for f in np.argsort(grid[c], axis=None, kind="stable")[:64]:
        if not np.isfinite(grid[c].flat[f]):
            break
        h = tuple(archs[j][int(i)] for j, i in enumerate(np.unravel_index(int(f), grid[c].shape)))
        res = best_first(search, [(0.0, h)], max_nodes=MEDIAN_MAX_NODES)
        if res.designs is None:
            continue
        evals = [ev.evaluate(d) for ev, d in zip(search.tables.evaluators, res.designs, strict=True)]
        return HardwareResult(h, "OPTIMAL" if res.proven else "FEASIBLE", evals, HowFound.DECOMPOSITION,
                              mix_value(mix, [e.metrics for e in evals], objective, own))
    return None


def _units_plan(mm: MixModel, objective: str, designs: Sequence[Design], lows, own) -> ObjectivePlan:
    metrics = [ev.metrics(d) for ev, d in zip(mm.evaluators, designs, strict=True)]
    return mm.plan("latency", metrics, lows, own if objective == "regret" else None)


def _units_goal(objective: str, weights, plan: ObjectivePlan) -> Goal:
    """The objective in the mix model's units at `plan` (MIX-5, MIX-8, MIX-9)."""
    if objective == "regret":
        return Goal("regret", tuple(weights), scale=plan.scale, opt_units=plan.opt_units, regret_scale=REGRET_SCALE)
    return Goal("latency", tuple(weights), scale=plan.scale)


def solve_decomposed(mix: Mix, objective: str, options: MixOptions, catalog: Catalog, on_stage=None,
                     optima: Sequence[SolveResult] | None = None) -> MixResult:
    """[MIX-14..19] The proven latency or regret optimum of `mix` (see the module docstring); `optima`: the
    cells' own optima if already known (else from the pass tables)."""
    t0 = time.perf_counter()
    phases = Phases(t0)
    opts = options.solver

    def say(text: str) -> None:
        if on_stage is not None:
            on_stage(text)

    evaluators = [Evaluator(c.scenario, catalog) for c in mix.cells]
    say("pass tables of every cell")
    mm = MixModel(mix, catalog, evaluators, deadline=opts.deadline)
    phases.lap("build_s")
    tables = MixTables(mix, mm.prices, evaluators, deadline=opts.deadline)
    phases.lap("tables_s")
    clock = _Clock(options, t0)
    weights = mm.weights
    latency = Search(tables, Goal("latency", tuple(weights)))

    def searching(goal: Goal) -> Search:  # every search shares the relaxation's minima and round arrays
        return Search(tables, goal, latency.minima, latency.rounds)

    grid = latency.cell_grid()
    phases.lap("bounds_s")
    # 1. every cell's own optimum (regret denominators, MIX-7 floors, comparison (a))
    if optima is None:
        optima = _own_optima(tables, latency, grid, mix, t0)
    own = [r.report.objective for r in optima]
    lows = list(own)
    phases.lap("cells_alone_s")
    refs: list[Comparison] = []
    if options.comparisons:
        say("GPU-SI and the PAPI-style rule on half-PIM HBM")
        refs = mix_compare.references(mix, evaluators, objective, own, catalog)
    phases.lap("references_s")
    # 2. the search, exact (Fractions): the optimum and its proof
    goal = Goal("latency", tuple(weights)) if objective == "latency" else Goal("regret", tuple(weights), own=tuple(own))
    search = searching(goal)
    say(f"branch and bound over {grid[0].size:,} hardware tuples and their weight copies")
    solved = clock.search(search, root_tuples(search, grid), _incumbent(mm, refs, goal, search))
    searches = {"exact": solved.as_dict()}
    if solved.designs is None:
        raise ScenarioError(_no_design(mix, solved))
    designs = solved.designs
    if objective == "regret" and solved.proven:  # stage 2: the least weighted latency at the optimal regret
        caps = tuple(solved.value * o for o in own)
        second = searching(Goal("latency", tuple(weights), caps=caps))
        st2 = clock.search(second, root_tuples(second, grid), _incumbent(mm, [_as_ref(mm, designs)], second.goal,
                                                                         second))
        searches["regret_stage2"] = st2.as_dict()
        if st2.designs is not None:
            designs = st2.designs
    phases.lap("search_s")
    # 3. the canonical optimum (MIX-13) among the designs of least objective in the model's units
    run = MixRun(mm, opts, on_stage)
    plan = None
    if solved.proven and opts.expired:
        tie = skipped_mix_tie_break("the time limit passed before it", proven=True)
    elif solved.proven:
        designs, tie, plan, units = _canonical(run, mm, searching, grid, objective, designs, lows, own, clock)
        searches["units"] = units
    else:
        tie = skipped_mix_tie_break("FEASIBLE")
    phases.lap("tie_break_s")
    # every cell's claim from its own model on the returned hardware (the SpecModel code the mix's cell
    # copies are built with): the whole mix model's schedules are too many to settle at once (palm-62b)
    hardware = tuple(md.arch for _, md in designs[0].models())

    def cell_model(c: int) -> SpecModel:
        pt = PriceTable.build(evaluators[c], DesignSpace(mix.cells[c].scenario, catalog).with_archs(hardware))
        return SpecModel(mix.cells[c].scenario, catalog, evaluators[c], prices=pt)

    evaluations, claims = verify_mix(mm, designs, opts, cell_model, whole=False)
    phases.lap("verify_s")
    value = mix_value(mix, [e.metrics for e in evaluations], objective, own)
    if solved.proven and value < solved.value:
        raise ModelMismatch(f"the returned design's {objective} {float(value)} is below the proven optimum "
                            f"{float(solved.value)}")
    comps: list[Comparison] = []
    tried: list[HardwareResult] = []
    if options.comparisons:
        median = None if opts.expired else _median_hardware(search, grid, mix, objective, own)
        tried = [median] if median is not None else []
        comps = mix_compare.compare(mix, evaluators, objective, own, optima,
                                    [md.arch for _, md in designs[0].models()], refs, median)
        phases.lap("comparisons_s")
    scale = plan.scale if plan is not None else None
    log = MixSolveLog(options=options, scale=scale, rounding=_rounding(objective, scale), stages=tuple(run.stages),
                      phases_s=phases.seconds, claimed=tuple(claims), hardware_tried=tuple(tried),
                      single_cell_fixed_hardware_solves=0, weights_integer=tuple(weights),
                      model_variables=len(mm.m.proto.variables), model_constraints=len(mm.m.proto.constraints))
    # the exact optimum bounds the returned design's value (which attains the optimum in the model's units)
    bound = min(Fraction(solved.bound), value) if solved.bound is not None else None
    extra = {**log.as_dict(), "method": METHOD, "decomposition": searches, **tie, **unchecked_claims(claims, designs)}
    report = MixReport(objective_name=objective, status="OPTIMAL" if solved.proven else "FEASIBLE", objective=value,
                       bound=bound, wall_s=time.perf_counter() - t0, seed=opts.seed, solver_version=solver_version(),
                       inputs_hash=mix.content_hash(options.hashed(objective)), extra=extra)
    return MixResult(mix, tuple(evaluations), report, tuple(optima), tuple(comps))


def _rounding(objective: str, scale: int | None) -> str | None:
    """What is rounded: the search's optimum and bound are exact; the canonical tie-break compares the cell
    metrics in the mix model's units (MIX-5), so the returned design is the canonical one among those of
    least rounded objective."""
    if scale is None:
        return None
    unit = 10 ** 6 / scale
    metric = "cell latencies" if objective == "latency" else "cell latencies and regrets"
    return (f"optimum and bound exact; the tie-break compares {metric} rounded up to {unit:g} ns/token, so the "
            "design is the canonical one among those of least rounded objective (its exact value exceeds the bound "
            "by less than that rounding)")


def _as_ref(mm: MixModel, designs: Sequence[Design]) -> Comparison:
    evals = [ev.evaluate(d) for ev, d in zip(mm.evaluators, designs, strict=True)]
    return Comparison("incumbent", "", tuple(evals), None, None)


def _canonical(run, mm: MixModel, searching, grid: np.ndarray, objective: str, designs: list[Design],
               lows, own, clock: _Clock):
    """The primary level in the mix model's units, proven by the search with ties kept (which also names
    every hardware tuple that attains it), then MIX-13's later levels by CP-SAT on those tuples only, with
    each cell's best on them as its MIX-7 floor. The units are the plan MIX-13 takes at the design (its
    scale depends on the floors, which depend on the tuples found: settled in at most three rounds)."""
    plan = _units_plan(mm, objective, designs, lows, own)
    n_cells = len(mm.cells)
    for _ in range(3):
        goal = _units_goal(objective, mm.weights, plan)
        search = searching(goal)
        res = clock.search(search, root_tuples(search, grid), _incumbent(mm, [_as_ref(mm, designs)], goal, search),
                           keep_ties=True)
        if not res.proven or not res.tied:
            return designs, skipped_mix_tie_break("FEASIBLE"), plan, res.as_dict()
        designs = res.designs
        floors = []  # each cell's best on the tuples that attain the level (MIX-7 floors of the later levels)
        for h in res.tied:
            node = search.evaluate(h, search.root_states(h), cells=range(n_cells))
            floors.append([Fraction(int(t) * 10 ** 6, int(n)) for t, n in zip(node.round_ns, node.tokens,
                                                                                 strict=True)])
        floor = [min(f[c] for f in floors) for c in range(n_cells)]
        again = _units_plan(mm, objective, designs, floor, own)
        if again.scale == plan.scale:
            break
        plan = again
    else:
        return designs, skipped_mix_tie_break("FEASIBLE (the units did not settle)"), plan, res.as_dict()
    run.stages.append(MixStage(f"decomposition: primary level in units of 10^-6/{plan.scale} "
                               f"({res.nodes:,} nodes, {len(res.tied)} hardware tuples attain it)", res.seconds,
                               "OPTIMAL"))
    if mm.bounds is None:  # MIX-10/11 of each level's metric (the energy level's LP bound needs them)
        mm.bounds = ArchBounds(mm.cells, "latency")
    energy = [min(f) for f in zip(*(search.energy_floor(h) for h in res.tied), strict=True)]
    primary = None if objective == "regret" else int(res.value)  # regret: the mix model settles its levels
    if objective == "latency":  # cell by cell where the cells decompose (canonical_cells.py)
        energy_plan = mm.plan("energy", [ev.metrics(d) for ev, d in zip(mm.evaluators, designs, strict=True)],
                              energy, None)
        keys = mix_tie_keys(mm)
        n_hw = sum(not k.name.startswith("cell[") for k in keys)
        per = (len(keys) - n_hw) // n_cells
        cells = CellwiseCanonical(run, mm, res.leaves, plan, int(res.value), energy_plan,
                                  lambda h: copies_never_bind(search.tables, h))
        done = cells.solve(designs, lambda c, h: compress_keys(mm, keys[n_hw + c * per:n_hw + (c + 1) * per], h))
        if done is not None:
            return (*done, plan, res.as_dict())
        run.stages.append(MixStage("tie-break: the cells do not decompose on the hardware left: the whole mix "
                                   "model settles the levels", 0.0))
    d, tie = canonical_mix(run, objective, designs, floor, own, primary, plan.scale, [], hardware=list(res.tied),
                           other_lows=energy, leaves=list(res.leaves) if objective == "latency" else None,
                           narrow=lambda h: MixModel(mm.mix, mm.catalog, mm.evaluators, archs=h))
    return d, tie, plan, res.as_dict()


def copies_never_bind(tables: MixTables, h) -> bool:
    """Whether, on hardware h, every weight copy every model can store fits beside every cell's largest KV
    cache and draft2 model on both sides: then the tensor-copy rule binds no design there."""
    for j, a in enumerate(h):
        tab = tables.tables[j][a]
        every = (tab.copy_kib * (open_copies(tab) != BANNED)[:, :, None]).sum((0, 1))
        d2 = max((int(v.max()) for v in tab.draft2_kib.values() if v is not None), default=0)
        for c in range(tables.n_cells):
            if ((every + tab.kv_kib[c].max(0) + d2) > tab.capacity).any():
                return False
    return True


def _no_design(mix: Mix, solved: Solved) -> str:
    if solved.tuples_bounded == 0 or solved.proven:
        return (f"infeasible: no shared hardware holds every cell of mix '{mix.name}' (each cell fits on its own "
                "hardware, but with one architecture per model the weight copies the cells use and the largest KV "
                "caches do not fit together) [MIX-3/4]")
    return "no mix design found within the time limit"


__all__ = ["solve_decomposed"]
