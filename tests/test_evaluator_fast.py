"""The evaluator's fast path: `Evaluator.metrics` equals `Evaluator.evaluate(...).metrics` exactly, and its
caches (per-model pieces, memoised speculation and cost functions, bounded and clearable) never change a
price, on random valid designs of every shipped example scenario."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from helpers import build_design

from specpim_cp.catalog import default_catalog
from specpim_cp.design import Design, Staging
from specpim_cp.errors import ScenarioError
from specpim_cp.evaluate import Evaluator
from specpim_cp.graph import PLACEABLE_OPS
from specpim_cp.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.toml"))
CAT = default_catalog()
DESIGNS = 60


@cache
def _scenario(name: str):
    return load_scenario(EXAMPLES / f"{name}.toml")


def _random_design(sc, ev: Evaluator, rng: np.random.Generator) -> Design:
    """A design of the scenario's free space: random architectures, placements, draft lengths, staging
    and pipeline (a few are autoregressive: no drafters at all)."""
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
    if sc.drafters and rng.random() < 0.1:  # autoregressive decoding (GPU-AR's shape)
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
def test_metrics_equal_evaluate_exactly(name):
    sc = _scenario(name)
    ev = Evaluator(sc, CAT)
    priced = 0
    for design in _designs(name):
        full = _outcome(ev.evaluate, design)
        fast = _outcome(ev.metrics, design)
        if isinstance(full, str):
            assert fast == full  # the same rejection, the same message
            continue
        assert fast == full.metrics
        assert type(fast.round_time_ns) is type(fast.energy_nj_per_round) is int
        unchecked = ev.metrics(design, check=False)
        assert unchecked == full.metrics
        keys = [Evaluator.model_key(md) for _, md in design.models()]
        assert ev.metrics(design, check=False, model_keys=keys) == full.metrics
        priced += 1
    assert priced >= DESIGNS // 4, f"{name}: only {priced} of the random designs are feasible"


@pytest.mark.parametrize("name", NAMES)
def test_caches_do_not_change_results(name):
    """A fresh evaluator per design, one reused evaluator, a tiny bounded cache and a cleared cache
    all give the same Metrics and breakdown."""
    sc = _scenario(name)
    designs = _designs(name)
    reused = Evaluator(sc, CAT)
    tiny = Evaluator(sc, CAT, cache_limit=2)
    for _ in range(2):  # the second pass prices every design from warm caches
        for design in designs:
            fresh = _outcome(lambda d: Evaluator(sc, CAT).evaluate(d), design)
            for other in (reused, tiny):
                again = _outcome(other.evaluate, design)
                if isinstance(fresh, str):
                    assert again == fresh
                else:
                    assert again.metrics == fresh.metrics and again.breakdown.as_dict() == fresh.breakdown.as_dict()
    assert 0 < len(reused._pass_cache) and len(tiny._pass_cache) <= 2
    reused.clear_cache()
    assert not reused._pass_cache and not reused._capacity_cache and not reused._cycle_cache
    for design in designs[:10]:
        assert _outcome(reused.metrics, design) == _outcome(lambda d: Evaluator(sc, CAT).metrics(d), design)


def test_pass_price_and_capacity_keep_their_signatures():
    """Callers outside the evaluator (brute force, the heuristic) price single models directly."""
    sc = _scenario("opt-13b")
    ev = Evaluator(sc, CAT)
    design = next(d for d in _designs("opt-13b") if d.drafters and not isinstance(_outcome(ev.evaluate, d), str))
    evaluation = ev.evaluate(design)
    md = design.verifier
    cap = ev.capacity(md)
    assert cap == Evaluator(sc, CAT).capacity(md) == ev.capacity(md, Evaluator.model_key(md))
    tokens = evaluation.breakdown.as_dict()["verifier"]["pass_tokens"]
    assert ev.pass_price(md, tokens, cap.spill_kib).time_ns == evaluation.breakdown.as_dict()["verifier"]["pass_time_ns"]
    drafter = design.drafters[0]
    cycle = ev.drafter_cycle(0, drafter, ev.capacity(drafter).spill_kib)
    assert cycle.time_ns == evaluation.breakdown.as_dict()["drafters"][0]["cycle_ns"]
