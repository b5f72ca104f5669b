"""Numeric safety (formulations/objectives.md, "Integer range"): every linear row a solve submits stays
inside CP-SAT's int64 range, for every built-in scenario x objective (latency, energy, EDP) x assumption
profile (memory model x energy accounting). Models are built, not solved
(`specpim_cp/solvers/exact/numeric.py`).

The default run covers examples, paper (which holds the mix set's base scenarios) and staged; every other
built-in scenario set (paper-trees, paper-full, paper-assumptions, the large tree sets) is marked slow. `benchmarks/bench_numeric.py` prints the largest log2 magnitude of every
scenario x objective x profile of every set.
"""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact.guards import INT_LIMIT
from specpim_cp.solvers.exact.numeric import (
    INCUMBENT_FAMILIES,
    OBJECTIVES,
    PROFILES,
    objective_magnitude,
    row_magnitudes,
    scenario_reports,
)

DEFAULT_SETS = ("examples", "paper", "staged")
#: Every other built-in scenario set (the mix set's files are covered through their base scenarios, below).
SLOW_SETS = tuple(sorted(set(builtin_sets()) - set(DEFAULT_SETS) - {"mix"}))


def _params():
    sets = builtin_sets()
    out = []
    for name in DEFAULT_SETS + SLOW_SETS:
        marks = [pytest.mark.slow] if name in SLOW_SETS else []
        out += [pytest.param(p, id=f"{name}/{p.stem}", marks=marks) for p in sorted(sets[name].glob("*.toml"))]
    return out


@pytest.mark.parametrize("path", _params())
def test_every_row_a_solve_submits_fits_cp_sat(path):
    """Per objective and profile: (1) the base model's rows the solve keeps have sum |c| x max|bound| <= 2^62;
    (2) at the largest incumbent `ratio.measure` admits, every row and objective passes CP-SAT's own rule
    (positive and negative parts each <= 2^62, so the two-sided OBJ rows stay within 2^63); (3) at the
    model's own ub(round time / energy) as incumbent, only the incumbent-dependent OBJ-1/OBJ-2 rows can
    break that rule, and only where `ratio.measure` would refuse such an incumbent with a ScenarioError."""
    reports = scenario_reports(load_scenario(path))
    assert len(reports) == len(OBJECTIVES) * len(PROFILES)
    for r in reports:
        where = f"{r.scenario} {r.objective} {r.profile}"
        if r.solve_refuses:  # a tree space beyond the menu under EDP: `solve` refuses it in one line, no model
            assert "[TREE-6] does not apply" in r.refused, where
            continue
        assert not r.refused, f"{where}: build_model refused the scenario: {r.refused}"
        assert r.base_worst.activity <= INT_LIMIT, f"{where}: {r.base_worst.describe()}"
        assert r.guarded_worst.checker <= INT_LIMIT, f"{where}: {r.guarded_worst.describe()}"
        assert r.guarded_solve_worst.activity <= 2 * INT_LIMIT, f"{where}: {r.guarded_solve_worst.describe()}"
        for row in r.checker_over:
            assert row.family.startswith(INCUMBENT_FAMILIES) and r.guard_refuses, f"{where}: {row.describe()}"


def test_the_mix_bases_are_covered_by_the_default_sets():
    """The mix set's base scenarios are measured by the default run (they are paper scenarios)."""
    sets = builtin_sets()
    covered = {load_scenario(p).content_hash() for name in DEFAULT_SETS for p in sets[name].glob("*.toml")}
    bases = [load_mix(p).base for p in sorted(sets["mix"].glob("*.toml"))]
    assert bases and all(b.content_hash() in covered for b in bases), [b.name for b in bases]


def test_row_magnitudes_on_a_small_model():
    """activity = sum |c| x max|bound|, CP-SAT's checker = max(positive, -negative part), cross = a
    coefficient x another variable's bound; negated literals, lin_max expressions and the objective too."""
    m = cp_model.CpModel()
    x = m.new_int_var(-5, 10, "x")
    p = m.new_int_var(0, 1000, "p")
    t = m.new_bool_var("t")
    m.add(3 * x - 7 * p <= 4)
    m.add(p >= 50 * t).only_enforce_if(~t)
    m.add_max_equality(p, [2 * x + 1, x])
    m.minimize(4 * p - x + 3)
    rows = row_magnitudes(m.proto)
    first, second, third = rows
    assert (first.activity, first.checker, first.cross) == (3 * 10 + 7 * 1000, 7 * 1000 + 3 * 5, 3 * 1000)
    assert (first.coeff, first.coeff_var, first.bound, first.bound_var) == (7, "p", 1000, "p")
    assert (second.activity, second.cross, second.enforced) == (1000 + 50, 50 * 1000, True)
    assert third.activity == 1000  # the target p; the expressions 2x + 1 (21) and x (10) are smaller
    obj = objective_magnitude(m.proto, "objective")
    assert (obj.activity, obj.checker, obj.cross) == (4 * 1000 + 10 + 3, 4 * 1000 + 5 + 3, 1 * 1000)
