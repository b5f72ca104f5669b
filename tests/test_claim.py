"""The evaluator's re-check of a claim (`finish.tight_claim`): one boxed CP-SAT solve confirms the evaluator's
(round ns, energy nJ) when CP-SAT's tight price is exactly that, and any other expectation is answered with
CP-SAT's own price (two unboxed solves), so a mismatch is still caught and named."""

from __future__ import annotations

import pytest

from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.exact.finish import tight_claim
from specpim_cp.solvers.exact.guards import build_model
from specpim_cp.solvers.shared_evaluator import shared_evaluator

OPTS = SolverOptions(time_limit_s=60.0, workers=1, deterministic=True)


@pytest.mark.parametrize("name", ["examples/opt-13b", "examples/gpt2-staged"])
def test_boxed_check_and_unboxed_solves_claim_the_same_price(name):
    sc = load_scenario(resolve_scenario_path(name))
    catalog = scenario_catalog(sc)
    design = solve(sc, options=OPTS, catalog=catalog).design
    sm = build_model(sc, catalog, shared_evaluator(sc, catalog))
    m = sm.ev.evaluate(design).metrics
    t, e = m.round_time_ns, m.energy_nj_per_round
    spent: list[float] = []
    unboxed = tight_claim(sm, design, OPTS)
    assert unboxed[:2] == (t, e)
    assert tight_claim(sm, design, OPTS, spent, expect=(t, e)) == unboxed
    assert len(spent) == 1  # confirmed by the one boxed solve
    for wrong in ((t - 1, e), (t, e - 1), (t + 1, e), (t, e + 1), (0, 0)):
        spent.clear()
        assert tight_claim(sm, design, OPTS, spent, expect=wrong) == unboxed  # CP-SAT's own price, not `wrong`
        assert len(spent) >= 2  # the box did not confirm it: the unboxed solves answered
