"""Decision ranges as text: one row per decision, the values designs within the tolerance reach."""

from __future__ import annotations

from specpim_cp.solvers.exact.ranges import DecisionRange, RangesResult
from specpim_cp.views.tables import human_objective, table

#: How decisions read in tables.
DECISION_WORDS = {"memory_type": "memory", "pim_units": "PIM units", "devices": "devices",
                  "draft_length": "draft length", "draft_shape": "draft shape", "draft_nodes": "draft nodes",
                  "staging": "staging", "pipeline": "pipeline", "speculation": "speculation"}


def decision_word(name: str) -> str:
    if name.startswith("engine["):
        return f"engine of {name[7:-1]}"
    return DECISION_WORDS.get(name, name)


def _value(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def value_span(values) -> str:
    """Values as text: consecutive integers as a..b, others listed."""
    vals = list(values)
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        vals = sorted(vals)
        if len(vals) > 2 and vals == list(range(vals[0], vals[-1] + 1)):
            return f"{vals[0]}..{vals[-1]}"
    return ", ".join(_value(v) for v in vals)


def range_text(r: DecisionRange) -> str:
    """The values reached (set decisions; '?' marks values not decided in time) or the ends (intervals,
    an unproven end with its bound)."""
    if r.interval:
        def end(value, status, bound, word):
            return str(value) if status == "OPTIMAL" else f"{value} ({status}, {word} {bound})"
        return f"{end(r.low, r.low_status, r.low_bound, 'bound')}..{end(r.high, r.high_status, r.high_bound, 'bound')}"
    text = value_span(r.reached)
    if r.unknown:
        text += f" (not decided in time: {value_span(r.unknown)})"
    return text


def verdict(r: DecisionRange) -> str:
    return {True: "forced", False: "free", None: "?"}[r.forced]


def format_ranges(res: RangesResult) -> str:
    """The ranges report: the optimum, the tolerance, then a row per decision with more than one value in
    the space (decisions the space fixes are summed up in one line)."""
    rep = res.optimum.report
    name = res.objective
    head = [f"Decision ranges of {res.scenario.name}: designs within {res.within_pct}% of the optimum {name}",
            f"optimum {human_objective(name, rep.objective)} ({rep.status}"
            + (f", gap {100 * rep.gap:.3g}%" if rep.gap else "") + f"); counted: at most "
            f"{human_objective(name, res.limit)}"]
    rows, fixed = [], 0
    for r in res.ranges:
        if not r.interval and len(r.reached) + len(r.excluded) + len(r.unknown) <= 1:
            fixed += 1
            continue
        rows.append([r.model, decision_word(r.decision), _value(r.at_optimum), range_text(r), verdict(r)])
    lines = head + ["", table(["model", "decision", "at optimum", f"within {res.within_pct}%", ""], rows)]
    if fixed:
        lines.append(f"({fixed} decisions have one value in the space and are not listed)")
    status = "every range proven" if res.proven else "not every range proven (see '?')"
    lines.append(f"{status}; {res.solves} CP-SAT solves, {res.wall_s:.1f} s")
    return "\n".join(lines)
