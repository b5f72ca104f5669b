"""The `specpim-cp` CLI: user errors give exit code 2 and one line naming the field; happy paths work."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import build_design

from specpim_cp.cli import main
from specpim_cp.kernels import predict_linear_us
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario, parse_scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
OPT13 = str(EXAMPLES / "opt-13b.toml")

HEADER = 'name = "t"\nbatch_size = 1\nprompt_tokens = 256\ngenerated_tokens = 128\n'
OPT_VERIFIER = '[verifier]\nmodel = "opt-13b"\ndevices = 2\n'
OPT_DRAFTER = '[[drafters]]\nmodel = "opt-1.3b"\ndevices = 1\n'


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _assert_user_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    err = result.stderr
    assert err.startswith("error: ") and err.endswith("\n"), err
    assert err.count("\n") == 1, f"more than one line on stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in result.stdout
    assert result.stdout == ""
    for n in needles:
        assert n in err, f"{n!r} not in {err!r}"
    return err


BAD_SCENARIOS = {
    "wrong-type": (
        HEADER.replace("batch_size = 1", 'batch_size = "x"') + OPT_VERIFIER,
        ["batch_size", "integer"],
    ),
    "negative-batch": (HEADER.replace("batch_size = 1", "batch_size = -4") + OPT_VERIFIER, ["batch_size"]),
    "zero-batch": (HEADER.replace("batch_size = 1", "batch_size = 0") + OPT_VERIFIER, ["batch_size"]),
    "unknown-model": (HEADER + OPT_VERIFIER.replace("opt-13b", "opt-14b"), ["verifier.model", "opt-14b"]),
    "unknown-drafter": (
        HEADER + OPT_VERIFIER + OPT_DRAFTER.replace("opt-1.3b", "opt-1b"),
        ["drafters[0].model", "opt-1b"],
    ),
    "missing-verifier": (HEADER + OPT_DRAFTER, ["verifier"]),
    "missing-batch": (HEADER.replace("batch_size = 1\n", "") + OPT_VERIFIER, ["batch_size"]),
    "tokenizer-family": (
        HEADER + OPT_VERIFIER + OPT_DRAFTER.replace("opt-1.3b", "llama-7b"),
        ["drafters[0]", "tokenizer"],
    ),
    "zero-devices": (HEADER + OPT_VERIFIER.replace("devices = 2", "devices = 0"), ["verifier.devices"]),
    "three-devices": (HEADER + OPT_VERIFIER.replace("devices = 2", "devices = 3"), ["verifier.devices"]),
    "drafter-zero-devices": (
        HEADER + OPT_VERIFIER + OPT_DRAFTER.replace("devices = 1", "devices = 0"),
        ["drafters[0].devices"],
    ),
    "no-devices-no-budget": (HEADER + OPT_VERIFIER.replace("devices = 2\n", ""), ["verifier.devices"]),
    "acceptance-one": (
        HEADER + OPT_VERIFIER + OPT_DRAFTER + "acceptance = 1.0\n",
        ["drafters[0].acceptance"],
    ),
    "unknown-memory": (HEADER + 'memory_types = ["sram"]\n' + OPT_VERIFIER, ["memory_types", "sram"]),
    "unknown-host": (
        HEADER.replace('name = "t"', 'name = "t"\nhost = "tpu"') + OPT_VERIFIER,
        ["host", "tpu"],
    ),
    "unknown-field": (HEADER + "bogus = 1\n" + OPT_VERIFIER, ["bogus"]),
    "draft2-not-smaller": (
        HEADER + OPT_VERIFIER + OPT_DRAFTER + '[drafters.staging]\ndraft2 = ["opt-2.7b"]\n',
        ["drafters[0].staging.draft2[0]"],
    ),
    "pim-units-too-many": (
        HEADER + OPT_VERIFIER + '[space]\nmemory_type = "hbm"\npim_units = 9\n',
        ["space.pim_units"],
    ),
    "invalid-toml": ('name = "t"\nbatch_size = [\n', ["not valid TOML"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_malformed_scenario_baselines(tmp_path, case):
    text, needles = BAD_SCENARIOS[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    _assert_user_error(_run("baselines", str(path)), *needles)


@pytest.mark.parametrize("case", ["wrong-type", "tokenizer-family", "zero-devices", "invalid-toml"])
def test_malformed_scenario_evaluate_and_simulate(tmp_path, case):
    text, needles = BAD_SCENARIOS[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    design = tmp_path / "d.json"
    design.write_text(_opt13_design_json())
    _assert_user_error(_run("evaluate", str(path), "--design", str(design)), *needles)
    _assert_user_error(_run("simulate", str(path), "--design", str(design), "--rounds", "100"), *needles)


def test_missing_scenario_file(tmp_path):
    _assert_user_error(_run("baselines", str(tmp_path / "nope.toml")), "nope.toml")
    _assert_user_error(_run("baselines", "examples/no-such-example"), "no-such-example")


# ------------------------------------------------------------------------------------------------
# A model that cannot fit its devices
# ------------------------------------------------------------------------------------------------
BIG = HEADER + '[verifier]\nmodel = "opt-66b"\ndevices = 1\n' + OPT_DRAFTER


def _big_design_json() -> str:
    sc = parse_scenario(
        {
            "name": "t",
            "batch_size": 1,
            "prompt_tokens": 256,
            "generated_tokens": 128,
            "verifier": {"model": "opt-66b", "devices": 1},
            "drafters": [{"model": "opt-1.3b", "devices": 1}],
        }
    )
    place = rule_placement("host-only", sc.space.share_levels)
    return build_design(sc, [ArchConfig("hbm", 0, 1)] * 2, [place] * 2, [3], [None], False).to_json()


def test_model_too_big_evaluate_names_the_shortfall(tmp_path):
    scen = tmp_path / "big.toml"
    scen.write_text(BIG)
    design = tmp_path / "big.json"
    design.write_text(_big_design_json())
    out = tmp_path / "out.json"
    err = _assert_user_error(
        _run("evaluate", str(scen), "--design", str(design), "--json", "-o", str(out)),
        "verifier",
        "opt-66b",
        "short by",
    )
    assert "GiB" in err
    assert not out.exists()
    assert set(tmp_path.iterdir()) == {scen, design}


def test_model_too_big_baselines_fails_with_shortfall(tmp_path):
    scen = tmp_path / "big.toml"
    scen.write_text(BIG)
    _assert_user_error(_run("baselines", str(scen)), "opt-66b", "short by")


def test_model_too_big_baselines_reports_every_row_infeasible(tmp_path):
    """Whatever the exit code, no baseline may claim a price for an impossible verifier."""
    scen = tmp_path / "big.toml"
    scen.write_text(BIG)
    res = _run("baselines", str(scen), "--json")
    rows = json.loads(res.stdout) if res.exit_code == 0 else []
    for row in rows:
        assert row["metrics"] is None and "short by" in row["error"]


# ------------------------------------------------------------------------------------------------
# Designs
# ------------------------------------------------------------------------------------------------
def _opt13_design(**update):
    sc = load_scenario(OPT13)
    place = rule_placement("host-only", sc.space.share_levels)
    d = build_design(sc, [ArchConfig("hbm", 0, 2), ArchConfig("hbm", 0, 1)], [place] * 2, [3], [None], False)
    return d.model_copy(update=update) if update else d


def _opt13_design_json() -> str:
    return _opt13_design().to_json()


def test_evaluate_design_for_another_model(tmp_path):
    design = tmp_path / "d.json"
    design.write_text(_opt13_design_json())
    out = tmp_path / "out.txt"
    _assert_user_error(
        _run("evaluate", str(EXAMPLES / "llama-13b.toml"), "--design", str(design), "-o", str(out)),
        "design.verifier.model",
        "opt-13b",
        "llama-13b",
    )
    assert not out.exists()


def test_evaluate_bad_design_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"pipeline": false')
    _assert_user_error(_run("evaluate", OPT13, "--design", str(bad)), "not valid JSON")
    _assert_user_error(_run("evaluate", OPT13, "--design", str(tmp_path / "none.json")), "none.json")
    data = json.loads(_opt13_design_json())
    data["verifier"]["placement"]["qkv"] = {"engine": "pim", "share": 4}
    bad.write_text(json.dumps(data))
    _assert_user_error(_run("evaluate", OPT13, "--design", str(bad)), "design.verifier.placement.qkv", "pim")
    data = json.loads(_opt13_design_json())
    data["pipeline"] = "maybe"
    bad.write_text(json.dumps(data))
    _assert_user_error(_run("evaluate", OPT13, "--design", str(bad)), "pipeline")
    data = json.loads(_opt13_design_json())
    del data["drafters"][0]["draft_length"]
    bad.write_text(json.dumps(data))
    _assert_user_error(_run("evaluate", OPT13, "--design", str(bad)), "drafters[0].draft_length")


def test_evaluate_design_not_an_object_names_the_design(tmp_path):
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    err = _assert_user_error(_run("evaluate", OPT13, "--design", str(bad)), "design")
    assert "scenario" not in err


def test_failed_output_leaves_no_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_SCENARIOS["wrong-type"][0])
    out = tmp_path / "sub" / "out.json"
    _assert_user_error(_run("baselines", str(bad), "--json", "-o", str(out)), "batch_size")
    assert not out.exists()
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p != bad]
    assert leftovers == []


def test_successful_output_goes_to_file_only(tmp_path):
    design = tmp_path / "d.json"
    design.write_text(_opt13_design_json())
    out = tmp_path / "out.json"
    res = _run("evaluate", OPT13, "--design", str(design), "--json", "-o", str(out))
    assert res.exit_code == 0, res.stderr
    assert res.stdout == "" and res.stderr == ""
    assert json.loads(out.read_text())["round_time_ns"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json", "out.json"]


def test_real_process_exit_code_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_SCENARIOS["tokenizer-family"][0])
    exe = shutil.which("specpim-cp")
    cmd = [exe] if exe else [sys.executable, "-m", "specpim_cp.cli"]
    proc = subprocess.run(
        [*cmd, "baselines", str(bad)], check=False, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: drafters[0]")


# ------------------------------------------------------------------------------------------------
# Happy paths
# ------------------------------------------------------------------------------------------------
def test_catalog_models_lists_every_model_with_parameters():
    from specpim_cp.catalog import default_catalog

    res = _run("catalog", "models")
    assert res.exit_code == 0, res.stderr
    cat = default_catalog()
    for m in cat.models.values():
        assert m.name in res.stdout
        assert f"{m.parameter_count() / 1e9:.2f}" in res.stdout
        assert m.source in res.stdout


def test_catalog_devices_shows_memory_model_sources_and_ranges():
    res = _run("catalog", "devices")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    for name in ("a100-40gb", "h100-sxm", "hbm", "gddr"):
        assert name in out
    assert "time-shared" in out and "partitioned" in out
    assert "hbm.source_group_external_bandwidth_gbps:" in out and "a100-40gb.source_peak_fp16_tflops:" in out
    assert "hbm.range_pim_efficiency: 0.45 .. 0.85" in out


def test_kernels_predict_matches_python_api():
    args = ["--gpu", "a100", "--in-features", "5120", "--out-features", "15360", "--tokens", "8"]
    res = _run("kernels", "predict", *args, "--tensor-parallel", "2")
    assert res.exit_code == 0, res.stderr
    assert float(res.stdout) == pytest.approx(predict_linear_us("a100", 5120, 15360, 8, 2), abs=0.006)
    _assert_user_error(_run("kernels", "predict", "--gpu", "v100", *args[2:]), "v100")


def test_kernels_fit_report_lists_gpus():
    res = _run("kernels", "fit-report")
    assert res.exit_code == 0, res.stderr
    for gpu in ("a100", "h100", "a40"):
        assert gpu in res.stdout


def test_baselines_json_is_list_of_name_design_metrics():
    res = _run("baselines", OPT13, "--json")
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    assert isinstance(rows, list) and rows
    names = [r["name"] for r in rows]
    assert {"GPU-AR", "GPU-SI"} <= set(names)
    for r in rows:
        assert {"name", "design", "metrics"} <= set(r)
        if r["metrics"] is not None:
            assert r["metrics"]["latency_ns_per_token"] > 0
            assert r["design"]["verifier"]["model"] == "opt-13b"
    si = next(r for r in rows if r["name"] == "GPU-SI")
    assert (
        si["metrics"]["latency_ns_per_token"]
        <= next(r for r in rows if r["name"] == "GPU-AR")["metrics"]["latency_ns_per_token"]
    )
    # the text form names the same baselines
    text = _run("baselines", "examples/opt-13b")
    assert text.exit_code == 0 and all(n in text.stdout for n in names)


def test_a_baselines_json_entry_is_a_design_for_evaluate(tmp_path):
    """`baselines --json` holds several designs: FILE#NAME picks one (the README's promise)."""
    out = tmp_path / "baselines.json"
    assert _run("baselines", OPT13, "--json", "-o", str(out)).exit_code == 0
    rows = json.loads(out.read_text())
    si = next(r for r in rows if r["name"] == "GPU-SI")
    res = _run("evaluate", OPT13, "--design", f"{out}#GPU-SI", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["latency_ns_per_token"] == si["metrics"]["latency_ns_per_token"]
    k = [r["name"] for r in rows].index("GPU-SI")
    assert _run("evaluate", OPT13, "--design", f"{out}#{k}").exit_code == 0
    for design, needle in ((str(out), "pick one with"), (f"{out}#nope", "no such entry")):
        res = _run("evaluate", OPT13, "--design", design)
        assert res.exit_code == 2 and needle in res.stderr and res.stderr.count("\n") == 1


def test_evaluate_json_keys_and_values(tmp_path):
    design = tmp_path / "d.json"
    design.write_text(_opt13_design_json())
    res = _run("evaluate", OPT13, "--design", str(design), "--json")
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    for key in (
        "latency_ns_per_token",
        "throughput_tokens_per_s",
        "energy_pj_per_token",
        "edp",
        "round_time_ns",
        "tokens_per_round",
        "breakdown",
        "design",
    ):
        assert key in data
    ev = Evaluator(load_scenario(OPT13)).evaluate(_opt13_design())
    assert data["round_time_ns"] == ev.metrics.round_time_ns
    assert data["latency_ns_per_token"] == pytest.approx(ev.metrics.latency_ns_per_token)
    assert data["design"] == json.loads(_opt13_design_json())
    # the JSON output is itself a design file `evaluate` accepts
    again = tmp_path / "again.json"
    again.write_text(res.stdout)
    res2 = _run("evaluate", OPT13, "--design", str(again), "--json")
    assert res2.exit_code == 0 and json.loads(res2.stdout)["round_time_ns"] == data["round_time_ns"]
    text = _run("evaluate", OPT13, "--design", str(design))
    assert text.exit_code == 0 and "latency" in text.stdout


def test_simulate_prints_agreement(tmp_path):
    design = tmp_path / "d.json"
    design.write_text(_opt13_design(pipeline=True).to_json())
    res = _run("simulate", OPT13, "--design", str(design), "--rounds", "20000", "--seed", "3")
    assert res.exit_code == 0, res.stderr
    assert "Monte Carlo: 20000 rounds, seed 3" in res.stdout
    assert "agree" in res.stdout
    assert " NO" not in res.stdout and "greedy sequence: yes" in res.stdout
    js = _run("simulate", OPT13, "--design", str(design), "--rounds", "20000", "--json")
    data = json.loads(js.stdout)
    assert data["tokens_agree"] is True and data["time_agree"] is True and data["continue_agree"] is True
    assert data["stream_verified"] is True
    assert (
        data["evaluator_round_ns"]
        == Evaluator(load_scenario(OPT13)).evaluate(_opt13_design(pipeline=True)).metrics.round_time_ns
    )
