"""Reports of a grid directory (`runs/grid.py`): heatmaps over the grid's first two axes and a table per cell.

`report.build_report` hands a directory here when its records carry grid cells. Heatmaps put the first
axis on x and the second on y; a grid with more axes gets one panel per combination of the other axes'
values (at most MAX_PANELS; the table has every cell). Four maps, each a PNG:

- `grid_family.png`: which design family wins: memory type, PIM units of units per group and devices
  per model of the exact optimum, as a categorical colour with its text in the cell;
- `grid_pim_ops.png`: how many of the verifier's operators the optimum puts on PIM;
- `grid_draft_length.png`: the optimum's draft length (colour: the first drafter's; text: every drafter's);
- `grid_speedup.png`: the exact optimum's speedup over GPU-SI (latency ratio).

Cells without an exact design are grey, labelled infeasible, error or not run; `*` marks a design not
proven optimal within the time limit. `grid.csv` has one row per cell.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specpim_cp.files import write_atomic
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.report.common import Report, consistency_checks, fmt, fmt_gap, geomean, group, ratio
from specpim_cp.runs.records import GridCell, PimAllocation, Record
from specpim_cp.runs.store import write_derived_files
from specpim_cp.views.figures import new_figure, save_figure
from specpim_cp.views.tables import md_table, table

MAX_PANELS = 24
MAX_WIDTH_IN = 22.0  # panels per row: as many as fit
PLOTS = ("grid_family.png", "grid_pim_ops.png", "grid_draft_length.png", "grid_speedup.png")
#: axis name -> title with unit (kept in step with grid.AXIS_TITLES; this module reads records only)
AXIS_TITLES = {"batch_size": "batch size (sequences)", "prompt_tokens": "prompt length (tokens)",
               "generated_tokens": "generated length (tokens)", "acceptance": "acceptance rate α (every drafter)",
               "device_budget": "device budget (devices)", "memory_types": "allowed memory types",
               "host": "host GPU", "models": "models (verifier + drafters)"}
MISSING_COLOR = "#e6e6e6"


def axis_title(axis: str) -> str:
    if axis.startswith("acceptance["):
        return f"acceptance rate α of drafter {axis[len('acceptance['):-1]}"
    return AXIS_TITLES.get(axis, axis)


# ------------------------------------------------------------------------------------------------
# Records per cell
# ------------------------------------------------------------------------------------------------
@dataclass
class CellResult:
    name: str
    cell: GridCell
    exact: Record | None = None
    baselines: dict[str, Record] = field(default_factory=dict)

    @property
    def solved(self) -> Record | None:
        return self.exact if self.exact is not None and self.exact.solved else None

    @property
    def state(self) -> str:
        """OPTIMAL | FEASIBLE | INFEASIBLE | ERROR | not run."""
        return self.exact.status if self.exact is not None and self.exact.status else "not run"

    def latency(self, part: str) -> float | None:
        r = self.solved if part == "exact" else self.baselines.get(part)
        return r.metrics.latency_ns_per_token if r is not None and r.solved else None

    @property
    def speedup(self) -> float | None:
        return ratio(self.latency("GPU-SI"), self.latency("exact"))

    def models(self) -> tuple[PimAllocation, ...]:
        return (self.solved.pim or ()) if self.solved is not None else ()

    def family(self, with_devices: bool) -> str | None:
        if self.solved is None:
            return None
        return " | ".join(f"{p.devices}x " * with_devices + f"{p.memory_type} {p.pim_units}/{p.units_per_group}"
                          for p in self.models())

    @property
    def verifier_pim_ops(self) -> tuple[str, ...] | None:
        v = next((p for p in self.models() if p.role == "verifier"), None)
        return None if v is None else v.pim_ops

    @property
    def draft_lengths(self) -> tuple[int, ...] | None:
        if self.solved is None:
            return None
        return tuple(p.draft_length for p in self.models() if p.role != "verifier" and p.draft_length is not None)


def grid_cells(records: Sequence[Record]) -> tuple[list[CellResult], list[str]]:
    """Cells of the grid with the most cells in the records (notes name any other grid left out)."""
    grids = Counter((r.cell.grid, r.cell.axes) for r in records if r.cell is not None)
    (grid, axes), _ = grids.most_common(1)[0]
    notes = [f"records of grid {g} (axes {', '.join(a)}) are not in this report" for g, a in grids if (g, a) != (grid, axes)]
    cells: dict[str, CellResult] = {}
    for r in records:
        if r.cell is None or (r.cell.grid, r.cell.axes) != (grid, axes):
            continue
        c = cells.setdefault(r.scenario, CellResult(r.scenario, r.cell))
        if r.method == "exact":
            c.exact = r
        elif r.method == "baselines":
            c.baselines[r.part] = r
    return sorted(cells.values(), key=lambda c: c.cell.index), notes


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------
def _fmt_draft(lengths: tuple[int, ...] | None) -> str:
    return "-" if lengths is None else (",".join(map(str, lengths)) or "-")


def cell_rows(cells: Sequence[CellResult]) -> tuple[list[str], list[list[str]]]:
    axes = cells[0].cell.axes
    headers = ["cell", *axes, "exact status", "proven gap", "exact us/token", "GPU-SI us/token",
               "speedup vs GPU-SI", "design family (devices x memory PIM units/group per model)",
               "verifier ops on PIM", "draft lengths", "pipeline", "warm start from", "solve s"]
    rows = []
    for c in cells:
        ex = c.solved
        ops = c.verifier_pim_ops
        rows.append([c.name, *c.cell.labels, c.state, fmt_gap(ex),
                     fmt(None if c.latency("exact") is None else c.latency("exact") / 1e3),
                     fmt(None if c.latency("GPU-SI") is None else c.latency("GPU-SI") / 1e3), fmt(c.speedup),
                     c.family(True) or "-", "-" if ops is None else (" ".join(ops) or "none"),
                     _fmt_draft(c.draft_lengths), "-" if ex is None else ("on" if ex.design["pipeline"] else "off"),
                     (c.exact.hint_from if c.exact is not None else None) or "-",
                     fmt(None if c.exact is None else c.exact.wall_s)])
    return headers, rows


def summary_lines(cells: Sequence[CellResult], grid: str) -> list[str]:
    sizes = cells[0].cell.sizes
    total = math.prod(sizes)
    states = Counter(c.state for c in cells)
    solved = [c for c in cells if c.solved is not None]
    speedups = [c.speedup for c in solved if c.speedup is not None]
    times = [c.exact.wall_s for c in cells if c.exact is not None and c.exact.wall_s is not None]
    axes = ", ".join(f"{a} ({n})" for a, n in zip(cells[0].cell.axes, sizes, strict=True))
    lines = [f"Grid {grid}: {total} cells over {axes}; {len(cells)} with records, {total - len(cells)} not run",
             "Exact results: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
             + (f"; {100 * states.get('OPTIMAL', 0) / len(cells):.0f}% of the cells proven optimal" if cells else "")]
    if speedups:
        lines.append(f"Speedup of the exact optimum over GPU-SI: geometric mean {fmt(geomean(speedups))}, "
                     f"min {fmt(min(speedups))}, max {fmt(max(speedups))} (latency ratio)")
    if times:
        lines.append(f"Exact solve time per cell (s): median {fmt(statistics.median(times))}, "
                     f"max {fmt(max(times))}, total {fmt(sum(times))}")
    return lines


def grid_csv(cells: Sequence[CellResult]) -> str:
    headers, rows = cell_rows(cells)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------
# Heatmaps
# ------------------------------------------------------------------------------------------------
def _ticks(cells: Sequence[CellResult], k: int) -> list[str]:
    """Tick labels of axis k by index (from the records; an index no record has is '?')."""
    labels = ["?"] * cells[0].cell.sizes[k]
    for c in cells:
        labels[c.cell.index[k]] = c.cell.labels[k]
    return labels


def _panels(cells: Sequence[CellResult]) -> list[tuple[tuple[int, ...], str]]:
    """(index of the axes after the first two, panel title) of every panel."""
    import itertools

    info = cells[0].cell
    rest = range(2, len(info.axes))
    ticks = {k: _ticks(cells, k) for k in rest}
    out = []
    for idx in itertools.product(*(range(info.sizes[k]) for k in rest)):
        title = ", ".join(f"{info.axes[k]} = {ticks[k][i]}" for k, i in zip(rest, idx, strict=True))
        out.append((idx, title))
    return out


def _text_color(rgba) -> str:
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _missing_text(c: CellResult | None) -> str:
    if c is None or c.exact is None:
        return "not run"
    return {"INFEASIBLE": "infeasible", "ERROR": "error"}.get(c.state, c.state.lower())


def heatmap(cells: Sequence[CellResult], value: Callable[[CellResult], float | None],
            text: Callable[[CellResult], str], title: str, path: Path, *, cmap: str = "viridis",
            colorbar: str | None = None, categories: Sequence[str] | None = None,
            vmin: float | None = None, vmax: float | None = None, integer: bool = False) -> Path:
    """One heatmap panel per combination of the axes after the first two; x = axis 0, y = axis 1.

    `categories`: `value` is an index into them, drawn with a qualitative palette and a legend.
    """
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize
    from matplotlib.patches import Patch

    info = cells[0].cell
    nx = info.sizes[0]
    ny = info.sizes[1] if len(info.sizes) > 1 else 1
    xt = _ticks(cells, 0)
    yt = _ticks(cells, 1) if len(info.sizes) > 1 else [""]
    panels = _panels(cells)
    shown = panels[:MAX_PANELS]
    by_pos = {c.cell.index: c for c in cells}
    cell_w, cell_h = (1.05, 0.62) if categories else (0.75, 0.45)
    panel_w = nx * cell_w + 1.6
    ncols = max(1, min(len(shown), 4, int(MAX_WIDTH_IN // panel_w)))
    nrows = math.ceil(len(shown) / ncols)
    fig = new_figure(max(6.0, ncols * panel_w + (1.2 if colorbar else 0)),
                  nrows * (ny * cell_h + 1.5) + 1.0 + (0.22 * math.ceil(len(categories) / 2) if categories else 0))
    axs = fig.subplots(nrows, ncols, squeeze=False)
    values = [v for c in cells if (v := value(c)) is not None]
    if categories:
        palette = [colormaps["tab20"](i % 20) for i in range(len(categories))] or ["white"]
        cm = ListedColormap(palette)
        norm = BoundaryNorm([i - 0.5 for i in range(len(palette) + 1)], len(palette))
    else:
        cm = colormaps[cmap]
        lo = vmin if vmin is not None else (min(values) if values else 0.0)
        hi = vmax if vmax is not None else (max(values) if values else 1.0)
        norm = Normalize(lo, hi if hi > lo else lo + 1)
    cm = cm.with_extremes(bad=MISSING_COLOR)
    image = None
    fontsize = 6.5 if categories else 9
    for n, (rest, ptitle) in enumerate(shown):
        ax = axs[n // ncols][n % ncols]
        grid = np.full((ny, nx), np.nan)
        for ix in range(nx):
            for iy in range(ny):
                c = by_pos.get((ix, iy, *rest)[:len(info.sizes)])
                v = None if c is None else value(c)
                if v is not None:
                    grid[iy, ix] = v
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cm, norm=norm, origin="lower", aspect="auto")
        for ix in range(nx):
            for iy in range(ny):
                c = by_pos.get((ix, iy, *rest)[:len(info.sizes)])
                if np.isnan(grid[iy, ix]):
                    ax.text(ix, iy, _missing_text(c), ha="center", va="center", fontsize=fontsize - 1,
                            color="#555555")
                else:
                    mark = "" if c.state == "OPTIMAL" else "*"
                    ax.text(ix, iy, text(c) + mark, ha="center", va="center", fontsize=fontsize,
                            color=_text_color(cm(norm(grid[iy, ix]))))
        ax.set_xticks(range(nx), xt, rotation=30 if max(map(len, xt)) > 6 else 0,
                      ha="right" if max(map(len, xt)) > 6 else "center")
        if len(info.axes) > 1:
            ax.set_yticks(range(ny), yt)
        else:
            ax.set_yticks([])
        ax.set_xlabel(axis_title(info.axes[0]))
        ax.set_ylabel(axis_title(info.axes[1]) if len(info.axes) > 1 else "")
        ax.set_xticks([x - 0.5 for x in range(1, nx)], minor=True)
        ax.set_yticks([y - 0.5 for y in range(1, ny)], minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
        if ptitle:
            ax.set_title(ptitle, fontsize=9)
    for n in range(len(shown), nrows * ncols):
        axs[n // ncols][n % ncols].set_visible(False)
    note = "" if len(panels) <= MAX_PANELS else f" (first {MAX_PANELS} of {len(panels)} panels; all cells in the table)"
    fig.suptitle(f"{title}{note}\n* not proven optimal within the time limit; grey: no exact design", fontsize=10)
    if categories:
        handles = [Patch(facecolor=cm(i), edgecolor="#888888", label=lab) for i, lab in enumerate(categories)]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), fontsize=8,
                   title="design family of the exact optimum: per model (verifier first) memory type, PIM units / "
                         "units per group; the cell text adds each model's device count", title_fontsize=8)
    elif image is not None and colorbar:
        bar = fig.colorbar(image, ax=axs.ravel().tolist(), label=colorbar, shrink=0.9)
        if integer:
            from matplotlib.ticker import MaxNLocator

            bar.locator = MaxNLocator(integer=True)
            bar.update_ticks()
    return save_figure(fig, path)


def plot_family(cells: Sequence[CellResult], path: Path) -> Path:
    """Colour: memory type and PIM units per model (most frequent family first); text: with devices."""
    counts = Counter(c.family(False) for c in cells if c.solved is not None)
    families = [f for f, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    index = {f: i for i, f in enumerate(families)}
    letters = [chr(ord("A") + i) if i < 26 else str(i) for i in range(len(families))]

    def text(c: CellResult) -> str:
        return f"{letters[index[c.family(False)]]}\n" + "\n".join(c.family(True).split(" | "))

    return heatmap(cells, lambda c: None if c.solved is None else index[c.family(False)], text,
                   "Which design family wins (exact optimum per cell)", path,
                   categories=[f"{letters[i]}: {f}" for i, f in enumerate(families)])


def plot_pim_ops(cells: Sequence[CellResult], path: Path) -> Path:
    def count(c: CellResult) -> float | None:
        ops = c.verifier_pim_ops
        return None if ops is None else float(len(ops))

    return heatmap(cells, count, lambda c: f"{int(count(c))}", "Verifier operators on PIM (exact optimum)", path,
                   cmap="Blues", vmin=0, vmax=len(PLACEABLE_OPS), integer=True,
                   colorbar=f"verifier operators on PIM\n(count, of {len(PLACEABLE_OPS)} placeable)")


def plot_draft_length(cells: Sequence[CellResult], path: Path) -> Path:
    multi = any(len(c.draft_lengths or ()) > 1 for c in cells)

    def first(c: CellResult) -> float | None:
        d = c.draft_lengths
        return float(d[0]) if d else None

    label = ("draft length γ of the first drafter\n(tokens per round; text: every drafter's)" if multi
             else "draft length γ\n(tokens drafted per round)")
    return heatmap(cells, first, lambda c: _fmt_draft(c.draft_lengths), "Draft length of the exact optimum",
                   path, cmap="YlOrBr", vmin=0, colorbar=label, integer=True)


def plot_speedup(cells: Sequence[CellResult], path: Path) -> Path:
    return heatmap(cells, lambda c: c.speedup, lambda c: f"{c.speedup:.2f}x",
                   "Speedup of the exact optimum over GPU speculative inference (GPU-SI)", path,
                   cmap="viridis", colorbar="speedup over GPU-SI\n(GPU-SI latency / exact latency, x)")


# ------------------------------------------------------------------------------------------------
def build_grid_report(out: Path, records: Sequence[Record], plots: bool = True) -> Report:
    """summary.md, results.csv, grid.csv and the heatmaps of a grid directory."""
    cells, notes = grid_cells(records)
    name = cells[0].cell.grid
    files = write_derived_files(out, records)
    write_atomic(out / "grid.csv", grid_csv(cells))
    files.append(out / "grid.csv")
    made: list[Path] = []
    if plots:
        for fn, fname in ((plot_family, PLOTS[0]), (plot_pim_ops, PLOTS[1]), (plot_draft_length, PLOTS[2]),
                          (plot_speedup, PLOTS[3])):
            made.append(fn(cells, out / fname))
    header = summary_lines(cells, name) + [f"note: {n}" for n in notes]
    failed = [f"{r.scenario}:{r.method} {r.part}: {r.error}" for r in records if r.status == "ERROR"]
    if failed:
        header.append("\n- ".join(["ERRORS (re-run `grid` to retry):", *failed]))
    checks = consistency_checks(group(records))
    header.append("Consistency checks (exact <= baselines): "
                  + ("all passed" if not checks else "\n- ".join([f"{len(checks)} VIOLATION(S)", *checks])))
    headers, rows = cell_rows(cells)
    title = "Cells (exact optimum per cell; '-': no design)"
    text = "\n\n".join([f"Grid report: {name}", *header, f"{title}\n{table(headers, rows)}"])
    md = [f"# Grid report: {name}", ""] + [line for h in header for line in (h, "")]
    md += [f"## {title}", "", md_table(headers, rows), ""]
    if made:
        md += ["## Heatmaps", "", "x: first axis, y: second axis; one panel per value of the other axes.", ""]
        md += [f"![{p.stem}]({p.name})" for p in made] + [""]
    write_atomic(out / "summary.md", "\n".join(md))
    return Report(text, "\n".join(md), [*files, out / "summary.md", *made])
