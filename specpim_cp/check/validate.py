"""The model next to measurements: one table, every row with its source and its tolerance.

`validation_rows()` computes each row from the package's own models (the fitted kernel tables, the
cost model through the evaluator, the Monte Carlo simulator) and compares it with a measured or
published figure. `specpim-cp validate` prints the table; the tests require every row to pass.
Sources are summarised in each row and cited in full in formulations/physics_sources.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from specpim_cp.catalog import Catalog, default_catalog
from specpim_cp.check.pim_gemv import pim_speedup


@dataclass(frozen=True)
class ValidationRow:
    area: str
    quantity: str
    model: str  # the model's value, formatted with its unit
    measured: str  # the measurement or published figure, formatted with its unit
    tolerance: str
    ok: bool
    source: str
    miss: str = ""  # a row outside its tolerance says why (not a failure of the model's arithmetic)

    def as_dict(self) -> dict:
        return dict(vars(self))


def _rel(model: float, measured: float) -> float:
    return (model - measured) / measured


# ------------------------------------------------------------------------------------------------
# Host kernels and the all-reduce
# ------------------------------------------------------------------------------------------------
#: The kernel model's leave-one-model-out error must stay at or below these (median, p90); the
#: design target is 3% / 10% (formulations/physics.md, host kernels: not met, why).
KERNEL_GUARD = (0.09, 0.23)


def _kernel_rows() -> list[ValidationRow]:
    from specpim_cp.kernels import fit_report

    out = []
    for r in fit_report():
        ok = r.median_abs_rel_error <= KERNEL_GUARD[0] and r.p90_abs_rel_error <= KERNEL_GUARD[1]
        out.append(ValidationRow(
            "host kernels", f"{r.gpu.upper()} FP16 linear layers, |error| median / p90, leave one model out "
                            f"({r.points} points)",
            f"{100 * r.median_abs_rel_error:.1f}% / {100 * r.p90_abs_rel_error:.1f}%", "0 (the measured times)",
            f"<= {100 * KERNEL_GUARD[0]:.0f}% / {100 * KERNEL_GUARD[1]:.0f}% (target 3% / 10%, not met)", ok,
            "Vidur measured FP16 linear layers (data/gpu_linear_measured.csv)"))
    return out


def _allreduce_rows() -> list[ValidationRow]:
    from specpim_cp.kernels.allreduce import envelope_fit_report

    out = []
    for r in envelope_fit_report():
        out.append(ValidationRow(
            "all-reduce", f"{r.workers} A100s over NVLink: measured medians at or above the envelope "
                          f"(envelope / median {r.median_ratio_to_median:.2f}), {r.sizes} sizes <= 16 M elements",
            f"{100 * r.share_at_or_above:.1f}%", "every measurement", ">= 99% (a lower envelope)",
            r.share_at_or_above >= 0.99, "Vidur a100 pairwise NVLink all_reduce.csv"))
    return out


# ------------------------------------------------------------------------------------------------
# GPU decode: latency per token and power
# ------------------------------------------------------------------------------------------------
def _gpu_ar(model: str, devices: int, batch: int, prompt: int, generated: int, host: str, memory: str,
            catalog: Catalog):
    from specpim_cp.problem.scenario import parse_scenario
    from specpim_cp.solvers.baselines import gpu_ar

    sc = parse_scenario({"name": "validate", "batch_size": batch, "prompt_tokens": prompt,
                         "generated_tokens": generated, "host": host, "memory_types": [memory],
                         "verifier": {"model": model, "devices": devices}}, catalog)
    return gpu_ar(sc, catalog)


#: (label, model, devices, batch, prompt, generated, host, memory, measured ms/token, source)
LATENCY_POINTS = (
    ("13B GPT (OPT-13B shape), 1 x A100-40GB, batch 1, 512 in", "opt-13b", 1, 1, 512, 10, "a100-40gb", "hbm",
     22.0, "FasterTransformer, kipp.ly via cli99/llm-analysis examples/fastertransformer"),
    ("13B GPT (OPT-13B shape), 2 x A100-40GB TP2, batch 1, 512 in", "opt-13b", 2, 1, 512, 10, "a100-40gb", "hbm",
     13.5, "FasterTransformer, kipp.ly via cli99/llm-analysis examples/fastertransformer"),
    ("Llama-2-7B, 1 x A100-80GB, batch 1", "llama-7b", 1, 1, 5, 200, "a100-80gb", "hbm2e",
     9.53, "gpt-fast README (pytorch-labs/gpt-fast), 104.9 tokens/s"),
    ("Llama-2-70B, 4 x A100-80GB TP4, batch 1", "llama2-70b", 4, 1, 5, 200, "a100-80gb", "hbm2e",
     26.3, "gpt-fast README (pytorch-labs/gpt-fast), TP4"),
)
LATENCY_TOLERANCE = 0.15


def _latency_rows(catalog: Catalog) -> list[ValidationRow]:
    out = []
    for label, model, n, b, p, g, host, mem, measured, source in LATENCY_POINTS:
        t = _gpu_ar(model, n, b, p, g, host, mem, catalog).metrics.round_time_ns / 1e6
        err = _rel(t, measured)
        out.append(ValidationRow("GPU decode latency", f"GPU-AR per token: {label}", f"{t:.2f} ms ({100 * err:+.1f}%)",
                                 f"{measured:.2f} ms", f"+-{100 * LATENCY_TOLERANCE:.0f}%",
                                 abs(err) <= LATENCY_TOLERANCE, source))
    return out


#: Mixture of experts (formulations/moe.md MOE-6 cites the source in full): (label, model, devices, batch, prompt,
#: generated, host, memory, published tokens/s, source). gpt-fast's Mixtral shards every expert over the GPUs
#: (tp.py `_apply_tp_moe_ffn`) and replicates the router, as the cost model does; at batch 1 each layer reads
#: the k = 2 experts of its token.
MOE_LATENCY_POINTS = (
    ("Mixtral-8x7B, 2 x A100-80GB TP2, batch 1, BF16", "mixtral-8x7b", 2, 1, 5, 200, "a100-80gb", "hbm2e", 96.67,
     ("gpt-fast mixtral-moe/README.md (pytorch-labs/gpt-fast @ 48328fb, Mar 2024): 8 x A100-80GB power-limited "
      "to 330 W, hybrid cube mesh, batch 1, 5-token prompt, bfloat16 baseline 96.67 tokens/s on 2 GPUs")),
    ("Mixtral-8x7B, 4 x A100-80GB TP4, batch 1, BF16", "mixtral-8x7b", 4, 1, 5, 200, "a100-80gb", "hbm2e", 155.35,
     "gpt-fast mixtral-moe/README.md (pytorch-labs/gpt-fast @ 48328fb): as above, 155.35 tokens/s on 4 GPUs"),
)


def _moe_rows(catalog: Catalog) -> list[ValidationRow]:
    out = []
    for label, model, n, b, p, g, host, mem, tokens_per_s, source in MOE_LATENCY_POINTS:
        t = _gpu_ar(model, n, b, p, g, host, mem, catalog).metrics.round_time_ns / 1e6
        measured = 1e3 / tokens_per_s
        err = _rel(t, measured)
        out.append(ValidationRow("MoE decode latency", f"GPU-AR per token: {label}",
                                 f"{t:.2f} ms (x{t / measured:.2f}, {100 * err:+.1f}%)",
                                 f"{measured:.2f} ms ({tokens_per_s:g} tokens/s)", f"+-{100 * LATENCY_TOLERANCE:.0f}%",
                                 abs(err) <= LATENCY_TOLERANCE, source))
    return out


#: (label, model, devices, batch inferred from the KV capacity at 4096 tokens, measured W, tolerance, note)
POWER_POINTS = (
    ("Llama2-7B, 1 x A100", "llama-7b", 1, 30, 293.0, 0.10, "the calibration point"),
    ("Llama2-13B, 2 x A100", "llama-13b", 2, 40, 577.0, 0.10, ""),
    ("Llama2-70B, 4 x A100", "llama2-70b", 4, 128, 1107.0, 0.25,
     "CENT's 70B baseline runs 140 ms per step where the model takes 60 ms, so its power is not bandwidth-bound"),
)


#: Llama 2's context (Touvron et al. 2023, arXiv:2307.09288, Table 1: 4k): the power points are Llama 2 runs at
#: 4,096 tokens, priced on the LLaMA-1 entries of the same shapes (whose own limit is 2,048).
LLAMA2_POSITIONS = 4096


def _as_llama2(catalog: Catalog) -> Catalog:
    """`catalog` with the LLaMA-1 7B and 13B shapes given Llama 2's position limit (the power points' models)."""
    models = {n: dataclasses.replace(m, max_position=LLAMA2_POSITIONS) if n in ("llama-7b", "llama-13b") else m
              for n, m in catalog.models.items()}
    return dataclasses.replace(catalog, models=models)


def _power_rows(catalog: Catalog) -> list[ValidationRow]:
    out = []
    catalog = _as_llama2(catalog)
    for label, model, n, b, measured, tol, note in POWER_POINTS:
        m = _gpu_ar(model, n, b, 512, 3584, "a100-80gb", "hbm2e", catalog).metrics
        watts = m.energy_nj_per_round / m.round_time_ns
        err = _rel(watts, measured)
        out.append(ValidationRow(
            "GPU decode power", f"GPU-AR draw: {label}, batch {b}, 512 + 3584 tokens" + (f" ({note})" if note else ""),
            f"{watts:.0f} W ({100 * err:+.1f}%)", f"{measured:.0f} W", f"+-{100 * tol:.0f}%", abs(err) <= tol,
            "CENT data/GPU_power.csv (Yufeng98/CENT), decoding"))
    return out


# ------------------------------------------------------------------------------------------------
# PIM GEMV throughput against the devices' published figures
# ------------------------------------------------------------------------------------------------
def _pim_rows(catalog: Catalog) -> list[ValidationRow]:
    hbm = pim_speedup(catalog, "hbm", catalog.memory("hbm").units_per_group // 2)
    aim = pim_speedup(catalog, "gddr", catalog.memory("gddr").units_per_group)
    return [
        ValidationRow("PIM GEMV", "HBM-PIM (Aquabolt-XL: 4 of 8 dies PIM), 4096 x 4096 FP16 GEMV: speed-up over the "
                                  "same stacks' external bandwidth", f"{hbm:.2f}x", "2.8x (Alveo U280 system)",
                      "+-20%", abs(_rel(hbm, 2.8)) <= 0.20,
                      "Kim et al., IEEE Micro 2022 (Aquabolt-XL: GEMV 2.8x on an Alveo U280)"),
        ValidationRow("PIM GEMV", "GDDR6-AiM (every package AiM), 4096 x 4096 BF16 GEMV: speed-up over the packages' "
                                  "external interface", f"{aim:.2f}x", "7.5-10.5x (AiM FPGA system)",
                      "within 7.5-10.5x", 7.5 <= aim <= 10.5,
                      "SK hynix JSSC 2023 (GEMV 7.5-10.5x vs HBM2/GDDR6 systems)"),
    ]


# ------------------------------------------------------------------------------------------------
# Monte Carlo of every example
# ------------------------------------------------------------------------------------------------
MONTE_CARLO_ROUNDS = 30_000


def _monte_carlo_rows(catalog: Catalog) -> list[ValidationRow]:
    from specpim_cp.check.simulate_design import simulate_design
    from specpim_cp.problem.builtin_sets import builtin_sets
    from specpim_cp.problem.design import Staging
    from specpim_cp.problem.scenario import load_scenario
    from specpim_cp.solvers.baselines import gpu_si

    out = []
    for path in sorted(builtin_sets()["examples"].glob("*.toml")):
        sc = load_scenario(path, catalog)
        base = gpu_si(sc, catalog).design
        drafters = [d if e.staging is None else
                    d.model_copy(update={"staging": Staging(draft2=e.staging.draft2[0], draft_length=2)})
                    for d, e in zip(base.drafters, sc.drafters, strict=True)]
        design = base.model_copy(update={"pipeline": True, "drafters": drafters})
        sim = simulate_design(sc, design, MONTE_CARLO_ROUNDS, seed=0).simulation
        ok = sim.tokens_agree() and sim.time_agree() and sim.continue_agree() and sim.stream_verified
        out.append(ValidationRow(
            "speculation", f"{sc.name}: pipelined rounds, tokens / time / continue rate vs closed forms, token "
                           f"stream = verifier's ({MONTE_CARLO_ROUNDS:,} rounds)",
            f"{sim.mean_tokens:.4f} tok, {sim.mean_time_ns / 1e3:,.1f} us, {sim.continue_rate:.4f}",
            f"{sim.closed_form_tokens:.4f} tok, {sim.closed_form_time_ns / 1e3:,.1f} us, {sim.closed_form_continue:.4f}",
            "3 x 95% CI; stream verified", ok, "Monte Carlo drawing token identities (simulate.py)"))
    return out


def _edge_rows(catalog: Catalog) -> list[ValidationRow]:
    from specpim_cp.check.validate_edge import edge_rows

    return edge_rows(catalog, ValidationRow)


SECTIONS: tuple[Callable[[Catalog], list[ValidationRow]], ...] = (
    lambda c: _kernel_rows(), lambda c: _allreduce_rows(), _latency_rows, _moe_rows, _power_rows, _pim_rows,
    _edge_rows, _monte_carlo_rows, lambda c: _head_rows(c))


def _head_rows(catalog: Catalog) -> list[ValidationRow]:
    from specpim_cp.check.validate_heads import head_rows

    return [ValidationRow(*fields) for fields in head_rows(catalog)]


def validation_rows(catalog: Catalog | None = None) -> list[ValidationRow]:
    catalog = catalog or default_catalog()
    return [row for section in SECTIONS for row in section(catalog)]


def format_validation(rows: list[ValidationRow]) -> str:
    from specpim_cp.views.tables import table

    body = [[r.area, r.quantity, r.model, r.measured, r.tolerance, "pass" if r.ok else "MISS" if r.miss else "FAIL"]
            for r in rows]
    text = table(["area", "quantity", "model", "measured / published", "tolerance", "result"], body)
    sources = "\n".join(f"{i + 1}. {r.area}: {r.source}" + (f" (MISS: {r.miss})" if r.miss else "")
                        for i, r in enumerate(rows))
    failed = sum(not r.ok and not r.miss for r in rows)
    missed = sum(bool(r.miss) for r in rows)
    verdict = (f"{failed} row(s) FAIL" if failed else "all rows pass") + (
        f"; {missed} row(s) MISS their tolerance for the stated reason" if missed else "")
    return f"{text}\n\n{verdict}\n\nsources (by row):\n{sources}"
