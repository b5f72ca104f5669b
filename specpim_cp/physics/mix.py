"""The price of a workload-mix design: its capacity under the tensor-copy rule and its exact objectives.

The hardware is shared by the cells, the dataflow is per cell. Weights do not move at run time, so a model
stores every (operator, layout) copy of a weight tensor that any cell uses, plus, per cell, that cell's KV
cache by its own layouts: `mix_capacity` checks a whole mix design that way, on the evaluator's tensor
tables (formulations/mix.md, MIX-2..4). `mix_value` is the exact mix objective every solver's claim is
checked against. The mix itself (cells, weights, loading) is `problem/mix.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import GIB_IN_KIB, CapacityUse, Evaluator, Metrics
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.problem.mix import WEIGHT_OPS, Mix
from specpim_cp.problem.operators import PLACEABLE_OPS


# ------------------------------------------------------------------------------------------------
# Capacity of a whole mix design (tensor copies)
# ------------------------------------------------------------------------------------------------
def weight_copies(designs: Sequence[Design]) -> list[dict[str, set[str]]]:
    """Per model, per weight operator, the layouts some cell's design keeps its weights in."""
    out: list[dict[str, set[str]]] = []
    for j in range(len(designs[0].models())):
        out.append({op: {d.models()[j][1].placement[op].layout for d in designs} for op in WEIGHT_OPS})
    return out


def mix_capacity(evaluators: Sequence[Evaluator], designs: Sequence[Design]) -> list[list[CapacityUse]]:
    """Per cell, per model (verifier first): bytes on the PIM side and the normal side under the
    tensor-copy rule (MIX-3/4): every weight copy any cell uses + the cell's own KV cache by its own
    layouts + the cell's draft2 model, from the evaluator's tables (`Evaluator.capacity_table`)."""
    if len(evaluators) != len(designs):
        raise ValueError("one evaluator per cell")
    copies = weight_copies(designs)
    out = []
    for ev, design in zip(evaluators, designs, strict=True):
        per_model = []
        for j, (_, md) in enumerate(design.models()):
            archs = {d.models()[j][1].arch for d in designs}
            if len(archs) != 1:
                raise ScenarioError(f"mix design: model {j} ({md.model}) has different architectures in different "
                                    f"cells ({', '.join(sorted(a.label() for a in archs))}); a mix shares the hardware")
            arch = md.arch
            tab = ev.capacity_table(md.model, arch)
            pim = normal = 0
            for op, split in zip(PLACEABLE_OPS, tab.ops, strict=True):
                layouts = copies[j][op] if op in WEIGHT_OPS else {md.placement[op].layout}
                for lay in layouts:
                    pim += split[lay][0]
                    normal += split[lay][1]
            for lay in copies[j]["lm_head"]:  # an untied input embedding sits beside each LM-head copy
                pim += tab.embedding[lay][0]
                normal += tab.embedding[lay][1]
            p2, n2 = draft2_kib(ev, md.model, arch, None if md.staging is None else md.staging.draft2)
            per_model.append(CapacityUse(pim + p2, normal + n2, *tab.capacity_kib))
        out.append(per_model)
    return out


def draft2_kib(ev: Evaluator, model: str, arch: ArchConfig, draft2: str | None) -> tuple[int, int]:
    """(PIM-side, normal-side) KiB of a catalog draft2 model on the drafter's devices, as the evaluator
    counts it (`Evaluator.capacity_of` with and without it); (0, 0) for none or an n-gram model."""
    if draft2 is None or draft2 not in ev.catalog.models:
        return 0, 0
    layouts = ("normal",) * len(PLACEABLE_OPS)
    with_d2 = ev.capacity_of(model, arch, layouts, draft2)
    without = ev.capacity_of(model, arch, layouts, None)
    return with_d2.pim_need_kib - without.pim_need_kib, with_d2.normal_need_kib - without.normal_need_kib


def check_mix_capacity(mix: Mix, evaluators: Sequence[Evaluator], designs: Sequence[Design]) -> None:
    """ScenarioError naming the cell, the model and the side that overflows under the tensor-copy rule."""
    for cell, uses, design in zip(mix.cells, mix_capacity(evaluators, designs), designs, strict=True):
        for (label, md), cap in zip(design.models(), uses, strict=True):
            over = cap.overflow()
            if over is not None:
                side, need, have = over
                raise ScenarioError(
                    f"mix.cells[{cell.index}] {label} ({md.model}): the {side} must hold {need / GIB_IN_KIB:.2f} "
                    f"GiB (every weight copy the mix uses + this cell's KV cache) but {md.arch.label()} has "
                    f"{have / GIB_IN_KIB:.2f} GiB there")


# ------------------------------------------------------------------------------------------------
# Mix objectives (exact)
# ------------------------------------------------------------------------------------------------
def cell_metric(metrics: Metrics, objective: str) -> Fraction:
    """The per-cell quantity a mix objective aggregates: latency (also for regret) or energy per token."""
    return metrics.energy_fraction() if objective == "energy" else metrics.latency_fraction()


def mix_value(mix: Mix, metrics: Sequence[Metrics], objective: str,
              optima: Sequence[Fraction] | None = None) -> Fraction:
    """The exact mix objective: weighted mean latency (ns/token) or energy (nJ/token) per token, or
    regret, max over cells of latency / the cell's own optimum (`optima`)."""
    if objective == "regret":
        if optima is None:
            raise ValueError("regret needs the cells' own optima")
        return max(m.latency_fraction() / o for m, o in zip(metrics, optima, strict=True))
    total = sum(mix.weights, Fraction(0))
    return sum((w * cell_metric(m, objective) for w, m in zip(mix.weights, metrics, strict=True)), Fraction(0)) / total


def regret(metrics: Sequence[Metrics], optima: Sequence[Fraction], objective: str) -> Fraction:
    """Worst cell's metric (energy for the energy objective, else latency) over its own optimum of it."""
    return max(cell_metric(m, objective) / o for m, o in zip(metrics, optima, strict=True))
