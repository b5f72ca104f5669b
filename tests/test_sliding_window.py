"""Sliding-window attention (formulations/costs.md WIN-1, WIN-2): a model with a window keeps at most the
window in its KV cache and reads at most the window per query; a model without one is priced as before.
Mistral-7B (built in, window 4096) against the same shape with full attention, at a 32K prompt."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specpim_cp.catalog import Catalog, default_catalog
from specpim_cp.catalog.import_hf import import_hf
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.costs import CostModel
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.context import decode_context, kv_positions, pass_context, prefill_attended
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.scenario import parse_scenario
from specpim_cp.solvers.brute import brute_force
from specpim_cp.solvers.exact import solve


def _full_attention(cat: Catalog) -> Catalog:
    """The catalog with Mistral-7B's window removed (every other field as built in)."""
    models = dict(cat.models)
    models["mistral-7b"] = dataclasses.replace(models["mistral-7b"], sliding_window=0)
    return dataclasses.replace(cat, models=models)


def _scenario(prompt: int, generated: int = 768, **extra) -> dict:
    return {"name": "mistral", "batch_size": 1, "prompt_tokens": prompt, "generated_tokens": generated,
            "host": "h100-sxm", "verifier": {"model": "mistral-7b", "devices": 1}, **extra}


def test_the_window_caps_the_contexts_and_none_keeps_them():
    sc = parse_scenario(_scenario(32000))
    cat = default_catalog()
    windowed, full = cat.models["mistral-7b"], _full_attention(cat).models["mistral-7b"]
    assert kv_positions(sc, full) == 32768 and kv_positions(sc, windowed) == 4096
    assert decode_context(sc, full) == sc.average_context == 32384 and decode_context(sc, windowed) == 4096
    assert pass_context(sc, windowed, 9) == 4096 and pass_context(sc, full, 9) == 32392
    # a window inside the decode span: the mean of min(c, W) over c in [P, P + G]; continuous at both ends
    short = parse_scenario(_scenario(3000, 2000))
    assert decode_context(short, windowed) == ((4096**2 - 3000**2) + 2 * (5000 - 4096) * 4096) // 4000
    edge = dataclasses.replace(windowed, sliding_window=5000)
    assert decode_context(short, edge) == short.average_context  # W = P + G: the full context
    assert decode_context(short, dataclasses.replace(windowed, sliding_window=3000)) == 3000  # W = P
    assert prefill_attended(10, 0) == 55 and prefill_attended(10, 4) == 10 + 6 * 4 and prefill_attended(3, 4) == 6


def test_kv_capacity_and_attention_at_32k_are_capped_at_the_window():
    sc = parse_scenario(_scenario(32000, memory_types=["hbm3"]))
    cat = default_catalog()
    capped, full = CostModel(sc, cat), CostModel(sc, _full_attention(cat))
    model_w, model_f = capped.catalog.models["mistral-7b"], full.catalog.models["mistral-7b"]
    kv_w, kv_f = capped.tensor_bytes(model_w, 1).op_kib, full.tensor_bytes(model_f, 1).op_kib
    assert kv_f["score"] == 8 * kv_w["score"] and kv_f["context"] == 8 * kv_w["context"]  # 32768 / 4096
    assert kv_w["qkv"] == kv_f["qkv"]  # weights do not change
    arch = ArchConfig(memory_type="hbm3", pim_units=0, devices=1)
    for op in ("score", "context"):
        host_w = capped.op_cost(model_w, op, "host", 0, arch, 1, "normal")
        host_f = full.op_cost(model_f, op, "host", 0, arch, 1, "normal")
        assert host_w.time_ns < host_f.time_ns / 3 and host_w.energy_nj < host_f.energy_nj / 7  # + launch
    fc_w = capped.op_cost(model_w, "ffn_up", "host", 0, arch, 1, "normal")
    assert fc_w == full.op_cost(model_f, "ffn_up", "host", 0, arch, 1, "normal")


def test_the_evaluator_prices_the_capped_cache_and_only_the_window_fits():
    """Batch 20 at a 32K context: the full cache (80 GiB) overflows one 80 GiB H100, the windowed one fits;
    the evaluator's capacity need is the weights plus layers x batch x W x KV width x 2 bytes x 2 (K, V)."""
    data = _scenario(32000, batch_size=20, memory_types=["hbm3"])
    sc = parse_scenario(data)
    cat = default_catalog()
    best = brute_force(sc, catalog=cat).evaluation
    m = cat.models["mistral-7b"]
    kv_kib = 2 * m.layers * 20 * 4096 * m.kv_dim * 2 // 1024
    weights_kib = Evaluator(sc, cat).costs.tensor_bytes(m, 1).total_kib() - kv_kib
    cap = best.breakdown.verifier.capacity
    assert cap.pim_need_kib + cap.normal_need_kib == weights_kib + kv_kib
    with pytest.raises(ScenarioError, match="no feasible design"):
        brute_force(sc, catalog=_full_attention(cat))


def test_exact_optimum_equals_brute_force_with_a_windowed_verifier():
    """OPT-1.3B given a 96-token window (a what-if) verifying OPT-125M drafts, prompt 128 + 64 generated."""
    data = {"name": "window-small", "batch_size": 2, "prompt_tokens": 128, "generated_tokens": 64,
            "host": "a100-40gb", "memory_types": ["hbm"], "max_draft_length": 3,
            "verifier": {"model": "opt-1.3b", "devices": 1},
            "drafters": [{"model": "opt-125m", "devices": 1, "acceptance": 0.7}],
            "space": {"share_levels": 2, "pim_units": 4, "mapping": "attention-offload"}}
    sc = parse_scenario(data)
    base = default_catalog()
    models = dict(base.models)
    models["opt-1.3b"] = dataclasses.replace(models["opt-1.3b"], sliding_window=96)
    cat = dataclasses.replace(base, models=models)
    exact, brute = solve(sc, catalog=cat), brute_force(sc, catalog=cat)
    assert exact.report.status == "OPTIMAL" and exact.report.objective == brute.report.objective
    assert exact.report.objective < brute_force(sc, catalog=base).report.objective  # fewer keys read


def test_import_hf_reads_the_window_typed_and_refuses_a_window_on_some_layers(tmp_path):
    base = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "vocab_size": 32000, "_name_or_path": "mistralai/Mistral-7B-v0.1"}

    def imported(**cfg):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**base, **cfg}))
        return import_hf(path)

    model, notes = imported(sliding_window=4096)
    assert model.values["sliding_window"] == 4096 and "arXiv:2310.06825" in model.sources["sliding_window"]
    assert any("capped" in n for n in notes)
    for absent in ({}, {"sliding_window": None}):
        assert "sliding_window" not in imported(**absent)[0].values  # null or absent: full attention
    with pytest.raises(ScenarioError, match="sliding_window must be an integer"):
        imported(sliding_window="4096")
    with pytest.raises(ScenarioError, match="sliding_window must be a positive integer"):
        imported(sliding_window=0)
    qwen = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "sliding_window": 131072}
    assert "sliding_window" not in imported(**qwen)[0].values  # Qwen2: use_sliding_window defaults to false
    assert "sliding_window" not in imported(**qwen, use_sliding_window=False)[0].values
    with pytest.raises(ScenarioError, match="max_window_layers 28"):
        imported(**qwen, use_sliding_window=True, max_window_layers=28)
