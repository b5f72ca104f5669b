"""One instance run by its method, in a worker process: the exact optimizer (and each ladder step), the
heuristic, the baselines, a Pareto front or a workload mix, into result records. `run_instance` never
raises: an infeasible scenario, a deadline passed before any design and a crash become records (INFEASIBLE,
TIME_LIMIT, ERROR; a re-run retries the last two).
`RUNNERS` maps a method to its runner (tests replace entries).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.design import parse_design
from specpim_cp.problem.scenario import Scenario, parse_scenario, scenario_catalog
from specpim_cp.runs.instances import Instance, heuristic_budget, ranges_tolerance
from specpim_cp.runs.mixes import run_mix
from specpim_cp.runs.records import FrontPoint, Record, evaluation_fields, objective_fields, package_version
from specpim_cp.solvers import baselines, exact, heuristic
from specpim_cp.solvers.deadline import TimeLimitReached
from specpim_cp.solvers.exact.ranges import RANGE_OBJECTIVES, decision_ranges
from specpim_cp.solvers.result import inputs_hash, solver_version
from specpim_cp.views.fronts import front_statement


def solve_record(inst: Instance, result, catalog: Catalog, part: str, parts: int = 1) -> Record:
    """A record of a SolveResult (exact, heuristic, ladder step): the claimed objective and its report."""
    rep = result.report
    return inst.record(part, parts).with_(
        **evaluation_fields(result.evaluation, catalog), **objective_fields(rep.objective),
        objective_name=rep.objective_name, status=rep.status, bound=None if rep.bound is None else float(rep.bound),
        gap=rep.gap, wall_s=rep.wall_s, seed=rep.seed, solver_version=rep.solver_version,
        inputs_hash=rep.inputs_hash, iterations=rep.iterations)


def failed_record(inst: Instance, part: str, status: str, error: str, wall_s: float) -> Record:
    return inst.record(part, 1).with_(status=status, error=error, wall_s=wall_s)


# ------------------------------------------------------------------------------------------------
# Methods
# ------------------------------------------------------------------------------------------------
def _run_solver(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    # the instance's deadline: its solve and its ranges step (deterministic: the limit for each, as `ranges`)
    options = inst.solver_options().with_deadline(1.0 if inst.options.get("ranges_within") is None else 2.0)
    hint = None
    if inst.hint is not None:
        try:
            hint = parse_design(inst.hint)
        except ScenarioError:  # a neighbour's design from an older record format: no warm start
            hint = None
    res, hinted = None, False
    if hint is not None:
        try:
            res, hinted = exact.solve(sc, options=options, hint=hint, catalog=catalog), True
        except TimeLimitReached:
            raise
        except ScenarioError:
            pass  # solve() skips a hint outside the space; should it ever reject one, solve without it
    if res is None:
        res = exact.solve(sc, options=options, catalog=catalog)
    record = solve_record(inst, res, catalog, inst.step or "exact")
    if hinted:
        record = record.with_(hint_from=inst.hint_from)
    return [after_solve(record, "ranges", lambda: _ranges(inst, sc, res, catalog, options), "ranges")]


def after_solve(record: Record, step: str, run: Callable[[], object], field_name: str | None = None) -> Record:
    """`record` with the result of a step run after its solve (in `field_name`), or, when the step fails or is
    refused, with the step's name and why in `step_failed`/`step_error`: the solve's status, objective and
    design are never changed by a later step."""
    try:
        value = run()
    except ScenarioError as exc:
        return record.with_(step_failed=step, step_error=f"refused: {exc}")
    except Exception as exc:  # noqa: BLE001 -- a bug in a later step must not discard a proven optimum
        return record.with_(step_failed=step, step_error=traceback.format_exception_only(type(exc), exc)[-1].strip())
    return record if field_name is None else record.with_(**{field_name: value})


def _ranges(inst: Instance, sc: Scenario, res, catalog: Catalog, options) -> dict | None:
    """The decision ranges around a proven optimum [OBJ-4] when the instance asks for them (`ranges_within`),
    on `options` (the solve's, with its deadline)."""
    within = inst.options.get("ranges_within")
    if within is None or res.report.status != "OPTIMAL" or res.report.objective_name not in RANGE_OBJECTIVES:
        return None
    out = decision_ranges(sc, within_pct=ranges_tolerance(within), options=options, catalog=catalog, optimum=res)
    return {"within_pct": str(out.within_pct), "proven": out.proven, "limit": float(out.limit),
            "solves": out.solves, "wall_s": round(out.wall_s, 3), "ranges": [r.as_dict() for r in out.ranges]}


def _run_heuristic(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    res = heuristic.run_heuristic(sc, budget=heuristic_budget(inst.options["budget"]), seed=inst.options["seed"])
    return [solve_record(inst, res, catalog, "heuristic")]


def _run_baselines(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    t0 = time.perf_counter()
    results = baselines.run_baselines(sc, catalog)
    wall = time.perf_counter() - t0
    out = []
    for r in results:
        # one enumeration run prices every baseline: wall_s is the whole instance's time
        rec = inst.record(r.name, len(results)).with_(
            wall_s=wall, solver_version=f"{package_version()} (evaluator enumeration)",
            inputs_hash=inputs_hash(sc, {"method": "baselines", "baseline": r.name}), description=r.description)
        if r.evaluation is None:
            rec = rec.with_(status="INFEASIBLE", error=r.error)
        else:
            rec = rec.with_(status="BASELINE", **evaluation_fields(r.evaluation, catalog),
                            **objective_fields(r.evaluation.metrics.objective(sc.objective)))
        out.append(rec)
    return out


def _run_pareto(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    o = inst.options
    t0 = time.perf_counter()
    result = exact.pareto(sc, options=inst.solver_options())
    wall = time.perf_counter() - t0
    points = tuple(FrontPoint(**evaluation_fields(ev, catalog)) for ev in result.points)
    return [inst.record("front", 1).with_(status="FRONT", wall_s=wall, front=points, description=front_statement(result),
                                          solver_version=solver_version(), inputs_hash=inputs_hash(sc, o))]


def _run_mix(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    return run_mix(inst, sc, catalog)


#: Methods that are a step after a scenario's exact solve (their own instance), by the step's name.
LATER_STEPS = {"pareto": "front"}

RUNNERS: dict[str, Callable[[Instance, Scenario, Catalog], list[Record]]] = {
    "exact": _run_solver, "ladder": _run_solver, "heuristic": _run_heuristic, "baselines": _run_baselines,
    "pareto": _run_pareto, "mix": _run_mix,
}


def run_instance(inst: Instance) -> list[Record]:
    """Solve one instance; never raises (an infeasible scenario and a crash become records)."""
    part = inst.step or inst.method
    t0 = time.perf_counter()
    try:
        sc = parse_scenario(inst.scenario_data)  # with its own catalog files (absolute paths)
        records = RUNNERS[inst.method](inst, sc, scenario_catalog(sc))
    except TimeLimitReached as exc:  # the instance's deadline passed before any design: unsolved, not infeasible
        records = [failed_record(inst, part, "TIME_LIMIT", str(exc), time.perf_counter() - t0)]
    except ScenarioError as exc:
        records = [failed_record(inst, part, "INFEASIBLE", str(exc), time.perf_counter() - t0)]
    except Exception as exc:  # noqa: BLE001 -- a bug in a method: record it, a re-run retries
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        records = [failed_record(inst, part, "ERROR", tb, time.perf_counter() - t0)]
    if inst.method in LATER_STEPS and records[0].error is not None and records[0].metrics is None:
        # a front is a step after a scenario's solve: its failure names the step (the solve's record stands)
        records = [r.with_(step_failed=LATER_STEPS[inst.method], step_error=r.error) for r in records]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return [r.with_(finished_at=stamp) for r in records]


def alias_records(inst: Instance, source: list[Record]) -> list[Record]:
    """Records of an aliased ladder step: the source instance's record under this instance's key."""
    return [src.with_(key=inst.key, method=inst.method, part=inst.step, parts=1, step=inst.step,
                      copied_from=src.key) for src in source]
