"""Pictures of a design's schedule, as the evaluator prices it: one decoder layer per model, and the round.

Two steps, kept apart so tests can compare what is drawn with what is priced:
- the interval data (`layer_pictures`, `round_picture`), read from the evaluator and never recomputed:
  a layer's start times and durations are `Evaluator.pass_price`'s schedule of `Evaluator.layer_nodes`;
  the round's pieces are the breakdown's cycle, verification and sync times, and its expected parts
  are `speculation.round_time_ns` applied to each drafting outcome, so they add up to the evaluator's
  round time (up to its final ceiling);
- `draw_schedule`, which draws that data with matplotlib's object API (Agg, no pyplot state).

`schedule_figure(scenario, design, path)` does both and writes the picture atomically (mode 0644).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.physics.rounds import round_stats, tree_pass_tokens
from specpim_cp.problem.design import Design, ModelDesign
from specpim_cp.problem.scenario import Scenario
from specpim_cp.views.figures import save_figure
from specpim_cp.views.tables import design_summary

#: Lanes of a layer, top to bottom: the host, the PIM units (as `share_levels` slots), the all-reduce link.
LAYER_LANES = ("host", "pim", "link")
#: Formats the figure can be written in (by the file's suffix).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


# ------------------------------------------------------------------------------------------------
# Interval data
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerBar:
    """One node of a layer's schedule: `lane` is where it runs ("host", "pim", "link"); `pim_slots` the
    PIM slots it holds (a PIM operator's share; every slot for a host operator whose data shares
    channels with the PIM units; 0 otherwise) and `slot_offset` the first of them as drawn."""

    node: str
    lane: str
    start_ns: int
    duration_ns: int
    pim_slots: int
    slot_offset: int = 0

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class LayerPicture:
    """One decoder layer of a model's pass (the pass the breakdown reports: verification, or the
    drafter's cycle pass), and how the pass is made of layers."""

    label: str  # "verifier", "drafters[0]", ...
    model_design: ModelDesign
    tokens: int
    share_levels: int
    bars: tuple[LayerBar, ...]
    makespan_ns: int
    layers: int
    embedding_ns: int
    lm_head_ns: int
    pass_ns: int
    spill_ns: int = 0  # a spilled model's overflow moved over the external bus (fixed recipes only)


@dataclass(frozen=True)
class RoundBar:
    """A piece of the round on a lane ("drafters[i]", "verifier", "sync", or "all" for the resync after a
    failed continuation); `probability`: how often a round has it (a staged drafter's later cycles, the
    resync), 1 otherwise."""

    lane: str
    label: str
    kind: str  # "draft" | "draft2" | "tree" | "verify" | "sync" | "resync"
    start_ns: int
    duration_ns: int
    probability: float = 1.0

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class RoundPicture:
    """The round: its bars, the expected drafting time E[D] (the slowest drafter), and the expected
    round as named parts in order; ceil(sum of the parts) is the evaluator's `round_time_ns` (vanilla:
    E[D], sync, V; pipeline: E[max(D, V)], E[resync], sync)."""

    pipeline: bool
    lanes: tuple[str, ...]
    lane_titles: tuple[str, ...]
    bars: tuple[RoundBar, ...]
    drafting_ns: Fraction
    verify_ns: int
    sync_ns: int
    fail_probability: float
    parts: tuple[tuple[str, Fraction], ...]
    round_time_ns: int
    tokens_per_round: float
    latency_ns_per_token: float


def _pack_slots(bars: list[LayerBar], levels: int) -> list[LayerBar]:
    """The PIM bars with slot offsets so that bars overlapping in time hold disjoint slots (the
    schedule keeps their total within `levels`; a contiguous packing is searched, first fit first)."""
    order = sorted(range(len(bars)), key=lambda i: (bars[i].start_ns, bars[i].node))
    offsets = [0] * len(bars)

    def place(k: int) -> bool:
        if k == len(order):
            return True
        i = order[k]
        b = bars[i]
        for off in range(levels - b.pim_slots + 1):
            if all(not (bars[j].start_ns < b.end_ns and b.start_ns < bars[j].end_ns
                        and offsets[j] < off + b.pim_slots and off < offsets[j] + bars[j].pim_slots)
                   for j in order[:k]):
                offsets[i] = off
                if place(k + 1):
                    return True
        return False

    if not place(0):
        offsets = [0] * len(bars)  # no contiguous packing (never seen): overlapping blocks drawn
    return [LayerBar(b.node, b.lane, b.start_ns, b.duration_ns, b.pim_slots, off) for b, off in zip(bars, offsets)]


def layer_picture(ev: Evaluator, label: str, md: ModelDesign, tokens: int) -> LayerPicture:
    """The layer of `md`'s pass over `tokens` tokens: per node, its lane, start and duration as
    `Evaluator.pass_price` schedules it."""
    price = ev.pass_price(md, tokens)
    levels = ev.costs.share_levels
    bars = []
    for name, duration, host, pim, link in ev.layer_nodes(md, tokens):
        lane = "link" if link else "host" if host else "pim"
        bars.append(LayerBar(name, lane, price.starts_ns[name], duration, pim))
    pim_bars = [b for b in bars if b.pim_slots and b.duration_ns]
    packed = {b.node: b for b in _pack_slots(pim_bars, levels)}
    bars = [packed.get(b.node, b) for b in bars]
    return LayerPicture(label, md, tokens, levels, tuple(bars), price.layer_makespan_ns,
                        ev.catalog.models[md.model].layers, price.embedding_ns, price.op_time_ns["lm_head"],
                        price.time_ns, price.spill_ns)


def layer_pictures(ev: Evaluator, evaluation: Evaluation) -> list[LayerPicture]:
    """One layer per model, verifier first, of the pass its breakdown reports."""
    return [layer_picture(ev, label, md, mb.pass_tokens)
            for (label, md), (_, mb) in zip(evaluation.design.models(), evaluation.breakdown.models(), strict=True)]


def _cycle_bars(ev: Evaluator, i: int, md: ModelDesign, evaluation: Evaluation,
                cycle_probs: Sequence[float]) -> list[RoundBar]:
    """Drafter i's cycles from time 0: a chain's steps; a staged drafter's draft2 steps and pass per
    cycle (`cycle_probs`: P(the round needs cycle k)); a token tree's passes, one per depth."""
    d = evaluation.breakdown.drafters[i]
    lane = f"drafters[{i}]"
    batch = ev.scenario.batch_size
    bars = []
    t = 0
    if md.tree is not None:
        for depth, tokens in enumerate(tree_pass_tokens(batch, md.choice), 1):
            ns = ev.pass_price(md, tokens).time_ns
            bars.append(RoundBar(lane, f"depth {depth}: {_tokens(tokens)}", "tree", t, ns))
            t += ns
        return bars
    for k, p in enumerate(cycle_probs, 1):
        if d.staging is not None:
            st = d.staging
            ns = st.draft_length * st.draft2_step_ns
            bars.append(RoundBar(lane, f"{st.draft_length}x {st.draft2}", "draft2", t, ns, p))
            t += ns
            bars.append(RoundBar(lane, f"pass {k}", "draft", t, d.pass_time_ns, p))
            t += d.pass_time_ns
        else:
            bars.append(RoundBar(lane, str(k), "draft", t, d.cycle_ns, p))
            t += d.cycle_ns
    return bars


def round_picture(ev: Evaluator, evaluation: Evaluation) -> RoundPicture:
    """The round of an evaluated design (`ev` priced it)."""
    design = evaluation.design
    b = evaluation.breakdown
    rnd = b.round
    stats = round_stats(design.choice, ev.acceptance)  # the evaluator's call: outcomes and q
    cycles = [d.cycle_ns for d in b.drafters]
    v, sync, q = rnd.verify_ns, rnd.sync_ns, stats.q

    def one(rs: tuple[int, ...], verify: int, pipeline: bool, fail_q: int) -> int:
        """`round_time_ns` of one drafting outcome, without sync."""
        return spec.round_time_ns(((rs, spec.OUTCOME_SCALE),), cycles, verify, 0, pipeline, fail_q)

    def expected(fn: Callable[[tuple[int, ...]], int]) -> Fraction:
        return Fraction(sum(p * fn(rs) for rs, p in stats.outcomes), spec.OUTCOME_SCALE)

    drafting = expected(lambda rs: one(rs, 0, False, 0))  # D = the slowest drafter
    if design.pipeline:
        overlap = expected(lambda rs: one(rs, v, True, 0))  # max(D, V)
        resync_all = expected(lambda rs: one(rs, v, True, spec.Q_SCALE) - one(rs, v, True, 0))  # min(D, V)
        resync = expected(lambda rs: one(rs, v, True, q) - one(rs, v, True, 0))
        parts = (("drafting || verification", overlap), ("resync x P(fail)", resync), ("sync", Fraction(sync)))
    else:
        parts = (("drafting", drafting), ("sync", Fraction(sync)), ("verification", Fraction(v)))
    parts = tuple((name, x) for name, x in parts if x or name == "verification")

    lanes, titles, bars = [], [], []
    for i, (md, d) in enumerate(zip(design.drafters, b.drafters, strict=True)):
        dist = stats.dists[i]
        probs = [sum(p for r, p in dist if r >= k) / spec.OUTCOME_SCALE for k in range(1, max(r for r, _ in dist) + 1)]
        lanes.append(f"drafters[{i}]")
        what = f"tree {'-'.join(map(str, md.tree))}" if md.tree is not None else f"gamma={md.draft_length}"
        staged = "" if md.staging is None else f"\nstaged: {md.staging.draft_length} x {md.staging.draft2}"
        titles.append(f"drafters[{i}] {md.model}\n{what}, alpha={d.alpha:g}{staged}")
        bars += _cycle_bars(ev, i, md, evaluation, probs)
    lanes.append("verifier")
    titles.append(f"verifier {design.verifier.model}\n{_tokens(b.verifier.pass_tokens)}")
    if design.drafters:
        lanes.append("sync")
        titles.append("sync")
    if design.pipeline:
        bars.append(RoundBar("verifier", "verify", "verify", 0, v))
        end, width = math.ceil(overlap), math.ceil(resync_all)  # the failed round: D + V = max + min
        bars.append(RoundBar("all", f"failed continuation (p={rnd.fail_probability:.3f}): +min(D, V)", "resync",
                             end, width, rnd.fail_probability))
        bars.append(RoundBar("sync", "sync", "sync", end + width, sync))
    else:
        d_end = math.ceil(drafting)
        if sync:
            bars.append(RoundBar("sync", "sync", "sync", d_end, sync))
        bars.append(RoundBar("verifier", "verify", "verify", d_end + sync, v))
    m = evaluation.metrics
    return RoundPicture(design.pipeline, tuple(lanes), tuple(titles), tuple(bars), drafting, v, sync,
                        rnd.fail_probability, parts, m.round_time_ns, m.tokens_per_round, m.latency_ns_per_token)


# ------------------------------------------------------------------------------------------------
# Drawing
# ------------------------------------------------------------------------------------------------
OP_COLORS = {"qkv": "#8dd3c7", "score": "#fdb462", "context": "#fb8072", "o_proj": "#80b1d3",
             "ffn_up": "#b3de69", "ffn_down": "#bebada", "allreduce": "#d9d9d9", "lm_head": "#fccde5"}
KIND_COLORS = {"draft": "#9ecae1", "draft2": "#e5f5e0", "tree": "#a1d99b", "verify": "#fdae6b",
               "sync": "#bdbdbd", "resync": "#de2d26"}
PART_COLORS = {"drafting": KIND_COLORS["draft"], "drafting || verification": "#dadaeb",
               "resync x P(fail)": "#fc9272", "sync": KIND_COLORS["sync"], "verification": KIND_COLORS["verify"]}
FIG_WIDTH_IN = 15.0
LEFT_IN, RIGHT_IN = 2.0, 0.3  # margins around the time axes (lane names on the left)
FONT = 7.5  # points, bar labels


def _tokens(n: int) -> str:
    return f"{n} token" + ("" if n == 1 else "s")


def _op_color(node: str) -> str:
    return OP_COLORS["allreduce" if node.startswith("allreduce") else node]


def _us(ns: float) -> str:
    us = ns / 1e3
    return f"{us:,.1f}" if us >= 10 else f"{us:,.2f}"


def _fits(text: str, width_pt: float, height_pt: float = math.inf) -> bool:
    """Whether `text` fits a box of these points (DejaVu Sans averages ~0.6 em per character)."""
    lines = text.split("\n")
    return max(len(line) for line in lines) * 0.6 * FONT + 4 <= width_pt and len(lines) * 1.25 * FONT <= height_pt


def _scale(ax) -> tuple[float, float]:
    """Points per x and per y data unit (the layout is fixed in inches; call once the limits are set)."""
    pos, fig = ax.get_position(), ax.figure
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    return pos.width * fig.get_figwidth() * 72 / (x1 - x0), pos.height * fig.get_figheight() * 72 / (y1 - y0)


def _label(ax, x0: float, width: float, y: float, height: float, options: Sequence[str]) -> None:
    """The first of `options` that fits the bar, centred; none if none fits (the legend names colours)."""
    sx, sy = _scale(ax)
    for text in options:
        if _fits(text, width * sx, height * sy):
            ax.text(x0 + width / 2, y, text, ha="center", va="center", fontsize=FONT)
            return


def _time_axis(ax, span_ns: float) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.set_xlim(0, span_ns / 1e3)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if span_ns >= 20_000 else f"{x:,.1f}"))
    ax.set_xlabel("time (us)", fontsize=8, labelpad=1)
    ax.tick_params(labelsize=7.5)
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6)
    ax.set_axisbelow(True)


def _draw_layer(ax, pic: LayerPicture) -> None:
    """Lanes, top to bottom: host (y 4.6..5.4), PIM (0.9..4.1, one band per slot), link (0..0.6)."""
    span = max(pic.makespan_ns, 1) * 1.005
    _time_axis(ax, span)
    ax.set_ylim(-0.15, 5.55)
    pim_lo, pim_hi = 0.9, 4.1
    slot_h = (pim_hi - pim_lo) / pic.share_levels
    ax.axhspan(pim_lo, pim_hi, color="#f4f4f4", zorder=0)
    for s in range(1, pic.share_levels if pic.model_design.pim_units else 0):
        ax.axhline(pim_lo + s * slot_h, color="#e2e2e2", linewidth=0.5, zorder=0)
    md = pic.model_design
    for b in pic.bars:
        if not b.duration_ns:
            continue
        x0, w = b.start_ns / 1e3, b.duration_ns / 1e3
        color = _op_color(b.node)
        short = b.node.replace("allreduce_", "AR ").replace("allreduce", "AR").replace("ffn_", "f")
        if b.lane == "pim":
            y0 = pim_lo + b.slot_offset * slot_h
            h = b.pim_slots * slot_h
            ax.broken_barh([(x0, w)], (y0, h), facecolors=color, edgecolors="#333333", linewidth=0.6)
            share = f"{b.pim_slots}/{pic.share_levels}"
            _label(ax, x0, w, y0 + h / 2, h, [f"{b.node}\n{share} PIM", f"{b.node} {share}", f"{b.node}\n{share}",
                                             b.node, short])
            continue
        y0, h = (4.6, 0.8) if b.lane == "host" else (0.0, 0.6)
        ax.broken_barh([(x0, w)], (y0, h), facecolors=color, edgecolors="#333333", linewidth=0.6)
        layout = md.placement[b.node].layout if b.node in md.placement else ""
        _label(ax, x0, w, y0 + h / 2, h, [f"{b.node} ({layout})" if layout else b.node, b.node, short])
        if b.pim_slots:  # a host read over channels the PIM units sit on: no PIM operator meanwhile
            ax.broken_barh([(x0, w)], (pim_lo, pim_hi - pim_lo), facecolors="none", edgecolors=color,
                           hatch="////", linewidth=0.8)
    pim = (f"PIM units, k={md.pim_units}\n({pic.share_levels} slot{'s' if pic.share_levels > 1 else ''})"
           if md.pim_units else "no PIM units\n(k=0)")
    link = "all-reduce" if md.devices > 1 else "all-reduce\n(none: 1 device)"
    ax.set_yticks([5.0, (pim_lo + pim_hi) / 2, 0.3], ["host", pim, link], fontsize=8)
    lm = md.placement["lm_head"]
    lm_where = "host" if lm.engine == "host" else f"PIM {lm.share}/{pic.share_levels}"
    ax.set_title(f"{pic.label}: {md.model} on {md.devices} x {md.memory_type} k={md.pim_units}; one decoder layer "
                 f"of the pass over {_tokens(pic.tokens)}: {_us(pic.makespan_ns)} us", loc="left", fontsize=9)
    spill = f" + spill {_us(pic.spill_ns)}" if pic.spill_ns else ""
    ax.set_title(f"pass {_us(pic.pass_ns)} us = embedding {_us(pic.embedding_ns)} + {pic.layers} layers x "
                 f"{_us(pic.makespan_ns)} + LM head {_us(pic.lm_head_ns)} ({lm_where}){spill}", loc="right",
                 fontsize=8, color="#444444")


def _draw_round(ax, pic: RoundPicture) -> None:
    """Lanes top to bottom: drafters, verifier, sync, then the expected round as its parts."""
    lanes = [*pic.lanes, "expected"]
    titles = [*pic.lane_titles, "expected round\n(evaluator)"]
    ypos = {lane: len(lanes) - 1 - k for k, lane in enumerate(lanes)}  # lane centres, first lane on top
    h = 0.7
    span = max([b.end_ns for b in pic.bars] + [pic.round_time_ns]) * 1.15  # room for E[round] on the right
    _time_axis(ax, span)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    sx = _scale(ax)[0]
    for b in pic.bars:
        if not b.duration_ns:
            continue
        x0, w = b.start_ns / 1e3, b.duration_ns / 1e3
        color = KIND_COLORS[b.kind]
        alpha = 1.0 if b.probability >= 1 else 0.3 + 0.7 * b.probability
        if b.lane == "all":  # the resync after a failed continuation: every lane above the expected round
            y0, height = ypos[lanes[-2]] - h / 2, ypos[lanes[0]] - ypos[lanes[-2]] + h
            ax.broken_barh([(x0, w)], (y0, height), facecolors="none", edgecolors=color, hatch="\\\\\\",
                           linewidth=1.0)
            ax.text(x0 + w / 2, y0 + height - 0.08, b.label, ha="center", va="top", fontsize=FONT,
                    color="#b2182b", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5}, zorder=5)
            continue
        y = ypos[b.lane]
        ax.broken_barh([(x0, w)], (y - h / 2, h), facecolors=color, edgecolors="#333333", linewidth=0.6,
                       alpha=alpha)
        options = [b.label] if b.kind in ("draft", "draft2") else [b.label, b.label.split(" (")[0]]
        if b.probability < 1:
            options = [f"{b.label}\np={b.probability:.2f}", *options]
        if b.kind == "verify":
            options = [f"{b.label}: {_us(b.duration_ns)} us", *options]
        if b.kind == "sync" and not _fits(b.label, w * sx):  # too short to hold it: beside it
            text = f" {_us(b.duration_ns)} us "
            right = _fits(text, (span - b.end_ns) / 1e3 * sx)
            ax.text(x0 + w if right else x0, y, text, ha="left" if right else "right", va="center", fontsize=FONT)
            continue
        _label(ax, x0, w, y, h, options)
    x = 0.0
    y = ypos["expected"]
    for name, ns in pic.parts:
        w = float(ns) / 1e3
        ax.broken_barh([(x, w)], (y - h / 2, h), facecolors=PART_COLORS[name], edgecolors="#333333",
                       linewidth=0.6)
        _label(ax, x, w, y, h, [f"{name} {_us(float(ns))}", name, _us(float(ns))])
        x += w
    t = pic.round_time_ns / 1e3
    ax.axvline(t, color="#b2182b", linestyle="--", linewidth=1.0)
    ax.text(t, y, f" E[round] = {_us(pic.round_time_ns)} us", color="#b2182b", fontsize=8, ha="left", va="center")
    if pic.drafting_ns:
        ax.axvline(float(pic.drafting_ns) / 1e3, color="#2166ac", linestyle=":", linewidth=1.0)
    ax.set_yticks([ypos[lane] for lane in lanes], titles, fontsize=8)
    if len(pic.lanes) == 1:  # the verifier alone
        title = f"the round (autoregressive: one verifier pass per token); verification {_us(pic.verify_ns)} us"
    else:
        mode = ("pipelined: the next drafts are drafted optimistically during verification" if pic.pipeline else
                "vanilla: drafting, sync, verification")
        title = (f"the round ({mode}); E[drafting] (dotted) {_us(float(pic.drafting_ns))} us, verification "
                 f"{_us(pic.verify_ns)} us, sync {_us(pic.sync_ns)} us"
                 + (f", P(continuation fails) {pic.fail_probability:.3f}" if pic.pipeline else ""))
    ax.set_title(title, loc="left", fontsize=9)
    if any(b.probability < 1 and b.kind != "resync" for b in pic.bars):
        ax.annotate("staged cycles shaded by p = P(the round needs them); what follows drafting starts at E[drafting]",
                    (1, 0), xycoords="axes fraction", xytext=(0, -22), textcoords="offset points", ha="right",
                    va="top", fontsize=7.5, color="#444444")


def _legend(fig, y_in: float, height_in: float, total_in: float, rnd: RoundPicture) -> None:
    """Two rows: the round's pieces (those drawn), then the layers' operators."""
    from matplotlib.patches import Patch

    def box(color: str, label: str) -> Patch:
        return Patch(facecolor=color, edgecolor="#333333", label=label)

    def title(label: str) -> Patch:
        return Patch(visible=False, label=label)

    kinds = {b.kind for b in rnd.bars}
    names = {"draft": "drafter step / pass", "draft2": "draft2 steps", "tree": "token-tree pass (one per depth)",
             "verify": "verification", "sync": "sync"}
    round_row = [title("round:")] + [box(KIND_COLORS[k], label) for k, label in names.items() if k in kinds]
    if "resync" in kinds:
        round_row.append(Patch(facecolor="white", edgecolor=KIND_COLORS["resync"], hatch="\\\\\\",
                               label="resync after a failed continuation"))
    round_row += [box(PART_COLORS[name], f"expected: {name}") for name, _ in rnd.parts
                  if name in ("drafting || verification", "resync x P(fail)")]
    layer_row = [title("layer:")] + [box(c, op) for op, c in OP_COLORS.items() if op != "lm_head"]
    layer_row.append(Patch(facecolor="white", edgecolor="#888888", hatch="////",
                           label="host read on PIM channels (no PIM operator meanwhile)"))
    for k, row in enumerate((round_row, layer_row)):
        y = 1 - (y_in + height_in * (1 + 2 * k) / 4) / total_in
        fig.legend(handles=row, loc="center", ncol=len(row), fontsize=7.5, frameon=False, bbox_to_anchor=(0.5, y),
                   handlelength=1.6, columnspacing=1.2, borderpad=0.1)


def draw_schedule(scenario: Scenario, evaluation: Evaluation, layers: Sequence[LayerPicture],
                  rnd: RoundPicture):
    """The figure (matplotlib.figure.Figure on the Agg canvas): title, legend, the round, one layer per model."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    summary = textwrap.wrap(design_summary(scenario, evaluation.design), 190)
    m = evaluation.metrics
    head = (f"{scenario.name}: {_us(m.latency_ns_per_token)} us per token "
            f"(round {_us(m.round_time_ns)} us, {m.tokens_per_round:.3f} tokens per round)")
    title_lines = [head, *summary]
    title_in = 0.25 + 0.2 * len(title_lines)
    legend_in = 0.5
    round_in = 0.55 + 0.5 * (len(rnd.lanes) + 1) + 0.55
    layer_in = 2.3
    gap_in = 0.25
    total = title_in + legend_in + round_in + gap_in + len(layers) * (layer_in + gap_in)
    fig = Figure(figsize=(FIG_WIDTH_IN, total), dpi=110)
    FigureCanvasAgg(fig)
    fig.text(0.5, 1 - 0.12 / total, title_lines[0], ha="center", va="top", fontsize=11, weight="bold")
    fig.text(0.5, 1 - 0.4 / total, "\n".join(title_lines[1:]), ha="center", va="top", fontsize=8.5,
             family="monospace")
    _legend(fig, title_in, legend_in, total, rnd)

    def axes(top_in: float, height_in: float):
        pad_top, pad_bottom = 0.3, 0.45  # panel title above, tick labels and axis label below
        return fig.add_axes((LEFT_IN / FIG_WIDTH_IN, 1 - (top_in + height_in - pad_bottom) / total,
                             1 - (LEFT_IN + RIGHT_IN) / FIG_WIDTH_IN, (height_in - pad_top - pad_bottom) / total))

    top = title_in + legend_in
    _draw_round(axes(top, round_in), rnd)
    top += round_in + gap_in
    for pic in layers:
        _draw_layer(axes(top, layer_in), pic)
        top += layer_in + gap_in
    return fig


# ------------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchedulePicture:
    """Everything a schedule figure shows: the evaluation, one layer per model and the round."""

    evaluation: Evaluation
    layers: tuple[LayerPicture, ...]
    round: RoundPicture


def schedule_picture(scenario: Scenario, design: Design, catalog: Catalog | None = None,
                     evaluator: Evaluator | None = None) -> SchedulePicture:
    """The interval data of a design (ScenarioError if the design is not in the scenario's space or
    does not fit its devices)."""
    ev = evaluator or Evaluator(scenario, catalog)
    evaluation = ev.evaluate(design)
    return SchedulePicture(evaluation, tuple(layer_pictures(ev, evaluation)), round_picture(ev, evaluation))


def check_figure_path(path: str | Path) -> Path:
    """A figure path with a suffix matplotlib writes (ScenarioError naming the suffix otherwise)."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise ScenarioError(f"{path}: a figure is written as {', '.join(FIGURE_SUFFIXES)}, not "
                         f"'{path.suffix or 'no suffix'}'")
    return path


def schedule_figure(scenario: Scenario, design: Design, path: str | Path, catalog: Catalog | None = None,
                    evaluator: Evaluator | None = None) -> Path:
    """Draw the design's schedule and write it to `path` atomically (mode 0644); returns the path."""
    path = check_figure_path(path)
    pic = schedule_picture(scenario, design, catalog, evaluator)
    fig = draw_schedule(scenario, pic.evaluation, pic.layers, pic.round)
    return save_figure(fig, path)


__all__ = ["LayerBar", "LayerPicture", "RoundBar", "RoundPicture", "SchedulePicture", "check_figure_path",
           "draw_schedule", "layer_picture", "layer_pictures", "round_picture", "schedule_figure",
           "schedule_picture"]
