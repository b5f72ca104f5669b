"""[PRE-5] The least end-to-end request latency R(x) = P(x) + G L(x): the prefill P (time to first token,
a constant of the hardware choice: each model's architecture and draft2 model) plus G generated tokens
at the latency per token L = T/D, the ratio Dinkelbach minimises (ratio.py, OBJ-1).

P takes finitely many values p_1 < p_2 < ..., one per model prefill. With L_i the least L over the designs
with P(x) <= p_i (a Dinkelbach solve with the rows that forbid every longer prefill), R* = min_i p_i + G L_i
exactly: a design with P(x) = p_i has R >= p_i + G L_i, and the design reaching L_i has R <= p_i + G L_i.
The thresholds are visited from the least; once p_i + G L* (L* the unrestricted least L, a bound below
every L_i) reaches the best R found, no later threshold can win. formulations/prefill.md has the proof.
"""

from __future__ import annotations

import time
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.exact.finish import explain_infeasible, run_details, verify
from specpim_cp.solvers.exact.guards import ModelMismatch
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.ratio import RatioObjective, minimize_ratio
from specpim_cp.solvers.exact.session import SolveSession
from specpim_cp.solvers.exact.starts import best_start
from specpim_cp.solvers.result import SolveReport, SolveResult, Status, inputs_hash, solver_version


def model_prefills(sm: SpecModel) -> list[dict[tuple, int]]:
    """Per model j: (architecture, draft2 model or None) -> its prefill ns (`PrefillModel.model_prefill`:
    a staged drafter's includes its draft2 model's); the keys cover every architecture and staging of j."""
    pf, cat = sm.ev.prefill, sm.catalog
    out = []
    for j, d in enumerate(sm.data):
        draft2s = {None}
        if j:
            draft2s |= {c.drafters[j - 1].staging.draft2 for c in sm.choices
                        if j - 1 < len(c.drafters) and c.drafters[j - 1].staging is not None}
        row = {}
        for a in d.archs:
            base = pf.model_pass(d.spec, a).time_ns
            for d2 in draft2s:
                extra = pf.model_pass(cat.models[d2], a).time_ns if d2 in cat.models else 0
                row[(a, d2)] = base + extra
        out.append(row)
    return out


def prefill_rows(sm: SpecModel, prefills: list[dict[tuple, int]], p: int):
    """The rows P(x) <= p on a clone: model j may not take an architecture whose prefill (with the draft2
    model a choice stages on it) exceeds p; a drafter's rows hold only under the choices that use it."""

    def add(model: cp_model.CpModel) -> None:
        x = [{a: model.get_bool_var_from_proto_index(v.index) for a, v in xs.items()} for xs in sm.x]
        z = [model.get_bool_var_from_proto_index(v.index) for v in sm.z]
        for (a, _), t in prefills[0].items():
            if t > p:
                model.add(x[0][a] == 0)
        for j in range(1, len(prefills)):
            for k, c in enumerate(sm.choices):
                if j - 1 >= len(c.drafters):  # this choice leaves drafter j - 1 unused
                    continue
                st = c.drafters[j - 1].staging
                d2 = None if st is None else st.draft2
                for (a, key_d2), t in prefills[j].items():
                    if key_d2 == d2 and t > p:
                        model.add_implication(z[k], x[j][a].Not())

    return add


def solve_request(sm: SpecModel, run: SolveSession, scenario: Scenario, hint: Design | None,
                  t0: float) -> SolveResult:
    """[PRE-5] The least request latency over the space, by prefill thresholds (module docstring)."""
    ev, g = sm.ev, scenario.generated_tokens
    latency = RatioObjective(sm, "latency")
    start = best_start(sm, ev, "latency", hint, run.start_baselines)
    status, design, _, l_bound = minimize_ratio(run, latency, start=start)
    if status == Status.INFEASIBLE:
        raise ScenarioError(explain_infeasible(sm, run.opts))
    if design is None:
        raise ScenarioError(f"no design found within the time limit ({run.opts.time_limit_s} s)")
    found = [ev.evaluate(design)]
    best = found[0]
    prefills = model_prefills(sm)
    # no design has a shorter prefill than the least of a model every choice uses (the verifier at least)
    used = [0] + [j for j in range(1, len(prefills)) if all(j - 1 < len(c.drafters) for c in sm.choices)]
    least = max(min(prefills[j].values()) for j in used)
    thresholds = sorted({t for row in prefills for t in row.values() if t >= least})
    proven = status == Status.OPTIMAL
    bound: Fraction | None = None  # the least p_i + G x (bound on L_i) over the thresholds solved
    visited = []
    for p in thresholds:
        if p + g * l_bound >= best.metrics.request_fraction():
            break  # [PRE-5] no design with a longer prefill beats the best found
        if run.budget.remaining() <= 0:
            proven = False
            bound = _least(bound, p + g * l_bound)
            break
        below = [e for e in found if e.metrics.prefill_ns <= p]
        start = min(below, key=lambda e: e.metrics.latency_fraction()) if below else None
        st, d, _, b = minimize_ratio(run, latency, extra=prefill_rows(sm, prefills, p), start=start)
        visited.append({"prefill_ns": p, "status": st, "latency": None if d is None else float(b)})
        if st == Status.INFEASIBLE:
            continue
        proven = proven and st == Status.OPTIMAL
        bound = _least(bound, p + g * b)
        if d is not None:
            found.append(ev.evaluate(d))
            best = min(best, found[-1], key=_request_key)
    objective = best.metrics.request_fraction()
    if proven:
        bound = objective
    else:
        bound = min(objective, _least(bound, thresholds[0] + g * l_bound))
    return _report(run, scenario, t0, Status.OPTIMAL if proven else Status.FEASIBLE, best, objective, bound,
                   visited)


def _least(a: Fraction | None, b: Fraction) -> Fraction:
    return b if a is None else min(a, b)


def _request_key(e: Evaluation) -> tuple[Fraction, Fraction]:
    """Least request latency, then least latency per token (then the first found: min is stable)."""
    return e.metrics.request_fraction(), e.metrics.latency_fraction()


def _report(run: SolveSession, scenario: Scenario, t0: float, status: Status, best: Evaluation,
            objective: Fraction, bound: Fraction, visited: list[dict]) -> SolveResult:
    """The evaluator's re-check of the claim (`verify`) and the SolveReport; no canonical tie-break (the
    thresholds' rows are not the canonical optimum's)."""
    evaluation, claim = verify(run, best.design)
    if evaluation.metrics.request_fraction() != objective:
        raise ModelMismatch(f"the evaluator prices request {evaluation.metrics.request_fraction()}, the solve "
                            f"claims {objective}")
    extra = {**run_details(run, claim), "prefill_thresholds": visited, "tie_break": [], "canonical": False,
             "tie_break_note": "none for the request objective (formulations/prefill.md PRE-5)",
             "cp_sat_s": round(run.cp_sat_s, 3)}
    rep = SolveReport(method="cp-sat", objective_name="request", status=status, objective=objective, bound=bound,
                      wall_s=time.perf_counter() - t0, iterations=run.iterations, seed=run.opts.seed,
                      solver_version=solver_version(), inputs_hash=inputs_hash(scenario, run.opts.as_dict()),
                      extra=extra)
    return SolveResult(evaluation, rep)
