"""Validation rows for drafter kinds: GPU-SI with each head next to the speedup its authors measured on GPUs
(formulations/drafter_kinds.md). GPU-SI here is the fixed recipe `solvers.baselines.gpu_si` (plain memory,
vanilla rounds, chains) with the head on the verifier's GPU, as serving engines run it, and the catalog's
default acceptance of the head's kind; the speedup is GPU-AR's latency per token over GPU-SI's."""

from __future__ import annotations

from specpim_cp.catalog import Catalog

#: Published GPU speedups of a head over decoding without it: (label, verifier, devices, host, memory, kind,
#: head fields, published speedup, source, why the row may miss: "" when it should hold the tolerance)
HEAD_SPEEDUP_POINTS = (
    ("EAGLE-3 on Llama-3.1-8B-Instruct, 1 x H100, batch 1 (SGLang, MT-bench)", "llama-3.1-8b", 1, "h100-sxm", "hbm3",
     "eagle", {}, 373.25 / 158.34,
     ("SGLang documentation, Speculative Decoding, 'Performance Highlights' table (sgl-project.github.io): "
      "LLaMA-Instruct 3.1 8B on MT-bench, 1 x H100, 158.34 tokens/s without speculation, 373.25 with EAGLE-3"), ""),
    ("Medusa-2 on Vicuna-7B (LLaMA-7B shape), 1 x A100-80GB, batch 1", "llama-7b", 1, "a100-80gb", "hbm2e",
     "medusa", {"heads": 5}, 2.83,
     ("Medusa (Cai et al., ICML 2024, arXiv 2401.10774), figure 'Speedup on different model sizes': Vicuna-7B "
      "2.83x with Medusa-2 (5 heads: FasterDecoding/Medusa MedusaConfig); the acceptance is the catalog's named "
      "ASSUMPTION medusa>any, so this row checks the round and pass arithmetic more than the acceptance"), ""),
    ("MTP (D = 1) on a MoE verifier: DeepSeek-V3's 1.8x next to Mixtral-8x7B on 2 x H100, batch 1", "mixtral-8x7b",
     2, "h100-sxm", "hbm3", "mtp", {"depth": 1}, 1.8,
     "DeepSeek-V3 technical report (arXiv 2412.19437, section 5.4.3): 85-90% second-token acceptance, 1.8 times TPS",
     ("DeepSeek-V3 (671B MoE with multi-head latent attention, 256 experts) is not in the catalog: the row prices "
      "Mixtral-8x7B, whose 2-token verification reads 1.75x the expert weights of one token (3.5 of 8 experts "
      "against 2, uniform routing), where DeepSeek-V3 serves large batches whose tokens already wake most experts")),
)
HEAD_SPEEDUP_TOLERANCE = 0.25


def head_rows(catalog: Catalog) -> list[tuple]:
    """Per point the fields of a `validate.ValidationRow` (area, quantity, model, measured, tolerance, ok,
    source, miss)."""
    from specpim_cp.problem.scenario import parse_scenario
    from specpim_cp.solvers.baselines import gpu_ar, gpu_si

    out = []
    for label, verifier, n, host, mem, kind, head, published, source, why in HEAD_SPEEDUP_POINTS:
        sc = parse_scenario({"name": "validate-heads", "batch_size": 1, "prompt_tokens": 128, "generated_tokens": 256,
                             "host": host, "memory_types": [mem], "max_draft_length": 8,
                             "verifier": {"model": verifier, "devices": n},
                             "drafters": [{"kind": kind, "placement": "verifier", "head": head}]}, catalog)
        si = gpu_si(sc, catalog)
        speedup = gpu_ar(sc, catalog).metrics.latency_ns_per_token / si.metrics.latency_ns_per_token
        err = (speedup - published) / published
        ok = abs(err) <= HEAD_SPEEDUP_TOLERANCE
        d = si.design.drafters[0]
        out.append((
            "drafter kinds", f"GPU-SI speedup over GPU-AR: {label} (draft length {d.draft_length})",
            f"{speedup:.2f}x ({100 * err:+.1f}%)", f"{published:.2f}x", f"+-{100 * HEAD_SPEEDUP_TOLERANCE:.0f}%", ok,
            source, "" if ok else why or "no reason known"))
    return out
