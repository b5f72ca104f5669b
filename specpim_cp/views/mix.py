"""Plain-text views of a solved workload mix (`MixResult`): the solve report, the shared hardware, the
policy table (one row per cell), the rule view (per operator, the cells where it runs on PIM) and the
comparisons. Nothing here prints; `solve-mix` and the batch report format with these.

Units: latency in us/token, energy in mJ/token (as `solve` prints them; JSON keeps the evaluator's
ns/token and nJ/token), regret as a ratio to the cell's own optimum. Every table header names its unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from specpim_cp.catalog import Catalog
from specpim_cp.physics.mix import cell_metric
from specpim_cp.problem.design import Design, ModelDesign
from specpim_cp.problem.mix import Mix
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.mix import MixResult
from specpim_cp.views.tables import draft_text, host_line, table, tie_break_line

#: Human unit of each mix objective and its factor from the evaluator's unit (ns/token, nJ/token, ratio).
MIX_HUMAN_UNITS = {"latency": ("us/token", 1e-3), "energy": ("mJ/token", 1e-6), "regret": ("x own optimum", 1.0)}


def human_mix_objective(objective: str, value: Fraction | float | None) -> str:
    """A mix objective value (evaluator units) in human units, with the unit; '-' for none."""
    if value is None:
        return "-"
    unit, factor = MIX_HUMAN_UNITS[objective]
    return f"{float(value) * factor:,.6g} {unit}"


def pim_ops(md: ModelDesign) -> tuple[str, ...]:
    """The operators of a model that run on PIM, in the graph's order."""
    return tuple(op for op in PLACEABLE_OPS if md.placement[op].engine == "pim")


def pim_text(md: ModelDesign) -> str:
    """The operators on PIM in a few characters: `all`, `none`, or their names."""
    ops = pim_ops(md)
    if len(ops) == len(PLACEABLE_OPS):
        return "all"
    return ",".join(ops) or "none"


def index_ranges(indices: Sequence[int]) -> str:
    """Cell indices as ranges: c0-c3, c5, c7-c8."""
    out: list[str] = []
    idx = sorted(indices)
    start = prev = None
    for i in [*idx, None]:
        if i is not None and prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(f"c{start}" if start == prev else f"c{start}-c{prev}")
        start = prev = i
    return ", ".join(out)


def rule_rows(batches: Sequence[int], designs: Sequence[Design]) -> list[list[str]]:
    """Per model and operator: the cells (indices) where it runs on PIM and their batch sizes."""
    rows = []
    n = len(designs)
    for j, (label, md0) in enumerate(designs[0].models()):
        for op in PLACEABLE_OPS:
            on = [c for c, d in enumerate(designs) if d.models()[j][1].placement[op].engine == "pim"]
            cells = "all" if len(on) == n else "none" if not on else index_ranges(on)
            sizes = ("b=" + ", ".join(str(b) for b in sorted({batches[c] for c in on}))) if on else "-"
            rows.append([label, md0.model, op, cells, sizes])
    return rows


RULE_HEADERS = ["model", "name", "operator", "cells on PIM (index)", "batch sizes on PIM"]


def in_mix_space(mix: Mix, designs: Sequence[Design], catalog: Catalog) -> bool:
    """Every cell's design lies in the cell's (restricted) design space: a reference design the mix optimum
    must be no worse than. References on fixed hardware (half-PIM HBM, GPU-SI) may lie outside it."""
    return all(not DesignSpace(c.scenario, catalog).violations(d) for c, d in zip(mix.cells, designs, strict=True))


def hardware_lines(design: Design) -> list[str]:
    return [f"  {label:12s} {md.model:12s} {md.devices} x {md.memory_type} k={md.pim_units} "
            f"({md.arch.label()})" for label, md in design.models()]


def policy_table(res: MixResult) -> tuple[list[str], list[list[object]]]:
    """One row per cell: its condition, its dataflow on the shared hardware, its metrics and regret."""
    mix, objective = res.mix, res.report.objective_name
    first = res.evaluations[0].design
    drafter_labels = [label for label, _ in first.models()[1:]]
    headers = ["cell", "batch", "context (tokens)", "task", "acceptance", "weight"]
    headers += [f"draft {label}" for label in drafter_labels] + [f"staging {label}" for label in drafter_labels]
    headers += ["pipeline"] if drafter_labels else []
    headers += [f"on PIM: {label}" for label, _ in first.models()]
    metric = "energy" if objective == "energy" else "latency"
    headers += ["latency (us/token)", "energy (mJ/token)", f"regret ({metric} / own optimum, x)"]
    rows = []
    for cell, e, own in zip(mix.cells, res.evaluations, res.optima, strict=True):
        d, m = e.design, e.metrics
        sc = cell.scenario
        row: list[object] = [cell.index, cell.batch_size, f"{sc.prompt_tokens}+{sc.generated_tokens}", cell.task or "-",
                             " ".join(f"{a:g}" for _, a in cell.acceptance) or "-", f"{float(cell.weight):g}"]
        row += [draft_text(md) for md in d.drafters]
        row += ["-" if md.staging is None else f"{md.staging.draft2}:{md.staging.draft_length}" for md in d.drafters]
        row += (["on" if d.pipeline else "off"] if d.drafters else [])
        row += [pim_text(md) for _, md in d.models()]
        regret = cell_metric(m, objective) / own.report.objective
        row += [f"{m.latency_ns_per_token / 1e3:,.1f}", f"{m.energy_pj_per_token / 1e9:,.3f}", f"{float(regret):.4f}"]
        rows.append(row)
    return headers, rows


def comparison_table(res: MixResult, catalog: Catalog) -> tuple[list[str], list[list[object]]]:
    """(a)-(d): each reference's mix objective, its ratio to the mix optimum, its regret, its hardware or
    the reason it has no design; a reference outside the mix's (restricted) space says so."""
    objective = res.report.objective_name
    unit, factor = MIX_HUMAN_UNITS[objective]
    opt = res.report.objective
    headers = ["design", f"objective: {objective} ({unit})", "ratio to mix optimum (x)", "regret (x own optimum)",
               "hardware, or why no design"]
    hardware = ", ".join(md.arch.label() for _, md in res.evaluations[0].design.models())
    rows: list[list[object]] = [["mix optimum (this solve)", f"{float(opt) * factor:,.6g}", "1.0000", _regret(res),
                                 hardware]]
    for c in res.comparisons:
        if c.value is None:
            rows.append([c.name, "-", "-", "-", f"no design: {c.error}"])
            continue
        ratio = "-" if opt == 0 else f"{float(c.value / opt):.4f}"
        archs = c.extra.get("archs")
        where = ", ".join(archs) if archs else "own hardware per cell"
        if "threshold_tokens" in c.extra:
            where += f"; FC on PIM when batch x tokens per pass < {c.extra['threshold_tokens']}"
        if archs and not in_mix_space(res.mix, [e.design for e in c.evaluations], catalog):
            where += "; outside the mix's design space"
        rows.append([c.name, f"{float(c.value) * factor:,.6g}", ratio,
                     "-" if c.regret is None else f"{float(c.regret):.4f}", where])
    return headers, rows


def _regret(res: MixResult) -> str:
    objective = res.report.objective_name
    worst = max(cell_metric(e.metrics, objective) / own.report.objective
                for e, own in zip(res.evaluations, res.optima, strict=True))
    return f"{float(worst):.4f}"


def _scales_text(extra: dict) -> str:
    """The resolution of the canonical optimum's weighted levels (MIX-13), e.g. ' (levels in ps, pJ per token)'."""
    scales = extra.get("tie_break_scales") or {}
    words = []
    for name, scale in scales.items():
        unit = "ns" if name in ("latency", "regret") else "nJ"
        words.append(f"{name} {10 ** 6 / scale:g} {unit}/token")
    return f" (weighted levels at {', '.join(words)})" if words else ""


def format_mix(res: MixResult, catalog: Catalog) -> str:
    """The whole human report of `solve-mix` (`catalog`: the one the mix was priced with)."""
    r, mix = res.report, res.mix
    gap = "n/a" if r.gap is None else f"{100 * r.gap:.3g}%"
    what = {"latency": "weighted mean latency per token", "energy": "weighted mean energy per token",
            "regret": "worst cell's latency / its own optimum"}[r.objective_name]
    head = (f"mix {mix.name} (base scenario {mix.base.name}, {len(mix.cells)} cells): {r.status}, objective "
            f"{r.objective_name} ({what}) = {human_mix_objective(r.objective_name, r.objective)}, bound "
            f"{human_mix_objective(r.objective_name, r.bound)}, gap {gap}, {r.wall_s:.2f} s, seed {r.seed}, "
            f"{r.solver_version}")
    lines = [head]
    if r.extra.get("rounding"):
        lines.append(f"rounding: {r.extra['rounding']}")
    tie = tie_break_line(r.extra)
    if tie:
        lines.append(tie + _scales_text(r.extra))
    lines += [host_line(mix.base, res.evaluations[0]), "shared hardware (per model):",
              *hardware_lines(res.evaluations[0].design)]
    h, rows = policy_table(res)
    lines += ["", "policy (best dataflow per cell on the shared hardware):", table(h, rows)]
    lines += ["", "rule view (per operator, the cells where it runs on PIM):",
              table(RULE_HEADERS, rule_rows([c.batch_size for c in mix.cells], list(res.designs)))]
    if res.comparisons:
        h, rows = comparison_table(res, catalog)
        lines += ["", "comparisons ((a) per-cell optima, (b) median-cell hardware, (c) PAPI-style rule, (d) GPU-SI):",
                  table(h, rows)]
    return "\n".join(lines)
