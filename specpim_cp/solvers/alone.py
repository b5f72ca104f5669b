"""The optimum against not speculating ([NOSPEC], formulations/speculation_rounds.md): the verifier alone and
the best speculating design, each the optimum of its own part of the space, so a report can say which wins
and by how much. Both parts are scenarios the solvers already take: the scenario without drafters (the
verifier alone on up to the whole device budget) and the scenario with `[space] speculation = "on"`."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from specpim_cp.errors import ScenarioError
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.result import SolveResult


def alone_scenario(scenario: Scenario) -> Scenario:
    """The verifier decoding alone: the scenario without its drafters (its space is NO_SPEC's designs)."""
    return scenario.model_copy(update={"drafters": []})


def speculating_scenario(scenario: Scenario) -> Scenario:
    """The scenario whose every design uses its drafters (`[space] speculation = "on"`)."""
    return scenario.model_copy(update={"space": scenario.space.model_copy(update={"speculation": "on"})})


def margin_pct(better: Fraction, worse: Fraction) -> float:
    """How much better `better` is than `worse`, in percent of `better` (6.5 when 2,156 us against 2,025 us)."""
    return float(100 * (worse - better) / better) if better else 0.0


def has_note(scenario: Scenario) -> bool:
    """Whether a solve of `scenario` gets the note: it has drafters and its space also holds designs without
    them (`DesignSpace.offers_no_spec`)."""
    return bool(scenario.drafters) and scenario.space.speculation == "free" and scenario.space.pipeline != "on"


def other_side(scenario: Scenario, speculates: bool) -> Scenario:
    """The side the note solves for an optimum that speculates (the verifier alone) or not (speculating)."""
    return alone_scenario(scenario) if speculates else speculating_scenario(scenario)


def speculation_note(scenario: Scenario, result: SolveResult,
                     solve: Callable[[Scenario], tuple[Fraction, str]]) -> dict | None:
    """The optimum's comparison with the other side (None for a scenario without drafters or a space that
    excludes not speculating): `solve` gives the other side's optimum and status (the best speculating design
    when the optimum is the verifier alone, else the verifier alone), with the options the optimum was solved
    with."""
    if not has_note(scenario):
        return None
    speculates = bool(result.design.drafters)
    try:
        other = solve(other_side(scenario, speculates))
    except ScenarioError as exc:  # e.g. no speculating design fits the devices
        return speculation_note_of(speculates, result.report.objective_name, result.report.objective, None,
                                   str(exc))
    return speculation_note_of(speculates, result.report.objective_name, result.report.objective, other)


def speculation_note_of(speculates: bool, objective: str, value: Fraction, other: tuple[Fraction, str] | None,
                        error: str | None = None) -> dict:
    """The note's record: whether the optimum (of `value`) speculates, the other side's optimum and status
    (`other`; None with the `error` that says why it has none) and the margin between them."""
    out: dict = {"optimum_speculates": speculates, "objective": objective}
    if other is None:
        out.update({"other": None, "other_status": "none", "margin_pct": None, "error": error})
        return out
    other_value, status = other
    out.update({"other": float(other_value), "other_status": status, "margin_pct": margin_pct(value, other_value)})
    out["verifier_alone" if speculates else "best_speculating"] = float(other_value)
    return out
