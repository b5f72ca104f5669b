"""Paths and unbounded work: names that become paths never leave the chosen output folder; a
grid or a mix too large is refused in one line before any work; a mix's base is a plain scenario (not
itself, not another mix, no cycle); `solve-mix --policy-dir` contradictions are refused before the solve
and the policy folder is written whole or not at all. Like tests/test_cli_corpus.py: each error is ONE line
`error: ...` naming the field, option or file, exit code 2, no traceback, nothing written; here "nothing
written" is checked over the whole tmp_path (the commands run with their default output folder
`results/` inside it), so a file that escaped would be seen.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_grid import BASE

from specpim_cp import files
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.files import MAX_NAME_LENGTH, name_problem, path_in, safe_name
from specpim_cp.problem.mix import MAX_MIX_CELLS, load_mix
from specpim_cp.report.mix import heatmap_path
from specpim_cp.runs import grid as grid_mod
from specpim_cp.runs import mix_policy as policy
from specpim_cp.runs.grid import MAX_GRID_CELLS, check_cell_count, load_grid
from specpim_cp.runs.records import FrontPoint, Record, RecordMetrics
from specpim_cp.runs.store import PARETO_DIR, write_derived_files

ROOT = Path(__file__).resolve().parents[1]

# A verifier and a drafter on one device each, one memory type, two PIM units, one share level: every
# solve of it takes well under a second.
TINY = BASE.lstrip("\n") + "acceptance = 0.7\n\n[space]\nshare_levels = 1\npim_units = 2\n"
CELL = "[[mix.cells]]\nbatch_size = 1\nweight = 1\n"
FAST = ["--deterministic", "--time-limit", "5"]
MIX_FAST = [*FAST, "--cell-time-limit", "5"]
RUN_FAST = ["--jobs", "1", "--time-limit", "5"]


def _mix(name: str | None = "m", base: str = "base.toml", cells: int = 1) -> str:
    head = "" if name is None else f"name = {json.dumps(name)}\n"
    return f"{head}scenario = {json.dumps(base)}\n" + CELL * cells


def _grid(name: str | None = "g", base: str = "base.toml", axes: str = "batch_size = [1]\n") -> str:
    head = "" if name is None else f"name = {json.dumps(name)}\n"
    return f"{head}base = {json.dumps(base)}\n[axes]\n{axes}"


# -- the checks ---------------------------------------------------------------------------------------
def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def _state(root: Path) -> dict[Path, int | None]:
    """Every path under `root` with its file's modification time (None for a folder: a temporary entry made
    and removed in it changes its time, not its content)."""
    return {p: None if p.is_dir() else p.stat().st_mtime_ns for p in _tree(root)}


def _setup(tmp_path: Path, monkeypatch, inputs: dict[str, str | bytes]) -> Path:
    """The inputs in tmp_path/work/in (the working folder is tmp_path/work, so `results/` lands there)."""
    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    for name, text in inputs.items():
        p = work / "in" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text, encoding="utf-8")
    monkeypatch.chdir(work)
    return work


def _refused(tmp_path: Path, args: list[str], needles: tuple[str, ...], absent: tuple[str, ...] = ()) -> str:
    """Run the CLI: exit 2, one `error:` line with every needle and none of `absent`, no file anywhere under
    tmp_path created, removed or changed."""
    before = _state(tmp_path)
    res = CliRunner().invoke(main, args)
    err = res.stderr
    assert res.exit_code == 2, (args, res.exit_code, res.stdout[-500:], err, res.exception)
    assert err.startswith("error: ") and err.count("\n") == 1 and err.endswith("\n"), (args, err)
    assert "Traceback" not in err and res.stdout == "", (args, res.stdout[-500:])
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r} ({args})"
    for word in absent:
        assert word not in err, f"{word!r} in {err!r} ({args})"
    after = _state(tmp_path)
    assert after == before, f"{args} changed {sorted(map(str, set(after) ^ set(before)))}"
    return err


def _ok(args: list[str]) -> str:
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, (args, res.stdout[-800:], res.stderr, res.exception)
    return res.stdout


def _new_files_inside(tmp_path: Path, before: set[Path], folder: Path) -> set[Path]:
    """The paths the run created; every one lies inside `folder` (or is a folder on the way to it)."""
    new = _tree(tmp_path) - before
    inside = folder.resolve()
    outside = sorted(str(p) for p in new if not p.resolve().is_relative_to(inside) and p.resolve() not in inside.parents)
    assert not outside, f"written outside {folder}: {outside}"
    return new


@pytest.fixture
def no_solve(monkeypatch):
    """Any solve is a test failure: the errors under test come before it."""
    import specpim_cp.solvers.mix as mix_solvers

    def refuse(*args, **kwargs):
        raise AssertionError("a solve started although the input is refused before any solve")

    monkeypatch.setattr(mix_solvers, "solve_mix", refuse)
    for where in ("specpim_cp.runs.batch.run_instances", "specpim_cp.runs.grid.run_instances",
                  "specpim_cp.check.sweep.sweep_acceptance"):
        monkeypatch.setattr(where, refuse)


# -- 1. names that would become paths ---------------------------------------------------------------------
def _bad_names(tmp_path: Path) -> dict[str, str]:
    return {"dotdot": "..", "dotdot-slash": "../x", "climb": "a/../../b", "absolute": str(tmp_path / "outside"),
            "backslash": "a\\..\\..\\b", "backslash-plain": "a\\b", "leading-dot": ".hidden", "dot": ".",
            "dotdot-inside": "a..b", "newline": "a\nb", "nul": "a\x00b", "tab": "a\tb", "trailing-slash": "x/",
            "spaces-around": " x ", "too-long": "n" * (MAX_NAME_LENGTH + 1)}


BAD_NAME_KEYS = sorted(_bad_names(Path("/t")))


@pytest.mark.parametrize("case", BAD_NAME_KEYS)
def test_grid_name_is_refused_before_any_work(tmp_path, monkeypatch, no_solve, case):
    name = _bad_names(tmp_path)[case]
    _setup(tmp_path, monkeypatch, {"base.toml": TINY, "g.toml": _grid(name)})
    _refused(tmp_path, ["grid", "in/g.toml", *RUN_FAST], ("in/g.toml", "name"))
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("case", BAD_NAME_KEYS)
def test_mix_name_is_refused_by_solve_mix_and_batch(tmp_path, monkeypatch, no_solve, case):
    name = _bad_names(tmp_path)[case]
    _setup(tmp_path, monkeypatch, {"base.toml": TINY, "m.toml": _mix(name)})
    _refused(tmp_path, ["solve-mix", "in/m.toml", *MIX_FAST, "--policy-dir", "pol", "-o", "r.json"], ("name",))
    _refused(tmp_path, ["batch", "in/m.toml", *RUN_FAST], ("in/m.toml", "name"))


@pytest.mark.parametrize("case", BAD_NAME_KEYS)
def test_scenario_name_is_refused_by_batch_sweep_and_a_grid_base(tmp_path, monkeypatch, no_solve, case):
    name = _bad_names(tmp_path)[case]
    scenario = TINY.replace('name = "tiny"', f"name = {json.dumps(name)}")
    _setup(tmp_path, monkeypatch, {"s.toml": scenario, "g.toml": _grid("g", base="s.toml"),
                                   "set/s.toml": scenario})
    _refused(tmp_path, ["batch", "in/s.toml", *RUN_FAST], ("name",))
    _refused(tmp_path, ["batch", "in/set", *RUN_FAST], ("name",))
    _refused(tmp_path, ["sweep", "in/s.toml", "--acceptance", "0.5:0.6:0.1"], ("name",))
    _refused(tmp_path, ["grid", "in/g.toml", *RUN_FAST], ("name",))


def test_the_name_rule_is_one_rule():
    """Scenario, grid and mix names obey the same rule (files.name_problem); good names keep their spelling."""
    for name in _bad_names(Path("/t")).values():
        assert name_problem(name) is not None, name
    for name in ("opt-13b-b1", "my atlas", "llama-32.5b", "a=1,b=2", "x" * MAX_NAME_LENGTH):
        assert name_problem(name) is None and safe_name(name) == name


def test_path_in_keeps_every_name_inside_its_folder(tmp_path):
    folder = tmp_path / "out"
    names = [*_bad_names(tmp_path).values(), "", "/", "\\", "...", "~", "$HOME", "a/b", "../../../../etc/passwd",
             "C:\\Windows", "x\x7fy", "\u202e.png"]
    for name in names:
        for kw in ({}, {"prefix": "schedule-"}, {"prefix": "mix-heatmap-"}):
            for suffix in ("", ".csv", ".png"):
                p = path_in(folder, name, suffix, **kw)
                assert p.parent == folder and p.resolve().parent == folder.resolve(), (name, p)
                assert not p.name.startswith(".") and p.name not in ("", ".", "..")
    assert path_in(folder, "opt-13b b1", ".csv") == folder / "opt-13b b1.csv"  # a valid name is kept as it is
    assert path_in(folder, ".", fallback="grid") == folder / "grid"


def test_report_writes_pareto_csv_inside_the_folder_whatever_the_record_says(tmp_path):
    """Records come from a file anyone can edit: a Pareto CSV named by a hostile scenario name stays in
    pareto/, and the CLI's `report` writes nothing outside the folder."""
    out = tmp_path / "work" / "out"
    names = ["../../escape", str(tmp_path / "abs"), "..", ".hidden", "a\\..\\b", "ok-name"]
    recs = []
    for i, name in enumerate(names):
        point = FrontPoint(RecordMetrics(1.0, 2.0, 3.0, 1.5, 10, 2.0), {"drafters": [], "pipeline": False}, ())
        recs.append(Record(key=f"k{i}", scenario=name, scenario_file="", scenario_hash="", family="f",
                           batch_size=1, scenario_objective="latency", objective_name="latency", method="pareto",
                           part="pareto", parts=1, status="FRONT", front=(point,)))
    out.mkdir(parents=True)
    (out / "results.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
    before = _tree(tmp_path)
    written = write_derived_files(out, recs)
    assert len(written) == 1 + len(names)
    assert all(p.parent == out / PARETO_DIR for p in written[1:]), written
    _new_files_inside(tmp_path, before, out)
    before = _tree(tmp_path)
    _ok(["report", str(out), "--no-plots"])
    _new_files_inside(tmp_path, before, out)
    assert (out / PARETO_DIR / "ok-name.csv").exists()


def test_mix_heatmap_paths_stay_in_the_report_folder(tmp_path):
    for name in _bad_names(tmp_path).values():
        r = Record(key="k", scenario=name, scenario_file="", scenario_hash="", family="f", batch_size=1,
                   scenario_objective="latency", objective_name="latency", method="mix", part="mix", parts=1)
        p = heatmap_path(tmp_path, r)
        assert p.parent == tmp_path and p.name.startswith("mix-heatmap-") and p.suffix == ".png", (name, p)


@pytest.mark.parametrize(("file", "folder"), [("..toml", "grid"), ("...toml", "_"), (".hidden.toml", "hidden"),
                                              ("a..b.toml", "a_b")])
def test_a_grid_named_by_an_unsafe_file_stem_runs_inside_results(tmp_path, monkeypatch, file, folder):
    """No `name`: the file's stem names the folder; `..toml` (stem '.') would have written into results/
    itself, `...toml` (stem '..') into the working folder, `.hidden.toml` into a hidden folder."""
    work = _setup(tmp_path, monkeypatch, {"base.toml": TINY, file: _grid(None)})
    before = _tree(tmp_path)
    _ok(["grid", f"in/{file}", *RUN_FAST])
    new = _new_files_inside(tmp_path, before, work / "results" / folder)
    assert work / "results" / folder / "results.jsonl" in new


@pytest.mark.parametrize("how", ["dotdot", "dot", "hidden-file"])
def test_a_batch_named_by_an_unsafe_folder_or_file_runs_inside_results(tmp_path, monkeypatch, how):
    """`batch sub/..` was named '..' and wrote into results/.. (the working folder); `batch .` wrote into
    results/ itself; `batch .h.toml` into a hidden folder."""
    work = _setup(tmp_path, monkeypatch, {"set/s.toml": TINY, "set/sub/readme.txt": "x", ".h.toml": TINY})
    target, folder = {"dotdot": ("in/set/sub/..", "set"), "dot": (".", "set"),
                      "hidden-file": ("in/.h.toml", "h")}[how]
    if how == "dot":
        monkeypatch.chdir(work / "in" / "set")
        work = work / "in" / "set"
    before = _tree(tmp_path)
    _ok(["batch", target, "--methods", "baselines", "--no-pareto", "--jobs", "1"])
    new = _new_files_inside(tmp_path, before, work / "results" / folder)
    assert work / "results" / folder / "results.jsonl" in new


# -- 2. unbounded work from one file ---------------------------------------------------------------------
def _values(n: int) -> str:
    return "[" + ", ".join(str(i) for i in range(1, n + 1)) + "]"


def _rates(lo: int, hi: int) -> str:
    return "[" + ", ".join(f"0.{i:03d}" for i in range(lo, hi)) + "]"


GRID_SIZES = {
    "just-over": (f"batch_size = {_values(101)}\nprompt_tokens = {_values(100)}\n", "10,100 cells"),
    "million": (f"batch_size = {_values(1000)}\nprompt_tokens = {_values(1000)}\n", "1,000,000 cells"),
    "one-long-axis": (f"prompt_tokens = {_values(100_000)}\n", "100,000 cells"),
    "per-drafter-axes": ((f'acceptance = {{"0" = {_rates(1, 101)}, "gpt2-small" = {_rates(101, 201)}}}\n'
                          "batch_size = [1, 2, 4]\n"), "30,000 cells"),
    "many-axes": ("".join(f"{k} = {_values(10)}\n" for k in ("batch_size", "prompt_tokens", "generated_tokens",
                                                              "device_budget")) + "host = [\"a100-40gb\"]\n",
                  "10,000 cells"),  # exactly the limit: its cells are then built and one of them fails
}


@pytest.mark.parametrize("case", sorted(GRID_SIZES))
def test_grid_cell_count_is_checked_from_the_axes_before_any_cell(tmp_path, monkeypatch, no_solve, case):
    axes, count = GRID_SIZES[case]
    _setup(tmp_path, monkeypatch, {"base.toml": TINY, "g.toml": _grid("g", axes=axes)})
    if case == "many-axes":  # at the limit: allowed, so the cells are built (device_budget 1 < 2 models fails)
        _refused(tmp_path, ["grid", "in/g.toml", *RUN_FAST], ("in/g.toml", "cell", "device_budget"))
        return

    def no_cells(*args, **kwargs):
        raise AssertionError("a cell was built before the cell count was checked")

    monkeypatch.setattr(grid_mod, "parse_scenario", no_cells)
    monkeypatch.setattr(grid_mod, "_axis", no_cells)  # not even the axes' labels
    _refused(tmp_path, ["grid", "in/g.toml", *RUN_FAST], ("in/g.toml", "axes", count, f"{MAX_GRID_CELLS:,}"))


def test_grid_limit_admits_the_benchmark_grid(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_grid", ROOT / "benchmarks" / "bench_grid.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    grid = load_grid(bench.grid_file(tmp_path, 200))
    assert len(grid.cells) == 200 <= MAX_GRID_CELLS
    check_cell_count(tmp_path / "g.toml", [("batch_size", 100), ("acceptance", MAX_GRID_CELLS // 100)])
    with pytest.raises(ScenarioError, match="10,001 cells"):
        check_cell_count(tmp_path / "g.toml", [("batch_size", MAX_GRID_CELLS + 1)])
    with pytest.raises(ScenarioError, match="more than the limit"):  # the API checks too, not only the file reader
        grid_mod.expand("g", tmp_path / "g.toml", {}, [grid_mod.Axis("batch_size", (1,) * 101, ("1",) * 101),
                                                       grid_mod.Axis("prompt_tokens", (1,) * 100, ("1",) * 100)])


@pytest.mark.parametrize("cells", [MAX_MIX_CELLS + 1, 1000, 10_000])
def test_mix_cell_count_is_refused_before_any_solve(tmp_path, monkeypatch, no_solve, cells):
    _setup(tmp_path, monkeypatch, {"base.toml": TINY, "m.toml": _mix(cells=cells)})
    needles = ("mix.cells", f"{cells:,} cells", str(MAX_MIX_CELLS))
    _refused(tmp_path, ["solve-mix", "in/m.toml", *MIX_FAST, "--policy-dir", "pol", "-o", "r.json"], needles)
    _refused(tmp_path, ["batch", "in/m.toml", *RUN_FAST], ("in/m.toml", *needles))


def test_mix_limit_admits_the_built_in_mixes(tmp_path):
    for name in ("opt-13b", "llama-32.5b", "palm-62b"):
        assert 1 < len(load_mix(f"mix/{name}").cells) <= MAX_MIX_CELLS
    (tmp_path / "base.toml").write_text(TINY)
    (tmp_path / "m.toml").write_text(_mix(cells=MAX_MIX_CELLS))
    assert len(load_mix(tmp_path / "m.toml").cells) == MAX_MIX_CELLS


# -- 3. a mix's base ------------------------------------------------------------------------------------------
MIX_BASES = {
    # file -> text; the mix run is m.toml; (needles)
    "itself": ({"m.toml": _mix(base="m.toml")}, ("in/m.toml", "scenario", "this mix file itself")),
    "itself-by-path": ({"m.toml": _mix(base="../in/m.toml")}, ("in/m.toml", "this mix file itself")),
    "another-mix": ({"m.toml": _mix(base="n.toml"), "n.toml": _mix("n")}, ("in/m.toml", "n.toml", "workload mix")),
    "scenario-with-mix-table": ({"m.toml": _mix(base="n.toml"), "n.toml": TINY + CELL},
                                ("in/m.toml", "n.toml", "workload mix")),
    "built-in-mix": ({"m.toml": _mix(base="mix/opt-13b")}, ("in/m.toml", "mix/opt-13b", "workload mix")),
    "cycle-of-two": ({"m.toml": _mix(base="n.toml"), "n.toml": _mix("n", base="m.toml")},
                     ("in/m.toml", "cycle", "m.toml -> ", "n.toml -> ")),
    "cycle-of-three": ({"m.toml": _mix(base="n.toml"), "n.toml": _mix("n", base="o.toml"),
                        "o.toml": _mix("o", base="m.toml")}, ("in/m.toml", "cycle", "o.toml")),
    "cycle-not-through-it": ({"m.toml": _mix(base="n.toml"), "n.toml": _mix("n", base="n.toml")},
                             ("in/m.toml", "cycle", "n.toml -> ")),
    "chain-to-nowhere": ({"m.toml": _mix(base="n.toml"), "n.toml": _mix("n", base="none.toml")},
                         ("in/m.toml", "n.toml", "workload mix")),
}


@pytest.mark.parametrize("case", sorted(MIX_BASES))
def test_a_mix_base_that_is_a_mix_names_the_file_and_the_problem(tmp_path, monkeypatch, no_solve, case):
    inputs, needles = MIX_BASES[case]
    _setup(tmp_path, monkeypatch, {"base.toml": TINY, **inputs})
    for args in (["solve-mix", "in/m.toml", *MIX_FAST], ["batch", "in/m.toml", *RUN_FAST]):
        _refused(tmp_path, args, needles, absent=("batch_size", "Field required"))


@pytest.mark.parametrize(("base", "needles"), [
    ("m.toml", ("in/g.toml", "base", "workload mix")),
    ("g.toml", ("in/g.toml", "base", "this grid file itself")),
    ("mix/palm-62b", ("in/g.toml", "base", "workload mix")),
])
def test_a_grid_base_that_is_a_mix_or_itself(tmp_path, monkeypatch, no_solve, base, needles):
    _setup(tmp_path, monkeypatch, {"base.toml": TINY, "m.toml": _mix(), "g.toml": _grid(base=base)})
    _refused(tmp_path, ["grid", "in/g.toml", *RUN_FAST], needles, absent=("Field required",))
    inline = f'[base]\nfrom = "{base}"\n[axes]\nbatch_size = [1]\n'
    (tmp_path / "work" / "in" / "g.toml").write_text(inline)
    _refused(tmp_path, ["grid", "in/g.toml", *RUN_FAST], ("base.from", *needles[2:]), absent=("Field required",))


# -- 3. solve-mix --policy-dir ------------------------------------------------------------------------------
POLICY_CONTRADICTIONS = {
    "same-path": (["-o", "p", "--policy-dir", "p"], ("--policy-dir p", "-o p", "same path")),
    "same-path-spelled-otherwise": (["-o", "x/../p", "--policy-dir", "./p"], ("same path",)),
    "output-inside": (["-o", "p/r.json", "--policy-dir", "p"], ("-o p/r.json", "inside --policy-dir p")),
    "output-deep-inside": (["-o", "p/a/b/r.json", "--policy-dir", "p/"], ("inside --policy-dir p",)),
    "output-inside-via-symlink": (["-o", "link/r.json", "--policy-dir", "pol-real"], ("inside --policy-dir",)),
    "policy-inside-output": (["-o", "r.json", "--policy-dir", "r.json/pol"], ("--policy-dir r.json/pol", "-o r.json")),
    "policy-is-an-existing-file": (["--policy-dir", "afile"], ("afile",)),
    "cell-file-is-a-folder": (["--policy-dir", "old"], ("--policy-dir old", "old/cell-0.json", "is a folder")),
    "second-cell-file-is-a-folder": (["--policy-dir", "old2"], ("--policy-dir old2", "old2/cell-1.toml")),
    "index-is-a-folder": (["--policy-dir", "old3"], ("--policy-dir old3", "policy.json", "is a folder")),
}


@pytest.mark.parametrize("case", sorted(POLICY_CONTRADICTIONS))
def test_policy_dir_contradictions_are_refused_before_the_solve(tmp_path, monkeypatch, no_solve, case):
    args, needles = POLICY_CONTRADICTIONS[case]
    work = _setup(tmp_path, monkeypatch, {"base.toml": TINY, "m.toml": _mix(cells=2)})
    (work / "afile").write_text("a file\n")
    (work / "pol-real").mkdir()
    (work / "link").symlink_to(work / "pol-real")
    for folder, blocked in (("old", "cell-0.json"), ("old2", "cell-1.toml"), ("old3", "policy.json")):
        (work / folder / blocked).mkdir(parents=True)
        if blocked != "cell-0.json":
            (work / folder / "cell-0.toml").write_text("old\n")
    _refused(tmp_path, ["solve-mix", "in/m.toml", *MIX_FAST, *args], needles, absent=(".tmp",))


POLICY = {"cell-0.toml": "a\n", "cell-0.json": "b\n", "cell-1.toml": "c\n", "cell-1.json": "d\n",
          "policy.json": "{}\n"}


def _fail_on(monkeypatch, target, name: str, call: int) -> None:
    """Make `target.name` raise an OSError (naming a hidden temporary path) on its `call`-th call."""
    real = getattr(target, name)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) == call:
            raise OSError(28, "No space left on device", str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, flaky)


# (the folder exists, the call that fails, its number): write_atomic writes the 5 files into the temporary
# folder, each ending in one os.replace (calls 1-5); then a new folder is renamed into place (call 6), or in
# an existing folder each file moves in, after its old version moves aside (calls 6-12).
FAILURES = [(False, "write_atomic", 1), (False, "write_atomic", 5), (False, "replace", 3), (False, "replace", 6),
            (True, "write_atomic", 1), (True, "write_atomic", 4), (True, "replace", 5), (True, "replace", 6),
            (True, "replace", 9), (True, "replace", 12)]


@pytest.mark.parametrize(("existing", "where", "call"), FAILURES)
def test_policy_folder_is_written_whole_or_not_at_all(tmp_path, monkeypatch, existing, where, call):
    """A failure at any file leaves the folder as it was (absent, or with its old files and the user's own),
    no temporary folder, and an error naming the folder the user gave."""
    monkeypatch.setattr(policy, "policy_files", lambda res: dict(POLICY))
    folder = tmp_path / "deep" / "pol" if not existing else tmp_path / "pol"
    if existing:
        folder.mkdir()
        for name in ("cell-0.toml", "policy.json", "mine.txt"):
            (folder / name).write_text(f"old {name}\n")
    before = {p: p.read_text() if p.is_file() else None for p in _tree(tmp_path)}
    _fail_on(monkeypatch, policy if where == "write_atomic" else policy.os, where, call)
    with pytest.raises(OSError) as err:
        policy.write_policy_dir(None, folder)
    assert err.value.filename == str(folder) and "No space left" in str(err.value)
    assert {p: p.read_text() if p.is_file() else None for p in _tree(tmp_path)} == before
    monkeypatch.undo()
    monkeypatch.setattr(policy, "policy_files", lambda res: dict(POLICY))
    written = policy.write_policy_dir(None, folder)  # without the failure: the whole policy
    assert sorted(p.name for p in written) == sorted(POLICY)
    assert {p.name: p.read_text() for p in written} == POLICY
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name.startswith(".")) == []
    assert (folder / "mine.txt").exists() == existing  # the user's own files stay
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in written)
    assert folder.stat().st_mode & 0o777 == 0o755


def test_policy_write_failure_after_a_real_solve_is_one_line_naming_the_users_folder(tmp_path, monkeypatch):
    """The solve ran, the policy folder could not be written: exit 2, the folder as given (not the hidden
    temporary one), no policy folder, no -o file (written after the policy), nothing else."""
    work = _setup(tmp_path, monkeypatch, {"base.toml": TINY, "m.toml": _mix(cells=2)})
    _fail_on(monkeypatch, policy, "write_atomic", 3)
    err = _refused(tmp_path, ["solve-mix", "in/m.toml", *MIX_FAST, "--policy-dir", "out/pol", "-o", "r.json"],
                   ("out/pol", "No space left"), absent=(".tmp", ".pol."))
    assert "cannot write the policy folder" in err
    assert not (work / "out").exists() and not (work / "r.json").exists()
    monkeypatch.undo()
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    _ok(["solve-mix", "in/m.toml", *MIX_FAST, "--policy-dir", "out/pol", "-o", "r.json", "--json"])
    new = _new_files_inside(tmp_path, before, work)
    assert {p.relative_to(work).as_posix() for p in new} == {
        "r.json", "out", "out/pol", *(f"out/pol/{n}" for n in policy.policy_names(load_mix(work / "in/m.toml")))}


def test_limits_are_documented_constants():
    """The limits are module constants with a comment saying why, and the error names each one."""
    for module, constant in ((grid_mod, "MAX_GRID_CELLS"), (importlib.import_module("specpim_cp.problem.mix"),
                                                            "MAX_MIX_CELLS"), (files, "MAX_NAME_LENGTH")):
        source = Path(module.__file__).read_text()
        line = next(i for i, text in enumerate(source.splitlines()) if text.startswith(f"{constant} ="))
        assert source.splitlines()[line - 1].startswith("#:"), constant


def test_policy_folder_behind_a_symlink_is_filled_in_place(tmp_path, monkeypatch):
    """An existing policy folder reached through a symlink: the files land in the real folder, the link stays."""
    monkeypatch.setattr(policy, "policy_files", lambda res: dict(POLICY))
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    policy.write_policy_dir(None, tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == sorted(POLICY)


def test_new_policy_folder_spelled_with_dotdot_is_built_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(policy, "policy_files", lambda res: dict(POLICY))
    policy.write_policy_dir(None, tmp_path / "x" / ".." / "a" / "pol")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in _tree(tmp_path)) == sorted(
        ["a", "a/pol", *(f"a/pol/{n}" for n in POLICY)])
