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
from specpim_cp.views.fronts import front_statement

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
    result = pareto(sc, options=OPTS, resolution=Fraction(0), max_points=None)
    assert len(front) > 2 and _values(result) == front
    assert result.status == "OPTIMAL" and result.resolution == 0 and result.solves > 0
    assert front_statement(result).startswith(f"front: OPTIMAL (every point proven), {len(front)} points, resolution 0%")


@pytest.mark.parametrize("pct", ["1", "5", "20"])
def test_front_at_a_resolution_covers_the_front(dynamic, pct):
    sc, front = dynamic
    result = pareto(sc, options=OPTS, resolution=Fraction(pct) / 100, max_points=None)
    r = Fraction(pct) / 100
    listed = _values(result)
    assert set(listed) <= set(front)  # every point found is a front point
    for lat, en in front:  # every front point has a listed point no slower, at most r above it in energy
        assert any(pl <= lat and (1 - r) * pe <= en for pl, pe in listed), (lat, en)
    assert result.resolution == r and f"resolution {pct}%" in front_statement(result)


def test_default_front_is_at_a_tenth_of_a_percent_within_32_points(dynamic):
    """OBJ-2r/2b's defaults: 0.1% asked, widened only as far as 32 points need, every point proven, stated."""
    sc, front = dynamic
    result = pareto(sc, options=OPTS)
    r = result.resolution
    assert result.max_points == 32 and len(result.points) <= 32 and r >= Fraction(1, 1000)
    assert (result.asked is None) == (r == Fraction(1, 1000))
    assert f"resolution {float(100 * r):g}% (every front point has" in front_statement(result)
    listed = _values(result)
    assert set(listed) <= set(front)
    for lat, en in front:
        assert any(pl <= lat and (1 - r) * pe <= en for pl, pe in listed), (lat, en)


@pytest.mark.parametrize("budget", [2, 3])
def test_point_budget_widens_the_resolution(dynamic, budget):
    """OBJ-2b: at most `budget` points, the widened resolution stated, and every front point still covered at it."""
    sc, front = dynamic
    result = pareto(sc, options=OPTS, resolution=Fraction(0), max_points=budget)
    listed = _values(result)
    assert len(listed) <= budget < len(front) and set(listed) <= set(front)
    r = result.resolution
    assert r > 0 and result.asked == 0 and f"0% asked, widened to list at most {budget} points" in front_statement(result)
    for lat, en in front:
        assert any(pl <= lat and (1 - r) * pe <= en for pl, pe in listed), (lat, en)
    assert result.as_dict()["max_points"] == budget


def test_point_budget_resolution_counts_the_points():
    """The widened r lets at most `points` points fit between the first energy and the floor, and not fewer
    than needed: at r the (points+1)-th point would lie below the floor."""
    from specpim_cp.solvers.exact.fronts import point_budget_resolution

    first, floor = Fraction(128), Fraction(100)
    for points in (1, 5, 32):
        r = point_budget_resolution(first, floor, points)
        assert first * (1 - r) ** points <= floor  # a point m > points would be below the floor
        assert r - Fraction(1, 10 ** 6) <= 0 or first * (1 - r + Fraction(2, 10 ** 6)) ** points > floor
    assert point_budget_resolution(first, first, 8) == 0 and point_budget_resolution(first, Fraction(0), 8) == 0


def test_cli_pareto_states_its_front(tmp_path):
    out = tmp_path / "p.csv"
    res = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--time-limit", "30", "--deterministic",
                                    "--resolution", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("latency_ns_per_token,") and lines[-1].startswith("# front: OPTIMAL")
    assert "resolution 1%" in lines[-1] and len(lines) >= 3
    default = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--time-limit", "30", "--deterministic"])
    last = default.output.splitlines()[-1]
    assert default.exit_code == 0 and "resolution 0.1" in last and "point budget 32" in last, default.output
    bad = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--resolution", "50", "-o", str(tmp_path / "q.csv")])
    assert bad.exit_code == 2 and "--resolution" in bad.output and not (tmp_path / "q.csv").exists()
    bad = CliRunner().invoke(main, ["pareto", "paper/opt-13b-b1", "--max-points", "1", "-o", str(tmp_path / "q.csv")])
    assert bad.exit_code == 2 and "--max-points" in bad.output and not (tmp_path / "q.csv").exists()


def test_a_solve_cut_short_states_the_cut3_bound():
    """Stopped before any unfocused Dinkelbach step: the bound is the least CUT-3 bound ratio, not 0."""
    sc = load_scenario(resolve_scenario_path("paper-full/opt-13b-full-b16"))
    res = solve(sc, objective="energy", options=SolverOptions(0.05, deterministic=True))
    rep = res.report
    assert rep.status == "FEASIBLE" and rep.bound is not None and 0 < rep.bound <= rep.objective
    assert rep.gap < 1
