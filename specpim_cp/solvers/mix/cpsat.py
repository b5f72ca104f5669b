"""The CP-SAT mix model's driver (`cpsat_model.py`; formulations/mix.md), for the objectives and methods
the decomposition does not take.

Every cell alone first (its own optimum: regret denominators, cuts, comparison (a)); then known mix
designs as warm starts (GPU-SI, the PAPI-style rule, and the best dataflow per cell on a few candidate
hardwares: the cells' own optima's, the median cell's, and the best-bounded by MIX-10/11); then the mix
model, hinted with the best of them. Every claim is re-checked: each cell's design is re-priced by the
evaluator and must equal the model's tight per-cell values, and the whole design must pass
`physics.mix.check_mix_capacity` (the tensor-copy rule).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.physics.mix import cell_metric, check_mix_capacity, mix_value
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.problem.mix import WEIGHT_OPS, Mix, median_cell
from specpim_cp.solvers.mix import comparisons as mix_compare
from specpim_cp.solvers.mix.arch_bounds import ArchBounds
from specpim_cp.solvers.mix.canonical import canonical_mix, skipped_mix_tie_break
from specpim_cp.solvers.mix.cell_solves import FixedHardware, cell_kind, cell_optima
from specpim_cp.solvers.mix.cpsat_model import REGRET_SCALE, MixModel, ObjectivePlan
from specpim_cp.solvers.mix.records import (
    Comparison,
    HardwareResult,
    HowFound,
    MixOptions,
    MixReport,
    MixResult,
    MixSolveLog,
)
from specpim_cp.solvers.mix.session import MixRun, Phases, Stage, StageHook, unchecked_claims, verify_mix
from specpim_cp.solvers.result import SolveResult, solver_version

#: Most hardwares (besides the median cell's) given per-cell dataflow as warm starts, best bound first:
#: each costs one fixed-hardware solve per cell.
MAX_SCREENED = 3
#: Most re-solves of the median cell for comparison (b) when its optimal hardware cannot serve the mix.
MEDIAN_TRIES = 8
#: Share of the time limit one hardware-screening stage may use (the rest is the mix model's).
SCREEN_SHARE = 0.1

# ------------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------------
def fixed_arch(mm: MixModel, archs: Sequence[ArchConfig]):
    """An `extra` that fixes the shared architecture (a clone's x) to `archs`."""
    lits = mm.arch_literals(archs)

    def extra(model: cp_model.CpModel) -> None:
        for v, val in lits:
            model.add(model.get_bool_var_from_proto_index(v.index) == val)

    return extra


def best_on_hardware(run: MixRun, fixed: FixedHardware, archs: Sequence[ArchConfig], objective: str,
                     own: Sequence[Fraction], lows: Sequence[Fraction], exact: bool = False,
                     limit: float | None = None) -> HardwareResult:
    """Every cell's best dataflow on fixed hardware: the cells' separate optima when they fit together
    under the tensor-copy rule (a relaxation that is then tight: status OPTIMAL); else the better of the
    single-copy designs (`_single_copy`, feasible by construction: status FEASIBLE), and with `exact`
    the mix model with the hardware fixed, started from it (OPTIMAL when proven within `limit`)."""
    archs = tuple(archs)
    status, evals = fixed.all(archs)
    if evals is None:
        return HardwareResult(archs, status, None, HowFound.PER_CELL)
    designs = [e.design for e in evals]
    try:
        check_mix_capacity(run.mm.mix, run.mm.evaluators, designs)
        run.mm.decision_literals(designs)
        value = mix_value(run.mm.mix, [e.metrics for e in evals], objective, own)
        return HardwareResult(archs, status, evals, HowFound.PER_CELL, value)
    except ScenarioError:
        pass
    single = _single_copy(run, fixed, archs, evals, objective, own)
    if not exact:
        if single is None:
            return HardwareResult(archs, "UNKNOWN", None, HowFound.SINGLE_COPY)
        return HardwareResult(archs, "FEASIBLE", single, HowFound.SINGLE_COPY,
                              mix_value(run.mm.mix, [e.metrics for e in single], objective, own))
    if status == "OPTIMAL":  # each cell's proven optimum on this hardware bounds it here (MIX-7, tighter)
        kind = cell_kind(objective)
        lows = [max(lo, cell_metric(e.metrics, kind)) for lo, e in zip(lows, evals, strict=True)]
    how = HowFound.MIX_MODEL
    extra = fixed_arch(run.mm, archs)
    start = [e.design for e in single] if single is not None else run.first_incumbent(extra)
    if start is None:
        return HardwareResult(archs, "INFEASIBLE" if run.last_status == "INFEASIBLE" else "UNKNOWN", None, how)
    # hinted with the feasible start, not with the cells' separate optima: repairing that infeasible hint
    # has aborted CP-SAT (formulations/mix.md, "Solver settings and a CP-SAT 9.15 presolve error")
    st = run.stage(f"mix model on {', '.join(a.label() for a in archs)}", objective, start, lows,
                   own if objective == "regret" else None, extra, limit=limit)
    found = st.designs if st.designs is not None and _exact(run.mm, st.designs, objective, own) <= \
        _exact(run.mm, start, objective, own) else start
    evals = [ev.evaluate(d) for ev, d in zip(run.mm.evaluators, found, strict=True)]
    return HardwareResult(archs, "OPTIMAL" if st.status == "OPTIMAL" else "FEASIBLE", evals, how,
                          mix_value(run.mm.mix, [e.metrics for e in evals], objective, own))


def _single_copy(run: MixRun, fixed: FixedHardware, archs: tuple[ArchConfig, ...], evals: Sequence[Evaluation],
                 objective: str, own: Sequence[Fraction]) -> list[Evaluation] | None:
    """A feasible mix design on fixed hardware whose cells' separate optima do not fit together: every
    model keeps one copy of each weight tensor, in the layout (a) most cells' optima use (by weight), or
    (b) the largest cell's (batch x context) optimum uses, every cell re-optimised with those layouts
    fixed. (b) is always feasible when the largest cell is: a cell then needs the largest cell's weights
    and its own, smaller KV cache. The better of the two, or None."""
    mix = run.mm.mix
    keys = [(j, op) for j in range(len(run.mm.x)) for op in WEIGHT_OPS]

    def layouts_of(e: Evaluation) -> dict[tuple[int, str], str]:
        mds = [md for _, md in e.design.models()]
        return {(j, op): mds[j].placement[op].layout for j, op in keys}

    votes: dict[tuple[int, str], dict[str, Fraction]] = {k: {} for k in keys}
    for cell, e in zip(mix.cells, evals, strict=True):
        for k, lay in layouts_of(e).items():
            votes[k][lay] = votes[k].get(lay, Fraction(0)) + cell.weight
    consensus = {k: min(v, key=lambda lay: (-v[lay], lay)) for k, v in votes.items()}
    largest = max(range(len(mix.cells)), key=lambda c: (mix.cells[c].batch_size * mix.cells[c].scenario.max_context, c))
    best, best_v = None, None
    for layouts in (consensus, layouts_of(evals[largest])):
        out = []
        for c, e in enumerate(evals):
            if layouts_of(e) == layouts:
                out.append(e)
                continue
            _status, e2 = fixed.cell_with_layouts(c, archs, layouts)
            if e2 is None:
                break
            out.append(e2)
        else:
            try:
                check_mix_capacity(mix, run.mm.evaluators, [e.design for e in out])
                run.mm.decision_literals([e.design for e in out])
            except ScenarioError:
                continue
            v = mix_value(mix, [e.metrics for e in out], objective, own)
            if best_v is None or v < best_v:
                best, best_v = out, v
    return best


def _median_fallback(run: MixRun, fixed: FixedHardware, tried: list[HardwareResult], median_archs, objective: str,
                     own: Sequence[Fraction], lows: Sequence[Fraction], time_limit_s: float):
    """Comparison (b) when the median cell's own optimal hardware cannot serve the mix (typically: too little
    memory for the largest batch's KV cache): the median cell's optimum over the hardware not yet ruled out,
    until one serves every cell (at most MEDIAN_TRIES). Returns the hardware (b) is measured on."""
    med = median_cell(run.mm.mix).index
    for _ in range(MEDIAN_TRIES):
        hr = next((h for h in tried if h.archs == median_archs), None)
        if hr is None or hr.status != "INFEASIBLE":
            return median_archs
        excluded = [h.archs for h in tried if h.status == "INFEASIBLE"]
        _status, e = fixed.best_excluding(med, excluded)
        if e is None:
            return median_archs
        median_archs = tuple(md.arch for _, md in e.design.models())
        run.say(f"median cell's next best hardware: {', '.join(a.label() for a in median_archs)}")
        if all(h.archs != median_archs or h.evaluations is None for h in tried):  # (b) needs its designs
            tried[:] = [h for h in tried if h.archs != median_archs]
            tried.append(best_on_hardware(run, fixed, median_archs, objective, own, lows, exact=True,
                                          limit=SCREEN_SHARE * time_limit_s))
    return median_archs


class CandidateReason(Enum):
    """Why a hardware is tried before the mix model; the candidates are tried in this order."""

    MEDIAN_OPTIMUM = "median cell's optimum"  # solved exactly: comparison (b) is measured on it
    CELL_OPTIMUM = "cell's optimum"  # a cell's own optimal hardware (a warm start)
    LOWEST_BOUND = "lowest bound"  # among the `screen` lowest MIX-10/11 bounds (a warm start)


@dataclass(frozen=True)
class Candidate:
    """A hardware worth a per-cell solve before the mix model."""

    bound: float  # its MIX-10/11 bound (0.0 without the cuts)
    archs: tuple[ArchConfig, ...]
    reason: CandidateReason
    cell: int | None = None  # whose optimum it is (the median cell's, or a cell's own)

    @property
    def why(self) -> str:
        """The reason as the stage messages state it."""
        if self.reason is CandidateReason.CELL_OPTIMUM:
            return f"cell {self.cell}'s optimum"
        return self.reason.value


def candidate_hardware(mm: MixModel, optima: Sequence[SolveResult], objective: str, own: Sequence[Fraction],
                       screen: int) -> list[Candidate]:
    """Hardware worth a per-cell solve before the mix model, in the order tried (`CandidateReason`): the
    weighted-median cell's optimal hardware, each cell's own, and the `screen` tuples with the lowest
    MIX-10/11 bound; best bound first within each reason."""
    archs = [list(xs) for xs in mm.x]
    grid = mm.bounds.tuple_bounds(list(mm.mix.weights), list(own) if objective == "regret" else None) \
        if mm.bounds is not None else None

    def key(t: tuple[ArchConfig, ...]) -> float:
        if grid is None:
            return 0.0
        return float(grid[tuple(archs[j].index(a) for j, a in enumerate(t))])

    out: dict[tuple[ArchConfig, ...], tuple[CandidateReason, int | None]] = {}
    med = median_cell(mm.mix)
    out[tuple(md.arch for _, md in optima[med.index].design.models())] = (CandidateReason.MEDIAN_OPTIMUM, med.index)
    for r, cell in zip(optima, mm.mix.cells, strict=True):
        out.setdefault(tuple(md.arch for _, md in r.design.models()), (CandidateReason.CELL_OPTIMUM, cell.index))
    if grid is not None and screen > 0:
        import numpy as np

        flat = np.argsort(grid, axis=None, kind="stable")[:screen]
        for f in flat:
            idx = np.unravel_index(int(f), grid.shape)
            out.setdefault(tuple(archs[j][k] for j, k in enumerate(idx)), (CandidateReason.LOWEST_BOUND, None))
    order = list(CandidateReason)
    cands = [Candidate(key(t), t, reason, cell) for t, (reason, cell) in out.items()]
    return sorted(cands, key=lambda c: (order.index(c.reason), c.bound))


def _screen_hardware(run: MixRun, fixed: FixedHardware, optima: Sequence[SolveResult], refs: Sequence[Comparison],
                     objective: str, own: Sequence[Fraction], lows: Sequence[Fraction], options: MixOptions
                     ) -> tuple[list[HardwareResult], tuple[ArchConfig, ...] | None]:
    """The best dataflow per cell on each candidate hardware (`candidate_hardware`): the median cell's
    hardware exactly (comparison (b) needs its optimum), the others as warm starts only (their cells'
    separate optima, or a single-copy design), skipped when MIX-10/11 prove them no better than the best
    design known, at most MAX_SCREENED of them. Returns the hardware tried and the hardware comparison (b)
    is measured on."""
    mm = run.mm
    time_limit_s = options.solver.time_limit_s
    tried: list[HardwareResult] = []
    best_value: Fraction | None = None
    median_archs = None
    cands = candidate_hardware(mm, optima, objective, own, options.screen)
    ref_best = _best_incumbent(mm, [list(c.evaluations) for c in refs if c.evaluations is not None], objective, own)
    if ref_best is not None:  # the references already rule out hardware whose bound is above them
        best_value = _exact(mm, ref_best, objective, own)
    screened = 0
    for rank, cand in enumerate(cands):
        if options.solver.expired:  # the command's deadline: the mix model starts from what is known
            break
        median = cand.reason is CandidateReason.MEDIAN_OPTIMUM
        if median:
            median_archs = cand.archs
        elif best_value is not None and cand.bound >= float(best_value):
            continue  # MIX-10/11 prove this hardware cannot beat the best one found
        elif screened >= MAX_SCREENED:
            continue  # warm starts only: the mix model settles the rest
        screened += not median
        run.say(f"hardware {rank + 1}: {', '.join(a.label() for a in cand.archs)} ({cand.why}), best dataflow "
                "per cell")
        hr = best_on_hardware(run, fixed, cand.archs, objective, own, lows, exact=median,
                              limit=SCREEN_SHARE * time_limit_s)
        tried.append(hr)
        if hr.value is not None and (best_value is None or hr.value < best_value):
            best_value = hr.value
    median_archs = _median_fallback(run, fixed, tried, median_archs, objective, own, lows, time_limit_s)
    return tried, median_archs


def _known_incumbent(run: MixRun, refs: Sequence[Comparison], tried: Sequence[HardwareResult], objective: str,
                     own: Sequence[Fraction]) -> list[Design]:
    """The best mix design known (the references, the hardware tried), else the first feasible one CP-SAT
    finds; ScenarioError when no shared hardware holds every cell."""
    candidates = [list(c.evaluations) for c in refs if c.evaluations is not None]
    candidates += [hr.evaluations for hr in tried if hr.evaluations is not None]
    incumbent = _best_incumbent(run.mm, candidates, objective, own)
    if incumbent is None:
        run.say("searching a first feasible mix design")
        incumbent = run.first_incumbent()
        if incumbent is None:
            raise ScenarioError(_infeasible_reason(run.mm.mix))
    return incumbent


@dataclass(frozen=True)
class _Solved:
    """What the mix model found: the best mix design and its status, a proven lower bound and the plan
    (rounding) of the mix model's stage."""

    designs: list[Design]
    status: str  # OPTIMAL | FEASIBLE
    bound: Fraction | None  # CP-SAT's (rounding subtracted), or an excluded hardware's value if lower; None: none
    plan: ObjectivePlan | None
    start: list[Design] | None = None  # a design that attains the mix model's proven optimum (MIX-13's start)
    optimum: int | None = None  # that optimum, in the units of `plan`


def _solve_mix_model(run: MixRun, incumbent: list[Design], tried: Sequence[HardwareResult], objective: str,
                     own: Sequence[Fraction], lows: Sequence[Fraction]) -> _Solved:
    """The mix model, capped by and hinted with the incumbent, without the hardwares already solved exactly
    and no better (MIX-12); for regret, then the best weighted latency at the optimal regret."""
    mm = run.mm
    inc_value = _exact(mm, incumbent, objective, own)
    inc_archs = tuple(md.arch for _, md in incumbent[0].models())
    done = [hr for hr in tried if hr.status in ("OPTIMAL", "INFEASIBLE") and hr.archs != inc_archs
            and (hr.value is None or hr.value >= inc_value)]
    excluded = [hr.archs for hr in done]

    def nogoods(model: cp_model.CpModel) -> None:
        mm.add_hardware_nogoods(model, excluded)

    st = run.stage("mix model", objective, incumbent, lows, own if objective == "regret" else None, nogoods)
    best = incumbent
    if st.designs is not None and _exact(mm, st.designs, objective, own) <= _exact(mm, incumbent, objective, own):
        best = st.designs
    status = "OPTIMAL" if st.status == "OPTIMAL" else "FEASIBLE"
    start = st.designs
    bound_cp = _bound(mm, st, objective, own)
    solved = [hr.value for hr in done if hr.value is not None]
    if bound_cp is not None and solved:
        bound_cp = min(bound_cp, min(solved))
    if objective == "regret" and st.status == "OPTIMAL" and not run.opts.expired:  # the best weighted latency at the optimal regret
        st2 = run.stage("regret stage 2 (weighted latency at the optimal regret)", "regret", best, lows, own,
                        regret_stage2=True)
        if st2.designs is not None and _exact(mm, st2.designs, objective, own) <= _exact(mm, best, objective, own):
            best = st2.designs
            start = st2.designs  # the regret optimum, its weighted latency least: MIX-13's first two levels
    return _Solved(best, status, bound_cp, st.plan, start, st.cp_objective)


def _reported_bound(mix: Mix, objective: str, lows: Sequence[Fraction], bound_cp: Fraction | None,
                    value: Fraction) -> Fraction:
    """The proven lower bound the report states: CP-SAT's, at least the cells' own optima's (1 for regret),
    at most the design's value."""
    if objective == "regret":
        bound = max(Fraction(1), bound_cp) if bound_cp is not None else Fraction(1)
    else:  # the cells' own optima (or bounds) bound any shared hardware from below
        lower = sum((w * lb for w, lb in zip(mix.weights, lows, strict=True)), Fraction(0)) / sum(mix.weights)
        bound = lower if bound_cp is None else max(lower, bound_cp)
    return min(bound, value)


def solve_mix_model(mix: Mix, objective: str, options: MixOptions, catalog: Catalog, on_stage: StageHook | None,
                    optima: Sequence[SolveResult] | None) -> MixResult:
    """`solve_mix` by the CP-SAT mix model (options already checked). `optima`: the cells' own optima if
    already known."""
    t0 = time.perf_counter()
    opts, cell_opts = options.solver, options.cell_solver()
    phases = Phases(t0)
    # 1. every cell alone: regret denominators, lower bounds (MIX-7), comparison (a)
    if optima is None:
        optima = cell_optima(mix, objective, cell_opts, options.cell_jobs, on_stage)
    own = [r.report.objective for r in optima]
    lows = [r.report.objective if r.report.status == "OPTIMAL" else (r.report.bound or Fraction(0)) for r in optima]
    phases.lap("cells_alone_s")
    evaluators = [Evaluator(c.scenario, catalog) for c in mix.cells]
    mm = MixModel(mix, catalog, evaluators, deadline=opts.deadline)
    phases.lap("build_s")
    if options.cuts:
        mm.bounds = ArchBounds(mm.cells, cell_kind(objective))
        phases.lap("bounds_s")
    run = MixRun(mm, opts, on_stage)
    # 2. known mix designs: the references and a few hardwares with per-cell dataflow (warm starts)
    refs = []
    if options.comparisons:
        run.say("GPU-SI and the PAPI-style rule on half-PIM HBM")
        refs = mix_compare.references(mix, evaluators, objective, own, catalog)
    phases.lap("references_s")
    fixed = FixedHardware(mix, evaluators, objective, cell_opts, catalog, prices=mm.prices)
    tried, median_archs = _screen_hardware(run, fixed, optima, refs, objective, own, lows, options)
    phases.lap("hardware_screening_s")
    incumbent = _known_incumbent(run, refs, tried, objective, own)
    # 3. the mix model, without the hardwares already solved exactly and no better (MIX-12)
    solved = _solve_mix_model(run, incumbent, tried, objective, own, lows)
    phases.lap("mix_model_s")
    # 4. the canonical optimum (MIX-13): ties broken exactly, whatever the search path
    if solved.status == "OPTIMAL" and opts.expired:
        designs, tie = solved.designs, skipped_mix_tie_break("the time limit passed before it", proven=True)
    elif solved.status == "OPTIMAL" and solved.start is not None:
        designs, tie = canonical_mix(run, objective, solved.start, lows, own, solved.optimum,
                                     solved.plan.scale if solved.plan else None, tried)
    else:
        designs, tie = solved.designs, skipped_mix_tie_break(solved.status)
    phases.lap("tie_break_s")
    evaluations, claims = verify_mix(mm, designs, opts, fixed.cell_model)
    phases.lap("verify_s")
    value = mix_value(mix, [e.metrics for e in evaluations], objective, own)
    comps: list[Comparison] = []
    if options.comparisons:
        median = next((hr for hr in tried if hr.archs == median_archs), None)
        comps = mix_compare.compare(mix, evaluators, objective, own, optima,
                                    [md.arch for _, md in designs[0].models()], refs, median)
        phases.lap("comparisons_s")
    scale = solved.plan.scale if solved.plan else None
    log = MixSolveLog(options=options, scale=scale, rounding=_rounding_text(objective, scale), stages=tuple(run.stages),
                      phases_s=phases.seconds, claimed=tuple(claims), hardware_tried=tuple(tried),
                      single_cell_fixed_hardware_solves=fixed.solves, weights_integer=tuple(mm.weights),
                      model_variables=len(mm.m.proto.variables), model_constraints=len(mm.m.proto.constraints))
    report = MixReport(
        objective_name=objective, status=solved.status, objective=value,
        bound=_reported_bound(mix, objective, lows, solved.bound, value), wall_s=time.perf_counter() - t0,
        seed=opts.seed, solver_version=solver_version(), inputs_hash=mix.content_hash(options.hashed(objective)),
        extra={**log.as_dict(), **tie, **unchecked_claims(claims, designs)})
    return MixResult(mix, tuple(evaluations), report, tuple(optima), tuple(comps))


def _rounding_text(objective: str, scale: int | None) -> str | None:
    if scale is None:
        return None
    unit = 10 ** 6 / scale
    if objective == "regret":
        return (f"cell latencies rounded up to {unit:g} ns/token and regret to 1/{REGRET_SCALE}: the reported bound "
                f"is CP-SAT's minus 1/{REGRET_SCALE} and minus {unit:g} ns/token over the smallest own optimum")
    what = "ns" if objective == "latency" else "nJ"
    return (f"cell metrics rounded up to {unit:g} {what}/token: CP-SAT's weighted mean exceeds the exact one by less "
            f"than {unit:g} {what}/token, which the reported bound subtracts")


def _exact(mm: MixModel, designs: Sequence[Design], objective: str, own: Sequence[Fraction]) -> Fraction:
    return mix_value(mm.mix, [ev.metrics(d) for ev, d in zip(mm.evaluators, designs, strict=True)], objective, own)


def _best_incumbent(mm: MixModel, candidates: Sequence[Sequence[Evaluation]], objective: str,
                    own: Sequence[Fraction]) -> list[Design] | None:
    """The best candidate mix design that lies in every cell's space and fits (tensor copies)."""
    best, best_v = None, None
    for evals in candidates:
        designs = [e.design for e in evals]
        try:
            mm.decision_literals(designs)
            check_mix_capacity(mm.mix, mm.evaluators, designs)
        except ScenarioError:
            continue
        v = mix_value(mm.mix, [e.metrics for e in evals], objective, own)
        if best_v is None or v < best_v:
            best, best_v = designs, v
    return best


def _bound(mm: MixModel, st: Stage, objective: str, own: Sequence[Fraction]) -> Fraction | None:
    """A proven lower bound on the exact mix objective from CP-SAT's bound minus the rounding (mix.md)."""
    if st.cp_bound is None or st.plan is None:
        return None
    sigma = Fraction(st.plan.scale, 10 ** 6)  # units per ns (nJ)
    if objective == "regret":
        return Fraction(st.cp_bound - 1, REGRET_SCALE) - 1 / (sigma * min(own))
    return Fraction(st.cp_bound, sum(mm.weights)) / sigma - 1 / sigma


def _infeasible_reason(mix: Mix) -> str:
    return (f"infeasible: no shared hardware holds every cell of mix '{mix.name}' (each cell fits on its own "
            "hardware, but with one architecture per model the weight copies the cells use and the largest KV "
            "caches do not fit together) [MIX-3/4]")
