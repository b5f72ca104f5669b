"""Validation rows for the edge devices (formulations/edge.md): published on-device decode rates of named models
on named phones and laptops against NPU-AR on the catalog's hosts, each within a stated tolerance, and the
LPDDR5X-PIM what-if's GEMV speed-up against Samsung's published LPDDR5-PIM figure.

`snapdragon-x-elite`'s host bandwidth fraction is calibrated on one published rate (the row marked "fitted",
formulations/edge.md 'The laptop's NPU bandwidth'); the other laptop rows are held out and test it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specpim_cp.catalog import Catalog
from specpim_cp.check.pim_gemv import pim_speedup

#: The validation table's row type (`validate.ValidationRow`, which imports this module): (area, quantity,
#: model, measured, tolerance, ok, source) -> a row.
RowType = Callable[[str, str, str, str, str, bool, str], Any]

_AI_HUB = ("Qualcomm AI Hub Models (github.com/quic/ai-hub-models, qai_hub_models/models/{}/perf.yaml at commit "
           "52c080d2): w4a16 (the LM head and KV cache 8-bit), {}, {} on the NPU, context_length {}, tokens_per_second "
           "{}; the exported graph reads its whole context_length KV cache every token, 8-bit: priced here as the FP16 "
           "cache of half that context")
_LAPTOP = "Snapdragon X Elite CRD"
_PHONE_S24 = "Samsung Galaxy S24 (chipset qualcomm-snapdragon-8gen3)"

#: (label, model, weights, host, memory, prompt, generated, published tokens/s, tolerance, source, role): role
#: "fitted" names the calibration row (formulations/edge.md), "held out" a row that tests a calibration.
EDGE_DECODE_POINTS = (
    (("DeepSeek-R1-Distill-Qwen-1.5B (Qwen2.5-1.5B shape), INT8 weights, Samsung Galaxy S24 Ultra (Snapdragon 8 "
      "Gen 3, LPDDR5X-8533), batch 1, KV cache 1280"), "qwen2.5-1.5b", "int8", "snapdragon-8-gen-3", "lpddr5x-phone",
     1024, 256, 26.98, 0.20,
     ("litert-community/DeepSeek-R1-Distill-Qwen-1.5B model card (Hugging Face; Google AI Edge LiteRT / MediaPipe LLM "
      "Inference): Samsung S24 Ultra, 1280 KV cache, dynamic_int8 (INT8 weights), GPU decode 26.98 tokens/s (CPU "
      "26.35), model file 1,831 MB; its untied LM head is INT8 there, FP16 here (1.78 GB read per token against "
      "1.83 GB)"), ""),
    ("Llama-2-7B-Chat, w4a16, Samsung Galaxy S24 (Snapdragon 8 Gen 3), batch 1, context 1024", "llama-2-7b", "int4",
     "snapdragon-8-gen-3", "lpddr5x-phone", 384, 256, 12.85, 0.20,
     _AI_HUB.format("llama_v2_7b_chat", _PHONE_S24, "qnn_context_binary", 1024, 12.85), ""),
    ("Llama-3.1-8B-Instruct, w4a16, Snapdragon X Elite CRD, batch 1, context 4096", "llama-3.1-8b", "int4",
     "snapdragon-x-elite", "lpddr5x-laptop", 1920, 256, 9.357, 0.02,
     _AI_HUB.format("llama_v3_1_8b_instruct", _LAPTOP, "Genie", 4096, 9.357), "fitted"),
    ("Llama-3.2-3B-Instruct, w4a16, Snapdragon X Elite CRD, batch 1, context 4096", "llama-3.2-3b", "int4",
     "snapdragon-x-elite", "lpddr5x-laptop", 1920, 256, 18.4176, 0.15,
     _AI_HUB.format("llama_v3_2_3b_instruct", _LAPTOP, "Genie", 4096, 18.4176), "held out"),
    ("Llama-3-8B-Instruct (Llama-3.1-8B shapes), w4a16, Snapdragon X Elite CRD, batch 1, context 4096",
     "llama-3.1-8b", "int4", "snapdragon-x-elite", "lpddr5x-laptop", 1920, 256, 10.0367, 0.15,
     _AI_HUB.format("llama_v3_8b_instruct", _LAPTOP, "Genie", 4096, 10.0367), "held out"),
    ("Llama-2-7B-Chat, w4a16, Snapdragon X Elite CRD, batch 1, context 1024", "llama-2-7b", "int4",
     "snapdragon-x-elite", "lpddr5x-laptop", 384, 256, 11.2, 0.15,
     _AI_HUB.format("llama_v2_7b_chat", _LAPTOP, "qnn_context_binary", 1024, 11.2), "held out"),
)
#: Samsung's LPDDR5-PIM simulation: "more than double performance" on voice recognition, translation and chatbot
#: workloads (Hot Chips 33, 2021, as reported by Samsung's press release of 24 August 2021); a GEMV is the part PIM
#: speeds up, so its speed-up is at least that and at most the 4x the PIM die's internal bandwidth allows.
LPDDR_PIM_SPEEDUP = (2.0, 4.0)


def _decode_rows(catalog: Catalog, row: RowType) -> list:
    from specpim_cp.problem.scenario import parse_scenario
    from specpim_cp.solvers.baselines import gpu_ar

    out = []
    for label, model, weights, host, memory, prompt, generated, tokens_per_s, tol, source, role in EDGE_DECODE_POINTS:
        sc = parse_scenario({"name": "validate-edge", "batch_size": 1, "prompt_tokens": prompt,
                             "generated_tokens": generated, "host": host, "memory_types": [memory],
                             "verifier": {"model": model, "devices": 1, "weights": weights}}, catalog)
        t = gpu_ar(sc, catalog).metrics.round_time_ns / 1e6
        measured = 1e3 / tokens_per_s
        err = (t - measured) / measured
        tolerance = f"+-{100 * tol:.0f}%" + (f" ({role})" if role else "")
        out.append(row("edge decode latency", f"NPU-AR per token: {label}",
                       f"{t:.2f} ms ({1e3 / t:.1f} tokens/s, {100 * err:+.1f}%)",
                       f"{measured:.2f} ms ({tokens_per_s:g} tokens/s)", tolerance, abs(err) <= tol, source))
    return out


def lpddr_pim_speedup(catalog: Catalog, memory: str = "lpddr5x-phone-pim", size: int = 4096) -> float:
    """A size x size FP16 GEMV on every channel's PIM die against streaming it over the channels' external
    bandwidth."""
    return pim_speedup(catalog, memory, catalog.memory(memory).max_pim_units, size, host="snapdragon-8-gen-3",
                       verifier="qwen2.5-0.5b")


def edge_rows(catalog: Catalog, row: RowType) -> list:
    """The edge rows, each built by `row` (`validate.ValidationRow`)."""
    speedup = lpddr_pim_speedup(catalog)
    low, high = LPDDR_PIM_SPEEDUP
    pim = row(
        "PIM GEMV", "LPDDR5X-PIM what-if (a PIM die on every phone channel), 4096 x 4096 FP16 GEMV: speed-up over "
                    "the channels' external bandwidth", f"{speedup:.2f}x", "more than 2x (LPDDR5-PIM, simulated)",
        f"within {low:g}-{high:g}x", low <= speedup <= high,
        "Samsung, Hot Chips 33 (2021): LPDDR5-PIM more than doubles performance in simulation; the upper end is the "
        "4x internal bandwidth of the what-if die (catalog memories.lpddr5x-phone-pim)")
    return _decode_rows(catalog, row) + [pim]
