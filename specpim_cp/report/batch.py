"""Reports of a batch directory: tables (terminal and `summary.md`), CSV files and PNG plots.

Everything is derived from `results.jsonl` (see `runs/store.py`), so `specpim-cp report DIR` can be re-run
at any time, also on a batch that is still running or was killed. Sections:

- latency and energy per token of GPU-AR, GPU-SI, FC-offload, attention-offload (and PIM variants such as
  FC-offload (fit) when run), heuristic and exact per scenario; the exact design's speedup and energy
  efficiency over GPU-SI and over fixed-recipe PIM two ways (`report/comparisons.py`: over the best PIM
  recipe, and the paper's geometric mean over the recipes); geometric means; the status and proven gap of
  every exact result; the same ratios per scenario in `comparisons.csv`;
- the ablation ladder per model family as factors (each step's optimum over the previous step's);
- where the PIM goes: per scenario and model, the fraction of memory units that are PIM units;
- plots (matplotlib Agg, no pyplot state): speedup and energy efficiency (over GPU-SI, and a panel over the
  PIM recipes with both comparisons), ladder, PIM allocation, Pareto fronts,
  and one schedule picture per family (the exact design of its smallest batch, `views/schedule_picture.schedule_figure`);
- workload mixes (records of method `mix`): the regret table, rule views and heatmaps of `report/mix.py`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.files import path_in, safe_stem, write_atomic
from specpim_cp.problem.ablation_ladder import LADDER_STEPS
from specpim_cp.problem.design import parse_design
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.report.common import (
    PIM_BASELINES,
    PIM_VARIANTS,
    Report,
    ScenarioResults,
    compared_methods,
    consistency_checks,
    fmt,
    fmt_excess,
    fmt_gap,
    geomean,
    group,
    ladder_latencies,
    ratio,
    scaled,
)
from specpim_cp.report.comparisons import (
    BEST_RECIPE,
    COMPARISONS_CSV,
    DEFINITIONS,
    PAPER,
    Comparison,
    Ratios,
    compare_all,
    comparisons_csv,
    mean_ratios,
    paper_flag,
)
from specpim_cp.report.drawing import draw_all
from specpim_cp.report.grid import build_grid_report
from specpim_cp.report.mix import mix_sections
from specpim_cp.runs.records import Record
from specpim_cp.runs.store import read_records, write_derived_files
from specpim_cp.views.figures import new_figure, save_figure
from specpim_cp.views.ranges import value_span
from specpim_cp.views.schedule_picture import schedule_figure
from specpim_cp.views.tables import md_table, table

PLOTS = ("speedup.png", "energy_efficiency.png", "ladder.png", "pim_allocation.png", "pareto.png")
MEMORY_COLORS = {"hbm": "#1f77b4", "gddr": "#ff7f0e"}
#: Colours for the other memory types, handed out in name order so every type on a plot has its own.
MEMORY_PALETTE = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#d62728", "#7f7f7f",
                  "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5")
METHOD_COLORS = {"GPU-AR": "#7f7f7f", "FC-offload": "#2ca02c", "attention-offload": "#9467bd",
                 "FC-offload (fit)": "#98df8a", "heuristic": "#ff7f0e", "exact": "#d62728"}
PARETO_MARKERS = {"GPU-SI": "s", "FC-offload": "^", "attention-offload": "v", "FC-offload (fit)": "<",
                  "heuristic": "D"}
STEP_COLORS = ("#c7c7c7", "#9467bd", "#2ca02c", "#17becf", "#d62728")


# ------------------------------------------------------------------------------------------------
# Tables: (title, headers, rows of strings), formatted for the terminal and for Markdown
# ------------------------------------------------------------------------------------------------
Table = tuple[str, list[str], list[list[str]]]


def latency_energy_tables(groups: Sequence[ScenarioResults]) -> list[Table]:
    methods = compared_methods(groups)
    lat = [[s.name, *(fmt(scaled(s.latency(m), 1e-3)) for m in methods)] for s in groups]
    en = [[s.name, *(fmt(scaled(s.energy(m), 1e-9)) for m in methods)] for s in groups]
    return [("Latency per generated token (us; '-': infeasible or not run)", ["scenario", *methods], lat),
            ("Energy per generated token (mJ; batch total / tokens)", ["scenario", *methods], en)]


def prefill_table(groups: Sequence[ScenarioResults]) -> Table:
    """Time to first token per method (the prompt's prefill on the host, formulations/prefill.md)."""
    methods = compared_methods(groups)
    rows = [[s.name, *(fmt(scaled(s.ttft(m), 1e-6)) for m in methods)] for s in groups]
    return ("Time to first token (ms; the prompt's prefill, before decoding)", ["scenario", *methods], rows)


def devices_table(groups: Sequence[ScenarioResults]) -> Table:
    """The devices each method's design uses, beside the latency and energy tables (a baseline without
    drafters, GPU-AR, takes the whole device budget: formulations/baselines.md)."""
    methods = compared_methods(groups)
    rows = [[s.name, *(design_devices(s.solved(m)) for m in methods)] for s in groups]
    return ("Devices each design uses (every model's; '-': no design)", ["scenario", *methods], rows)


def design_devices(r) -> str:
    """The devices of a record's design, over its verifier and drafters ('-' without a design; a head on the
    verifier's devices adds none)."""
    if r is None or r.design is None:
        return "-"
    mds = [r.design["verifier"], *r.design.get("drafters", [])]
    return str(sum(md["devices"] for md in mds if not md.get("colocated")))


SPEEDUP_TITLE = f"Exact design vs baselines (factors: baseline / exact per token; per scenario also in {COMPARISONS_CSV})"
SPEEDUP_HEADERS = ["scenario", "exact status", "proven gap", "speedup vs GPU-SI", f"speedup vs {BEST_RECIPE}",
                   f"speedup vs {PAPER}", "best PIM recipe", "energy eff. vs GPU-SI", f"energy eff. vs {BEST_RECIPE}",
                   f"energy eff. vs {PAPER}", "heuristic above exact"]


def _ratio_cells(rs: Ratios, flag: str) -> list[str]:
    return [fmt(rs.vs_gpu_si), fmt(rs.vs_best_pim_recipe), fmt(rs.vs_pim_paper) + flag]


def speedup_table(groups: Sequence[ScenarioResults]) -> Table:
    """The exact design's speedup and energy efficiency over GPU-SI and over PIM (both comparisons)."""
    comps = compare_all(groups)
    rows = []
    for s, c in zip(groups, comps, strict=True):
        speed, energy = _ratio_cells(c.speedup, paper_flag(c)), _ratio_cells(c.energy_efficiency, paper_flag(c))
        rows.append([s.name, c.exact_status or "-", fmt_gap(s.solved("exact")), *speed, c.best_pim_recipe or "-",
                     *energy, fmt_excess(c.heuristic_over_exact)])
    speed = _ratio_cells(mean_ratios(comps, lambda c: c.speedup), "")
    energy = _ratio_cells(mean_ratios(comps, lambda c: c.energy_efficiency), "")
    rows.append(["geometric mean", "", "", *speed, "", *energy,
                 fmt_excess(geomean([c.heuristic_over_exact for c in comps]))])
    return SPEEDUP_TITLE, list(SPEEDUP_HEADERS), rows


def speedup_notes(groups: Sequence[ScenarioResults]) -> list[str]:
    """The definitions under the speedup table, with what this report's geometric means are over."""
    comps = compare_all(groups)
    paper = [c for c in comps if c.speedup.vs_pim_paper is not None]
    partial = [c.scenario for c in paper if c.partial]
    lines = list(DEFINITIONS)
    lines.append(f"PIM geometric means here: over {len(paper)} of {len(comps)} scenarios"
                 + (f"; the paper value of {', '.join(partial)} is over one recipe" if partial else "") + ".")
    variants = [v for v in PIM_VARIANTS if any(v in s.by_method for s in groups)]
    if variants:
        lines.append(f"{', '.join(variants)}: in the latency and energy tables, not a recipe of either PIM "
                     "comparison.")
    alone = [s.name for s in groups if (r := s.solved("exact")) is not None and r.design is not None
             and not r.design.get("drafters") and (g := s.solved("GPU-SI")) is not None and g.design is not None
             and g.design.get("drafters")]
    if alone:  # [NOSPEC] formulations/speculation_rounds.md
        lines.append(f"No speculation: the verifier alone is the exact optimum of {', '.join(alone)} (it beats "
                     "every drafter there).")
    return lines


def ladder_factors(s: ScenarioResults) -> list[float | None]:
    """Speedup of each ladder step over the previous one (the first step, GPU-SI, is 1)."""
    lat = ladder_latencies(s)
    return [1.0 if lat[0] is not None else None] + [ratio(lat[i - 1], lat[i]) for i in range(1, len(lat))]


def ladder_cumulative(s: ScenarioResults) -> list[float | None]:
    """Speedup of each ladder step over GPU-SI (the last one is the ladder's total)."""
    lat = ladder_latencies(s)
    return [ratio(lat[0], x) for x in lat]


def family_ladders(groups: Sequence[ScenarioResults]) -> dict[str, list[ScenarioResults]]:
    fams: dict[str, list[ScenarioResults]] = {}
    for s in groups:
        if s.ladder:
            fams.setdefault(s.family, []).append(s)
    return dict(sorted(fams.items()))


def ladder_table(groups: Sequence[ScenarioResults]) -> Table | None:
    rows = []
    for fam, members in family_ladders(groups).items():
        for s in members:
            lat0 = ladder_latencies(s)[0]
            rows.append([fam, s.name, fmt(scaled(lat0, 1e-3)), *(fmt(x) for x in ladder_factors(s)[1:]),
                         fmt(ladder_cumulative(s)[-1])])
        means = [geomean([ladder_factors(s)[i] for s in members]) for i in range(1, len(LADDER_STEPS))]
        rows.append([fam, "geometric mean", "", *(fmt(x) for x in means),
                     fmt(geomean([ladder_cumulative(s)[-1] for s in members]))])
    if not rows:
        return None
    headers = ["family", "scenario", "GPU-SI us/token", *LADDER_STEPS[1:], "total"]
    title = ("Ablation ladder: speedup of each step over the previous (each step the optimum of its space; "
             "'-': step missing)")
    return title, headers, rows


def range_cells(ranges: dict | None, role: str) -> list[str]:
    """A model's decision ranges [OBJ-4] as three cells: memory, PIM units and devices within the
    tolerance, and the operators whose engine is free ('-': no ranges; '?': a value not decided)."""
    if not ranges:
        return ["-", "-", "-"]
    mine = {r["decision"]: r for r in ranges["ranges"] if r["model"] == role}

    def cell(name: str) -> str:
        r = mine.get(name)
        if r is None:
            return "-"
        return value_span(r["reached"]) + (" ?" if r["unknown"] else "")

    free = [name[7:-1] for name, r in mine.items() if name.startswith("engine[") and r["forced"] is not True]
    return [cell("memory_type"), cell("pim_units"), ", ".join(free) or "none"]


def pim_table(groups: Sequence[ScenarioResults]) -> Table | None:
    rows, within = [], set()
    for s in groups:
        r = s.best_design()
        if r is None:
            continue
        if r.ranges:
            within.add(r.ranges["within_pct"])
        for p in r.pim:
            rows.append([s.name, r.method, p.role, p.model, p.memory_type, str(p.devices),
                         f"{p.pim_units}/{p.units_per_group}", fmt(p.pim_fraction, 2), ", ".join(p.pim_ops) or "-",
                         "-" if p.draft_length is None else str(p.draft_length) if p.tree is None else
                         "tree " + "-".join(map(str, p.tree)), *range_cells(r.ranges, p.role)])
    if not rows:
        return None
    tol = f"{'/'.join(sorted(within))}%" if within else "tolerance"
    headers = ["scenario", "from", "role", "model", "memory", "devices", "PIM units", "PIM fraction",
               "operators on PIM", "draft (length or tree)", f"memory within {tol}", f"PIM units within {tol}",
               f"engine free within {tol}"]
    title = ("Where the PIM goes (best design: exact, else heuristic; PIM units per memory group; the last three "
             f"columns: the values designs within {tol} of the proven optimum take, each proven by CP-SAT, "
             "`specpim-cp ranges`)")
    return title, headers, rows


def pareto_table(groups: Sequence[ScenarioResults]) -> Table | None:
    rows = []
    for s in groups:
        if s.pareto is None:
            continue
        if not s.pareto.front:
            rows.append([s.name, "-", "-", "no point found within the time limit"])
        for p in s.pareto.front or ():
            rows.append([s.name, fmt(p.metrics.latency_ns_per_token / 1e3), fmt(p.metrics.energy_pj_per_token / 1e9),
                         " ".join(f"{q.model}:{q.memory_type}:{q.pim_units}" for q in p.pim)])
    if not rows:
        return None
    return ("Latency-energy Pareto fronts (also in pareto/*.csv)",
            ["scenario", "us/token", "mJ/token", "memory:PIM units per model"], rows)


# ------------------------------------------------------------------------------------------------
# Plots
# ------------------------------------------------------------------------------------------------
def _bars(ax, groups: Sequence[ScenarioResults], value: Callable[[ScenarioResults, str], float | None],
          methods: Sequence[str], ylabel: str, title: str) -> None:
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        xs, ys = [], []
        for i, s in enumerate(groups):
            v = value(s, m)
            if v is not None:
                xs.append(i + (j - (len(methods) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=m, color=METHOD_COLORS.get(m))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="GPU-SI = 1")
    ax.set_xticks(range(len(groups)), [s.name for s in groups], rotation=45, ha="right")
    ax.set_xlabel("scenario (verifier, batch size)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncols=min(len(methods) + 1, 6), loc="upper left")
    ax.set_ylim(0, max([v for s in groups for m in methods if (v := value(s, m)) is not None] + [1.0]) * 1.25)


def _pim_panel(ax, comps: Sequence[Comparison], which: Callable[[Comparison], Ratios], what: str) -> None:
    """The exact design over fixed-recipe PIM: a bar per recipe, a dashed line at the best recipe's ratio, a
    solid line and diamond at the paper's (geometric mean over the recipes); the last group: geometric means."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ratios = [which(c) for c in comps] + [mean_ratios(comps, which)]
    partial = [c.partial for c in comps] + [False]
    n, width, half = len(PIM_BASELINES), 0.8 / len(PIM_BASELINES), 0.42
    top = max([v for rs in ratios for v in rs.vs_recipe.values() if v is not None] + [1.0]) * 1.5  # legend room
    for j, recipe in enumerate(PIM_BASELINES):
        pts = [(i + (j - (n - 1) / 2) * width, rs.vs_recipe[recipe]) for i, rs in enumerate(ratios)
               if rs.vs_recipe[recipe] is not None]
        ax.bar([x for x, _ in pts], [y for _, y in pts], width, color=METHOD_COLORS.get(recipe), alpha=0.7)
    for i, (rs, part) in enumerate(zip(ratios, partial, strict=True)):
        if rs.vs_best_pim_recipe is not None:
            ax.plot([i - half, i + half], [rs.vs_best_pim_recipe] * 2, color="black", linewidth=1.2, linestyle="--")
        if rs.vs_pim_paper is not None:
            ax.plot([i - half, i + half], [rs.vs_pim_paper] * 2, color="black", linewidth=1.6)
            ax.scatter([i], [rs.vs_pim_paper], marker="D", s=30, zorder=3, edgecolor="black",
                       facecolor="white" if part else "black")
            ax.annotate(f"{rs.vs_pim_paper:.2f}", (i, rs.vs_pim_paper), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=7)
        else:
            ax.text(i, top * 0.03, "no PIM recipe", rotation=90, ha="center", va="bottom", fontsize=7, color="#555555")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.axvspan(len(comps) - 0.5, len(comps) + 0.5, color="#eeeeee", zorder=0)
    ax.set_xticks(range(len(ratios)), [c.scenario for c in comps] + ["geometric mean"], rotation=45, ha="right")
    ax.get_xticklabels()[-1].set_fontweight("bold")
    ax.set_xlim(-0.6, len(ratios) - 0.4)
    ax.set_ylim(0, top)
    handles = [Patch(color=METHOD_COLORS.get(r), alpha=0.7, label=f"vs {r}") for r in PIM_BASELINES]
    handles += [Line2D([], [], color="black", linestyle="--", label=f"vs {BEST_RECIPE} (by the objective)"),
                Line2D([], [], color="black", marker="D", label=f"vs {PAPER}")]
    if any(partial):
        handles.append(Line2D([], [], color="black", marker="D", markerfacecolor="white",
                              label="paper value over one recipe only"))
    ax.legend(handles=handles, fontsize=8, ncols=2, loc="upper left")
    ax.set_xlabel("scenario (shaded: geometric mean over the scenarios; dotted: 1 = the recipe)")
    ax.set_ylabel(f"{what} of the exact design\nover fixed-recipe PIM (x)")
    ax.set_title(f"Exact design vs fixed-recipe PIM: both comparisons ({what})")
    ax.grid(axis="y", alpha=0.3)


def _comparison_figure(groups: Sequence[ScenarioResults], value: Callable[[ScenarioResults, str], float | None],
                       which: Callable[[Comparison], Ratios], what: str, ylabel: str, title: str,
                       path: Path) -> Path | None:
    """Top: every method over GPU-SI; bottom (when a PIM recipe has a ratio): both PIM comparisons."""
    methods = _plotted_methods(groups)
    over_si = bool(methods) and any(value(s, m) is not None for s in groups for m in methods)
    comps = compare_all(groups)
    over_pim = any(v is not None for c in comps for v in which(c).vs_recipe.values())
    if not over_si and not over_pim:
        return None  # nothing to compare (e.g. a ladder-only batch, or GPU-SI missing everywhere)
    fig = new_figure(max(7.0 + 2.0 * over_pim, 0.75 * len(groups) + 3), 4.8 * (over_si + over_pim))
    axes = list(fig.subplots(over_si + over_pim, 1, squeeze=False)[:, 0])
    if over_si:
        _bars(axes.pop(0), groups, value, methods, ylabel, title)
    if over_pim:
        _pim_panel(axes.pop(0), comps, which, what)
    return save_figure(fig, path)


def _plotted_methods(groups: Sequence[ScenarioResults]) -> list[str]:
    return [m for m in ("GPU-AR", *PIM_BASELINES, *PIM_VARIANTS, "heuristic", "exact")
            if any(s.solved(m) for s in groups)]


def plot_speedup(groups: Sequence[ScenarioResults], path: Path) -> Path | None:
    return _comparison_figure(groups, lambda s, m: ratio(s.latency("GPU-SI"), s.latency(m)), lambda c: c.speedup,
                              "speedup", "speedup over GPU-SI (latency ratio, x)",
                              "Speedup over GPU speculative inference (GPU-SI); no bar: infeasible", path)


def plot_energy(groups: Sequence[ScenarioResults], path: Path) -> Path | None:
    return _comparison_figure(groups, lambda s, m: ratio(s.energy("GPU-SI"), s.energy(m)),
                              lambda c: c.energy_efficiency, "energy efficiency",
                              "energy efficiency over GPU-SI (energy ratio, x)",
                              "Energy efficiency over GPU-SI (energy per token ratio); no bar: infeasible", path)


def plot_ladder(groups: Sequence[ScenarioResults], path: Path) -> Path | None:
    """A waterfall per scenario: step k's bar spans the speedup over GPU-SI before and after it."""
    bars: list[tuple[str, list[float | None], bool]] = []  # (label, cumulative speedups, family mean)
    for fam, members in family_ladders(groups).items():
        bars += [(s.name, ladder_cumulative(s), False) for s in members]
        cum: list[float | None] = [1.0]
        for i in range(1, len(LADDER_STEPS)):
            f = geomean([ladder_factors(s)[i] for s in members])
            cum.append(None if f is None or cum[-1] is None else cum[-1] * f)
        bars.append((f"{fam} (geo-mean)", cum, True))
    if not bars:
        return None
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator

    steps = len(LADDER_STEPS) - 1
    width = 0.84 / steps
    fig = new_figure(max(8.0, 0.9 * len(bars) + 3), 5.4)
    ax = fig.subplots()
    ax.set_yscale("log")
    top, bottom = 1.0, 1.0
    for i, (_, cum, mean) in enumerate(bars):
        for k in range(1, len(LADDER_STEPS)):
            if cum[k - 1] is None or cum[k] is None or cum[k - 1] <= 0 or cum[k] <= 0:
                continue  # a missing step (or a zero latency, which a log axis cannot show)
            x = i + (k - 1 - (steps - 1) / 2) * width
            lo, hi = sorted((cum[k - 1], cum[k]))
            ax.bar(x, hi - lo, width, bottom=lo, color=STEP_COLORS[k], edgecolor="black", linewidth=0.4,
                   hatch="//" if cum[k] < cum[k - 1] else None)
            ax.text(x, hi * 1.04, f"{cum[k] / cum[k - 1]:.2f}", ha="center", va="bottom", fontsize=6,
                    rotation=90)
            top, bottom = max(top, hi), min(bottom, lo)
        if cum[-1] is not None:
            ax.plot([i - 0.45, i + 0.45], [cum[-1], cum[-1]], color="black", linewidth=1.2)
        if mean:
            ax.axvspan(i - 0.5, i + 0.5, color="#eeeeee", zorder=0)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_ylim(bottom / 1.15, top * 1.6)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=45, ha="right")
    ax.set_xlim(-0.6, len(bars) - 0.4)
    for tick, b in zip(ax.get_xticklabels(), bars, strict=True):
        if b[2]:
            tick.set_fontweight("bold")
    handles = [Patch(facecolor=STEP_COLORS[k], edgecolor="black", label=LADDER_STEPS[k])
               for k in range(1, len(LADDER_STEPS))]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="slower than previous step"))
    handles.append(Patch(facecolor="black", label="total over GPU-SI"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", ncols=3)
    ax.set_xlabel("scenario (shaded: geometric mean per model family; no bar: step missing)")
    ax.set_ylabel("speedup over GPU-SI (x, log scale)")
    ax.set_title("Ablation ladder: each bar spans one step's speedup factor (label)")
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def plot_pim(groups: Sequence[ScenarioResults], path: Path) -> Path | None:
    rows = []
    for s in groups:
        r = s.best_design()
        if r is None:
            continue
        rows += [(f"{s.name} | {p.role.replace('drafters', 'drafter')} {p.model}", p) for p in r.pim]
    if not rows:
        return None
    longest = max(len(label) for label, _ in rows)  # the y labels take their width, the bars keep 5 inches
    fig = new_figure(5.5 + 0.055 * longest, 0.28 * len(rows) + 2.0)
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    scenario_of = [label.split(" | ")[0] for label, _ in rows]
    shade, start = False, 0
    for k in range(1, len(rows) + 1):  # shade every other scenario's rows
        if k == len(rows) or scenario_of[k] != scenario_of[start]:
            if shade:
                ax.axhspan(ys[k - 1] - 0.5, ys[start] + 0.5, color="#f0f0f0", zorder=0)
            shade, start = not shade, k
    mems = sorted({p.memory_type for _, p in rows})
    colors = memory_colors(mems)
    for y, (_, p) in zip(ys, rows, strict=True):
        ax.barh(y, p.pim_fraction, 0.7, color=colors[p.memory_type])
        label = f"{p.pim_units}/{p.units_per_group} {p.memory_type}"
        inside = p.pim_fraction >= 0.5  # a long bar holds its label, so no label runs past the axes
        ax.text(p.pim_fraction - 0.01 if inside else p.pim_fraction + 0.01, y, label, va="center",
                ha="right" if inside else "left", fontsize=7, color="white" if inside else "black")
    ax.set_yticks(ys, [label for label, _ in rows], fontsize=7)
    ax.set_xlim(0, 1.0)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("PIM units / units per group (the fraction converted to PIM)")
    ax.set_title("Where the PIM goes (best design per scenario and model)")
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=colors[m], label=m) for m in mems], title="memory type", fontsize=8,
               loc="outside lower center", ncol=min(len(mems), 4))
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path)


def memory_colors(memory_types: Sequence[str]) -> dict[str, str]:
    """A distinct colour per memory type: hbm's and gddr's own, the others from MEMORY_PALETTE in order."""
    free = iter(c for c in MEMORY_PALETTE if c not in MEMORY_COLORS.values())
    return {m: MEMORY_COLORS.get(m) or next(free, "#333333") for m in memory_types}


def plot_pareto(groups: Sequence[ScenarioResults], path: Path) -> Path | None:
    """Top row: each front with the baselines; bottom row: the front alone (it is small next to them)."""
    fronts = [s for s in groups if s.pareto is not None]
    if not fronts:
        return None
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    fig = new_figure(max(7.0, 4.8 * len(fronts)), 8.4)
    axes = fig.subplots(2, len(fronts), squeeze=False)
    for col, s in enumerate(fronts):
        ax, zoom = axes[0][col], axes[1][col]
        pts = sorted((p.metrics.latency_ns_per_token / 1e3, p.metrics.energy_pj_per_token / 1e9)
                     for p in s.pareto.front or ())
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        for t in (ax, zoom):
            t.step(xs, ys, where="post", color="#d62728", linewidth=1, alpha=0.6)
            t.scatter(xs, ys, color="#d62728", zorder=3, s=20, label="exact Pareto front")
            t.set_xlabel("latency per token (us)")
            t.set_ylabel("energy per token (mJ)")
            t.grid(alpha=0.3)
            t.xaxis.set_major_locator(MaxNLocator(5))
            t.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            t.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            if not pts:
                t.text(0.5, 0.5, "no Pareto point found\nwithin the time limit", transform=t.transAxes,
                       ha="center", va="center", fontsize=9, color="#d62728")
        if not pts:
            zoom.set_xticks([])
            zoom.set_yticks([])
        zoom.margins(0.3)
        for m in ("GPU-SI", *PIM_BASELINES, *PIM_VARIANTS, "heuristic"):
            if s.solved(m) is not None:
                ax.scatter([s.latency(m) / 1e3], [s.energy(m) / 1e9], marker=PARETO_MARKERS.get(m, "o"),
                           color=METHOD_COLORS.get(m, "grey"), label=m, zorder=2)
        ax.set_title(f"{s.family}: {s.name}, with baselines")
        ax.legend(fontsize=7, loc="upper left")
        zoom.set_title(f"{s.name}: the front alone ({len(pts)} point{'s' if len(pts) != 1 else ''})")
        if s.solved("exact") is not None:
            for t in (ax, zoom):
                t.scatter([s.latency("exact") / 1e3], [s.energy("exact") / 1e9], marker="*", s=90,
                          facecolor="none", edgecolor="black", zorder=4, label="exact latency optimum")
            zoom.legend(fontsize=7, loc="upper right")
        for i, (x, y) in enumerate(pts):
            last = i == len(pts) - 1 and len(pts) > 1  # label the rightmost point on its left
            zoom.annotate(f"{x:,.0f} us, {y:,.0f} mJ", (x, y), textcoords="offset points",
                          xytext=(-4, 4) if last else (4, 4), ha="right" if last else "left", fontsize=6)
    fig.suptitle("Latency-energy Pareto fronts (exact)")
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------------
def schedule_records(groups: Sequence[ScenarioResults]) -> list[Record]:
    """Per family (sorted), the exact record of its smallest batch: the design its schedule picture draws."""
    first: dict[str, Record] = {}
    for s in groups:
        r = s.solved("exact")
        if r is not None and r.design is not None and s.family not in first:
            first[s.family] = r
    return [r for _, r in sorted(first.items())]


def plot_schedule(r: Record, out: Path) -> tuple[Path | None, str | None]:
    """The schedule picture of a family's record (`views/schedule_picture.schedule_figure`), or why not: a
    scenario file that moved or changed since the run is skipped with a note (the picture would not be the
    recorded design's)."""
    try:
        sc = load_scenario(r.scenario_file)
        if sc.content_hash() != r.scenario_hash:
            return None, f"schedule of {r.scenario}: skipped, {r.scenario_file} changed since the run"
        path = path_in(out, safe_stem(r.family), ".png", prefix="schedule-")  # no spaces: a Markdown link
        return schedule_figure(sc, parse_design(r.design), path), None
    except ScenarioError as exc:
        return None, f"schedule of {r.scenario}: skipped ({exc})"


def draw_plots(groups: Sequence[ScenarioResults], out: Path) -> tuple[list[Path], list[str], list[str]]:
    """The plots and the schedule pictures, drawn side by side (report/drawing.py): the files made, and the
    notes on plots and on pictures that failed or were skipped."""
    names = ("speedup.png", "energy_efficiency.png", "ladder.png", "pim_allocation.png", "pareto.png")
    fns = (plot_speedup, plot_energy, plot_ladder, plot_pim, plot_pareto)
    records = schedule_records(groups)
    drawn = draw_all([*((fn, (groups, out / name)) for fn, name in zip(fns, names)),
                      *((plot_schedule, (r, out)) for r in records)])
    made, plot_notes, picture_notes = [], [], []
    for name, (p, why) in zip(names, drawn):
        if why is not None:
            plot_notes.append(f"{name}: failed ({why})")
        elif p is not None:
            made.append(p)
    for r, (got, why) in zip(records, drawn[len(names):]):
        if why is not None:  # a picture that fails is named; the records and report stand
            picture_notes.append(f"schedule of {r.scenario}: failed ({why})")
        elif got[1] is not None:
            picture_notes.append(got[1])
        else:
            made.append(got[0])
    return made, plot_notes, picture_notes


def build_report(out: str | Path, plots: bool = True) -> Report:
    """Regenerate results.csv, pareto/*.csv, summary.md and the plots of a batch directory (a grid
    directory, detected from its records, gets the grid report of `report/grid.py`)."""
    out = Path(out)
    records = read_records(out)
    if any(r.cell is not None for r in records):
        return build_grid_report(out, records, plots)
    files = write_derived_files(out, records)
    groups = group([r for r in records if r.method != "mix"])  # workload mixes: report/mix.py
    tables = ([*latency_energy_tables(groups), devices_table(groups), prefill_table(groups), speedup_table(groups)]
              if groups else [])
    notes = {SPEEDUP_TITLE: speedup_notes(groups)} if groups else {}
    if groups:
        write_atomic(out / COMPARISONS_CSV, comparisons_csv(compare_all(groups)))
        files.append(out / COMPARISONS_CSV)
    tables += [t for t in (ladder_table(groups), pim_table(groups), pareto_table(groups)) if t is not None]
    mix_tables, mix_plots, mix_lines = [], [], []
    if any(r.method == "mix" for r in records):
        mix_tables, mix_plots, mix_lines = mix_sections(records, out, plots)
    tables += mix_tables
    made, plot_notes, picture_notes = draw_plots(groups, out) if plots else ([], [], [])
    header = _header(records, groups)
    if plot_notes:
        header.append("Plots: " + "; ".join(plot_notes))
    if picture_notes:
        header.append("Schedule pictures: " + "; ".join(picture_notes))
    checks = consistency_checks(groups)
    verdict = "all passed" if not checks else "\n- ".join([f"{len(checks)} VIOLATION(S)", *checks])
    if groups:
        header.append("Consistency checks (exact <= baselines and heuristic, nested ladder steps, Pareto front "
                      f"vs exact): {verdict}")
    header += mix_lines
    name = batch_title(records, out)
    text = "\n\n".join([f"Batch report: {name}", *header,
                         *("\n".join([title, table(h, rows), *notes.get(title, [])]) for title, h, rows in tables)])
    md = ["# Batch report: " + name, ""] + [line for h in header for line in (h, "")]
    for title, h, rows in tables:
        md += [f"## {title}", "", md_table(h, rows), ""] + [line for n in notes.get(title, []) for line in (n, "")]
    if made:
        md += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in made if not p.stem.startswith("schedule-")]
        md += [""]
        schedules = [p for p in made if p.stem.startswith("schedule-")]
        if schedules:
            md += ["## Schedules (exact design of each family's smallest batch: one layer per model, the round)",
                   ""] + [f"![{p.stem}]({p.name})" for p in schedules] + [""]
    if mix_plots:
        md += ["## Workload mixes: where each operator runs per cell (PIM or host)", ""]
        md += [f"![{p.stem}]({p.name})" for p in mix_plots] + [""]
    write_atomic(out / "summary.md", "\n".join(md))
    return Report(text, "\n".join(md), [*files, out / "summary.md", *made, *mix_plots])


def batch_title(records: Sequence[Record], out: Path) -> str:
    """The set's (or grid's) name the records were run for; older records: their scenario files' folder."""
    names = sorted({r.batch for r in records if r.batch})
    if names:
        return ", ".join(names)
    folders = {Path(r.scenario_file).parent.name for r in records if r.scenario_file}
    return folders.pop() if len(folders) == 1 and "" not in folders else out.name


def _header(records: Sequence[Record], groups: Sequence[ScenarioResults]) -> list[str]:
    versions = sorted({r.solver_version for r in records if r.solver_version})
    failed = [f"{r.scenario}:{r.method} {r.part}: {r.error}" for r in records
              if r.status == "ERROR" and not r.step_failed]  # a failed front: in the line below
    mixes = sum(1 for r in records if r.method == "mix")
    what = ", ".join(([f"{len(groups)} scenarios"] if groups or not mixes else [])
                     + ([f"{mixes} workload mixes"] if mixes else []))
    lines = [f"{what}, {len(records)} records; solvers: {'; '.join(versions) or '-'}"]
    if failed:
        lines.append("\n- ".join(["ERRORS (re-run `batch` to retry):", *failed]))
    later = [f"{r.scenario}:{r.method} {r.part}: {r.step_failed} {r.step_error}" for r in records if r.step_failed]
    if later:
        title = ("Steps after the solve that failed (each solve's status, objective and design stand; "
                 "column step_failed):")
        lines.append("\n- ".join([title, *later]))
    return lines


def step_error(exc: BaseException) -> str:
    """An exception as one line (its type and message)."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()
