"""Monte Carlo check of a priced design: its round structure, taken from the evaluator, is simulated."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from specpim_cp.catalog import Catalog
from specpim_cp.check.simulate import SimulationResult, simulate_rounds
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario


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


def simulate_design(scenario: Scenario, design: Design, rounds: int, seed: int,
                    catalog: Catalog | None = None) -> DesignSimulation:
    ev = Evaluator(scenario, catalog)
    result = ev.evaluate(design)
    b = result.breakdown
    alphas = [d.alpha for d in b.drafters]
    gammas = [d.draft_length for d in b.drafters]
    staging = [None if d.staging is None else (d.staging.alpha2, d.staging.draft_length) for d in b.drafters]
    cycles = [d.cycle_ns for d in b.drafters]
    # a token tree's drafter: its positional vector and width profile; cycle_ns is its whole drafting
    trees = [None if md.tree is None else (ev.acceptance.tree(i), md.tree) for i, md in enumerate(design.drafters)]
    sim = simulate_rounds(alphas, gammas, staging, cycles, b.round.verify_ns, b.round.sync_ns,
                          design.pipeline, rounds, seed, trees=trees if any(trees) else None)
    return DesignSimulation(sim, result.metrics.round_time_ns,
                            result.metrics.tokens_per_round_micro / spec.TOKENS_SCALE)
