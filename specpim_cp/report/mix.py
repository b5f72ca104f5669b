"""The workload-mix part of a batch report (records of method `mix`, `runs/mixes.py`).

- the regret table: per mix (one per family in the built-in `mix` set) the mix optimum, the per-cell
  optima's value, what one hardware loses against them, the worst cell's regret, and what the mix
  optimum gains over the PAPI-style rule, the median cell's hardware and GPU-SI;
- per mix the rule view (per model and operator, the cells where it runs on PIM) and a heatmap of
  cells x operators (PIM or host, per model), with each cell's draft per drafter;
- consistency checks: a proven mix optimum is no worse than (b) and (c), and never better than (a).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specpim_cp.files import path_in, safe_stem
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.runs.records import MixOutcome, Record
from specpim_cp.solvers.mix import GPU_SI, MEDIAN, PAPI_HALF, PAPI_MIX, PER_CELL
from specpim_cp.views.figures import new_figure, save_figure
from specpim_cp.views.mix import MIX_HUMAN_UNITS, rule_rows

Table = tuple[str, list[str], list[list[str]]]
#: Comparisons the mix optimum is measured against in the regret table, with their column titles.
GAINS = ((PAPI_HALF, "gain over PAPI-style rule, half-PIM HBM (%)"),
         (PAPI_MIX, "gain over PAPI-style rule, mix hardware (%)"),
         (MEDIAN, "gain over median-cell hardware (%)"),
         (GPU_SI, "gain over GPU-SI (%)"))
PIM_COLOR, HOST_COLOR = "#d62728", "#dddddd"


def mix_records(records: Sequence[Record]) -> list[Record]:
    """The mix records that hold a solved mix, by family and name."""
    return sorted((r for r in records if r.method == "mix" and r.mix is not None),
                  key=lambda r: (r.family, r.scenario))


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f}"


def _value(r: Record, v: float | None) -> str:
    if v is None:
        return "-"
    _, factor = MIX_HUMAN_UNITS[r.objective_name]
    return f"{v * factor:,.6g}"


def regret_table(records: Sequence[Record]) -> Table | None:
    rows = []
    for r in mix_records(records):
        m: MixOutcome = r.mix
        per_cell = m.comparison(PER_CELL)
        pc = None if per_cell is None else per_cell.objective
        worst = max(c.regret for c in m.cells)
        row = [r.family, r.scenario, str(len(m.cells)), r.status or "-",
               "-" if r.gap is None else ("0%" if r.gap == 0 else f"{100 * r.gap:.2g}%"),
               f"{r.objective_name} ({MIX_HUMAN_UNITS[r.objective_name][0]})", _value(r, r.objective), _value(r, pc),
               _pct(None if pc is None or not pc else 100 * (r.objective / pc - 1)), f"{worst:.4f}"]
        for name, _ in GAINS:
            c = m.comparison(name)
            ok = c is not None and c.objective is not None and r.objective
            mark = "*" if ok and c.in_space is False else ""
            row.append(_pct(100 * (c.objective / r.objective - 1)) + mark if ok else "-")
        rows.append(row)
    if not rows:
        return None
    headers = ["family", "mix", "cells", "status", "proven gap", "objective (unit)", "mix optimum",
               "per-cell optima", "loss vs per-cell optima (%)", "max regret (x own optimum)",
               *(title for _, title in GAINS)]
    title = ("Workload mixes: one hardware vs per-cell optima and vs the references (loss = mix optimum / "
             "per-cell optima - 1; gain = reference / mix optimum - 1; '-': the reference has no design; "
             "*: the reference lies outside the mix's design space)")
    return title, headers, rows


def rule_tables(records: Sequence[Record]) -> list[Table]:
    out = []
    for r in mix_records(records):
        from specpim_cp.problem.design import parse_design

        designs = [parse_design(c.design) for c in r.mix.cells]
        rows = rule_rows([c.batch_size for c in r.mix.cells], designs)
        title = (f"Rule view of mix {r.scenario} ({r.family}; hardware {', '.join(r.mix.hardware)}): per operator, "
                 "the cells where it runs on PIM")
        out.append((title, ["model", "name", "operator", "cells on PIM (index)", "batch sizes on PIM"], rows))
    return out


def consistency_checks(records: Sequence[Record]) -> list[str]:
    """Violations (each a bug somewhere): a proven mix optimum worse than (b) or (c) when they lie in the
    mix's design space, or better than (a)."""
    out = []
    for r in mix_records(records):
        if r.status != "OPTIMAL" or r.objective is None:
            continue
        tol = 1e-9 * abs(r.objective)
        for name in (MEDIAN, PAPI_HALF, PAPI_MIX):
            c = r.mix.comparison(name)
            if c is not None and c.objective is not None and c.in_space and c.objective < r.objective - tol:
                out.append(f"{r.scenario}: {name} ({c.objective:,.6g}) beats the proven mix optimum "
                           f"({r.objective:,.6g}) on {r.objective_name}")
        c = r.mix.comparison(PER_CELL)
        if c is not None and c.objective is not None and c.objective > r.objective + tol:
            out.append(f"{r.scenario}: the per-cell optima ({c.objective:,.6g}) are worse than one shared hardware "
                       f"({r.objective:,.6g}) on {r.objective_name}")
    return out


def _draft(c) -> str:
    parts = []
    for p in c.pim[1:]:
        if p.tree is not None:
            parts.append("tree " + "-".join(map(str, p.tree)))
        elif p.draft_length is not None:
            parts.append(str(p.draft_length) + (f"/{p.staging['draft2']}:{p.staging['draft_length']}"
                                                if p.staging else ""))
    return ("draft " + " ".join(parts)) if parts else ""


def plot_heatmap(r: Record, path: Path) -> Path:
    """Cells (rows) x operators per model (columns): PIM or host, with each cell's draft per drafter."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch


    m = r.mix
    roles = [(p.role, p.model) for p in m.cells[0].pim]
    columns = [(j, op) for j in range(len(roles)) for op in PLACEABLE_OPS]
    grid = [[1 if op in c.pim[j].pim_ops else 0 for j, op in columns] for c in m.cells]
    fig = new_figure(max(6.5, 0.32 * len(columns) + 4.5), 0.3 * len(m.cells) + 2.4)
    ax = fig.subplots()
    ax.imshow(grid, cmap=ListedColormap([HOST_COLOR, PIM_COLOR]), vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(columns)), [op for _, op in columns], rotation=90, fontsize=7)
    labels = [f"c{c.index} {c.label}" + (f" | {_draft(c)}" if _draft(c) else "") for c in m.cells]
    ax.set_yticks(range(len(m.cells)), labels, fontsize=7)
    for k in range(1, len(roles)):  # separate the models
        ax.axvline(k * len(PLACEABLE_OPS) - 0.5, color="black", linewidth=1.2)
    ax.set_yticks([k - 0.5 for k in range(1, len(m.cells))], minor=True)
    ax.grid(which="minor", axis="y", color="white", linewidth=1.0)
    ax.tick_params(which="minor", length=0)
    top = ax.secondary_xaxis("top")
    top.set_xticks([(j + 0.5) * len(PLACEABLE_OPS) - 0.5 for j in range(len(roles))],
                   [f"{role}: {model} ({m.hardware[j]})" for j, (role, model) in enumerate(roles)], fontsize=7)
    top.tick_params(length=0)
    ax.legend(handles=[Patch(color=PIM_COLOR, label="PIM"), Patch(color=HOST_COLOR, label="host")], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_xlabel("operator (per model)")
    ax.set_title(f"{r.family}: mix {r.scenario}, where each operator runs per cell "
                 f"({r.objective_name} objective, {r.status})", fontsize=9)
    return save_figure(fig, path)


def heatmap_path(out: Path, r: Record) -> Path:
    """Where the heatmap of mix record `r` goes in the report folder `out` (`files.path_in`)."""
    return path_in(out, safe_stem(r.scenario), ".png", prefix="mix-heatmap-")  # no spaces: a Markdown link


def mix_sections(records: Sequence[Record], out: Path, plots: bool) -> tuple[list[Table], list[Path], list[str]]:
    """(tables, plots written, consistency-check lines) of the mix records."""
    tables = [t for t in (regret_table(records),) if t is not None] + rule_tables(records)
    made = [plot_heatmap(r, heatmap_path(out, r)) for r in mix_records(records)] if plots else []
    failed = [f"{r.scenario}: {r.status}: {r.error}" for r in records if r.method == "mix" and r.mix is None]
    checks = consistency_checks(records)
    verdict = "all passed" if not checks else "\n- ".join([f"{len(checks)} VIOLATION(S)", *checks])
    lines = [("Mix consistency checks (a proven mix optimum <= median-cell hardware and the PAPI-style rule, "
              f">= per-cell optima): {verdict}")]
    if failed:
        lines.append("\n- ".join(["Mixes without a result:", *failed]))
    return tables, made, lines
