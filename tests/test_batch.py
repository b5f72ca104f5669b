"""Batch runner, reports and sweeps: resumability, CSV regeneration, report files, golden objectives.

Most tests run the real baselines and a brute-force stand-in for the exact optimizer (defined here, over
uniform mapping rules only: fast, and enough to exercise the plumbing); one test runs the real CP-SAT
solver end to end on a tiny scenario, and the golden test recomputes the fastest pinned paper optima.
"""

from __future__ import annotations

import itertools
import json
import time
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.catalog import default_catalog
from specpim_cp.check.sweep import parse_range, sweep_acceptance, write_sweep
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.design import Design
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.problem.space import DesignSpace
from specpim_cp.report.batch import PLOTS, build_report
from specpim_cp.runs import methods as methods_mod
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.instances import BatchOptions, plan, resolve_inputs
from specpim_cp.runs.records import Record
from specpim_cp.runs.store import ResultStore, read_records, write_derived_files
from specpim_cp.solvers.result import SolveReport, SolveResult, inputs_hash

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "paper.json"

TINY = """
name = "{name}"
batch_size = {batch}
prompt_tokens = 64
generated_tokens = 32
memory_types = ["hbm"]
max_draft_length = 2

[verifier]
model = "{verifier}"
devices = 1

[[drafters]]
model = "{drafter}"
devices = 1
"""


@pytest.fixture
def tiny_files(tmp_path: Path) -> list[Path]:
    """Two small scenarios of two families (so the report has two ladders and two Pareto fronts)."""
    d = tmp_path / "scenarios"
    d.mkdir()
    files = []
    for name, batch, verifier, drafter in (("gpt2-tiny", 1, "gpt2-large", "gpt2-small"),
                                           ("opt-tiny", 2, "opt-2.7b", "opt-125m")):
        f = d / f"{name}.toml"
        f.write_text(TINY.format(name=name, batch=batch, verifier=verifier, drafter=drafter))
        files.append(f)
    return files


# ------------------------------------------------------------------------------------------------
# A brute-force stand-in for the exact optimizer (tests only): no, half or all memory units PIM (unless
# the space fixes them), uniform mapping rules, every speculation choice; "optimal" in that subspace.
# ------------------------------------------------------------------------------------------------
RULES = ("host-only", "fc-offload", "attention-offload", "all-pim")


def _archs(scenario, catalog, j):
    return [a for a in DesignSpace(scenario, catalog).models[j].archs
            if scenario.space.pim_units is not None
            or a.pim_units in (0, catalog.memory(a.memory_type).max_pim_units // 2,
                               catalog.memory(a.memory_type).max_pim_units)]


def _enumerate(scenario, catalog=None):
    catalog = catalog or default_catalog()
    ev = Evaluator(scenario, catalog)
    n = len(scenario.drafters)
    rules = [r for r in RULES if scenario.space.mapping in ("free", r)]
    for archs in itertools.product(*[_archs(scenario, catalog, j) for j in range(n + 1)]):
        for rule in rules:
            place = rule_placement(rule, scenario.space.share_levels)
            for choice in DesignSpace(scenario, catalog).choice_list:
                names = [scenario.verifier.model] + [d.model for d in scenario.drafters]
                design = Design.assemble(names, list(archs), [place] * (n + 1), choice)
                try:
                    yield ev.evaluate(design)
                except ScenarioError:
                    continue


def brute_force_solve(scenario, *, objective=None, options=None, hint=None, catalog=None):
    t0 = time.perf_counter()
    seed = 0 if options is None else options.seed
    name = objective or scenario.objective
    evals = list(_enumerate(scenario, catalog))
    if not evals:
        raise ScenarioError(f"{scenario.name}: no feasible design")
    best = min(evals, key=lambda e: e.metrics.objective(name))
    obj = best.metrics.objective(name)
    report = SolveReport(method="brute-force", objective_name=name, status="OPTIMAL", objective=obj, bound=obj,
                         wall_s=time.perf_counter() - t0, iterations=len(evals), seed=seed,
                         solver_version="brute-force (tests)", inputs_hash=inputs_hash(scenario, {"seed": seed}))
    return SolveResult(best, report)


def brute_force_pareto(scenario, *, options=None, catalog=None, on_progress=None):
    evals = sorted(_enumerate(scenario),
                   key=lambda e: (e.metrics.latency_fraction(), e.metrics.energy_fraction()))
    front, best_energy = [], None
    for e in evals:
        if best_energy is None or e.metrics.energy_fraction() < best_energy:
            front.append(e)
            best_energy = e.metrics.energy_fraction()
    return front


def brute_force_pareto_front(sc, options=None, **kwargs):
    """`exact.pareto`'s stand-in: the brute-force front as a proven ParetoFront."""
    from fractions import Fraction

    from specpim_cp.solvers.exact import ParetoFront, SolverOptions

    return ParetoFront(brute_force_pareto(sc, options=options), "OPTIMAL", Fraction(0), 0.0, 0.0, 0,
                       options or SolverOptions())


@pytest.fixture
def stand_in(monkeypatch):
    """Replace the exact optimizer with the brute force; count calls per method runner."""
    from specpim_cp.solvers import exact

    monkeypatch.setattr(exact, "solve", brute_force_solve)
    monkeypatch.setattr(exact, "pareto", brute_force_pareto_front)
    calls: dict[str, int] = {}
    for method, fn in list(methods_mod.RUNNERS.items()):
        def counting(inst, sc, catalog, fn=fn, method=method):
            calls[method] = calls.get(method, 0) + 1
            return fn(inst, sc, catalog)
        monkeypatch.setitem(methods_mod.RUNNERS, method, counting)
    return calls


# ------------------------------------------------------------------------------------------------
# Planning and keys
# ------------------------------------------------------------------------------------------------
def test_plan_keys_ladder_alias_and_pareto_representatives(tiny_files):
    scenarios = [(f, load_scenario(f)) for f in tiny_files]
    insts, _ = plan(scenarios, BatchOptions(methods=("exact", "baselines", "ladder")))
    keys = [i.key for i in insts]
    assert len(keys) == len(set(keys))
    assert sorted({i.method for i in insts}) == ["baselines", "exact", "ladder", "pareto"]
    assert len([i for i in insts if i.method == "pareto"]) == 2  # one per family
    exact = {i.scenario_name: i.key for i in insts if i.method == "exact"}
    aliased = [i for i in insts if i.alias_of is not None]
    assert [(i.step, i.alias_of) for i in aliased] == [("+free architecture", exact[i.scenario_name])
                                                       for i in aliased]
    assert len(aliased) == 2
    # a different time limit is a different exact instance; baselines do not depend on it
    other, _ = plan(scenarios, BatchOptions(methods=("exact", "baselines"), time_limit_s=5.0))
    assert {i.key for i in other if i.method == "baselines"} <= set(keys)
    assert not {i.key for i in other if i.method == "exact"} & set(keys)
    with pytest.raises(ScenarioError, match="unknown method"):
        plan(scenarios, BatchOptions(methods=("simplex",)))


def test_resolve_inputs_sets_dirs_files(tiny_files):
    name, files = resolve_inputs(None, builtin_sets())
    assert name == "paper" and len(files) == 12
    assert len(resolve_inputs("staged", builtin_sets())[1]) == 4
    assert resolve_inputs(str(tiny_files[0].parent), builtin_sets())[1] == tiny_files
    assert resolve_inputs(str(tiny_files[0]), builtin_sets()) == ("gpt2-tiny", [tiny_files[0]])
    with pytest.raises(ScenarioError, match="no such scenario"):
        resolve_inputs("no-such-set", builtin_sets())


def test_benchmark_sets_load():
    sets = builtin_sets()
    paper = [load_scenario(f) for f in sorted(sets["paper"].glob("*.toml"))]
    shapes = {(s.verifier.model, s.verifier.devices, len(s.drafters), s.max_draft_length) for s in paper}
    assert sorted(shapes) == [("llama-32.5b", 4, 2, 6), ("opt-13b", 2, 1, 8), ("palm-62b", 4, 3, 4)]
    assert sorted({s.batch_size for s in paper}) == [1, 2, 4, 8]
    staged = [load_scenario(f) for f in sorted(sets["staged"].glob("*.toml"))]
    assert sorted((s.space.staging, s.space.pipeline) for s in staged) == [
        ("free", "off"), ("free", "on"), ("off", "off"), ("off", "on")]


# ------------------------------------------------------------------------------------------------
# Resumability
# ------------------------------------------------------------------------------------------------
def test_rerun_skips_done_instances(tiny_files, tmp_path, stand_in):
    out = tmp_path / "out"
    options = BatchOptions(methods=("baselines",), jobs=1)
    first = run_batch(tiny_files, out, options)
    assert (first.total, first.ran, first.skipped, first.failed) == (2, 2, 0, [])
    assert stand_in == {"baselines": 2}
    lines = (out / "results.jsonl").read_text().splitlines()
    recs = [Record.from_json(json.loads(x)) for x in lines]
    assert {r.part for r in recs} >= {"GPU-AR", "GPU-SI", "FC-offload", "attention-offload"}
    assert all(r.parts == len([q for q in recs if q.key == r.key]) for r in recs)
    assert all(r.seed is None and r.solver_version and r.inputs_hash for r in recs)

    second = run_batch(tiny_files, out, options)
    assert (second.ran, second.skipped) == (0, 2)
    assert stand_in == {"baselines": 2}  # no new solver invocation
    assert (out / "results.jsonl").read_text().splitlines() == lines


def test_killed_run_loses_only_unfinished_work(tiny_files, tmp_path, stand_in):
    """A torn last line and an instance with only some of its records are redone, nothing else."""
    out = tmp_path / "out"
    options = BatchOptions(methods=("baselines",), jobs=1)
    run_batch(tiny_files, out, options)
    path = out / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    last_key = json.loads(lines[-1])["key"]
    # drop two records of the last instance and tear the one before
    kept = lines[:-3] + [lines[-3][: len(lines[-3]) // 2]]
    path.write_text("".join(kept))
    again = run_batch(tiny_files, out, options)
    assert (again.ran, again.skipped) == (1, 1)
    assert stand_in == {"baselines": 3}
    recs = [Record.from_json(json.loads(x)) for x in path.read_text().splitlines()]  # every line parses
    assert len({(r.key, r.part) for r in recs if r.key == last_key}) == recs[-1].parts
    assert ResultStore(path).done_keys() == {r.key for r in recs}


def test_failed_instances_are_recorded_and_retried(tiny_files, tmp_path, monkeypatch):
    out = tmp_path / "out"

    def broken(inst, sc, catalog):
        raise RuntimeError("solver crashed")

    monkeypatch.setitem(methods_mod.RUNNERS, "baselines", broken)
    s = run_batch(tiny_files[:1], out, BatchOptions(methods=("baselines",), jobs=1))
    assert s.failed == ["gpt2-tiny:baselines"]
    rec = Record.from_json(json.loads((out / "results.jsonl").read_text()))
    assert rec.status == "ERROR" and "solver crashed" in rec.error
    monkeypatch.undo()
    s = run_batch(tiny_files[:1], out, BatchOptions(methods=("baselines",), jobs=1))
    assert (s.ran, s.failed) == (1, [])
    assert all(r.status != "ERROR" for r in read_records(out))


def test_worker_processes_and_csv_regeneration(tiny_files, tmp_path):
    out = tmp_path / "out"
    s = run_batch(tiny_files, out, BatchOptions(methods=("baselines",), jobs=2))
    assert (s.ran, s.failed) == (2, [])
    records = read_records(out)
    csv_path = out / "results.csv"
    original = csv_path.read_text()
    assert len(original.splitlines()) == len(records) + 1
    assert original.splitlines()[0].startswith("scenario,family,batch_size,host,prompt_tokens,generated_tokens,method,part,status")
    csv_path.unlink()
    write_derived_files(out)
    assert csv_path.read_text() == original


def test_dying_worker_is_an_error_and_the_batch_goes_on(tiny_files, tmp_path, monkeypatch):
    """A worker killed mid-solve (fork start method carries the patch into the workers)."""
    import multiprocessing
    import os

    if multiprocessing.get_start_method() != "fork":
        pytest.skip("needs the fork start method to patch the workers")
    real = methods_mod.RUNNERS["baselines"]

    def dies_on_gpt2(inst, sc, catalog):
        if sc.name == "gpt2-tiny":
            os._exit(9)
        return real(inst, sc, catalog)

    monkeypatch.setitem(methods_mod.RUNNERS, "baselines", dies_on_gpt2)
    out = tmp_path / "out"
    s = run_batch(tiny_files, out, BatchOptions(methods=("baselines",), jobs=2))
    assert "gpt2-tiny:baselines" in s.failed and s.ran == 2
    errors = [r for r in read_records(out) if r.status == "ERROR"]
    assert errors and "worker process died" in errors[0].error
    monkeypatch.undo()
    s = run_batch(tiny_files, out, BatchOptions(methods=("baselines",), jobs=2))
    assert s.failed == [] and s.ran == len(errors)


def test_no_resume_starts_afresh(tiny_files, tmp_path, stand_in):
    out = tmp_path / "out"
    run_batch(tiny_files[:1], out, BatchOptions(methods=("baselines",), jobs=1))
    s = run_batch(tiny_files[:1], out, BatchOptions(methods=("baselines",), jobs=1, resume=False))
    assert (s.ran, s.skipped) == (1, 0)
    assert (out / "results.jsonl.old").exists()


# ------------------------------------------------------------------------------------------------
# Reports
# ------------------------------------------------------------------------------------------------
def test_report_with_every_method(tiny_files, tmp_path, stand_in):
    out = tmp_path / "out"
    s = run_batch(tiny_files, out, BatchOptions(methods=("exact", "baselines", "ladder"), jobs=1))
    assert s.failed == []
    # the last ladder step is the unrestricted space: copied from the exact record, not re-solved
    assert stand_in["ladder"] == 2 * 4 and stand_in["exact"] == 2 and stand_in["pareto"] == 2
    records = read_records(out)
    exact = {r.scenario: r for r in records if r.method == "exact"}
    for r in records:
        if r.method == "ladder" and r.part == "+free architecture":
            assert r.objective_exact == exact[r.scenario].objective_exact
            assert r.copied_from == exact[r.scenario].key
    for r in exact.values():
        pim = r.pim
        # a design that does not speculate ([NOSPEC]) has no drafter's row
        assert [p.role for p in pim] == ["verifier", "drafters[0]"][:1 + len(r.design["drafters"])]
        assert all(p.units_per_group == 8 and p.pim_fraction == p.pim_units / 8 for p in pim)

    rep = build_report(out)
    for name in ("summary.md", "results.csv", *PLOTS):
        assert (out / name).exists() and (out / name).stat().st_size > 1000, name
    assert sorted(p.name for p in (out / "pareto").iterdir()) == ["gpt2-tiny.csv", "opt-tiny.csv"]
    md = (out / "summary.md").read_text()
    for text in ("speedup vs GPU-SI", "geometric mean", "+free mapping", "Where the PIM goes", "proven gap",
                 "![ladder](ladder.png)"):
        assert text in md
    assert "gpt2-tiny" in rep.text and "opt-tiny" in rep.text
    assert "Consistency checks" in rep.text and "all passed" in rep.text
    # speedup over GPU-SI in the table is the latency ratio of the records
    si = next(r for r in records if r.scenario == "gpt2-tiny" and r.part == "GPU-SI")
    expected = si.metrics.latency_ns_per_token / exact["gpt2-tiny"].metrics.latency_ns_per_token
    row = next(line for line in rep.text.splitlines() if line.startswith("gpt2-tiny") and "OPTIMAL" in line)
    assert f"{expected:.3g}" in row.split()


def test_consistency_checks_flag_disagreements():
    from specpim_cp.report.batch import consistency_checks, group
    from specpim_cp.runs.records import FrontPoint, RecordMetrics

    def metrics(latency, energy):
        return RecordMetrics(latency, energy, 0.0, 1.0, 1, latency * energy)

    def point(latency, energy):
        return FrontPoint(metrics(latency, energy), {}, ())

    def rec(method, part, latency, energy, status="OPTIMAL", **extra):
        return Record(key=f"{method}-{part}", scenario="s", scenario_file="s.toml", scenario_hash="h", family="f",
                      batch_size=1, scenario_objective="latency", objective_name="latency", method=method, part=part,
                      parts=1, status=status, metrics=metrics(latency, energy), **extra)

    steps = ("GPU-SI", "+attention offload", "+free mapping", "+pipeline", "+free architecture")
    ok = [rec("exact", "exact", 100.0, 50.0), rec("baselines", "GPU-SI", 200.0, 80.0),
          rec("heuristic", "heuristic", 110.0, 40.0, "HEURISTIC"),
          rec("pareto", "front", 0, 0, "FRONT", front=(point(100.0, 50.0), point(120.0, 30.0))),
          *(rec("ladder", st, lat, 1.0) for st, lat in zip(steps, (200.0, 300.0, 150.0, 120.0, 100.0),
                                                            strict=True))]
    assert consistency_checks(group(ok)) == []
    bad = [rec("exact", "exact", 100.0, 50.0), rec("heuristic", "heuristic", 90.0, 40.0, "HEURISTIC"),
           rec("pareto", "front", 0, 0, "FRONT", front=(point(100.0, 60.0),)),
           *(rec("ladder", st, lat, 1.0) for st, lat in zip(steps, (200.0, 300.0, 150.0, 160.0, 100.0),
                                                             strict=True))]
    found = consistency_checks(group(bad))
    assert len(found) == 3
    assert any("heuristic" in f and "beats" in f for f in found)
    assert any("dominated" in f for f in found)
    assert any("+pipeline" in f and "slower" in f for f in found)


def test_report_command_and_errors(tiny_files, tmp_path, stand_in):
    from specpim_cp.cli.batch import batch, report

    out = tmp_path / "out"
    runner = CliRunner()
    res = runner.invoke(batch, [str(tiny_files[0]), "--out", str(out), "--methods", "baselines",
                                "--jobs", "1"])
    assert res.exit_code == 0, res.output
    assert "GPU-SI" in res.output and "1 run, 0 already done" in res.output
    res = runner.invoke(report, [str(out), "--no-plots"])
    assert res.exit_code == 0 and "summary.md" in res.output
    res = runner.invoke(batch, [str(tiny_files[0]), "--out", str(out), "--methods", "simplex"])
    assert res.exit_code == 2 and "unknown method" in res.output
    res = runner.invoke(report, [str(tmp_path)])
    assert res.exit_code == 2 and "no results" in res.output


# ------------------------------------------------------------------------------------------------
# Sweep
# ------------------------------------------------------------------------------------------------
def test_parse_range():
    assert parse_range("0.5:0.7:0.1") == [0.5, 0.6, 0.7]
    assert parse_range("0.3:0.3:0.1") == [0.3]
    for bad in ("0.5:0.9", "0.9:0.5:0.1", "0.5:1.0:0.1", "a:b:c", "0.1:0.9:0"):
        with pytest.raises(ScenarioError, match="--acceptance"):
            parse_range(bad)


def test_sweep_table_hints_and_files(tiny_files, tmp_path):
    # on plain memory the verifier's pass is nearly flat in tokens, so longer drafts pay off as alpha grows
    # (on all-PIM devices every drafted token costs the verifier a re-stream of its weights)
    sc = load_scenario(tiny_files[0])
    sc = sc.model_copy(update={"space": sc.space.model_copy(update={"pim_units": 0})})
    hints = []

    def solver(scenario, **kw):
        hints.append(kw["hint"])
        return brute_force_solve(scenario, **kw)

    result = sweep_acceptance(sc, [0.2, 0.5, 0.8, 0.95], solver=solver)
    assert [p.acceptance for p in result.points] == [0.2, 0.5, 0.8, 0.95]
    assert hints[0] is None and all(h == p.design for h, p in zip(hints[1:], result.points, strict=False))
    lat = [p.latency_ns_per_token for p in result.points]
    assert lat == sorted(lat, reverse=True)  # better drafts never hurt the optimum
    # the optimum changes somewhere between alpha 0.2 and 0.95 (longer drafts pay off)
    gammas = [p.design.drafters[0].draft_length if p.design.drafters else 0 for p in result.points]  # 0: alone
    assert gammas[0] < gammas[-1]
    assert any(c.startswith("draft ") for p in result.change_points() for c in p.changes)
    files = write_sweep(result, tmp_path / "sweep")
    assert all(f.exists() and f.stat().st_size > 200 for f in files)
    assert len((tmp_path / "sweep" / "sweep.csv").read_text().splitlines()) == 5
    with pytest.raises(ScenarioError, match="--drafter"):
        sweep_acceptance(sc, [0.5], drafter="opt-125m", solver=solver)


def test_sweep_command(tiny_files, tmp_path, stand_in):
    from specpim_cp.cli.batch import sweep

    res = CliRunner().invoke(sweep, [str(tiny_files[0]), "--acceptance", "0.5:0.9:0.2", "--out",
                                     str(tmp_path / "sw")])
    assert res.exit_code == 0, res.output
    assert "acceptance" in res.output and (tmp_path / "sw" / "sweep.png").stat().st_size > 1000
    res = CliRunner().invoke(sweep, [str(tiny_files[0]), "--acceptance", "0.9:0.5:0.1"])
    assert res.exit_code == 2


# ------------------------------------------------------------------------------------------------
# The real exact optimizer
# ------------------------------------------------------------------------------------------------
def test_exact_batch_end_to_end(tiny_files, tmp_path):
    """CP-SAT through the batch: proven optima, ladder steps nested, brute force never better."""
    pytest.importorskip("specpim_cp.solvers.exact")
    out = tmp_path / "out"
    s = run_batch(tiny_files[:1], out, BatchOptions(methods=("exact", "ladder"), jobs=1, pareto=False,
                                                    time_limit_s=30))
    assert s.failed == []
    records = {(r.method, r.part): r for r in read_records(out)}
    ex = records[("exact", "exact")]
    assert ex.status == "OPTIMAL" and ex.gap == 0 and ex.solver_version.startswith("ortools")
    assert ex.options["deterministic"] is True and ex.options["workers"] == 1
    optimum = Fraction(ex.objective_exact)
    assert optimum <= brute_force_solve(load_scenario(tiny_files[0])).report.objective
    ladder = [records[("ladder", step)] for step in ("+free mapping", "+pipeline", "+free architecture")]
    objs = [Fraction(r.objective_exact) for r in ladder]
    assert objs == sorted(objs, reverse=True) and objs[-1] == optimum  # each step widens the previous space


def test_golden_paper_objectives():
    """Recompute the fastest pinned paper optima; they must agree exactly (same solver version)."""
    if not GOLDEN.exists():
        pytest.skip("no tests/golden/paper.json (python benchmarks/bench_batch.py --write-golden)")
    from specpim_cp.solvers.exact import SolverOptions, solve
    from specpim_cp.solvers.result import solver_version

    golden = json.loads(GOLDEN.read_text())
    if golden["solver_version"] != solver_version():
        pytest.skip(f"golden file pinned with {golden['solver_version']}, running {solver_version()}")
    optimal = {n: g for n, g in golden["scenarios"].items() if g["status"] == "OPTIMAL"}
    assert len(optimal) >= 3
    opts = golden["options"]
    for name in sorted(optimal, key=lambda n: optimal[n]["wall_s"])[:3]:
        sc = load_scenario(builtin_sets()["paper"] / f"{name}.toml")
        assert sc.content_hash() == optimal[name]["scenario_hash"], f"{name} changed: rewrite the golden file"
        res = solve(sc, options=SolverOptions.from_dict(opts))
        assert res.report.status == "OPTIMAL"
        assert res.report.objective == Fraction(optimal[name]["objective_exact"]), name


def test_records_carry_the_packages_own_version():
    """The version records carry is the package's `__version__` (not an editable install's stale metadata)."""
    import specpim_cp
    from specpim_cp.runs.records import package_version

    assert package_version() == f"specpim-cp {specpim_cp.__version__}"
