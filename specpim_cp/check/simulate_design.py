"""Monte Carlo check of a priced design: its round structure, taken from the evaluator, is simulated."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from specpim_cp.catalog import Catalog
from specpim_cp.check.simulate import SimDrafter, SimulationResult, simulate_rounds
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import Design, ModelDesign
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.trees import TreeDraft


@dataclass(frozen=True)
class DesignSimulation:
    simulation: SimulationResult
    evaluator_round_ns: int
    evaluator_tokens: float

    def as_dict(self) -> dict:
        sim = asdict(self.simulation)
        sim.update(tokens_agree=self.simulation.tokens_agree(), time_agree=self.simulation.time_agree(),
                   continue_agree=self.simulation.continue_agree(), waste_agree=self.simulation.waste_agree(),
                   evaluator_round_ns=self.evaluator_round_ns, evaluator_tokens=self.evaluator_tokens)
        return sim


def draft_tree(ev: Evaluator, i: int, md: ModelDesign, alpha: float) -> TreeDraft | None:
    """Drafter i's tree as simulated: its token tree, or a one-pass head's chain as the tree of widths 1 (its
    cycle time is its whole drafting per round, as a tree's is)."""
    if md.tree is not None:
        return TreeDraft(ev.acceptance.tree(i), md.tree)
    if ev.acceptance.one_pass[i]:
        return TreeDraft((alpha,), (1,) * md.draft_length)
    return None


def simulate_design(scenario: Scenario, design: Design, rounds: int, seed: int,
                    catalog: Catalog | None = None) -> DesignSimulation:
    ev = Evaluator(scenario, catalog)
    result = ev.evaluate(design)
    b = result.breakdown
    drafters = [
        SimDrafter(
            alpha=d.alpha,
            draft_length=d.draft_length,
            cycle_ns=d.cycle_ns,  # a token tree's: its whole drafting per round
            staging=None if d.staging is None else (d.staging.alpha2, d.staging.draft_length),
            tree=draft_tree(ev, i, md, d.alpha),
        )
        for i, (d, md) in enumerate(zip(b.drafters, design.drafters, strict=True))
    ]
    # a head's hidden-state transfer: a fixed part of the round, like the sync (its expected value)
    sync_ns = b.round.sync_ns + b.round.head_transfer_ns
    sim = simulate_rounds(drafters, b.round.verify_ns, sync_ns, design.pipeline, rounds, seed)
    return DesignSimulation(sim, result.metrics.round_time_ns,
                            result.metrics.tokens_per_round_micro / spec.TOKENS_SCALE)
