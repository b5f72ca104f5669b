"""Plain-text formatting of designs, metrics and baselines for the terminal (no printing here)."""

from __future__ import annotations

from collections.abc import Sequence

from specpim_cp.physics.evaluate import GIB_IN_KIB
from specpim_cp.problem.design import Design, ModelDesign
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.trees import render_tree

#: Human units of the objectives: (unit, factor from the evaluator's unit); metrics print the same units.
HUMAN_UNITS = {"latency": ("us/token", 1e-3), "energy": ("mJ/token", 1e-6), "edp": ("us*mJ/token^2", 1e-9),
               "request": ("ms/request", 1e-6)}


def human_objective(name: str, value) -> str:
    """An objective value (evaluator units: ns/token, nJ/token, ns*nJ/token^2) in human units, with the unit."""
    unit, factor = HUMAN_UNITS[name]
    return f"{float(value) * factor:,.6g} {unit}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join([line, sep, *body])


def _numeric(s: str) -> bool:
    return s.replace(",", "").replace(".", "").replace("-", "").replace("e", "").replace("%", "").isdigit()


def placement_summary(md: ModelDesign, share_levels: int) -> str:
    pim = [f"{op}" + (f"@{md.placement[op].share}/{share_levels}" if md.placement[op].share != share_levels else "")
           for op in PLACEABLE_OPS if md.placement[op].engine == "pim"]
    return "PIM: " + (", ".join(pim) if pim else "none")


def design_lines(sc: Scenario, design: Design) -> list[str]:
    out = []
    for label, md in design.models():
        extra = ""
        if md.tree is not None:
            extra = f", token tree {tree_text(md.tree)} ({sum(md.tree)} nodes, depth {len(md.tree)})"
        elif md.draft_length is not None:
            extra = f", draft length {md.draft_length}"
            if md.staging is not None:
                extra += f", staged by {md.staging.draft2} (draft length {md.staging.draft_length})"
        if md.spill:
            extra += ", spills what its PIM units cannot hold (moved every pass)"
        what_if = md.pim_units and scenario_catalog(sc).memory(md.memory_type).what_if
        arch = f"{md.memory_type} k={md.pim_units}" + (" (what-if PIM units)" if what_if else "")
        where = "on the verifier's devices " if md.colocated else f"{md.devices} x "
        out.append(f"  {label:12s} {md.model:12s} {where}{arch}{extra}; "
                   f"{placement_summary(md, sc.space.share_levels)}")
    if design.drafters:
        out.append(f"  pipeline: {'on' if design.pipeline else 'off'}")
    elif sc.drafters:  # [NOSPEC] a design of a scenario with drafters that uses none
        out.append("  no speculation: the verifier decodes alone, one token per pass (no drafter used)")
    return out


def format_metrics(m) -> str:
    return (f"latency {m.latency_ns_per_token / 1e3:,.1f} us/token | throughput {m.throughput_tokens_per_s:,.1f} "
            f"tokens/s | energy {m.energy_pj_per_token / 1e9:,.3f} mJ/token | round {m.round_time_ns / 1e3:,.1f} us, "
            f"{m.tokens_per_round:.3f} tokens/round")


def prefill_line(sc: Scenario, m) -> str:
    """The prompt's prefill beside the per-token figures (formulations/prefill.md): time to first token,
    its energy per request, and the request's end-to-end latency (TTFT + generated tokens x latency)."""
    return (f"prefill: TTFT {m.prefill_ns / 1e6:,.3f} ms | energy {m.prefill_energy_nj / m.batch_size / 1e6:,.3f} "
            f"mJ/request | request {float(m.request_fraction()) / 1e6:,.3f} ms (TTFT + {sc.generated_tokens} tokens "
            "x latency)")


def host_line(sc: Scenario, ev) -> str:
    """The host, how its kernels were priced (fitted to measurements or a derated roofline), and the user
    catalog files the price used."""
    files = f"; catalog files: {', '.join(ev.catalog_files)}" if ev.catalog_files else ""
    return f"host {sc.host}: kernels {ev.host_kernel_model}{files}"


def format_evaluation(sc: Scenario, ev) -> str:
    lines = [f"scenario {sc.name}: batch {sc.batch_size}, context {sc.prompt_tokens}+{sc.generated_tokens}",
             host_line(sc, ev), "design:", *design_lines(sc, ev.design), "metrics: " + format_metrics(ev.metrics),
             prefill_line(sc, ev.metrics), *acceptance_notes(sc), "breakdown:"]
    b = ev.breakdown
    rows = []
    for label, mb in b.models():
        cap = mb.capacity
        rows.append([label, mb.model, mb.pass_tokens, mb.pass_time_ns / 1e3, mb.layer_makespan_ns / 1e3,
                     mb.pass_energy_nj / 1e6, f"{cap.pim_need_kib / GIB_IN_KIB:.2f}/{cap.pim_capacity_kib / GIB_IN_KIB:.1f}",
                     f"{cap.normal_need_kib / GIB_IN_KIB:.2f}/{cap.normal_capacity_kib / GIB_IN_KIB:.1f}"])
    lines.append(table(["model", "name", "tokens", "pass us", "layer us", "pass mJ", "PIM GiB used/cap",
                        "normal GiB used/cap"], rows))
    spilled = spill_text(b)
    if spilled:
        lines.append("spill (PIM overflow kept in normal units, moved into the PIM units over the external bus "
                     f"every pass, in pass us): {spilled}")
    op_rows = []
    for label, mb in b.models():
        for op, o in mb.operators.items():
            where = f" {o.share}/{sc.space.share_levels}" if o.share else f" ({o.layout})"
            op_rows.append([label, op, o.engine + where, o.time_ns / 1e3, o.energy_nj / 1e3])
    lines.append(table(["model", "operator", "engine", "time us", "energy uJ"], op_rows))
    r = b.round
    lines.append(f"round: verify {r.verify_ns / 1e3:,.1f} us, sync {r.sync_ns / 1e3:,.1f} us, "
                 f"P(pipelined round does not continue) {r.fail_probability:.4f}")
    lines.append("energy per round by component (mJ): " + ", ".join(
        f"{k} {v / 1e6:,.3f}" for k, v in r.energy_nj_by_component.items()))
    for i, d in enumerate(b.drafters):
        if d.tree is not None:
            lines.append(f"token tree of drafters[{i}] ({d.model}), top-ranked candidates per node:")
            lines += ["  " + line for line in render_tree(d.tree_vector, d.tree).splitlines()]
    return "\n".join(lines)


def spill_text(breakdown, short: bool = False) -> str:
    """The spilled models of an evaluated design: overflow, its transfer time per pass and share of the
    pass ("" when nothing spills)."""
    form = ("{label} {gib:,.2f} GiB {us:,.0f} us/pass ({pct:.0f}%)" if short else
            "{label} {gib:,.2f} GiB, {us:,.1f} us per pass ({pct:.0f}% of the pass)")
    return "; ".join(form.format(label=label, gib=mb.capacity.spill_kib / GIB_IN_KIB, us=mb.spill_ns / 1e3,
                                 pct=100 * mb.spill_share)
                     for label, mb in breakdown.models() if mb.capacity.spill_kib)


def tree_text(widths) -> str:
    """A width profile as text: nodes per depth joined by dashes (2-3-3)."""
    return "-".join(str(w) for w in widths)


def draft_text(md: ModelDesign) -> str:
    """A drafter's draft in a few characters: its chain length, or `tree 2-3-3`."""
    return str(md.draft_length) if md.tree is None else f"tree {tree_text(md.tree)}"


def format_baselines(sc: Scenario, results) -> str:
    rows = []
    for r in results:
        if r.evaluation is None:
            rows.append([r.name, "-", "infeasible", "", "", "", "", "", r.error])
            continue
        m = r.evaluation.metrics
        gam = ",".join(str(d.draft_length) if d.tree is None else f"tree {tree_text(d.tree)}"
                       for d in r.evaluation.design.drafters) or "-"
        rows.append([r.name, devices_text(r.evaluation.design), m.latency_ns_per_token / 1e3,
                     m.throughput_tokens_per_s, m.energy_pj_per_token / 1e9, m.prefill_ns / 1e6, gam,
                     spill_text(r.evaluation.breakdown, short=True) or "-", r.description])
    priced = next((r.evaluation for r in results if r.evaluation is not None), None)
    host = "" if priced is None else host_line(sc, priced) + "\n"
    return f"scenario {sc.name} (objective {sc.objective})\n{host}" + table(
        ["baseline", "devices", "us/token", "tokens/s", "mJ/token", "TTFT ms", "draft len", "spill (moved every pass)",
         "recipe"], rows)


def devices_text(design: Design) -> str:
    """The devices a design uses: their total, and per model when there are several (`4 (2+1+1)`); a head on
    the verifier's devices adds none."""
    counts = [md.arch.own_devices for _, md in design.models()]
    return str(counts[0]) if len(counts) == 1 else f"{sum(counts)} ({'+'.join(map(str, counts))})"


def _placement_text(md: ModelDesign, share_levels: int) -> str:
    """The model's operators in a few words: those on PIM (`op@s/L` when on s of the L share levels, not all)
    and the host tensors spread over every unit (`spread op+op`, `spread all`), so two designs that differ anywhere in
    their placement read differently."""
    pim = [op + ("" if md.placement[op].share in (0, share_levels) else f"@{md.placement[op].share}/{share_levels}")
           for op in PLACEABLE_OPS if md.placement[op].engine == "pim"]
    host = [op for op in PLACEABLE_OPS if md.placement[op].engine == "host"]
    spread = [op for op in host if md.placement[op].layout == "spread"]
    where = "all" if spread == host else "+".join(spread)
    return ("+".join(pim) or "host") + (f"; spread {where}" if spread else "")


def design_summary(sc: Scenario, design: Design) -> str:
    """One line: per model memory type, PIM units, devices, placement (`_placement_text`), a fixed recipe's
    spill, draft length or tree; pipeline. Designs that differ read differently."""
    parts = []
    for label, md in design.models():
        s = f"{md.model}:{md.devices}x{md.memory_type}-k{md.pim_units}[{_placement_text(md, sc.space.share_levels)}]"
        s += " spill" if md.spill else ""
        if md.tree is not None:
            s += f" tree={tree_text(md.tree)}"
        elif md.draft_length is not None:
            s += f" g={md.draft_length}" + (f"/{md.staging.draft2}:{md.staging.draft_length}" if md.staging else "")
        parts.append(s)
    tail = (f" | pipeline={'on' if design.pipeline else 'off'}" if design.drafters else
            " | no speculation" if sc.drafters else "")
    return " | ".join(parts) + tail


def format_solve(sc: Scenario, res) -> str:
    r = res.report
    gap = "n/a" if r.gap is None else f"{100 * r.gap:.3g}%"
    bound = "n/a" if r.bound is None else human_objective(r.objective_name, r.bound)
    head = (f"scenario {sc.name}: {r.method} {r.status}, objective {r.objective_name} = "
            f"{human_objective(r.objective_name, r.objective)}, bound {bound}, gap {gap}, {r.wall_s:.2f} s, "
            f"{r.iterations} iterations, seed {r.seed}, {r.solver_version}")
    lines = [head, host_line(sc, res.evaluation), "design:", *design_lines(sc, res.design),
             "metrics: " + format_metrics(res.evaluation.metrics), prefill_line(sc, res.evaluation.metrics),
             *acceptance_notes(sc)]
    note = speculation_line(r.extra.get("no_speculation"))
    return "\n".join(lines + acceptance_lines(r.extra.get("acceptance")) + ([note] if note else []))


def acceptance_lines(origins: list[dict] | None) -> list[str]:
    """One line per drafter: the acceptance rate it gets and where it came from (the scenario, or the
    catalog's acceptance.toml entry with its source: a pair, a family fallback or the default)."""
    words = {"scenario": "set by the scenario", "tree vector": "set by the scenario",
             "pair": "the catalog's entry for this pair", "family": "the catalog's family fallback",
             "default": "the catalog's default (no pair or family entry)"}
    return [f"acceptance: drafters[{i}] ({o['drafter']}) {o['acceptance']:g}, {words[o['origin']]} "
            f"({o['entry']}; source: {o['source']})" for i, o in enumerate(origins or [])]


def speculation_line(note: dict | None) -> str | None:
    """One line on the optimum against not speculating ([NOSPEC]): which wins and by how much."""
    if not note:
        return None
    name = note["objective"]
    what = {"latency": "faster", "energy": "more energy-efficient", "edp": "better in EDP",
            "request": "faster end to end"}.get(name, "better")
    if note["other"] is None:
        side = "speculating" if note["optimum_speculates"] else "the verifier alone"
        return f"no speculation: {side} is the only side of the space with a design ({note['error']})"
    other = human_objective(name, note["other"])
    status = "" if note["other_status"] == "OPTIMAL" else f", {note['other_status']}"
    if note["optimum_speculates"]:
        return (f"speculation: {note['margin_pct']:.3g}% {what} than the verifier alone ({other}{status}; no "
                "speculation is in the space and loses here)")
    return (f"no speculation: the verifier alone beats every drafter here by {note['margin_pct']:.3g}% "
            f"(the best speculating design: {other}{status})")


def acceptance_notes(sc: Scenario) -> list[str]:
    """One line per measured acceptance vector the model re-ranked or cut ([TREE-5])."""
    from specpim_cp.physics.rounds import Acceptance
    from specpim_cp.problem.scenario import scenario_catalog

    return [f"note: {n}" for n in Acceptance.of(sc, scenario_catalog(sc)).notes]


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(c: str) -> str:
        return str(c).replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


_LEVEL_WORDS = {"latency": "latency", "energy": "energy", "edp": "EDP", "regret": "regret", "pim_units": "PIM units",
                "devices": "devices", "order": "the fixed order"}


def tie_break_line(extra: dict) -> str | None:
    """One line on the canonical optimum (formulations/objectives.md OBJ-3, mix.md MIX-13): the levels
    other designs tie on and the level that leaves one design, or why the design is not canonical; None
    without one."""
    levels = extra.get("tie_break")
    if levels is None:
        return None
    if not extra.get("canonical"):
        return f"tie-break: {extra.get('tie_break_note', 'not proven')}"
    tied = [_LEVEL_WORDS[lv["level"]] for lv in levels if lv["ties"]]
    unique = next((_LEVEL_WORDS[lv["level"]] for lv in levels if lv["ties"] is False), None)
    unknown = any(lv["ties"] is None for lv in levels)
    if not tied:
        line = f"tie-break: no other design has this {_LEVEL_WORDS[levels[0]['level']]} (unique optimum)"
    else:
        line = f"tie-break: other designs tie on {', '.join(tied)}; canonical by {unique}"
    return line + ("; some ties not checked (time limit)" if unknown else "")
