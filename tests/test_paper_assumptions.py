"""The built-in set `paper-assumptions` (formulations/paper_assumptions.md): the 12 `paper` scenarios under
the SpecPIM authors' conventions, each equal to its `paper` twin except for the named conventions."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.builtin_sets import SET_DESCRIPTIONS, TWIN_SETS, builtin_sets, resolve_scenario_path
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.solvers import baselines
from specpim_cp.solvers.exact import SolverOptions, solve

SET = "paper-assumptions"
#: [PA-1] partitioned channels, [PA-2] dynamic energy: the only fields a twin changes besides its labels
CONVENTIONS = {"memory_model": "partitioned", "energy_accounting": "dynamic"}
LABELS = {"name", "description"}
ROOT = Path(__file__).resolve().parents[1]


@cache
def _files(set_name: str) -> tuple[Path, ...]:
    return tuple(sorted(builtin_sets()[set_name].glob("*.toml")))


def test_the_set_is_registered_with_its_twin():
    assert SET in builtin_sets()
    assert SET in SET_DESCRIPTIONS and TWIN_SETS[SET] == "paper"
    assert set(SET_DESCRIPTIONS) <= set(builtin_sets())  # every described set exists
    assert resolve_scenario_path(f"{SET}/opt-13b-b1") == builtin_sets()[SET] / "opt-13b-b1.toml"


def test_package_data_ships_the_set():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["specpim_cp"]
    for f in _files(SET):
        rel = f.relative_to(ROOT / "specpim_cp").as_posix()
        assert any(fnmatch(rel, g) for g in globs), rel


def test_twelve_scenarios_each_its_paper_twin_under_the_conventions():
    files, twins = _files(SET), _files("paper")
    assert len(files) == 12 and [f.name for f in files] == [f.name for f in twins]
    for f, t in zip(files, twins):
        sc, twin = load_scenario(f), load_scenario(t)
        assert sc.name == f"{twin.name}-paper-assumptions"
        assert "authors' conventions" in sc.description
        assert sc.assumptions.model_dump() == CONVENTIONS
        assert twin.assumptions.model_dump() == {"memory_model": "time-shared", "energy_accounting": "total"}
        same = LABELS | {"assumptions"}
        assert sc.model_dump(exclude=same) == twin.model_dump(exclude=same), f.name


def test_fc_offload_is_identical_half_pim_devices_with_spill():
    """[PA-4]: the recipe the comparison uses is already the paper's under the partitioned profile."""
    sc = load_scenario(resolve_scenario_path(f"{SET}/opt-13b-b1"))
    cat = scenario_catalog(sc)
    ev = baselines.fc_offload(sc, cat)
    models = [md for _, md in ev.design.models()]
    assert {(md.memory_type, md.pim_units) for md in models} == {("hbm", cat.memory("hbm").max_pim_units // 2)}
    assert ev.design.verifier.spill


def test_opt13b_b1_solves_and_the_claim_is_the_evaluators():
    sc = load_scenario(resolve_scenario_path(f"{SET}/opt-13b-b1"))
    cat = scenario_catalog(sc)
    res = solve(sc, options=SolverOptions(5.0, deterministic=True), catalog=cat)
    assert res.report.status == "OPTIMAL"
    metrics = Evaluator(sc, cat).evaluate(res.design).metrics
    assert metrics.objective("latency") == res.report.objective
    assert res.evaluation.breakdown.round.idle_energy_nj == 0  # [PA-2]: dynamic energy, no idle power


def test_dynamic_accounting_only_removes_idle_energy():
    """The same design priced under both profiles: time-shared and partitioned give one latency for a
    design whose host reads only normal units, and dynamic accounting drops exactly the idle energy."""
    sc = load_scenario(resolve_scenario_path(f"{SET}/opt-13b-b1"))
    twin = load_scenario(resolve_scenario_path("paper/opt-13b-b1"))
    cat = scenario_catalog(twin)
    gpu_si = baselines.gpu_si(twin, cat)  # plain memory: no PIM units, so the profiles agree on time
    mine = Evaluator(sc, cat).evaluate(gpu_si.design)
    assert mine.metrics.round_time_ns == gpu_si.metrics.round_time_ns
    idle = gpu_si.breakdown.round.idle_energy_nj
    assert idle > 0 and mine.breakdown.round.idle_energy_nj == 0
    assert mine.metrics.energy_nj_per_round == gpu_si.metrics.energy_nj_per_round - idle
