"""The first incumbent of a solve: the best of the user's hint and the baselines that lie in the model's
space, with the best speculation choice on its hardware (a closer start saves Dinkelbach iterations)."""

from __future__ import annotations

from collections.abc import Collection

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.ablation_ladder import unrestricted
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.exact.model import SpecModel


def best_start(sm: SpecModel, ev: Evaluator, objective: str, hint: Design | None,
               baselines: bool = True) -> Evaluation | None:
    """The best feasible design among the hint and (`baselines`) the baselines that lies in the (restricted)
    space."""
    best = best_known(sm, ev, objective, hint, sm.scenario if baselines else None)
    return None if best is None else best_choice_for(sm, ev, objective, best)


def best_known(sm: SpecModel, ev: Evaluator, objective: str, hint: Design | None, baselines_of: Scenario | None,
               skip: tuple[type[Exception], ...] = (ScenarioError,)) -> Evaluation | None:
    """The best of the hint and the baselines of `baselines_of` (None: none) that lie in the model's space (a
    candidate raising one of `skip` is left out), priced by the evaluator; None when none does."""
    candidates = [hint] if hint is not None else []
    candidates += [b.evaluation.design for b in (space_baselines(baselines_of, sm.catalog) if baselines_of else ())
                   if b.evaluation is not None and (len(b.evaluation.design.drafters) == sm.n_drafters
                                                    or (not b.evaluation.design.drafters and sm.no_spec is not None))]
    best = None
    for d in candidates:
        try:
            sm.decision_literals(d)
            e = ev.evaluate(d)
        except skip:
            continue
        if best is None or e.metrics.objective(objective) < best.metrics.objective(objective):
            best = e
    return best


def space_baselines(scenario: Scenario, catalog) -> list:
    """The baselines of `scenario` without the ablation ladder's restrictions (`unrestricted`: kept per
    scenario content by `run_baselines`, so the scenario's ladder steps and its batch baselines price them
    once); those of `scenario` itself when that space is refused. The caller keeps only the designs its
    own model's space holds."""
    from specpim_cp.solvers.baselines import run_baselines

    free = unrestricted(scenario)
    if free is not scenario:
        try:
            return run_baselines(free, catalog)
        except ScenarioError:
            pass
    return run_baselines(scenario, catalog)


#: Most speculation choices `best_choice_for` prices one by one.
MAX_START_CHOICES = 20_000


def best_choice_for(sm: SpecModel, ev: Evaluator, objective: str, start: Evaluation,
                    exclude: Collection[int] = (), limit: int | None = MAX_START_CHOICES) -> Evaluation:
    """The start design's hardware and placements with the best speculation choice of the space (every
    choice priced by the evaluator but the indices in `exclude`): a closer first incumbent saves Dinkelbach
    iterations. With more than `limit` choices, the start as it is."""
    if limit is not None and len(sm.choices) > limit:
        return start
    d = start.design
    archs = [md.arch for _, md in d.models()]
    places = [md.placement for _, md in d.models()]
    best, best_value = d, start.metrics.objective(objective)
    for k, c in enumerate(sm.choices):
        if k in exclude or (c.speculates and len(archs) < sm.space.n_models):  # a start alone has no drafters
            continue
        cand = sm.space.build(archs, places, c)
        try:
            if not c.speculates:  # the verifier alone may not keep its hardware (a shared device's slice)
                ev.check(cand)
            value = ev.metrics(cand, check=False).objective(objective)
        except ScenarioError:  # e.g. a draft2 model that cannot run on this drafter's host
            continue
        if value < best_value:
            best, best_value = cand, value
    return start if best is d else ev.evaluate(best)
