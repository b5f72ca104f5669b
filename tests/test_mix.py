"""Workload mixes (formulations/mix.md): `solve_mix` equals `solve` for one cell and brute force over shared
architectures on small mixes (every objective, one mix where the tensor-copy rule binds), its claims equal
the evaluator's prices, it is never worse than the median cell's hardware or the PAPI-style rule when
those lie in the mix's space; `solve-mix` (units, JSON, policy files that `evaluate` re-prices, one-line
errors) and `batch` of mix files (records, report, resume).
"""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from oracles.mix_brute import MixEnumeration

from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.files import toml_text
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.mix import check_mix_capacity, mix_value
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.scenario import parse_scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.runs.batch import run_batch
from specpim_cp.runs.instances import BatchOptions
from specpim_cp.runs.mixes import is_mix_file, plan_mixes
from specpim_cp.runs.records import Record
from specpim_cp.runs.store import read_records
from specpim_cp.solvers.exact import SolverOptions, solve
from specpim_cp.solvers.mix import solve_mix
from specpim_cp.solvers.mix.comparisons import MEDIAN, PAPI_HALF, PAPI_MIX, PER_CELL
from specpim_cp.solvers.mix.records import MixOptions

# A verifier and a drafter on one device each; two memory types with two PIM units (four shared
# architectures), one PIM share level: small enough for brute force.
BASE = """
name = "tiny"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = [{memories}]
max_draft_length = 2

[verifier]
model = "gpt2-large"
devices = 1

[[drafters]]
model = "gpt2-small"
devices = 1
acceptance = 0.7

[space]
share_levels = 1
{pim_units}
"""
TASKS = """
[mix.tasks.easy]
"gpt2-small" = 0.85
"""
CELLS = """
[[mix.cells]]
batch_size = 1
task = "easy"
weight = 2

[[mix.cells]]
batch_size = 1
acceptance = {"gpt2-small" = 0.55}
weight = 1

[[mix.cells]]
batch_size = 16
weight = 1.5
"""
# Autoregressive OPT-6.7B on one GDDR device: a batch-1 cell wants its FC weights in PIM units, a batch-64
# cell on the host, and at 4 PIM units both copies do not fit (the tensor-copy rule binds).
COUPLED = """
name = "coupled"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["gddr"]

[verifier]
model = "opt-6.7b"
devices = 1

[space]
share_levels = 1

[[mix.cells]]
batch_size = 1
weight = 3

[[mix.cells]]
batch_size = 64
weight = 1
"""
OBJECTIVES = ("latency", "energy", "regret")
#: Deterministic solves, 30 units for the mix model and for each single-cell solve.
OPTIONS = MixOptions(SolverOptions(30, deterministic=True), cell_time_limit_s=30)


def _base(memories: str = '"hbm", "gddr"', pim_units: int | None = 2) -> str:
    return BASE.format(memories=memories, pim_units="" if pim_units is None else f"pim_units = {pim_units}")


def _mix_file(name: str, cells: str = CELLS, tasks: str = TASKS, base: str = "base.toml") -> str:
    return f'name = "{name}"\nscenario = "{base}"\n{tasks}{cells}'


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("mixes")
    (d / "base.toml").write_text(_base())
    (d / "free.toml").write_text(_base('"hbm"', None))  # the PIM units free: the references lie in the space
    (d / "small.toml").write_text(_mix_file("small"))
    (d / "free-mix.toml").write_text(_mix_file("free-mix", base="free.toml"))
    (d / "coupled.toml").write_text(COUPLED)
    return d


@pytest.fixture(scope="module")
def solved(folder):
    """solve_mix results, each computed once: (mix file stem, objective) -> MixResult."""
    cache = {}

    def get(stem: str, objective: str):
        if (stem, objective) not in cache:
            cache[stem, objective] = solve_mix(load_mix(folder / f"{stem}.toml"), objective, OPTIONS)
        return cache[stem, objective]

    return get


@pytest.fixture(scope="module")
def enumerated(folder):
    cache = {}

    def get(stem: str) -> MixEnumeration:
        if stem not in cache:
            cache[stem] = MixEnumeration(load_mix(folder / f"{stem}.toml"))
        return cache[stem]

    return get


# ------------------------------------------------------------------------------------------------
# The optimum
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("objective", ["latency", "energy"])
def test_one_cell_equals_solve(folder, objective):
    one = load_mix(_write(folder, "one.toml", _mix_file("one", cells="[[mix.cells]]\nbatch_size = 4\nweight = 0.3\n")))
    assert len(one.cells) == 1
    res = solve_mix(one, objective, OPTIONS)
    alone = solve(one.cells[0].scenario, objective=objective, options=OPTIONS.solver)
    assert res.report.status == alone.report.status == "OPTIMAL"
    assert res.report.objective == alone.report.objective
    assert res.evaluations[0].metrics.objective(objective) == alone.evaluation.metrics.objective(objective)
    if objective == "latency":
        regret = solve_mix(one, "regret", OPTIONS)
        assert regret.report.objective == 1


@pytest.mark.parametrize("stem", ["small", "coupled"])
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_brute_force_over_shared_architectures_equals_cp_sat(solved, enumerated, stem, objective):
    res = solved(stem, objective)
    brute = enumerated(stem).optimum(objective)
    assert res.report.status == "OPTIMAL"
    assert res.report.objective == brute.value, (float(res.report.objective), float(brute.value))
    assert tuple(r.report.objective for r in res.optima) == brute.own  # the regret denominators
    assert res.report.bound <= res.report.objective
    if stem == "coupled":  # the cells' separate best designs do not fit one hardware together
        assert brute.coupled > 0


@pytest.mark.parametrize("stem", ["small", "coupled"])
def test_every_cell_re_evaluates_to_its_claim(solved, stem):
    for objective in ("latency", "regret"):
        res = solved(stem, objective)
        claims = res.report.extra["claimed"]
        assert len(claims) == len(res.mix.cells)
        for cell, e, claim in zip(res.mix.cells, res.evaluations, claims, strict=True):
            m = Evaluator(cell.scenario, scenario_catalog(cell.scenario)).evaluate(e.design).metrics
            assert m == e.metrics
            assert claim == {"round_time_ns": m.round_time_ns, "energy_nj_per_round": m.energy_nj_per_round,
                             "tokens_per_round_micro": m.tokens_per_round_micro}
        check_mix_capacity(res.mix, [Evaluator(c.scenario) for c in res.mix.cells], list(res.designs))


@pytest.mark.parametrize("stem", ["free-mix", "small", "coupled"])
def test_mix_optimum_never_worse_than_median_cell_or_the_rule(solved, stem):
    """(b) and (c) are mix designs: when they lie in the mix's space, a proven optimum is no worse; (a) is
    a lower bound."""
    compared = 0
    for objective in ("latency", "energy"):
        res = solved(stem, objective)
        assert res.report.status == "OPTIMAL"
        by_name = {c.name: c for c in res.comparisons}
        assert by_name[PER_CELL].value <= res.report.objective
        for name in (MEDIAN, PAPI_HALF, PAPI_MIX):
            c = by_name.get(name)
            if c is None or c.value is None:
                continue
            in_space = all(not DesignSpace(cell.scenario, scenario_catalog(cell.scenario)).violations(e.design)
                           for cell, e in zip(res.mix.cells, c.evaluations, strict=True))
            if in_space:
                assert res.report.objective <= c.value, (name, float(c.value), float(res.report.objective))
                compared += 1
    if stem == "free-mix":
        assert compared >= 6  # median, both rules, both objectives


# ------------------------------------------------------------------------------------------------
# solve-mix
# ------------------------------------------------------------------------------------------------
def _write(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text)
    return folder / name


def test_solve_mix_report_json_and_policy_files_re_price(folder, tmp_path):
    out, pol = tmp_path / "r.json", tmp_path / "policy"
    res = CliRunner().invoke(main, ["solve-mix", str(folder / "small.toml"), "--deterministic", "--time-limit", "30",
                                    "-o", str(out), "--policy-dir", str(pol)])
    assert res.exit_code == 0 and res.stderr == "", (res.stderr, res.exception)
    text = res.stdout
    head = text.splitlines()[0]
    assert "OPTIMAL" in head and "us/token" in head and "seed 0" in head and "ortools" in head and "gap" in head
    for header in ("latency (us/token)", "energy (mJ/token)", "regret (latency / own optimum, x)",
                   "cells on PIM (index)", "objective: latency (us/token)", "ratio to mix optimum (x)",
                   "draft drafters[0]", "on PIM: verifier", "per-cell optima", "median-cell hardware",
                   "PAPI-style rule, mix hardware", "GPU-SI"):
        assert header in text, header
    data = json.loads(out.read_text())
    assert data["solve"]["objective_unit"] == "ns/token" and data["solve"]["status"] == "OPTIMAL"
    assert {"seed", "solver_version", "inputs_hash", "bound", "gap", "claimed"} <= set(data["solve"])
    assert len(data["cells"]) == 3 and len(data["comparisons"]) >= 4
    index = json.loads((pol / "policy.json").read_text())
    assert sorted(p.name for p in pol.iterdir()) == sorted(
        ["policy.json", *(f"cell-{i}.{x}" for i in range(3) for x in ("toml", "json"))])
    for i, cell in enumerate(data["cells"]):
        assert index["cells"][i]["scenario_file"] == f"cell-{i}.toml"
        ev = CliRunner().invoke(main, ["evaluate", str(pol / f"cell-{i}.toml"), "--design", str(pol / f"cell-{i}.json"),
                                       "--json"])
        assert ev.exit_code == 0, ev.stderr
        priced = json.loads(ev.stdout)
        for k in ("latency_ns_per_token", "energy_pj_per_token", "round_time_ns", "tokens_per_round_micro",
                  "energy_nj_per_round"):
            assert priced[k] == cell["metrics"][k], k
        assert priced["design"] == cell["design"]


USER_MODEL = """
[models."my-drafter"]
family = "gpt2"
tokenizer = "gpt2-bpe"
layers = 6
hidden = 768
heads = 12
kv_heads = 12
head_dim = 64
ffn = 3072
ffn_kind = "two-matrix"
parallel_block = false
vocab = 50257
tied_embeddings = true
bytes_per_param = 2
nominal_params_b = 0.08
source = "test: half of gpt2-small"
"""


def test_user_catalog_reaches_every_cell_and_the_policy_files(tmp_path):
    """--catalog is merged into the base scenario's catalog files, so the cells and the policy's scenario
    files carry it: `evaluate` re-prices them without --catalog."""
    _write(tmp_path, "models.toml", USER_MODEL)
    _write(tmp_path, "base.toml", _base().replace('model = "gpt2-small"', 'model = "my-drafter"'))
    mix = _write(tmp_path, "m.toml", _mix_file("m", tasks="", cells="[[mix.cells]]\nbatch_size = 2\nweight = 1\n"))
    _one_line_error(CliRunner().invoke(main, ["solve-mix", str(mix)]), ("my-drafter",))
    pol = tmp_path / "pol"
    res = CliRunner().invoke(main, ["solve-mix", str(mix), "--catalog", str(tmp_path / "models.toml"),
                                    "--deterministic", "--json", "--policy-dir", str(pol)])
    assert res.exit_code == 0, res.stderr
    cell = json.loads(res.stdout)["cells"][0]
    ev = CliRunner().invoke(main, ["evaluate", str(pol / "cell-0.toml"), "--design", str(pol / "cell-0.json"),
                                   "--json"])
    assert ev.exit_code == 0, ev.stderr
    priced = json.loads(ev.stdout)
    assert priced["catalog_files"] == [str(tmp_path / "models.toml")]
    assert priced["latency_ns_per_token"] == cell["metrics"]["latency_ns_per_token"]


@pytest.mark.parametrize("objective,unit", [("energy", "mJ/token"), ("regret", "x own optimum")])
def test_solve_mix_objectives_and_json_stdout(folder, objective, unit):
    res = CliRunner().invoke(main, ["solve-mix", str(folder / "coupled.toml"), "--objective", objective,
                                    "--deterministic"])
    assert res.exit_code == 0 and res.stderr == "", res.stderr
    assert f"objective {objective}" in res.stdout.splitlines()[0] and unit in res.stdout.splitlines()[0]
    res = CliRunner().invoke(main, ["solve-mix", str(folder / "coupled.toml"), "--objective", objective,
                                    "--deterministic", "--json"])
    data = json.loads(res.stdout)
    assert data["solve"]["objective_name"] == objective
    assert data["hardware"][0]["model"] == "opt-6.7b"


def test_scenario_toml_round_trip(folder):
    """The policy's scenario files are the cells' scenarios exactly (the TOML writer loses nothing)."""
    import tomllib

    for stem in ("small", "coupled"):
        for cell in load_mix(folder / f"{stem}.toml").cells:
            data = cell.scenario.model_dump(mode="json")
            assert parse_scenario(tomllib.loads(toml_text(data))) == cell.scenario


BAD = {
    "empty-mix": ('name = "m"\nscenario = "base.toml"\n[mix]\ncells = []\n', [], ("mix.cells", "no cells")),
    "zero-weight": (_mix_file("m", cells="[[mix.cells]]\nbatch_size = 1\nweight = 0\n"), [], ("mix.cells[0].weight",)),
    "negative-weight": (_mix_file("m", cells="[[mix.cells]]\nbatch_size = 1\nweight = 1\n[[mix.cells]]\nbatch_size = 2"
                                          "\nweight = -0.5\n"), [], ("mix.cells[1].weight", "> 0")),
    "model-absent": (_mix_file("m", cells='[[mix.cells]]\nbatch_size = 1\nweight = 1\nacceptance = {"opt-125m" = 0.5}\n'),
                     [], ("mix.cells[0].acceptance.opt-125m", "not a drafter")),
    "task-model-absent": (_mix_file("m", tasks='[mix.tasks.qa]\n"llama-1.3b" = 0.5\n'), [],
                          ("mix.tasks.qa.llama-1.3b",)),
    "unknown-objective": (_mix_file("m"), ["--objective", "throughput"], ("--objective", "throughput")),
    "nan-time-limit": (_mix_file("m"), ["--time-limit", "nan"], ("--time-limit",)),
    "inf-cell-time-limit": (_mix_file("m"), ["--cell-time-limit", "inf"], ("--cell-time-limit",)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(folder, tmp_path, case):
    text, extra, needles = BAD[case]
    (tmp_path / "base.toml").write_text(_base())
    path = _write(tmp_path, "m.toml", text)
    before = sorted(tmp_path.iterdir())
    res = CliRunner().invoke(main, ["solve-mix", str(path), *extra, "-o", str(tmp_path / "r.json"),
                                    "--policy-dir", str(tmp_path / "pol")])
    _one_line_error(res, needles)
    assert sorted(tmp_path.iterdir()) == before  # nothing written


def test_missing_mix_file_names_the_built_in_mixes(tmp_path):
    res = CliRunner().invoke(main, ["solve-mix", str(tmp_path / "none.toml")])
    _one_line_error(res, ("none.toml", "no such mix file", "mix/opt-13b"))


def _one_line_error(res, needles) -> None:
    assert res.exit_code == 2, (res.exit_code, res.stdout[-300:], res.stderr, res.exception)
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr
    for needle in needles:
        assert needle in res.stderr, (needle, res.stderr)


# ------------------------------------------------------------------------------------------------
# batch and report
# ------------------------------------------------------------------------------------------------
def test_batch_of_mix_files_records_report_and_resume(folder, tmp_path):
    mixes = tmp_path / "mixes"
    mixes.mkdir()
    _write(mixes, "coupled.toml", COUPLED)
    _write(mixes, "small.toml", _mix_file("small", base=str(folder / "base.toml")))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["batch", str(mixes), "--out", str(out), "--jobs", "1", "--time-limit", "30"])
    assert res.exit_code == 0, (res.stdout[-2000:], res.stderr)
    records = read_records(out)
    assert sorted((r.scenario, r.method, r.status) for r in records) == [
        ("coupled", "mix", "OPTIMAL"), ("small", "mix", "OPTIMAL")]
    for r in records:
        assert Record.from_json(json.loads(json.dumps(r.to_json()))) == r
        assert r.objective_name == "latency" and r.mix is not None
        assert len(r.mix.cells) == {"coupled": 2, "small": 3}[r.scenario]
        assert r.mix.comparison(PER_CELL).objective <= r.objective
    summary = (out / "summary.md").read_text()
    assert "gain over PAPI-style rule, mix hardware (%)" in summary and "loss vs per-cell optima (%)" in summary
    assert "Rule view of mix small" in summary and "VIOLATION" not in summary
    for name in ("coupled", "small"):
        png = (out / f"mix-heatmap-{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and f"mix-heatmap-{name}.png" in summary
    assert "mix" in (out / "results.csv").read_text()
    again = run_batch(sorted(mixes.iterdir()), out, BatchOptions(jobs=1, time_limit_s=30))
    assert (again.total, again.ran, again.skipped) == (2, 0, 2)
    other = run_batch(sorted(mixes.iterdir()), out, BatchOptions(jobs=1, time_limit_s=30, mix_objective="regret"))
    assert other.ran == 2  # another objective is another instance


def test_built_in_mix_set_plans_one_instance_per_family(tmp_path):
    files = sorted(builtin_sets()["mix"].glob("*.toml"))
    assert files and all(is_mix_file(f) for f in files)
    instances = plan_mixes(files, BatchOptions(), "mix")
    assert sorted(i.family for i in instances) == ["llama", "opt", "palm"]
    assert all(i.method == "mix" and len(i.mix_data["mix"]["cells"]) == 21 for i in instances)
    assert len({i.key for i in instances}) == 3
    energy = plan_mixes(files, BatchOptions(mix_objective="energy"), "mix")
    assert not {i.key for i in instances} & {i.key for i in energy}


def test_scenario_files_keep_their_batch(folder, tmp_path):
    """A folder of scenario files plans and runs as before (no mix instance)."""
    scen = tmp_path / "scen"
    scen.mkdir()
    _write(scen, "tiny.toml", _base())
    assert not is_mix_file(scen / "tiny.toml")
    summary = run_batch([scen / "tiny.toml"], tmp_path / "out", BatchOptions(methods=("baselines",), jobs=1))
    assert summary.failed == [] and summary.ran == 1
    assert {r.method for r in read_records(tmp_path / "out")} == {"baselines"}


# ------------------------------------------------------------------------------------------------
# Warm starts and solver guards of the driver
# ------------------------------------------------------------------------------------------------
def test_single_copy_design_fits_where_the_cells_optima_do_not(folder):
    """On hardware where the cells' separate optima need two copies of a weight tensor that do not fit,
    the single-copy warm start is a feasible mix design (tensor-copy rule) and no better than the optimum."""
    from specpim_cp.catalog import default_catalog
    from specpim_cp.physics.mix import check_mix_capacity
    from specpim_cp.solvers.mix import cpsat as M
    from specpim_cp.solvers.mix.cell_solves import FixedHardware
    from specpim_cp.solvers.mix.session import MixRun

    mix = load_mix(folder / "coupled.toml")
    catalog = default_catalog()
    evs = [Evaluator(c.scenario, catalog) for c in mix.cells]
    mm = M.MixModel(mix, catalog, evs)
    opts = SolverOptions(30.0, 1, 0, True)
    fixed = FixedHardware(mix, evs, "latency", opts, catalog)
    run = MixRun(mm, opts, None)
    coupled = []
    for archs in ([a] for a in mm.x[0]):
        _status, evals = fixed.all(archs)
        if evals is None:
            continue
        try:
            check_mix_capacity(mix, evs, [e.design for e in evals])
        except ScenarioError:
            coupled.append((archs, evals))
    assert coupled, "the COUPLED mix must have a hardware where the tensor-copy rule binds"
    optimum = solve_mix(mix, options=OPTIONS).report.objective
    for archs, evals in coupled:
        single = M._single_copy(run, fixed, tuple(archs), evals, "latency", [Fraction(1)] * len(evals))
        assert single is not None
        check_mix_capacity(mix, evs, [e.design for e in single])  # raises if the copies do not fit
        assert mix_value(mix, [e.metrics for e in single], "latency") >= optimum


def test_infeasible_answer_on_a_model_with_a_known_design_is_re_solved(folder, monkeypatch):
    """A CP-SAT INFEASIBLE on a stage capped by a known feasible design is a solver error (9.15 presolve):
    the stage is re-solved without presolve and the error is logged."""
    from ortools.sat.python import cp_model

    from specpim_cp.solvers.mix import cpsat as M

    calls = []
    real = cp_model.CpSolver.solve

    def first_says_infeasible(self, model, *args, **kwargs):
        status = real(self, model, *args, **kwargs)
        if any(v.name == "mix_objective" for v in model.proto.variables):  # a mix-model stage
            calls.append(self.parameters.cp_model_presolve)
            if len(calls) == 1:
                return cp_model.INFEASIBLE  # what 9.15 answered on the llama-32.5b mix
        return status

    mix = load_mix(folder / "small.toml")
    options = dataclasses.replace(OPTIONS, method="cp-sat")  # the mix model's stages
    baseline = solve_mix(mix, options=options)
    optima = list(baseline.optima)
    monkeypatch.setattr(M.cp_model.CpSolver, "solve", first_says_infeasible)
    res = solve_mix(mix, options=options, optima=optima)
    assert calls[:2] == [True, False]
    assert any("re-solved without presolve" in s["stage"] for s in res.report.extra["stages"])
    assert res.report.objective == baseline.report.objective


def test_claims_fall_back_to_each_cells_own_model(folder, monkeypatch):
    """When the whole mix model does not prove its tight values in time, each cell's claim comes from its
    own single-scenario model, and it still equals the evaluator (same result as the whole-model claim)."""
    from specpim_cp.solvers.exact.guards import ModelMismatch
    from specpim_cp.solvers.mix import session

    mix = load_mix(folder / "small.toml")
    options = dataclasses.replace(OPTIONS, method="cp-sat")  # the decomposition asks each cell's model at once
    first = solve_mix(mix, options=options)

    def slow(*args, **kwargs):
        raise ModelMismatch("the mix model rejects its own design (FEASIBLE)")

    monkeypatch.setattr(session, "_tight_claims_whole", slow)
    again = solve_mix(mix, options=options, optima=list(first.optima))
    assert again.report.extra["claimed"] == first.report.extra["claimed"]
    assert again.report.objective == first.report.objective
