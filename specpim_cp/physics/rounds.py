"""Shared pass arithmetic below the evaluator and the exact model: token counts, acceptance rates and
the integer round statistics of a speculation choice.

Both the evaluator and the CP-SAT model read these functions (never their own copies), so "how many
tokens does this pass process" and "what does this choice yield per round" have one answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.costs import CostModel
from specpim_cp.problem.design import DrafterChoice, SpecChoice
from specpim_cp.problem.heads import with_heads
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.space import ModelOptions, drafter_alpha, drafter_tree_vector
from specpim_cp.problem.trees import RankedVector, TreeDraft, draft_pass_tokens


# -- tokens per pass -------------------------------------------------------------------------
def verifier_tokens(batch: int, choice: SpecChoice) -> int:
    """The verification pass: every drafted node of every drafter's chain or tree plus one, per sequence."""
    return batch * (sum(d.nodes for d in choice.drafters) + 1)


def drafter_cycle_tokens(batch: int, drafter: DrafterChoice) -> int:
    """A drafter's own pass in one cycle: one token per sequence (a chain step, or a tree's root pass),
    or (staged) the draft2's gamma2 + 1."""
    return batch if drafter.staging is None else batch * (drafter.staging.draft_length + 1)


def tree_pass_tokens(batch: int, drafter: DrafterChoice) -> tuple[int, ...]:
    """The passes that draft a token tree, depth by depth: one over the root and one over the nodes of
    every depth but the last (1, w_1, ..., w_{D-1} tokens per sequence)."""
    assert drafter.tree is not None
    return tuple(batch * w for w in draft_pass_tokens(drafter.tree))


def falling_prices(costs: CostModel, model: ModelOptions, tokens: Sequence[int]) -> list[str]:
    """The premise of dominance rule [TREE-4], checked on the price tables: every operator (at every
    placement), all-reduce and embedding-lookup price of `model` on each of its architectures, time and
    energy, is non-decreasing along the ascending token counts `tokens`. Returns each exception as
    'arch what: t1 -> t2 tokens' (empty: the premise holds there)."""
    out = []
    for a in model.archs:
        series = {f"{op} {p.engine}{p.share or ''} {p.layout}": [costs.placement_cost(model.spec, op, p, a, t)
                                                                 for t in tokens]
                  for op in PLACEABLE_OPS for p in model.allowed(a, op)}
        series["allreduce"] = [costs.allreduce_cost(model.spec, a, t) for t in tokens]
        for lay in sorted({p.layout for p in model.allowed(a, "lm_head")}):
            series[f"embedding {lay}"] = [costs.embedding_cost(model.spec, a, lay, t) for t in tokens]
        for what, prices in series.items():
            for (t0, c0), (t1, c1) in zip(zip(tokens, prices), zip(tokens[1:], prices[1:])):
                if c0 is not None and c1 is not None and (c1.time_ns < c0.time_ns or c1.energy_nj < c0.energy_nj):
                    out.append(f"{a.label()} {what}: {t0} -> {t1} tokens")
    return out


def draft2_tokens(batch: int) -> int:
    """A draft2 model's step: one token per sequence."""
    return batch


def pass_tokens(batch: int, choice: SpecChoice, index: int) -> int:
    """Tokens of model `index`'s pass (0: the verifier's verification pass, i + 1: drafter i's cycle pass)."""
    return verifier_tokens(batch, choice) if index == 0 else drafter_cycle_tokens(batch, choice.drafters[index - 1])


# -- acceptance ------------------------------------------------------------------------------
def drafter_acceptance(scenario: Scenario, catalog: Catalog, i: int) -> float:
    """Drafter i's acceptance rate: the scenario's value, else the largest entry of its token trees'
    acceptance_vector (rank 1 once ranked by probability), else the catalog's (pair, family, default)."""
    return drafter_alpha(scenario, catalog, i)


def tree_vector(scenario: Scenario, catalog: Catalog, i: int, alpha: float) -> RankedVector | None:
    """Drafter i's positional acceptance vector p_1..p_R for token trees (None without a [tree] table):
    the scenario's acceptance_vector ranked by probability and cut or padded to max_children ([TREE-5];
    its `note` says how), else alpha with the catalog's conditional tail ([TREE])."""
    return drafter_tree_vector(scenario, catalog, i, alpha)


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
    trees: tuple[tuple[float, ...] | None, ...] = ()  # per drafter: positional vector of its token trees
    one_pass: tuple[bool, ...] = ()  # per drafter: its whole draft (chain or tree) from one pass (Medusa)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the scenario's acceptance vectors became ([TREE-5]: re-ranked by probability, ranks beyond
        max_children dropped), one line per drafter it concerns (naming the field), for a report to show."""
        return tuple(p.note for p in self.trees if getattr(p, "note", ""))

    @classmethod
    def of(cls, scenario: Scenario, catalog: Catalog) -> Acceptance:
        n = len(scenario.drafters)
        d2 = tuple({name: draft2_acceptance(scenario, catalog, i, name)
                    for name in (scenario.drafters[i].staging.draft2 if scenario.drafters[i].staging else ())}
                   for i in range(n))
        alphas = tuple(drafter_acceptance(scenario, catalog, i) for i in range(n))
        trees = tuple(tree_vector(scenario, catalog, i, alphas[i]) for i in range(n))
        return cls(alphas, d2, trees, one_pass_drafters(scenario, catalog))

    def tree(self, i: int) -> tuple[float, ...]:
        """Drafter i's positional vector (ScenarioError if it has no token trees)."""
        p = self.trees[i] if i < len(self.trees) else None
        if p is None:
            raise ScenarioError(f"drafters[{i}]: a token tree needs a [drafters.tree] table in the scenario")
        return p

    def alpha2(self, i: int, draft2: str) -> float:
        return self.draft2[i][draft2]


# -- round statistics ------------------------------------------------------------------------
@dataclass(frozen=True)
class RoundStats:
    """The integer statistics of a speculation choice (the contract of `physics/speculation.py`).

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
    vectors = tuple(None if d.tree is None else acceptance.tree(i) for i, d in enumerate(choice.drafters))
    # a design without drafters on a scenario with drafters is autoregressive decoding (GPU-AR, [NOSPEC]):
    # every drafter runs no cycle and wastes nothing (its per-drafter entries are 0)
    n = len(choice.drafters)
    stats = _round_stats(choice, acceptance.drafters[:n], alpha2, vectors, acceptance.one_pass[:n])
    if not choice.drafters and acceptance.drafters:
        zeros = (0,) * len(acceptance.drafters)
        stats = replace(stats, rounds_scaled=zeros, drafter_q=zeros)
    return stats


def one_pass_drafters(scenario: Scenario, catalog: Catalog) -> tuple[bool, ...]:
    """Per drafter: whether one pass drafts all its positions (a Medusa head, [HEAD-3])."""
    cat = with_heads(catalog, scenario)
    return tuple(bool(getattr(cat.models.get(d.model), "one_pass", False)) for d in scenario.drafters)


@lru_cache(maxsize=1 << 16)
def _round_stats(choice: SpecChoice, alphas: tuple[float, ...], alpha2: tuple[float | None, ...],
                 vectors: tuple[tuple[float, ...] | None, ...], one_pass: tuple[bool, ...] = ()) -> RoundStats:
    pipe = choice.pipeline
    # a token tree is drafted in one cycle (its depth passes, CYC-1); a chain in gamma cycles, or staged;
    # a one-pass drafter (Medusa, [HEAD-3]) in one cycle whatever it drafts
    single = one_pass or (False,) * len(choice.drafters)
    dists = tuple(((1, spec.OUTCOME_SCALE),) if d.tree is not None or single[i] else
                  ((d.draft_length, spec.OUTCOME_SCALE),) if d.staging is None else
                  spec.staged_rounds_int(a2, d.staging.draft_length, d.draft_length)
                  for i, (d, a2) in enumerate(zip(choice.drafters, alpha2, strict=True)))
    if all(v is None for v in vectors):  # chains: the chain formulas
        gammas = choice.gammas
        tokens = spec.expected_tokens_micro(alphas, gammas, pipeline=pipe)  # BONUS-1
        q = spec.fail_q(alphas, gammas) if pipe else 0
        drafter_q = tuple(spec.drafter_fail_q(alphas, gammas, i) if pipe else 0 for i in range(len(gammas)))
    else:  # token trees: the depth-mass formulas [TREE-2]
        drafts = [(a, d.draft_length) if v is None else TreeDraft(v, d.tree)
                  for a, v, d in zip(alphas, vectors, choice.drafters, strict=True)]
        tokens = spec.expected_tokens_micro_drafts(drafts, pipeline=pipe)
        q = spec.fail_q_drafts(drafts) if pipe else 0
        drafter_q = tuple(spec.drafter_fail_q_drafts(drafts, i) if pipe else 0 for i in range(len(drafts)))
    return RoundStats(
        tokens_micro=tokens, q=q, outcomes=spec.draft_outcomes(dists), dists=dists,
        rounds_scaled=tuple(spec.expected_rounds_scaled(d) for d in dists), drafter_q=drafter_q)
