"""Latency-energy fronts [OBJ-2, OBJ-2r] against an enumeration of every design, the front's statement, the
CLI's `--resolution`, and the bound a solve cut short reports before any Dinkelbach step proves one."""

from __future__ import annotations

from fractions import Fraction

import pytest
from click.testing import CliRunner
from test_canonical import tiny

from specpim_cp.cli import main
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.scenario import load_scenario, parse_scenario, scenario_catalog
from specpim_cp.solvers.brute import every_design
from specpim_cp.solvers.exact import SolverOptions, pareto, solve

OPTS = SolverOptions(60, deterministic=True)


@pytest.fixture(scope="module")
def dynamic():
    """A small space whose front under dynamic accounting has several points."""
    data = tiny("p-devices", "gpt2-large", "gpt2-small", ["gddr"], "fc-offload", verifier_devices=None, budget=3)
    data["assumptions"]["energy_accounting"] = "dynamic"
    sc = parse_scenario(data)
    values = {(e.metrics.latency_fraction(), e.metrics.energy_fraction())
              for e in every_design(sc, scenario_catalog(sc))}
    front = sorted(v for v in values if not any(w[0] <= v[0] and w[1] <= v[1] and w != v for w in values))
    return sc, front


def _values(result) -> list[tuple[Fraction, Fraction]]:
    return [(e.metrics.latency_fraction(), e.metrics.energy_fraction()) for e in result.points]


def test_exact_front_equals_enumeration(dynamic):
    sc, front = dynamic
    result = pareto(sc, options=OPTS, resolution_pct=0)
    assert len(front) > 2 and _values(result) == front
    assert result.status == "OPTIMAL" and result.resolution == 0 and result.solves > 0
    assert result.statement().startswith(f"front: OPTIMAL (every point proven), {len(front)} points, resolution 0%")


@pytest.mark.parametrize("pct", ["1", "5", "20"])
def test_front_at_a_resolution_covers_the_front(dynamic, pct):
    sc, front = dynamic
    result = pareto(sc, options=OPTS, resolution_pct=pct)
    r = Fraction(pct) / 100
    listed = _values(result)
    assert set(listed) <= set(front)  # every point found is a front point
    for lat, en in front:  # every front point has a listed point no slower, at most r above it in energy
        assert any(pl <= lat and (1 - r) * pe <= en for pl, pe in listed), (lat, en)
    assert result.resolution == r and f"resolution {pct}%" in result.statement()


def test_default_front_is_at_a_tenth_of_a_percent(dynamic):
    """OBJ-2r's default: the front at 0.1% (every point proven), stated as such."""
    sc, front = dynamic
    result = pareto(sc, options=OPTS)
    assert result.resolution == Fraction(1, 1000) and "resolution 0.1% (every front point has" in result.statement()
    listed = _values(result)
    assert set(listed) <= set(front)
    for lat, en in front:
        assert any(pl <= lat and Fraction(999, 1000) * pe <= en for pl, pe in listed), (lat, en)


def test_cli_pareto_states_its_front(tmp_path):
    out = tmp_path / "p.csv"
    res = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--time-limit", "30", "--deterministic",
                                    "--resolution", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("latency_ns_per_token,") and lines[-1].startswith("# front: OPTIMAL")
    assert "resolution 1%" in lines[-1] and len(lines) >= 3
    default = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--time-limit", "30", "--deterministic"])
    assert default.exit_code == 0 and "resolution 0.1% (" in default.output.splitlines()[-1], default.output
    bad = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--resolution", "50", "-o", str(tmp_path / "q.csv")])
    assert bad.exit_code == 2 and "--resolution" in bad.output and not (tmp_path / "q.csv").exists()


def test_a_solve_cut_short_states_the_cut3_bound():
    """Stopped before any unfocused Dinkelbach step: the bound is the least CUT-3 bound ratio, not 0."""
    sc = load_scenario(resolve_scenario_path("paper-full/opt-13b-full-b16"))
    res = solve(sc, objective="energy", options=SolverOptions(0.05, deterministic=True))
    rep = res.report
    assert rep.status == "FEASIBLE" and rep.bound is not None and 0 < rep.bound <= rep.objective
    assert rep.gap < 1
