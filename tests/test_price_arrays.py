"""Operator prices over numpy arrays (`CostModel.placement_costs`) are the scalar formula's integers
(`CostModel.op_cost`, one token count at a time, the reference): time ns, energy nJ and every energy
component bit-identical on every placement, architecture and pass of the built-in scenario sets."""

from __future__ import annotations

import pytest

from specpim_cp.catalog.heads import HeadSpec
from specpim_cp.physics.costs import CostModel
from specpim_cp.problem.builtin_sets import scenario_files
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.exact.prices import pass_token_counts

SETS = ("paper", "paper-full", "heads", "edge", "staged", "examples")
#: The default run's sample: every scenario of the small sets, a spread of paper-full (batch 1 to 64, the
#: three families); the whole of every set is the slow sweep.
SAMPLE = {"paper-full": ("opt-13b-full-b1", "llama-32.5b-full-b16", "palm-62b-full-b8", "palm-62b-full-b64")}
#: Counts beyond the scenario's passes, so the comparison also covers a prefill-sized pass.
EXTRA_TOKENS = (1, 3, 64, 257)


def _scenarios(sample: bool) -> list:
    out = []
    for name in SETS:
        for path in scenario_files([name]):
            if sample and name in SAMPLE and path.stem not in SAMPLE[name]:
                continue
            out.append(pytest.param(path, id=f"{name}/{path.stem}"))
    return out


def _compare(path) -> int:
    """Prices every placement the physics offers of every model, architecture and operator of the scenario at
    every pass's token count, once over arrays and once count by count (two fresh cost models); returns how
    many operators were priced over arrays."""
    sc = load_scenario(path)
    catalog = scenario_catalog(sc)
    space = DesignSpace(sc, catalog)
    arrays, scalar = CostModel(sc, catalog), CostModel(sc, catalog)
    vectorised = 0
    for d in space.models:
        tokens = sorted(set(pass_token_counts(sc.batch_size, space.choice_list, d.index)) | set(EXTRA_TOKENS))
        for op in PLACEABLE_OPS:
            pairs = [(a, p) for a in d.archs for p in arrays.placements(a)]
            got = arrays.placements_costs(d.spec, op, pairs, tokens)
            for (a, p), by_tokens in zip(pairs, got, strict=True):
                want = {t: scalar.op_cost(d.spec, op, p.engine, p.share, a, t, p.layout) for t in tokens}
                assert by_tokens == want, (path.name, d.spec.name, a, op, p)
            shape = arrays.shapes(d.spec)[op]
            vectorised += (not shape.parts and not (isinstance(d.spec, HeadSpec) and d.spec.kind == "ngram")
                           and arrays._costs_grid(d.spec, shape, pairs, tokens) is not None)
    return vectorised


@pytest.mark.parametrize("path", _scenarios(sample=True))
def test_array_prices_equal_the_scalar_formula(path):
    assert _compare(path) > 0  # the array path priced something (not only the count-by-count fallback)


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in _scenarios(sample=False) if p not in _scenarios(sample=True)])
def test_array_prices_equal_the_scalar_formula_on_every_builtin_scenario(path):
    assert _compare(path) > 0


def test_an_integer_beyond_float64_is_priced_count_by_count():
    """A kernel whose integers reach 2^53 is refused by the array path and priced by the scalar formula."""
    path = scenario_files(["paper"])[0]
    sc = load_scenario(path)
    catalog = scenario_catalog(sc)
    space = DesignSpace(sc, catalog)
    costs = CostModel(sc, catalog)
    d = space.models[0]
    a = d.archs[0]
    huge = [1 << 40]
    shape = costs.shapes(d.spec)["score"]
    host = next(p for p in costs.placements(a) if p.engine == "host")
    assert costs._costs_grid(d.spec, shape, [(a, host)], huge) is None
    got = costs.placement_costs(d.spec, "score", host, a, huge)
    assert got == {huge[0]: CostModel(sc, catalog).op_cost(d.spec, "score", "host", 0, a, huge[0], host.layout)}
