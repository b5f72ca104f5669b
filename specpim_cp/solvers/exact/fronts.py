"""Latency-energy Pareto fronts by epsilon-constraint [OBJ-2] (resolution OBJ-2r, point budget OBJ-2b,
stopping rule OBJ-2s) and the part of the front that can hold the least EDP [EDP-1..3]; `pareto` returns the
front with its status and cost as a `ParetoFront` record (views/fronts.py states it in words)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.solvers.exact import no_spec
from specpim_cp.solvers.exact.finish import explain_infeasible
from specpim_cp.solvers.exact.guards import build_model, check_options
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.ratio import (
    RatioObjective,
    RatioRow,
    cap_copy,
    choice_sum,
    minimize_ratio,
    ratio_limits,
)
from specpim_cp.solvers.exact.session import ProgressHook, SolverOptions, SolveSession
from specpim_cp.solvers.exact.settled import keep_settled, settled_model
from specpim_cp.solvers.result import DEFAULT_MAX_POINTS, DEFAULT_RESOLUTION, Status
from specpim_cp.solvers.shared_evaluator import shared_evaluator


class LeastEnergy(NamedTuple):
    """[EDP-1] The least energy per token: the run's status, its design priced, a proven lower bound."""

    status: Status
    evaluation: Evaluation | None
    bound: Fraction


class Sweep(NamedTuple):
    """A sweep's front, its status, EDP's least-energy design (None otherwise) and the resolution used."""

    points: list[Evaluation]
    status: Status
    least: Evaluation | None
    resolution: Fraction


def least_energy(sm: SpecModel, run: SolveSession, start: Evaluation | None, stage: str = "EDP: least energy"
                 ) -> LeastEnergy:
    """[EDP-1] The least energy per token (status, its design priced, a proven lower bound)."""
    run.stage = stage
    status, design, _, bound = minimize_ratio(run, RatioObjective(sm, "energy"), start=start)
    return LeastEnergy(status, None if design is None else sm.ev.evaluate(design), bound)


def epsilon_front(sm: SpecModel, run: SolveSession, edp: bool = False,
                  resolution: Fraction = Fraction(0), start: Evaluation | None = None,
                  max_points: int | None = None) -> Sweep:
    """`sweep`; for EDP, when the sweep is not proven, its points also hold the least-energy design it
    started from (a feasible design, so a time limit hit early still returns the best EDP seen)."""
    front, status, least, resolution = sweep(sm, run, edp, resolution, start, max_points)
    if edp and status == Status.FEASIBLE and least is not None and all(p.design.key() != least.design.key()
                                                                        for p in front):
        front = [*front, least]
    return Sweep(front, status, least, resolution)


def sweep(sm: SpecModel, run: SolveSession, edp: bool, resolution: Fraction, start: Evaluation | None = None,
          max_points: int | None = None) -> Sweep:
    """Exact latency-energy (per token) Pareto front by epsilon-constraint [OBJ-2]. `edp`: only the part
    of the front that can hold the least EDP [EDP-1]: the sweep goes from the least latency up and stops
    once the next point's latency (a proven lower bound) times the least energy per token exceeds the
    least EDP found, since every later point has at least that latency and at least that energy.
    `resolution` r > 0 [OBJ-2r]: the next point's energy per token is below (1 - r) x the last one's, so
    every point found is still a proven Pareto point, and every front point Q has a found point P no
    slower than Q with (1 - r) E_P <= E_Q. `max_points` [OBJ-2b] (not with `edp`): once the first point is
    known, r is widened where needed so that at most that many points fit between its energy and a proven
    lower bound on every design's energy. Returns the front, its status, EDP's least-energy design (None
    otherwise) and the resolution used."""
    lat, en = RatioObjective(sm, "latency"), RatioObjective(sm, "energy")
    d_max = max(st.tokens_micro for st in sm.stats)
    ev = sm.ev
    front: list[Evaluation] = []
    energy_cap: tuple[int, int] | None = None  # (energy numerator, tokens) of the last point: go strictly below
    proven = True
    least: Evaluation | None = None
    e_low: Fraction | None = None  # EDP-1: a proven lower bound on every design's energy per token
    best: Fraction | None = None  # EDP-2: the least EDP of a design seen so far
    if edp:
        st0, least, e_low = least_energy(sm, run, start)
        if st0 == Status.INFEASIBLE:
            return Sweep(front, Status.INFEASIBLE, least, resolution)
        if least is None:
            return Sweep(front, Status.FEASIBLE, least, resolution)
        best = least.metrics.objective("edp")
        # [CUT-4] a design of EDP <= best has energy per token <= best / (its latency) <= best / least latency bound
        least_latency = min(Fraction(lt, st.tokens_micro) for lt, st in zip(lat.num_bounds, sm.stats)) * lat.scale
        sm.tighten_energy(best / (least_latency * en.scale))
    while True:
        run.stage = f"pareto point {len(front) + 1}: latency"

        def below_energy(model, cap=energy_cap, r=resolution):
            if cap is not None:  # strictly less energy per token than the last point
                e_n, e_d = cap
                keep = 1 - r  # OBJ-2r: below (1 - r) x the last energy per token
                E = cap_copy(model, sm.energy, -(-e_n * d_max // e_d), "E_eps")
                model.add(E <= choice_sum(model, sm, ratio_limits(sm, e_n * keep.numerator, e_d * keep.denominator,
                                                                   strict=True)))

        after = slower_than(front, proven) if edp else None

        def edp_box(model, cap=energy_cap, best=best, after=after, e_low=e_low):
            """EDP-2: only designs that can reach the least EDP seen: CUT-3's EDP bound of their choice and
            their latency (at most best / E_min) at most it. EDP-3: after a proven point, the latency bounds
            are at least its latency, the energy bounds at least E_min, and the latency above it."""
            below_energy(model, cap)
            slower = after.latency_fraction() if after is not None else Fraction(0)
            for k, z in enumerate(sm.z):  # CUT-3's EDP bound of the choice (CUT-4's energy, EDP-3's floors)
                tok = sm.stats[k].tokens_micro
                lat_k = max(lat.value(lat.num_bounds[k], tok), slower)
                if lat_k * max(en.value(en.num_bounds[k], tok), e_low or 0) > best:
                    model.add(model.get_bool_var_from_proto_index(z.index) == 0)
                    continue
                # CUT-4 per architecture: latency bound x energy bound > best, i.e. the energy bound (per round)
                # above best x tokens / (latency bound x energy scale)
                if lat_k <= 0:
                    continue
                le_max = best * tok / (lat_k * en.scale)
                for (j, a), le in sm.arch_energy_bounds.get(k, {}).items():
                    if le > le_max:
                        model.add_implication(model.get_bool_var_from_proto_index(z.index),
                                              model.get_bool_var_from_proto_index(sm.x[j][a].index).Not())
            if e_low:
                q = best / (e_low * lat.scale)  # T / D <= q
                T = model.get_int_var_from_proto_index(sm.T.index)
                model.add(T <= choice_sum(model, sm, ratio_limits(sm, q.numerator, q.denominator, strict=False)))
            if after is not None:  # EDP-3: T / D above the last point's (a redundant row: it removes no design)
                T = model.get_int_var_from_proto_index(sm.T.index)
                above = ratio_limits(sm, after.round_time_ns, after.tokens_per_round_micro, strict=False)
                model.add(T >= choice_sum(model, sm, [n + 1 for n in above]))

        # EDP: the least-energy design starts the stage while it satisfies the stage's rows (its EDP is the least
        # seen, so it is in the EDP box, and it is below the energy cap): a Dinkelbach step then has an
        # incumbent, so a solver fault that drops it is caught (the session's ladder)
        usable = (edp and least is not None and least.metrics.objective("edp") <= best
                  and below_cap(least.metrics, energy_cap, resolution))
        st1, d1, _o1, l_low = minimize_ratio(run, lat, edp_box if edp else below_energy, start=least if usable else None)
        if st1 == Status.INFEASIBLE:
            return Sweep(front, Status.INFEASIBLE if not front else ended(proven), least, resolution)
        if edp and front and l_low * e_low > min(p.metrics.objective("edp") for p in front):  # EDP-1 stop
            return Sweep(front, ended(proven), least, resolution)
        if d1 is None:
            return Sweep(front, Status.FEASIBLE, least, resolution)
        proven &= st1 == Status.OPTIMAL
        e1 = ev.evaluate(d1)
        t_n, t_d = e1.metrics.round_time_ns, e1.metrics.tokens_per_round_micro
        if edp:
            best = min(best, e1.metrics.objective("edp"))

        def within_latency(model, t_n=t_n, t_d=t_d, cap=energy_cap):
            below_energy(model, cap)
            T = cap_copy(model, sm.T, -(-t_n * d_max // t_d), "T_eps")
            model.add(T <= choice_sum(model, sm, ratio_limits(sm, t_n, t_d, strict=False)))

        # the latency stage's point satisfies both epsilon rows: a close starting ratio for Dinkelbach
        run.stage = f"pareto point {len(front) + 1}: energy"
        st2, d2, _o2, _ = minimize_ratio(run, en, within_latency, start=e1,
                                         choices=RatioRow("latency", t_n, t_d).keeps(sm))
        if d2 is None:
            return Sweep(front, Status.FEASIBLE, least, resolution)
        proven &= st2 == Status.OPTIMAL
        point = ev.evaluate(d2)
        front.append(point)
        if max_points and not edp and len(front) == 1:  # OBJ-2b: widen r so that at most max_points fit
            _, _, e_low = least_energy(sm, run, None, stage="pareto: least energy")
            resolution = max(resolution, point_budget_resolution(point.metrics.energy_fraction(), e_low,
                                                                 max_points))
        if edp:
            best = min(best, point.metrics.objective("edp"))
        energy_cap = (point.metrics.energy_nj_per_round, point.metrics.tokens_per_round_micro)
        # [OBJ-2s] no later point (that matters): the EDP test needs EDP-3's "later points are slower"
        if e_low is not None and last_point(point, e_low, best if slower_than(front, proven) else None):
            return Sweep(front, ended(proven), least, resolution)
        if run.budget.remaining() <= 0:
            return Sweep(front, Status.FEASIBLE, least, resolution)


def ended(proven: bool) -> Status:
    """The status of a sweep that ended: OPTIMAL when every stage was proven."""
    return Status.OPTIMAL if proven else Status.FEASIBLE


def below_cap(metrics, cap: tuple[int, int] | None, resolution: Fraction) -> bool:
    """Whether a design's energy per round (per its tokens) meets a latency stage's energy cap, E / D <
    (1 - r) e_n / e_d, exactly as `below_energy`'s per-choice row states it."""
    if cap is None:
        return True
    keep = 1 - resolution
    used = metrics.energy_nj_per_round * cap[1] * keep.denominator
    return used < cap[0] * keep.numerator * metrics.tokens_per_round_micro


def slower_than(front: list[Evaluation], proven: bool):
    """[EDP-3] The metrics of the last front point when every stage so far was proven (every later front
    point is slower than it), else None."""
    return front[-1].metrics if front and proven else None


def last_point(point: Evaluation, e_low: Fraction, best: Fraction | None) -> bool:
    """[OBJ-2s] Whether the sweep can stop after `point` without solving the next latency stage. Every later
    front point is slower than `point` (a design no slower with less energy would have been stage 2's) and
    has energy per token at least the proven floor `e_low`: so none exists when `point` is at the floor,
    and under EDP (`best`, the least EDP seen; None unless every stage so far was proven, which the first
    claim needs) none beats or ties `best` once `point`'s latency times the floor reaches it."""
    energy = point.metrics.energy_fraction()
    if energy <= e_low:
        return True
    return best is not None and point.metrics.latency_fraction() * e_low >= best


def point_budget_resolution(first: Fraction, floor: Fraction, points: int) -> Fraction:
    """[OBJ-2b] The least resolution r (rounded up to 10^-6) at which a sweep from energy per token `first`
    lists at most `points` points above `floor` (a lower bound on every design's energy per token): point m
    has energy below (1 - r)^(m-1) first, so m - 1 < ln(floor / first) / ln(1 - r) <= points."""
    if floor <= 0 or floor >= first:
        return Fraction(0)
    r = 1 - math.exp(math.log(floor / first) / points)
    return Fraction(math.ceil(r * 10 ** 6), 10 ** 6)


#: The default options of a Pareto front: many solves share its time limit.
PARETO_OPTIONS = SolverOptions(time_limit_s=300.0)


@dataclass(frozen=True)
class ParetoFront:
    """A front and what it cost: OPTIMAL when every point's two stages are proven and the sweep ended proven
    (a closing latency stage INFEASIBLE, or OBJ-2s's floor reached): the front is exact at its `resolution`;
    FEASIBLE when the time limit cut it short."""

    points: list[Evaluation]
    status: Status
    resolution: Fraction  # the resolution the front was listed at (OBJ-2r), widened by the point budget
    wall_s: float
    deterministic_time: float
    solves: int
    options: SolverOptions
    asked: Fraction | None = None  # the resolution asked for, when the point budget widened it
    max_points: int | None = None  # OBJ-2b's point budget (None: none)

    def as_dict(self) -> dict:
        return {"status": self.status, "points": len(self.points), "resolution_pct": float(100 * self.resolution),
                "resolution_asked_pct": float(100 * (self.resolution if self.asked is None else self.asked)),
                "max_points": self.max_points,
                "wall_s": round(self.wall_s, 3), "deterministic_time": round(self.deterministic_time, 3),
                "solves": self.solves, **self.options.as_dict()}


def pareto(scenario: Scenario, *, options: SolverOptions | None = None, catalog: Catalog | None = None,
           on_progress: ProgressHook | None = None, resolution: Fraction = DEFAULT_RESOLUTION,
           max_points: int | None = DEFAULT_MAX_POINTS) -> ParetoFront:
    """The latency-energy front (points sorted by latency) with its status and cost; `options` bound the
    whole front (default `PARETO_OPTIONS`: 300 s); `resolution` [OBJ-2r]: a fraction of 1 (0 <= r < 1/2),
    default `DEFAULT_RESOLUTION`; 0 with `max_points=None` for the exact front; `max_points` [OBJ-2b]: the
    resolution is widened where needed so that the front lists at most that many points (None or 0: no
    budget)."""
    t0 = time.perf_counter()
    asked = resolution
    max_points = max_points or None
    opts = (options or PARETO_OPTIONS).with_deadline()  # the command's deadline, unless started above
    check_options(opts.time_limit_s, opts.workers)
    catalog = catalog or scenario_catalog(scenario)
    sm = settled_model(scenario, catalog) or build_model(scenario, catalog, shared_evaluator(scenario, catalog))
    run = SolveSession(sm, opts)
    run.on_progress = on_progress
    no_spec.settle(sm, run)  # [NOSPEC-6] the verifier alone's proven bounds (kept by a solve's model)
    keep_settled(scenario, catalog, sm)
    front, status, _, resolution = epsilon_front(sm, run, resolution=asked, max_points=max_points)
    if status == Status.INFEASIBLE:
        raise ScenarioError(explain_infeasible(sm, opts))
    points = sorted(front, key=lambda e: e.metrics.latency_fraction())
    return ParetoFront(points, status, resolution, time.perf_counter() - t0, run.deterministic_time, run.iterations,
                       opts, asked if resolution != asked else None, max_points)


def pareto_front(scenario: Scenario, *, options: SolverOptions | None = None, catalog: Catalog | None = None,
                 on_progress: ProgressHook | None = None, resolution: Fraction = DEFAULT_RESOLUTION,
                 max_points: int | None = DEFAULT_MAX_POINTS) -> list[Evaluation]:
    """Non-dominated (latency per token, energy per token) designs, sorted by latency (`pareto`'s points)."""
    return pareto(scenario, options=options, catalog=catalog, on_progress=on_progress,
                  resolution=resolution, max_points=max_points).points
