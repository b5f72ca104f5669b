"""Decision ranges [OBJ-4]: every value a decision takes over the designs within a tolerance of the optimum,
against an enumeration of every design of small spaces (`solvers/brute.every_design`, no pruning), and the
`specpim-cp ranges` command."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from click.testing import CliRunner
from test_canonical import tiny

from specpim_cp.cli import main
from specpim_cp.cli.options import check_within
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import parse_scenario, scenario_catalog
from specpim_cp.solvers.brute import every_design
from specpim_cp.solvers.exact import SolverOptions
from specpim_cp.solvers.exact.ranges import decision_ranges
from specpim_cp.views.ranges import format_ranges

OPTS = SolverOptions(30, deterministic=True)

CASES = [
    (tiny("r-attention-k2", "gpt2-large", "gpt2-small", ["gddr", "hbm"], "attention-offload", pim_units=2),
     "latency"),
    (tiny("r-hbm-k3", "gpt2-large", "gpt2-small", ["hbm"], "fc-offload", pim_units=3, batch=2), "latency"),
    (tiny("r-attention", "gpt2-large", "gpt2-small", ["gddr"], "attention-offload"), "energy"),
    (tiny("r-part-fc", "opt-1.3b", "opt-125m", ["hbm", "gddr"], "fc-offload", memory_model="partitioned"),
     "energy"),
    (tiny("r-devices", "gpt2-large", "gpt2-small", ["gddr"], "fc-offload", verifier_devices=None, budget=3),
     "latency"),
]


def value_of(design, model: str, decision: str):
    """A decision's value in a design, written independently of `ranges.model_decisions`."""
    if model == "design":
        return bool(design.drafters) if decision == "speculation" else design.pipeline
    if model != "verifier" and not design.drafters:  # the verifier alone: a drafter has no part, no draft
        return 0 if decision == "draft_nodes" else "none"
    part = design.verifier if model == "verifier" else design.drafters[int(model[9:-1])]
    if decision.startswith("engine["):
        return part.placement[decision[7:-1]].engine
    if decision in ("memory_type", "pim_units", "devices", "draft_length"):
        return getattr(part, decision)
    if decision == "draft_shape":
        return "chain" if part.tree is None else "tree"
    if decision == "draft_nodes":
        return part.draft_length if part.tree is None else sum(part.tree)
    if decision == "staging":
        return "unstaged" if part.staging is None else f"{part.staging.draft2} x{part.staging.draft_length}"
    raise AssertionError(decision)


@pytest.fixture(scope="module")
def enumerations():
    return {}


def _all(sc, cache):
    if sc.name not in cache:
        cache[sc.name] = every_design(sc, scenario_catalog(sc))
    return cache[sc.name]


@pytest.mark.parametrize("within", ["0", "1", "5", "25"])
@pytest.mark.parametrize("data,objective", CASES, ids=[c[0]["name"] for c in CASES])
def test_ranges_equal_enumeration(data, objective, within, enumerations):
    sc = parse_scenario(data)
    res = decision_ranges(sc, within_pct=within, objective=objective, options=OPTS)
    evals = _all(sc, enumerations)
    opt = min(e.metrics.objective(objective) for e in evals)
    assert res.optimum.report.objective == opt and res.optimum.report.status == "OPTIMAL"
    assert opt <= res.limit <= opt * (1 + Fraction(within) / 100)
    inside = [e.design for e in evals if e.metrics.objective(objective) <= res.limit]
    # the rounding to a whole ns (nJ) per round loses no design of these spaces
    assert inside == [e.design for e in evals if e.metrics.objective(objective) <= opt * (1 + Fraction(within) / 100)]
    assert res.proven
    for r in res.ranges:
        reached = {value_of(d, r.model, r.decision) for d in inside}
        assert set(r.reached) == reached, (r.model, r.decision)
        assert not set(r.excluded) & reached and not r.unknown
        assert r.at_optimum == value_of(res.optimum.design, r.model, r.decision)
        assert r.forced == (len(reached) == 1)
    # one question first for every decision: when no design within the tolerance but the optimum takes
    # another value anywhere, it closes them all and nothing else is asked
    if all(r.forced for r in res.ranges if not r.interval) and not any(r.interval for r in res.ranges):
        assert res.solves <= 2  # the closing question (under energy: confirmed at CP-SAT's own presolve)


@pytest.mark.parametrize("data,objective", CASES, ids=[c[0]["name"] for c in CASES])
def test_witnesses_found_near_the_witnesses_change_no_range(data, objective, monkeypatch):
    """The designs near the witnesses (`harvest`, priced by the evaluator) and the per-model questions give the
    ranges CP-SAT's questions alone give (no harvest: NEIGHBOUR_LIMIT 0), with no more solves."""
    from specpim_cp.solvers.exact import ranges as ranges_mod

    sc = parse_scenario(data)
    near = decision_ranges(sc, within_pct=25, objective=objective, options=OPTS)
    monkeypatch.setattr(ranges_mod, "NEIGHBOUR_LIMIT", 0)
    alone = decision_ranges(sc, within_pct=25, objective=objective, options=OPTS)
    assert [r.as_dict() for r in near.ranges] == [r.as_dict() for r in alone.ranges]
    assert near.proven and near.solves <= alone.solves


def test_harvested_witnesses_are_within_the_tolerance_and_save_solves(monkeypatch):
    """Every design `harvest` keeps as a witness is priced within the limit by the evaluator, and on a space where
    many designs lie within the tolerance it finds some (fewer CP-SAT questions than without it)."""
    from specpim_cp.physics.evaluate import Evaluator
    from specpim_cp.solvers.exact import ranges as ranges_mod

    kept = []
    real = ranges_mod._Ranges.harvest

    def harvest(self, decisions, start=None, limit=None):
        before = len(self.witnesses)
        real(self, decisions, start, limit)
        kept.extend((self.limit, w) for w in self.witnesses[before:])

    monkeypatch.setattr(ranges_mod._Ranges, "harvest", harvest)
    data, objective = CASES[0]
    sc = parse_scenario(data)
    near = decision_ranges(sc, within_pct=25, objective=objective, options=OPTS)
    ev = Evaluator(sc, scenario_catalog(sc))
    assert kept and all(ev.evaluate(w).metrics.objective(objective) <= limit for limit, w in kept)
    monkeypatch.setattr(ranges_mod, "NEIGHBOUR_LIMIT", 0)
    assert near.solves < decision_ranges(sc, within_pct=25, objective=objective, options=OPTS).solves


def test_within_zero_is_the_tie_set(enumerations):
    """At 0% the ranges are the values the optimal designs take: free exactly where designs tie."""
    data, objective = CASES[1]
    sc = parse_scenario(data)
    res = decision_ranges(sc, within_pct=0, objective=objective, options=OPTS)
    evals = _all(sc, enumerations)
    opt = min(e.metrics.objective(objective) for e in evals)
    tied = [e.design for e in evals if e.metrics.objective(objective) == opt]
    free = {(r.model, r.decision) for r in res.ranges if r.forced is False}
    expect = {(m, d) for m in ["verifier", "drafters[0]"]
              for d in ["memory_type", "pim_units", "devices", *(f"engine[{op}]" for op in PLACEABLE_OPS)]
              if len({value_of(x, m, d) for x in tied}) > 1}
    assert expect <= free


def test_bad_inputs():
    sc = parse_scenario(CASES[0][0])
    with pytest.raises(ScenarioError, match="within"):  # the CLI's parsing of --within
        check_within("-1")
    with pytest.raises(ScenarioError, match="objective"):
        decision_ranges(sc, within_pct=1, objective="edp", options=OPTS)


def test_text_and_json_same_for_any_workers(tmp_path):
    """Proven ranges are facts: the same with one deterministic worker and with two workers."""
    sc = parse_scenario(CASES[1][0])
    a = decision_ranges(sc, within_pct=2, options=OPTS).as_dict()
    b = decision_ranges(sc, within_pct=2, options=SolverOptions(30, workers=2)).as_dict()
    for d in (a, b):
        for k in ("wall_s", "deterministic_time", "solves", "inputs_hash"):
            d.pop(k)
    assert a == b
    text = format_ranges(decision_ranges(sc, within_pct=2, options=OPTS))
    assert "within 2%" in text and "every range proven" in text


def test_cli_ranges(tmp_path):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["ranges", "paper/opt-13b-b1", "--within", "1", "--deterministic",
                                    "--time-limit", "30", "--json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["proven"] and data["within_pct"] == "1" and data["seed"] == 0 and data["solver_version"]
    pim = next(r for r in data["ranges"] if r["model"] == "verifier" and r["decision"] == "pim_units")
    assert pim["at_optimum"] in pim["reached"] and pim["forced"] == (len(pim["reached"]) == 1)
    text = CliRunner().invoke(main, ["ranges", "paper/opt-13b-b1", "--deterministic", "--time-limit", "30"])
    assert text.exit_code == 0 and "Decision ranges of opt-13b-b1" in text.output


@pytest.mark.parametrize("args,word", [(["--within", "x"], "--within"), (["--within", "-2"], "--within"),
                                       (["--objective", "edp"], "--objective")])
def test_cli_ranges_bad_input(tmp_path, args, word):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["ranges", "paper/opt-13b-b1", *args, "-o", str(out)])
    assert res.exit_code == 2 and word in res.output and len(res.output.strip().splitlines()) == 1
    assert not out.exists()


def test_batch_records_and_reports_ranges(tmp_path):
    """`batch` runs the ranges after each proven exact optimum; the report's PIM table shows them."""
    from test_batch import TINY

    from specpim_cp.runs.store import read_records

    d = tmp_path / "in"
    d.mkdir()
    (d / "gpt2-tiny.toml").write_text(TINY.format(name="gpt2-tiny", batch=1, verifier="gpt2-large",
                                                  drafter="gpt2-small"))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["batch", str(d), "--out", str(out), "--methods", "exact", "--no-pareto",
                                    "--jobs", "1", "--time-limit", "30", "--ranges", "2"])
    assert res.exit_code == 0, res.output
    rec = next(r for r in read_records(out) if r.method == "exact")
    assert rec.ranges["within_pct"] == "2" and rec.ranges["proven"]
    direct = decision_ranges(parse_scenario({"name": "gpt2-tiny", "batch_size": 1, "prompt_tokens": 64,
                                             "generated_tokens": 32, "memory_types": ["hbm"], "max_draft_length": 2,
                                             "verifier": {"model": "gpt2-large", "devices": 1},
                                             "drafters": [{"model": "gpt2-small", "devices": 1}]}),
                             within_pct=2, options=SolverOptions(30, deterministic=True))
    assert rec.ranges["ranges"] == json.loads(json.dumps([r.as_dict() for r in direct.ranges]))
    summary = (out / "summary.md").read_text()
    assert "PIM units within 2%" in summary
    bad = CliRunner().invoke(main, ["batch", str(d), "--out", str(tmp_path / "o2"), "--ranges", "x"])
    assert bad.exit_code == 2 and "--ranges" in bad.output


def test_the_harvest_stops_at_the_commands_deadline(monkeypatch):
    """With the time spent, the harvest prices no design (the ranges' questions left are UNKNOWN, not the
    evaluator's work past the deadline)."""
    from specpim_cp.solvers.exact import ranges as ranges_mod

    priced = []
    real = ranges_mod._Ranges.within

    def within(self, design):
        priced.append(design)
        return real(self, design)

    def harvest(self, decisions, start=None, limit=None):
        monkeypatch.setattr(self.run.budget, "remaining", lambda: 0.0)
        real_harvest(self, decisions, start, limit)

    real_harvest = ranges_mod._Ranges.harvest
    monkeypatch.setattr(ranges_mod._Ranges, "within", within)
    monkeypatch.setattr(ranges_mod._Ranges, "harvest", harvest)
    data, objective = CASES[0]
    res = decision_ranges(parse_scenario(data), within_pct=25, objective=objective, options=OPTS)
    assert priced == [] and not res.proven


def test_ranges_count_their_seconds_inside_cp_sat():
    data, objective = CASES[0]
    res = decision_ranges(parse_scenario(data), within_pct=25, objective=objective, options=OPTS)
    assert res.solves > 0 and 0 < res.cp_sat_s <= res.wall_s
    assert res.as_dict()["cp_sat_s"] == round(res.cp_sat_s, 3)  # `ranges --json` reports them
