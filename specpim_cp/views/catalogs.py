"""The catalog as `catalog models` and `catalog devices` list it: tables and one line per entry (no printing)."""

from __future__ import annotations

from collections.abc import Iterable

from specpim_cp.catalog import active_text
from specpim_cp.catalog.entries import MemorySpec, ModelSpec
from specpim_cp.views.tables import table

__all__ = ["experts_text", "memories_table", "memory_line", "model_line", "models_table", "pim_units_text"]


def experts_text(m: ModelSpec) -> str:
    """'2 of 8' (+ shared experts) for a mixture-of-experts model, '-' for a dense one."""
    if not m.experts:
        return "-"
    return f"{m.experts_per_token} of {m.experts}" + (f" + {m.shared_experts}" if m.shared_experts else "")


def models_table(models: Iterable[ModelSpec]) -> str:
    """One row per model: its shape, experts, parameters (active ones of a mixture of experts: the
    attention, router, shared experts, routed experts a token uses and embeddings), position limit and
    sliding window."""
    rows = [[m.name, m.family, m.tokenizer, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.ffn_kind,
             "yes" if m.parallel_block else "no", m.vocab, experts_text(m), f"{m.parameter_count() / 1e9:.2f}",
             f"{m.active_parameter_count() / 1e9:.2f}" if m.is_moe else "-",
             f"{m.max_position:,}" if m.max_position else "-",
             f"{m.sliding_window:,}" if m.sliding_window else "-"] for m in models]
    return table(["model", "family", "tokenizer", "layers", "hidden", "heads", "kv", "head", "ffn", "ffn kind",
                  "parallel", "vocab", "experts (k of E + shared)", "params (B)", "active (B)", "max position",
                  "window"],
                 rows)


def model_line(m: ModelSpec) -> str:
    """`NAME: SOURCE`, with the active parameters of a mixture of experts."""
    active = f" [active parameters per token: {active_text(m)}]" if m.is_moe else ""
    return f"{m.name}: {m.source}{active}"


def pim_units_text(m: MemorySpec) -> str:
    """The memory's PIM units in a word: none (the memory as sold has none), a what-if, or a product."""
    if not m.pim_capable:
        return "none"
    return "what-if" if m.what_if else "product"


def memory_line(m: MemorySpec) -> str:
    """`NAME: LABEL` and its PIM units: none placed (a memory as sold without them), a what-if or a product."""
    if not m.pim_capable:
        return f"{m.name}: {m.label}; designs place no PIM units on it (pim_capable = false)"
    pim = "a what-if (no product has them)" if m.what_if else "a product (sold with them)"
    return f"{m.name}: {m.label}; PIM units: {pim}"


def memories_table(memories: Iterable[MemorySpec]) -> str:
    """One row per memory system: units, bandwidths, capacities, PIM figures and whether its PIM units exist."""
    rows = []
    for m in memories:
        units = m.groups * m.units_per_group
        rows.append([m.name, f"{m.groups} x {m.units_per_group}", m.units_per_channel, m.pim_arrangement,
                     m.group_external_bandwidth_gbps * m.groups, units * m.normal_unit_capacity_mib / 1024,
                     m.pim_unit_capacity_mib / 1024, m.pim_lanes_per_unit * m.pim_lane_bandwidth_gbps,
                     m.pim_efficiency, m.pim_mode_switch_ns, m.external_energy_pj_per_bit,
                     m.internal_energy_pj_per_bit, pim_units_text(m)])
    return table(["memory", "groups x units", "units/channel", "PIM arrangement", "ext GB/s", "GiB (k=0)",
                  "GiB/PIM unit", "PIM GB/s/unit", "PIM efficiency", "PIM kernel ns", "ext pJ/bit",
                  "PIM pJ/bit", "PIM units"], rows)
