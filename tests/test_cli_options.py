"""The CLI's percentage and index options: one parser accepts 1, 0.5, 1e-3 and 1%, and refuses in one line
(exit code 2, naming the option and its range) what is out of range or too long to parse exactly, at once;
the cheap option copies of `specpim_cp.api.limits` equal their sources; `--help` imports no solver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.api import limits
from specpim_cp.cli import main
from specpim_cp.cli.options import check_ranges_within, check_resolution, check_within
from specpim_cp.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
#: The slowest a refusal may take, process start included (a hang would never return).
REFUSAL_S = 20.0


@pytest.mark.parametrize("text,expected", [("1", Fraction(1)), ("0.5", Fraction(1, 2)), ("1e-3", Fraction(1, 1000)),
                                           ("1%", Fraction(1)), (" 2.5 % ", Fraction(5, 2)), ("1/4", Fraction(1, 4)),
                                           (".5", Fraction(1, 2)), ("0", Fraction(0)), (2, Fraction(2)),
                                           (0.25, Fraction(1, 4)), (Fraction(1, 3), Fraction(1, 3))])
def test_percent_accepts_the_ways_people_write_it(text, expected):
    assert check_within(text) == expected
    assert check_resolution(text) == expected / 100


@pytest.mark.parametrize("text,words", [("-1", "[0, 1000)"), ("1000", "[0, 1000)"), ("x", "such as"),
                                        ("nan", "such as"), ("inf", "such as"), ("1e-999999999", "exponent"),
                                        ("1e300", "exponent"), ("1" * 5000, "digits"), ("0." + "0" * 40 + "1", "digits"),
                                        ("1%%", "such as"), ("", "such as"), (True, "such as")])
def test_percent_refuses_with_the_option_and_its_range(text, words):
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as exc:
        check_within(text)
    assert time.perf_counter() - t0 < 1
    msg = str(exc.value)
    assert msg.startswith("--within: ") and words in msg and "\n" not in msg and len(msg) < 200


def test_batch_ranges_keeps_the_text_without_its_percent_sign():
    assert check_ranges_within("off") is None and check_ranges_within(" OFF ") is None
    assert check_ranges_within("0.5") == "0.5" and check_ranges_within("1%") == "1"
    with pytest.raises(ScenarioError, match="^--ranges: "):
        check_ranges_within("1e-999999999")


def _refused(args: list[str], *needles: str, cwd: Path | None = None) -> str:
    """Run the CLI in a process: exit code 2, one `error:` line holding `needles`, well within REFUSAL_S."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "specpim_cp.cli", *args], capture_output=True, text=True,
                         timeout=4 * REFUSAL_S, env=env, cwd=cwd, check=False)
    assert time.perf_counter() - t0 < REFUSAL_S
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr
    for needle in needles:
        assert needle in res.stderr, (needle, res.stderr)
    return res.stderr


@pytest.mark.parametrize("args,needles", [
    (["ranges", "paper/opt-13b-b1", "--within", "1e-999999999"], ("--within", "[0, 1000)")),
    (["ranges", "paper/opt-13b-b1", "--within", "1e300"], ("--within", "[0, 1000)")),
    (["ranges", "paper/opt-13b-b1", "--within", "1" * 5000], ("--within", "[0, 1000)")),
    (["pareto", "paper/opt-13b-b1", "--resolution", "1e-99999999"], ("--resolution", "[0, 50)")),
    (["pareto", "paper/opt-13b-b1", "--resolution", "75%"], ("--resolution", "[0, 50)")),
    (["batch", "paper", "--ranges", "1e-999999999"], ("--ranges", "[0, 1000)")),
])
def test_cli_refuses_unparseable_percentages_at_once(args, needles, tmp_path):
    _refused(args + (["--out", str(tmp_path / "out")] if args[0] == "batch" else []), *needles)
    assert not (tmp_path / "out").exists()


def test_cli_accepts_a_percent_sign(tmp_path):
    res = CliRunner().invoke(main, ["ranges", "paper/opt-13b-b1", "--within", "1%", "--deterministic",
                                    "--time-limit", "20", "--json"])
    assert res.exit_code == 0, res.output
    assert Fraction(json.loads(res.stdout)["within_pct"]) == 1


@pytest.mark.parametrize("pick,needle", [("²", "digits 0-9"), ("1²", "digits 0-9"), ("٣", "digits 0-9"),
                                         ("1" * 5000, "at most")])
def test_export_tree_refuses_odd_drafter_indices(pick, needle, tmp_path):
    design = tmp_path / "d.json"
    design.write_text("{}")
    err = _refused(["export-tree", str(design), "--drafter", pick, "--format", "json"], "--drafter", needle)
    assert len(err) < 200


def test_cheap_copies_equal_their_sources():
    from specpim_cp.check.simulate import MAX_ROUNDS
    from specpim_cp.kernels import linear
    from specpim_cp.problem.mix import MIX_OBJECTIVES
    from specpim_cp.solvers import result
    from specpim_cp.solvers.mix import MIX_METHODS

    assert limits.DEFAULT_RESOLUTION_PCT == result.DEFAULT_RESOLUTION_PCT
    assert limits.DEFAULT_MAX_POINTS == result.DEFAULT_MAX_POINTS
    assert limits.MAX_FRONT_POINTS == result.MAX_FRONT_POINTS
    assert limits.MIX_OBJECTIVES == MIX_OBJECTIVES and limits.MIX_METHODS == MIX_METHODS
    assert (limits.MAX_FEATURES, limits.MAX_TOKENS, limits.MAX_TENSOR_PARALLEL) == (
        linear.MAX_FEATURES, linear.MAX_TOKENS, linear.MAX_TENSOR_PARALLEL)
    assert limits.MAX_SIMULATE_ROUNDS == MAX_ROUNDS


def test_help_imports_no_solver():
    code = ("import sys\nfrom click.testing import CliRunner\nimport specpim_cp\nfrom specpim_cp.cli import main\n"
            "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('ortools', 'matplotlib', 'numpy')\n"
            "         or m.startswith(('specpim_cp.solvers', 'specpim_cp.problem', 'specpim_cp.runs'))\n"
            "         and m not in ('specpim_cp.problem', 'specpim_cp.problem.percent')]\n"
            "print(heavy)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_help_texts_name_every_hf_model_type_and_the_grids_page():
    from specpim_cp.catalog.import_hf import ARCHITECTURES

    text = CliRunner().invoke(main, ["catalog", "import-hf", "--help"]).output
    assert all(kind in text for kind in ARCHITECTURES), text
    assert "docs/grids.md" in CliRunner().invoke(main, ["grid", "--help"]).output


@pytest.mark.parametrize("value", ["1e-999999999", "1e300", "9" * 5000])
def test_batch_options_bound_the_percentage_before_any_arithmetic(value):
    """A Python caller's `BatchOptions(ranges_within=...)` goes through the same bounded parser as the CLI."""
    import time

    from specpim_cp.runs.instances import BatchOptions

    t0 = time.perf_counter()
    with pytest.raises(ScenarioError, match="--ranges"):
        BatchOptions(ranges_within=value).validate()
    assert time.perf_counter() - t0 < 2
