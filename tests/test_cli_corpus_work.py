"""Unbounded work and inconsistent checks: one option, one limit, one line. Every command that takes
`--seed`, `--time-limit`, `--workers`, `--rounds` or `--jobs` refuses a value outside its limit with the
SAME line (`error: OPTION: must be ..., got VALUE`, naming the option and the limit), exit code 2, no
traceback, nothing written, and before any work: the solvers, the simulation and the executors are
replaced by tripwires here, so a check that came after the work started would fail the test, not pass it.
Like tests/test_cli_corpus.py, each case runs through the real CLI (click's runner; one real process).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import build_design

import specpim_cp.check.simulate as simulate_mod
import specpim_cp.runs.executors as executors_mod
import specpim_cp.runs.instances as instances_mod
from specpim_cp.check.simulate import MAX_ROUNDS, SimDrafter, simulate_rounds
from specpim_cp.cli import main
from specpim_cp.cli.common import MIN_SIMULATE_ROUNDS
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.problem.trees import TreeDraft
from specpim_cp.runs.executors import MAX_CLUSTER_JOBS, PoolExecutor, RayExecutor, open_executor
from specpim_cp.runs.instances import MAX_SEED, MAX_TIME_LIMIT_S, MAX_WORKERS, BatchOptions

ROOT = Path(__file__).resolve().parents[1]
OPT13 = str(ROOT / "benchmarks" / "examples" / "opt-13b.toml")
GRID = f'base = "{OPT13}"\n[axes]\nbatch_size = [1, 2]\n'

#: Each command with the arguments of a run that would do real work and write files into the case folder
#: ({d}), and the shared options it takes.
COMMANDS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "solve": (["solve", OPT13, "--no-warm-start", "--json", "-o", "{d}/out/s.json"],
              ("--seed", "--time-limit", "--workers")),
    "pareto": (["pareto", OPT13, "-o", "{d}/out/p.csv"], ("--seed", "--time-limit", "--workers")),
    "heuristic": (["heuristic", OPT13, "--json", "-o", "{d}/out/h.json"], ("--seed", "--time-limit")),
    "compare": (["compare", OPT13], ("--seed", "--time-limit")),
    "sensitivity": (["sensitivity", OPT13, "--plot", "{d}/out/t.png"], ("--seed", "--time-limit")),
    "sweep": (["sweep", OPT13, "--acceptance", "0.5:0.6:0.1", "--out", "{d}/sweep"],
              ("--seed", "--time-limit", "--workers")),
    "simulate": (["simulate", OPT13, "--design", "{d}/d.json"], ("--seed", "--rounds")),
    "solve-mix": (["solve-mix", "mix/opt-13b", "-o", "{d}/out/m.json", "--policy-dir", "{d}/policy"],
                  ("--seed", "--time-limit", "--cell-time-limit", "--workers")),
    "batch": (["batch", OPT13, "--out", "{d}/batch"], ("--seed", "--time-limit", "--workers", "--jobs")),
    "grid": (["grid", "{d}/g.toml", "--out", "{d}/grid"], ("--seed", "--time-limit", "--workers", "--jobs")),
}

SEED_LIMIT = f"must be an integer from 0 to {MAX_SEED} (CP-SAT's random seed is a 32-bit integer)"
TIME_LIMIT = f"must be a finite number of seconds from 0.1 to {MAX_TIME_LIMIT_S:.0f} (one day per solve)"
WORKERS_LIMIT = f"must be an integer from 1 to {MAX_WORKERS} (CP-SAT workers of one solve)"
ROUNDS_LIMIT = f"must be an integer from {MIN_SIMULATE_ROUNDS} to {MAX_ROUNDS} (at most about 90 s and 250 MB)"

#: (option, value on the command line, the line every command taking the option must print)
BAD_VALUES: list[tuple[str, str, str]] = [
    ("--seed", "-1", f"--seed: {SEED_LIMIT}, got -1"),
    ("--seed", str(2**31), f"--seed: {SEED_LIMIT}, got 2147483648"),  # CP-SAT failed on it with a traceback
    ("--seed", str(2**64), f"--seed: {SEED_LIMIT}, got 18446744073709551616"),
    ("--seed", "9" * 60, f"--seed: {SEED_LIMIT}, got {'9' * 20}... (60 characters)"),
    ("--time-limit", "0", f"--time-limit: {TIME_LIMIT}, got 0"),
    ("--time-limit", "-1", f"--time-limit: {TIME_LIMIT}, got -1"),
    ("--time-limit", "0.05", f"--time-limit: {TIME_LIMIT}, got 0.05"),
    ("--time-limit", "nan", f"--time-limit: {TIME_LIMIT}, got nan"),
    ("--time-limit", "inf", f"--time-limit: {TIME_LIMIT}, got inf"),
    ("--time-limit", "1e308", f"--time-limit: {TIME_LIMIT}, got 1e+308"),
    ("--time-limit", "86401", f"--time-limit: {TIME_LIMIT}, got 86401"),
    ("--cell-time-limit", "nan", f"--cell-time-limit: {TIME_LIMIT}, got nan"),
    ("--cell-time-limit", "1e308", f"--cell-time-limit: {TIME_LIMIT}, got 1e+308"),
    ("--cell-time-limit", "0", f"--cell-time-limit: {TIME_LIMIT}, got 0"),
    ("--workers", "0", f"--workers: {WORKERS_LIMIT}, got 0"),
    ("--workers", "-1", f"--workers: {WORKERS_LIMIT}, got -1"),
    ("--workers", "65", f"--workers: {WORKERS_LIMIT}, got 65"),
    ("--workers", "1000000", f"--workers: {WORKERS_LIMIT}, got 1000000"),
    ("--rounds", "0", f"--rounds: {ROUNDS_LIMIT}, got 0"),
    ("--rounds", "1", f"--rounds: {ROUNDS_LIMIT}, got 1"),
    ("--rounds", "-5", f"--rounds: {ROUNDS_LIMIT}, got -5"),
    ("--rounds", str(MAX_ROUNDS + 1), f"--rounds: {ROUNDS_LIMIT}, got {MAX_ROUNDS + 1}"),
    ("--rounds", "1000000000000", f"--rounds: {ROUNDS_LIMIT}, got 1000000000000"),
]


class Tripwire(AssertionError):
    """Work started although an option was out of its limit."""


@pytest.fixture
def no_work(monkeypatch):
    """Every solver, the simulation, sweeps, sensitivities and the executors fail the test if reached."""
    import specpim_cp.check.sensitivity as sensitivity_mod
    import specpim_cp.check.simulate_design as simulate_design_mod
    import specpim_cp.check.sweep as sweep_mod
    import specpim_cp.runs.batch as batch_mod
    import specpim_cp.solvers.mix as mix_solvers
    from specpim_cp.solvers import exact, heuristic

    def trip(*args, **kwargs):
        raise Tripwire("work started before the options were checked")

    for module, name in ((exact, "solve"), (exact, "pareto_front"), (exact, "pareto"), (heuristic, "run_heuristic"),
                         (mix_solvers, "solve_mix"), (sweep_mod, "sweep_acceptance"), (sensitivity_mod, "sensitivity"),
                         (simulate_design_mod, "simulate_design"), (batch_mod, "open_executor"),
                         (executors_mod.cf, "ProcessPoolExecutor")):
        monkeypatch.setattr(module, name, trip)


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*"))


def _design_json() -> str:
    sc = load_scenario(OPT13)
    place = rule_placement("host-only", sc.space.share_levels)
    archs = [ArchConfig("hbm", 0, e.devices or 1) for e in [sc.verifier, *sc.drafters]]
    d = build_design(sc, archs, [place] * len(archs), [3] * len(sc.drafters), [None] * len(sc.drafters), False)
    return d.to_json()


def _refused(folder: Path, args: list[str], expected: str | None = None, needles: tuple[str, ...] = ()) -> str:
    """Run `args` ({d} = a fresh folder holding a design and a grid): exit 2, one `error:` line (`expected`
    exactly, or holding the needles), no traceback, nothing written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "d.json").write_text(_design_json())
    (folder / "g.toml").write_text(GRID)
    before = _files(folder)
    argv = [a.replace("{d}", str(folder)) for a in args]
    res = CliRunner().invoke(main, argv)
    err = res.stderr
    assert not isinstance(res.exception, Tripwire), (argv, "work started")
    assert res.exit_code == 2, (argv, res.exit_code, err, res.exception)
    assert res.stdout == "" and "Traceback" not in err, (argv, res.stdout[-300:], err)
    assert err.startswith("error: ") and err.count("\n") == 1 and err.endswith("\n"), (argv, err)
    if expected is not None:
        assert err == f"error: {expected}\n", (argv, err)
    for needle in needles:
        assert needle in err, (needle, err)
    assert _files(folder) == before, (argv, sorted(map(str, _files(folder) - before)))
    return err


# -- one option, one limit, the same line from every command that takes it ------------------------------
@pytest.mark.parametrize(("option", "value", "expected"), BAD_VALUES, ids=[f"{o}={v[:12]}" for o, v, _ in BAD_VALUES])
def test_every_command_refuses_the_same_value_with_the_same_line(tmp_path, no_work, option, value, expected):
    takers = [name for name, (_, options) in COMMANDS.items() if option in options]
    assert takers
    for name in takers:
        args, _ = COMMANDS[name]
        _refused(tmp_path / name, [*args, option, value], expected)


def test_every_command_that_solves_or_simulates_takes_the_shared_options():
    """The matrix above covers every command that solves or simulates: each shared option on each one."""
    takes = {o: {n for n, (_, opts) in COMMANDS.items() if o in opts} for o, _, _ in BAD_VALUES}
    assert takes["--seed"] == set(COMMANDS)
    assert takes["--time-limit"] == set(COMMANDS) - {"simulate"}
    assert takes["--workers"] == {"solve", "pareto", "sweep", "solve-mix", "batch", "grid"}
    assert takes["--rounds"] == {"simulate"}


@pytest.mark.parametrize("args", [["simulate", OPT13, "--design", "{d}/none.json", "--rounds", "1000000000000"],
                                  ["solve", "{d}/none.toml", "--seed", "-1"],
                                  ["grid", "{d}/none.toml", "--jobs", "1000000"]])
def test_the_option_is_checked_before_the_inputs_are_read(tmp_path, no_work, args):
    """The input files do not exist: the error is the option's, so nothing was read before the check."""
    err = _refused(tmp_path, args)
    assert "none." not in err and ("--rounds" in err or "--seed" in err or "--jobs" in err)


def test_values_at_the_limits_are_accepted(tmp_path):
    """The limits are inclusive, and defaults and the examples' values still run."""
    (tmp_path / "d.json").write_text(_design_json())
    res = CliRunner().invoke(main, ["simulate", OPT13, "--design", str(tmp_path / "d.json"), "--rounds",
                                    str(MIN_SIMULATE_ROUNDS), "--seed", str(MAX_SEED), "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["rounds"] == MIN_SIMULATE_ROUNDS and json.loads(res.stdout)["seed"] == MAX_SEED
    res = CliRunner().invoke(main, ["solve", OPT13, "--no-warm-start", "--seed", str(MAX_SEED), "--time-limit",
                                    str(MAX_TIME_LIMIT_S), "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["solve"]["status"] == "OPTIMAL"
    BatchOptions(seed=MAX_SEED, time_limit_s=MAX_TIME_LIMIT_S, workers=MAX_WORKERS, deterministic=False).validate()
    BatchOptions(time_limit_s=0.1).validate()


def test_text_is_refused_like_a_number_out_of_range(tmp_path, no_work):
    for args, option in ((["solve", OPT13, "--workers", "many"], "--workers"),
                         (["simulate", OPT13, "--design", "{d}/d.json", "--rounds", "1e6"], "--rounds"),
                         (["pareto", OPT13, "--seed", "1.5"], "--seed"),
                         (["compare", OPT13, "--time-limit", "soon"], "--time-limit")):
        err = _refused(tmp_path / option, args)
        assert err.startswith(f"error: {option}: must be ") and "got '" in err, err


def test_the_python_api_words_the_limits_as_the_cli_does():
    for kwargs, line in (({"seed": -1}, BAD_VALUES[0][2]), ({"time_limit_s": float("nan")}, BAD_VALUES[7][2]),
                         ({"workers": 65, "deterministic": False}, BAD_VALUES[16][2])):
        with pytest.raises(ScenarioError) as info:
            BatchOptions(**kwargs).validate()
        assert str(info.value) == line


# -- budgets: one rule for heuristic --budget and batch --heuristic-budget ----------------------------------
BUDGET_LIMIT = "needs 0 <= generations <= 100000, 2 <= population <= 1000000 and 0 <= leaves <= 10000000"


@pytest.mark.parametrize("value", ["1x99999999999x1", "100001x2x1", "1x1x1", "1x2x10000001", "1x" + "9" * 5000 + "x1"])
def test_budget_limits_are_one_rule(tmp_path, no_work, value):
    """Thousands of digits were a ValueError traceback in batch; now the budget's limit, as in heuristic."""
    heur = _refused(tmp_path / "h", ["heuristic", OPT13, "--budget", value], needles=("--budget", BUDGET_LIMIT))
    batch = _refused(tmp_path / "b", ["batch", OPT13, "--out", "{d}/b", "--heuristic-budget", value],
                     needles=("--heuristic-budget", BUDGET_LIMIT))
    assert heur.replace("--budget", "OPTION") == batch.replace("--heuristic-budget", "OPTION")
    assert len(heur) < 300


# -- jobs: never more processes than CPUs, checked before any pool ------------------------------------------
def _local_cap() -> int:
    return max(2, os.cpu_count() or 1)


@pytest.mark.parametrize("jobs", [_local_cap() + 1, 1000, 1_000_000, 10**30])
@pytest.mark.parametrize("command", ["batch", "grid"])
def test_jobs_above_the_cpu_count_is_refused_before_any_pool(tmp_path, no_work, command, jobs):
    args, _ = COMMANDS[command]
    _refused(tmp_path, [*args, "--jobs", str(jobs)],
             needles=("--jobs", f"from 1 to {_local_cap()}", f"this machine has {os.cpu_count()} CPUs",
                      f"got {jobs}"))


@pytest.mark.parametrize("jobs", ["0", "-3"])
def test_jobs_below_one_is_refused(tmp_path, no_work, jobs):
    _refused(tmp_path, [*COMMANDS["batch"][0], "--jobs", jobs], needles=("--jobs", f"got {jobs}"))


def test_jobs_cap_follows_the_cpu_count(monkeypatch):
    monkeypatch.setattr(executors_mod.os, "cpu_count", lambda: 8)
    BatchOptions(jobs=8).validate()
    with pytest.raises(ScenarioError, match=r"--jobs: must be an integer from 1 to 8 \(this machine has 8 CPUs\)"):
        BatchOptions(jobs=9).validate()
    monkeypatch.setattr(executors_mod.os, "cpu_count", lambda: 1)
    BatchOptions().validate()  # the default 2 jobs stays allowed on one CPU
    with pytest.raises(ScenarioError, match="from 1 to 2"):
        BatchOptions(jobs=3).validate()


def test_ray_jobs_have_a_cap_too(tmp_path, no_work, monkeypatch):
    """A local Ray runtime forks on this machine: its CPUs. A cluster: MAX_CLUSTER_JOBS tasks in flight.
    Without --jobs, as many as the CPUs allow (checked before Ray is even looked for)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(instances_mod, "ray_available", lambda: True)
    args = [*COMMANDS["grid"][0], "--executor", "ray"]
    _refused(tmp_path / "local", [*args, "--jobs", "1000000"],
             needles=("--jobs", f"from 1 to {_local_cap()}", "without --jobs"))
    _refused(tmp_path / "cluster", [*args, "--ray-address", "10.0.0.1:6379", "--jobs", str(MAX_CLUSTER_JOBS + 1)],
             needles=("--jobs", f"from 1 to {MAX_CLUSTER_JOBS}", "cluster"))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    _refused(tmp_path / "env", [*args, "--jobs", "5000"], needles=("--jobs", f"from 1 to {MAX_CLUSTER_JOBS}"))
    BatchOptions(executor="ray", jobs=MAX_CLUSTER_JOBS).validate()
    BatchOptions(executor="ray", jobs=0).validate()


def test_executors_refuse_too_many_jobs_themselves():
    """The Python API starts no pool either: the executor checks its own jobs."""
    with pytest.raises(ScenarioError, match="--jobs"):
        open_executor("local", print, jobs=1_000_000)
    with pytest.raises(ScenarioError, match="--jobs"):
        PoolExecutor(print, _local_cap() + 1)
    with pytest.raises(ScenarioError, match="--jobs"):
        open_executor("local", print, jobs=0)


class _FakeRay(types.ModuleType):
    """A Ray already initialised on a cluster of `cpus` CPUs (what the executor asks before any task)."""

    def __init__(self, cpus: int):
        super().__init__("ray")
        self.cpus = cpus
        self.remote_calls = 0

    def is_initialized(self) -> bool:
        return True

    def cluster_resources(self) -> dict:
        return {"CPU": self.cpus}

    def remote(self, **kwargs):
        self.remote_calls += 1
        return lambda fn: fn


def test_a_ray_task_wider_than_the_cluster_is_refused_not_left_waiting(tmp_path, monkeypatch):
    """A task needing more CPUs than the whole cluster has would wait forever: one line instead."""
    fake = _FakeRay(cpus=2)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(executors_mod, "ray_available", lambda: True)
    monkeypatch.setattr(instances_mod, "ray_available", lambda: True)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ScenarioError, match=r"--workers 4: each Ray task needs 4 CPUs, the Ray cluster has 2"):
        RayExecutor(print, workers=4)
    assert fake.remote_calls == 0
    assert RayExecutor(print, workers=2).slots == 1
    _refused(tmp_path, ["batch", OPT13, "--out", "{d}/b", "--methods", "baselines", "--executor", "ray",
                        "--workers", "4", "--no-deterministic"],
             "--workers 4: each Ray task needs 4 CPUs, the Ray cluster has 2")


# -- simulate: rounds bounded, memory bounded --------------------------------------------------------------
def test_simulate_rounds_has_a_maximum_in_the_python_api_too():
    one = [SimDrafter(0.5, 2, 10)]
    with pytest.raises(ValueError, match=f"rounds must be from 2 to {MAX_ROUNDS:,}"):
        simulate_rounds(one, 100, 0, True, MAX_ROUNDS + 1, seed=1)
    with pytest.raises(ValueError, match="rounds"):
        simulate_rounds(one, 100, 0, True, 10**12, seed=1)


MC_CASES = {
    "chains-vanilla": ([SimDrafter(0.8, 3, 40)], False, "bonus1"),
    "chains-pipeline": ([SimDrafter(0.9, 6, 40), SimDrafter(0.6, 2, 30)], True, "bonus1"),
    "chains-naive": ([SimDrafter(0.9, 6, 40), SimDrafter(0.6, 2, 30)], True, "naive"),
    "staged": ([SimDrafter(0.92, 8, 262, staging=(0.65, 3))], True, "bonus1"),
    "trees": ([SimDrafter(0.6, 3, 30, tree=TreeDraft((0.6, 0.2), (2, 2, 1))), SimDrafter(0.7, 2, 30)], True, "bonus1"),
}


@pytest.mark.parametrize("case", sorted(MC_CASES))
def test_simulation_memory_is_bounded_and_results_unchanged(monkeypatch, case):
    """The reference and the stream keep only what a drafter can still read: with a small trim block and a
    small reference block they stay short over thousands of rounds, and the result is the one of a run
    that keeps every token."""
    drafters, pipeline, policy = MC_CASES[case]
    monkeypatch.setattr(simulate_mod, "_REF_BLOCK", 64)
    monkeypatch.setattr(simulate_mod, "_TRIM", 10**12)  # never trims: every token kept
    kept = simulate_rounds(drafters, 300, 5, pipeline, 4000, seed=3, policy=policy)

    longest = {"ref": 0, "stream": 0}
    trim = simulate_mod._trim

    def spy(drafting, tape):  # the lengths before each trim: the most the lists ever hold
        longest["ref"] = max(longest["ref"], len(tape.ref))
        longest["stream"] = max(longest["stream"], len(tape.stream))
        trim(drafting, tape)

    monkeypatch.setattr(simulate_mod, "_TRIM", 32)
    monkeypatch.setattr(simulate_mod, "_trim", spy)
    trimmed = simulate_rounds(drafters, 300, 5, pipeline, 4000, seed=3, policy=policy)
    assert trimmed == kept
    total = round(kept.mean_tokens * 4000)
    assert total > 4000  # the untrimmed lists grew past 4000 tokens
    assert 0 < longest["stream"] <= 32 + 200, longest  # one trim block plus the tokens of a few rounds
    assert 0 < longest["ref"] <= 32 + 200 + 2 * 64, longest


def _peak_bytes(rounds: int) -> int:
    import tracemalloc

    drafters = [SimDrafter(0.95, 12, 40), SimDrafter(0.9, 8, 30)]  # ~10 tokens a round
    tracemalloc.start()
    try:
        simulate_rounds(drafters, 300, 0, True, rounds, seed=1)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_simulation_memory_grows_by_the_tallies_only(monkeypatch):
    """Past the token window, a round costs its two tallies (16 bytes), not its ~10 tokens (~440 bytes in
    Python lists): at MAX_ROUNDS the tallies take 80 MB whatever the tokens per round."""
    monkeypatch.setattr(simulate_mod, "_TRIM", 1024)
    small, large = _peak_bytes(5_000), _peak_bytes(25_000)
    assert (large - small) / 20_000 < 40, (small, large)


# -- a real process: runaway inputs (huge --rounds, --jobs) end at once ----------------------------------
@pytest.mark.parametrize("args", [["simulate", OPT13, "--design", "{d}/d.json", "--rounds", "1000000000000"],
                                  ["grid", "{d}/g.toml", "--out", "{d}/out", "--jobs", "1000000"]])
def test_real_process_ends_at_once(tmp_path, args):
    (tmp_path / "d.json").write_text(_design_json())
    (tmp_path / "g.toml").write_text(GRID)
    before = _files(tmp_path)
    exe = shutil.which("specpim-cp")
    cmd = [exe] if exe else [sys.executable, "-m", "specpim_cp.cli"]
    proc = subprocess.run([*cmd, *(a.replace("{d}", str(tmp_path)) for a in args)], check=False,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert _files(tmp_path) == before


@pytest.mark.parametrize("command", [
    ["solve", "examples/opt-13b"], ["pareto", "examples/opt-13b"],
    ["sweep", "examples/opt-13b", "--acceptance", "0.5:0.6:0.1"],
    ["solve-mix", "mix/opt-13b"],
])
def test_deterministic_with_several_workers_is_refused_everywhere(tmp_path, no_work, command):
    """`--deterministic` solves with one CP-SAT worker: more workers with it is a contradiction, not ignored."""
    _refused(tmp_path, [*command, "--deterministic", "--workers", "2"], needles=("--workers 2", "--deterministic"))
