"""The evaluator against an independent implementation, and its caches.

- On random valid designs of every shipped example, the evaluator's integers (round time, energy per
  round, tokens) equal what the CP-SAT model computes with every decision fixed (`exact.solve.tight_claim`):
  two implementations of the same arithmetic, one in Python and one as constraints.
- The fast path (`metrics`, `check=False`, precomputed model keys) and every cache (a fresh evaluator per
  design, one reused, a tiny bounded one, a cleared one) give the same prices as a fresh evaluator.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from helpers import build_design

from specpim_cp.catalog import default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import Design, Staging
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact.finish import tight_claim
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.session import SolverOptions

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.toml"))
CAT = default_catalog()
DESIGNS = 60
CLAIMED = 4  # random feasible designs per example checked against CP-SAT (each check is one small solve)


@cache
def _scenario(name: str):
    return load_scenario(EXAMPLES / f"{name}.toml")


def _random_design(sc, ev: Evaluator, rng: np.random.Generator, autoregressive: bool = True) -> Design:
    """A design of the scenario's free space: random architectures, placements (layouts included), draft
    lengths, staging and pipeline (a few are autoregressive: no drafters at all)."""
    n = 1 + len(sc.drafters)
    archs, places = [], []
    for j in range(n):
        options = ev.space.models[j].archs
        arch = options[rng.integers(len(options))]
        allowed = ev.costs.placements(arch)
        archs.append(arch)
        places.append({op: allowed[rng.integers(len(allowed))] for op in PLACEABLE_OPS})
    gammas = [int(rng.integers(1, sc.max_draft_length + 1)) for _ in sc.drafters]
    staging = []
    for entry in sc.drafters:
        st = entry.staging
        if st is None or rng.random() < 0.3:
            staging.append(None)
        else:
            staging.append(Staging(draft2=st.draft2[rng.integers(len(st.draft2))],
                                   draft_length=int(rng.integers(1, st.max_draft_length + 1))))
    pipeline = bool(rng.random() < 0.5)
    if autoregressive and sc.drafters and rng.random() < 0.1:  # autoregressive decoding (GPU-AR's shape)
        return build_design(sc.model_copy(update={"drafters": []}), archs[:1], places[:1], [], [], False)
    return build_design(sc, archs, places, gammas, staging, pipeline)


@cache
def _designs(name: str) -> tuple[Design, ...]:
    sc = _scenario(name)
    ev = Evaluator(sc, CAT)
    rng = np.random.default_rng(sorted(NAMES).index(name) + 17)
    return tuple(_random_design(sc, ev, rng) for _ in range(DESIGNS))


def _outcome(fn, design):
    """fn(design), or the ScenarioError's message."""
    try:
        return fn(design)
    except ScenarioError as exc:
        return f"ScenarioError: {exc}"


@pytest.mark.parametrize("name", NAMES)
def test_evaluator_equals_the_cp_sat_model_on_random_designs(name):
    """Random feasible designs (drawn until CLAIMED are feasible) priced by both implementations."""
    sc = _scenario(name)
    ev = Evaluator(sc, CAT)
    sm = SpecModel(sc, CAT, ev)
    rng = np.random.default_rng(sorted(NAMES).index(name) + 101)
    checked = tries = 0
    while checked < CLAIMED and tries < 4000:
        tries += 1
        design = _random_design(sc, ev, rng, autoregressive=False)
        if sm.space.violations(design):  # outside the scenario's restricted space: no CP-SAT literals
            continue
        try:
            m = ev.metrics(design)
        except ScenarioError:  # e.g. a layout that overflows a side
            continue
        claim = tight_claim(sm, design, SolverOptions(time_limit_s=30, seed=0))
        assert claim == (m.round_time_ns, m.energy_nj_per_round, m.tokens_per_round_micro), design.key()
        checked += 1
    assert checked == CLAIMED, f"{name}: only {checked} random designs were feasible in {tries} tries"


@pytest.mark.parametrize("name", NAMES)
def test_fast_path_and_caches_give_the_evaluators_prices(name):
    """`metrics` (checked, unchecked, with model keys), a reused evaluator, a tiny bounded cache and a
    cleared cache all give a fresh evaluator's Metrics and breakdown, and the same rejections."""
    sc = _scenario(name)
    designs = _designs(name)
    reused = Evaluator(sc, CAT)
    tiny = Evaluator(sc, CAT, cache_limit=2)
    priced = 0
    for _ in range(2):  # the second pass prices every design from warm caches
        for design in designs:
            fresh = _outcome(lambda d: Evaluator(sc, CAT).evaluate(d), design)
            for other in (reused, tiny):
                again = _outcome(other.evaluate, design)
                fast = _outcome(other.metrics, design)
                if isinstance(fresh, str):
                    assert again == fresh and fast == fresh  # the same rejection, the same message
                    continue
                assert again.metrics == fresh.metrics and again.breakdown == fresh.breakdown
                assert fast == fresh.metrics
                assert other.metrics(design, check=False) == fresh.metrics
                keys = [Evaluator.model_key(md) for _, md in design.models()]
                assert other.metrics(design, check=False, model_keys=keys) == fresh.metrics
                priced += 1
    assert priced > 0, f"{name}: no random design is feasible"
    assert 0 < len(reused._pass_cache) and len(tiny._pass_cache) <= 2
    reused.clear_cache()
    assert not reused._pass_cache and not reused._capacity_cache and not reused._cycle_cache
    for design in designs[:10]:
        assert _outcome(reused.metrics, design) == _outcome(lambda d: Evaluator(sc, CAT).metrics(d), design)
