"""The prompt's prefill (formulations/prefill.md PRE-1..5): priced on the host with the decode's kernel
models, reported beside the per-token figures, and the end-to-end request objective solved exactly
(CP-SAT by prefill thresholds == brute force, also where it picks other hardware than the latency optimum)."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
from click.testing import CliRunner

from specpim_cp.catalog import default_catalog
from specpim_cp.cli import main
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.prefill import PrefillModel
from specpim_cp.problem.context import prefill_attended
from specpim_cp.problem.design import ArchConfig, Design, ModelDesign, Placement, Staging
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.runs.records import RecordMetrics
from specpim_cp.runs.store import CSV_COLUMNS
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import solve

HOST_ONLY = {op: Placement(engine="host", share=0, layout="normal") for op in PLACEABLE_OPS}


def _scenario(prompt: int = 1000, generated: int = 4, **extra) -> dict:
    return {"name": "prefill", "batch_size": 1, "prompt_tokens": prompt, "generated_tokens": generated,
            "host": "a100-40gb", "memory_types": ["hbm"], "max_draft_length": 2,
            "verifier": {"model": "opt-1.3b", "devices": 1},
            "drafters": [{"model": "opt-125m", "devices": 1, "acceptance": 0.7}], **extra}


def _md(model: str, devices: int = 1, drafter: bool = False, staging: Staging | None = None) -> ModelDesign:
    return ModelDesign(model=model, memory_type="hbm", pim_units=0, devices=devices, placement=HOST_ONLY,
                       draft_length=1 if drafter else None, staging=staging)


def test_attention_is_quadratic_in_the_prompt_and_linear_past_the_window():
    """The attention kernels read the prompt's causal keys (PRE-2): doubling a long prompt quadruples their
    FLOPs (time ~4x, compute-bound), the FC kernels' time doubles; with a window the attention doubles too."""
    cat = default_catalog()
    full = dataclasses.replace(cat.models["mistral-7b"], sliding_window=0)
    windowed = cat.models["mistral-7b"]
    sc = parse_scenario({**_scenario(16384), "host": "h100-sxm", "memory_types": ["hbm3"],
                         "verifier": {"model": "mistral-7b", "devices": 1}, "drafters": []})
    costs = PrefillModel(sc, cat).costs
    arch = ArchConfig(memory_type="hbm3", pim_units=0, devices=1)

    def op_ns(model, op, prompt):
        keys = -(-prefill_attended(prompt, model.sliding_window) // prompt) if op == "score" else None
        return costs.op_cost(model, op, "host", 0, arch, prompt, "normal", keys).time_ns

    assert 3.6 < op_ns(full, "score", 16384) / op_ns(full, "score", 8192) < 4.1
    # windowed: 16384 x 3584 keys against 8192 x 3072 (the first W queries read fewer than W), 2.33x
    flops = 16384 * prefill_attended(16384, 4096) / 16384 / (8192 * prefill_attended(8192, 4096) / 8192)
    assert flops == pytest.approx(2.333, abs=1e-3)
    assert flops * 0.95 < op_ns(windowed, "score", 16384) / op_ns(windowed, "score", 8192) < flops * 1.05
    assert 1.8 < op_ns(full, "ffn_up", 16384) / op_ns(full, "ffn_up", 8192) < 2.2


def test_a_pass_sums_the_decode_cost_models_host_kernels_and_all_reduces():
    """PRE-1: one model's prefill = embedding + layers x (host kernels over P x batch tokens + its two
    all-reduces) + the LM head over each prompt's last position, all from the decode's CostModel."""
    sc = parse_scenario(_scenario(1000, batch_size=2))
    cat = default_catalog()
    pf = PrefillModel(sc, cat)
    model = cat.models["opt-1.3b"]
    for devices in (1, 2):
        arch = ArchConfig(memory_type="hbm", pim_units=0, devices=devices)
        c, tokens, keys = pf.costs, 2000, -(-prefill_attended(1000, 0) // 1000)
        layer = sum(c.op_cost(model, op, "host", 0, arch, tokens, "normal", keys if op in ("score", "context")
                              else None).time_ns for op in PLACEABLE_OPS[:-1])
        layer += 2 * c.allreduce_cost(model, arch, tokens).time_ns
        want = (c.embedding_cost(model, arch, "normal", tokens).time_ns + model.layers * layer
                + c.op_cost(model, "lm_head", "host", 0, arch, 2, "normal").time_ns)
        assert pf.model_pass(model, arch).time_ns == want
    one = pf.model_pass(model, ArchConfig("hbm", 0, 1)).time_ns
    two = pf.model_pass(model, ArchConfig("hbm", 0, 2)).time_ns
    assert one / 2 < two < one  # tensor parallel: faster, not twice (all-reduces, launches)


def test_ttft_is_the_longest_models_prefill_and_the_energy_adds_idle_power():
    cat = default_catalog()
    staged = Staging(draft2="gpt2-small", draft_length=1)
    design = Design(verifier=_md("opt-1.3b"), drafters=[_md("opt-125m", drafter=True)])
    for accounting in ("total", "dynamic"):
        sc = parse_scenario(_scenario(assumptions={"energy_accounting": accounting}))
        pf = PrefillModel(sc, cat)
        price = pf.price(design)
        v, d = (pf.model_pass(cat.models[m], ArchConfig("hbm", 0, 1)) for m in ("opt-1.3b", "opt-125m"))
        assert price.ttft_ns == max(v.time_ns, d.time_ns) == v.time_ns
        idle = 2 * -(-cat.host("a100-40gb").idle_power_mw * price.ttft_ns // 1000) if accounting == "total" else 0
        assert price.energy_nj == v.energy_nj + d.energy_nj + idle
        # a staged drafter's draft2 model prefills its own cache after it on the same devices
        d2 = pf.model_prefill(_md("opt-125m", drafter=True, staging=staged))
        assert d2.time_ns == d.time_ns + pf.model_pass(cat.models["gpt2-small"], ArchConfig("hbm", 0, 1)).time_ns


def test_metrics_report_the_prefill_beside_the_per_token_figures():
    sc = parse_scenario(_scenario(1000, 64, batch_size=2))
    ev = Evaluator(sc)
    e = ev.evaluate(Design(verifier=_md("opt-1.3b"), drafters=[_md("opt-125m", drafter=True)]))
    m = e.metrics
    assert m.prefill_ns == e.prefill.ttft_ns > 0 and m.prefill_energy_nj == e.prefill.energy_nj > 0
    assert m.objective("request") == m.prefill_ns + 64 * m.latency_fraction()
    out = e.as_dict()
    assert out["ttft_ns"] == m.prefill_ns and out["prefill_energy_nj_per_request"] == m.prefill_energy_nj / 2
    assert out["prefill"]["models"][1]["model"] == "opt-125m" and "ttft_ns" in out["units"]
    rec = RecordMetrics.of(m)
    assert rec.value("request") == float(m.request_fraction()) and rec.ttft_ns == m.prefill_ns
    assert {"ttft_ns", "prefill_energy_nj_per_request", "request_latency_ns"} <= set(CSV_COLUMNS)
    old = {k: v for k, v in dataclasses.asdict(rec).items() if k not in ("ttft_ns", "prefill_energy_nj_per_request",
                                                                          "request_latency_ns")}
    assert RecordMetrics(**old).ttft_ns is None  # a record written before the prefill was priced still reads


def test_a_batch_too_large_for_one_kernel_is_prefilled_in_chunks():
    cat = default_catalog()
    arch = ArchConfig("hbm", 0, 1)
    big = PrefillModel(parse_scenario(_scenario(2000, batch_size=512)), cat).model_pass(cat.models["opt-125m"], arch)
    half = PrefillModel(parse_scenario(_scenario(2000, batch_size=256)), cat).model_pass(cat.models["opt-125m"], arch)
    assert 1.9 < big.time_ns / half.time_ns < 2.1  # 1,024,000 tokens: two chunks of 512,000


REQUEST_SPACES = [  # (verifier, drafter, memory, PIM units, device budget)
    ("opt-350m", "opt-125m", "hbm", 4, 9),  # the request optimum gives the verifier more devices
    ("gpt2-large", "gpt2-small", "gddr", 2, 10),  # likewise on GDDR
    ("opt-1.3b", "opt-125m", "hbm", 4, 4),  # the latency optimum is the request optimum
]


@pytest.mark.parametrize(("verifier", "drafter", "memory", "pim_units", "budget"), REQUEST_SPACES)
def test_request_optimum_equals_brute_force(verifier, drafter, memory, pim_units, budget):
    sc = parse_scenario({**_scenario(1000, 4, objective="request", device_budget=budget), "memory_types": [memory],
                         "verifier": {"model": verifier}, "drafters": [{"model": drafter, "acceptance": 0.7}],
                         "space": {"share_levels": 1, "pim_units": pim_units}})
    exact, brute = solve(sc), brute_force(sc)
    assert exact.report.status == "OPTIMAL" and exact.report.objective_name == "request"
    assert exact.report.objective == brute.report.objective == exact.evaluation.metrics.request_fraction()
    latency = solve(sc, objective="latency").evaluation.metrics
    assert exact.report.objective <= latency.request_fraction()
    if verifier != "opt-1.3b":  # the spaces where the prefill moves the optimum
        assert exact.report.objective < latency.request_fraction()
        assert exact.evaluation.metrics.latency_fraction() > latency.latency_fraction()


def test_solve_prints_the_prefill_and_takes_the_request_objective(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**_scenario(1000, 4), "space": {"pim_units": 4, "share_levels": 1}}))
    runner = CliRunner()
    text = runner.invoke(main, ["solve", str(path), "--no-warm-start"])
    assert text.exit_code == 0 and "prefill: TTFT " in text.output and "mJ/request" in text.output
    res = runner.invoke(main, ["solve", str(path), "--objective", "request", "--json", "--no-warm-start"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["solve"]["objective_name"] == "request" and data["solve"]["objective_unit"] == "ns/request"
    assert data["metrics"]["request_latency_ns"] == pytest.approx(data["solve"]["objective"])
    assert data["metrics"]["ttft_ns"] == data["metrics"]["prefill"]["ttft_ns"]


def test_the_heuristic_searches_by_latency_and_selects_by_request_latency():
    from specpim_cp.solvers.heuristic import run_heuristic

    sc = parse_scenario({**_scenario(1000, 4, objective="request", device_budget=9),
                         "verifier": {"model": "opt-350m"}, "drafters": [{"model": "opt-125m", "acceptance": 0.7}],
                         "space": {"share_levels": 1, "pim_units": 4}})
    res = run_heuristic(sc, budget="quick", seed=0)
    assert res.report.objective_name == "request" and res.report.extra["search_objective"] == "latency"
    assert res.report.objective == res.evaluation.metrics.request_fraction() >= solve(sc).report.objective


def test_request_optimum_equals_brute_force_with_a_staged_drafter():
    """A drafter that may stage a draft2 model: its prefill then includes the draft2 model's (PRE-4), and the
    threshold rows hold per staging choice."""
    sc = parse_scenario({
        "name": "staged-request", "batch_size": 1, "prompt_tokens": 900, "generated_tokens": 4, "objective": "request",
        "memory_types": ["gddr"], "max_draft_length": 2, "device_budget": 6, "verifier": {"model": "gpt2-xl"},
        "drafters": [{"model": "gpt2-medium", "acceptance": 0.7,
                      "staging": {"draft2": ["gpt2-small"], "max_draft_length": 2, "acceptance": {"gpt2-small": 0.6}}}],
        "space": {"share_levels": 1, "pim_units": 2}})
    exact = solve(sc)
    assert exact.report.status == "OPTIMAL" and exact.report.objective == brute_force(sc).report.objective


def test_a_batch_records_and_reports_the_prefill(tmp_path):
    folder, out = tmp_path / "set", tmp_path / "out"
    folder.mkdir()
    data = {**_scenario(1000, 4, objective="request", device_budget=9), "verifier": {"model": "opt-350m"},
            "drafters": [{"model": "opt-125m", "acceptance": 0.7}], "space": {"share_levels": 1, "pim_units": 4}}
    (folder / "req.json").write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["batch", str(folder), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader((out / "results.csv").open()))
    exact = next(r for r in rows if r["method"] == "exact")
    assert exact["objective_name"] == "request" and float(exact["ttft_ns"]) > 0
    assert float(exact["request_latency_ns"]) == pytest.approx(float(exact["objective"]))
    assert "## Time to first token" in (out / "summary.md").read_text()
