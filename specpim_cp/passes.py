"""Shared pass arithmetic below the evaluator and the exact model: token counts, acceptance rates and
the integer round statistics of a speculation choice.

Both the evaluator and the CP-SAT model read these functions (never their own copies), so "how many
tokens does this pass process" and "what does this choice yield per round" have one answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from specpim_cp import speculation as spec
from specpim_cp.catalog import Catalog
from specpim_cp.design import DrafterChoice, SpecChoice
from specpim_cp.scenario import Scenario


# -- tokens per pass -------------------------------------------------------------------------
def verifier_tokens(batch: int, choice: SpecChoice) -> int:
    """The verification pass: every drafted token of every drafter plus one, per sequence."""
    return batch * (sum(d.draft_length for d in choice.drafters) + 1)


def drafter_cycle_tokens(batch: int, drafter: DrafterChoice) -> int:
    """A drafter's own pass in one cycle: one token per sequence, or (staged) the draft2's gamma2 + 1."""
    return batch if drafter.staging is None else batch * (drafter.staging.draft_length + 1)


def draft2_tokens(batch: int) -> int:
    """A draft2 model's step: one token per sequence."""
    return batch


def pass_tokens(batch: int, choice: SpecChoice, index: int) -> int:
    """Tokens of model `index`'s pass (0: the verifier's verification pass, i + 1: drafter i's cycle pass)."""
    return verifier_tokens(batch, choice) if index == 0 else drafter_cycle_tokens(batch, choice.drafters[index - 1])


# -- acceptance ------------------------------------------------------------------------------
def drafter_acceptance(scenario: Scenario, catalog: Catalog, i: int) -> float:
    """Drafter i's acceptance rate: the scenario's value, else the catalog's (pair, family, default)."""
    e = scenario.drafters[i]
    return e.acceptance if e.acceptance is not None else catalog.default_acceptance(e.model, scenario.verifier.model)


def draft2_acceptance(scenario: Scenario, catalog: Catalog, i: int, draft2: str) -> float:
    st = scenario.drafters[i].staging
    if st is not None and draft2 in st.acceptance:
        return st.acceptance[draft2]
    return catalog.default_acceptance(draft2, scenario.drafters[i].model)


@dataclass(frozen=True)
class Acceptance:
    """The acceptance rates of a scenario: per drafter, and per drafter and draft2 model."""

    drafters: tuple[float, ...]
    draft2: tuple[dict[str, float], ...]

    @classmethod
    def of(cls, scenario: Scenario, catalog: Catalog) -> Acceptance:
        n = len(scenario.drafters)
        d2 = tuple({name: draft2_acceptance(scenario, catalog, i, name)
                    for name in (scenario.drafters[i].staging.draft2 if scenario.drafters[i].staging else ())}
                   for i in range(n))
        return cls(tuple(drafter_acceptance(scenario, catalog, i) for i in range(n)), d2)

    def alpha2(self, i: int, draft2: str) -> float:
        return self.draft2[i][draft2]


# -- round statistics ------------------------------------------------------------------------
@dataclass(frozen=True)
class RoundStats:
    """The integer statistics of a speculation choice (the contract of `speculation.py`).

    tokens_micro: expected committed tokens per round per sequence x TOKENS_SCALE (pipelined rounds
    that continue drop the bonus token, BONUS-1); q: P(a pipelined round does not continue) x Q_SCALE
    (0 without a pipeline); outcomes: joint drafting cycles per drafter with integer probabilities;
    rounds_scaled: expected cycles per drafter x OUTCOME_SCALE; drafter_q: per drafter, P(its
    optimistic drafting is wasted) x Q_SCALE when pipelined (0 otherwise).
    """

    tokens_micro: int
    q: int
    outcomes: spec.Outcomes
    dists: tuple[spec.RoundsDistInt, ...]
    rounds_scaled: tuple[int, ...]
    drafter_q: tuple[int, ...]


def round_stats(choice: SpecChoice, acceptance: Acceptance) -> RoundStats:
    alpha2 = tuple(None if d.staging is None else acceptance.alpha2(i, d.staging.draft2)
                   for i, d in enumerate(choice.drafters))
    # a design without drafters on a scenario with drafters is autoregressive decoding (GPU-AR)
    return _round_stats(choice, acceptance.drafters[:len(choice.drafters)], alpha2)


@lru_cache(maxsize=1 << 16)
def _round_stats(choice: SpecChoice, alphas: tuple[float, ...], alpha2: tuple[float | None, ...]) -> RoundStats:
    gammas = choice.gammas
    dists = tuple(((d.draft_length, spec.OUTCOME_SCALE),) if d.staging is None else
                  spec.staged_rounds_int(a2, d.staging.draft_length, d.draft_length)
                  for d, a2 in zip(choice.drafters, alpha2, strict=True))
    pipe = choice.pipeline
    return RoundStats(
        tokens_micro=spec.expected_tokens_micro(alphas, gammas, pipeline=pipe),  # BONUS-1
        q=spec.fail_q(alphas, gammas) if pipe else 0,
        outcomes=spec.draft_outcomes(dists),
        dists=dists,
        rounds_scaled=tuple(spec.expected_rounds_scaled(d) for d in dists),
        drafter_q=tuple(spec.drafter_fail_q(alphas, gammas, i) if pipe else 0 for i in range(len(gammas))),
    )
