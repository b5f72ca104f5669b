"""What every report of a results folder shares: records grouped by scenario (`ScenarioResults`),
ratios and geometric means, number formatting, the cross-checks between independent methods, and the
`Report` value (terminal text, Markdown, files written). Batch, grid and mix reports build on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specpim_cp.problem.ablation_ladder import LADDER_STEPS
from specpim_cp.runs.records import Record
from specpim_cp.runs.store import sort_key

#: The fixed PIM recipes the exact design is compared against (formulations/baselines.md), by record name:
#: "vs best PIM recipe" takes the better of them per scenario, "vs PIM (paper)" the geometric mean over
#: them (`report/comparisons.py`). The one place that says which baselines are the recipes.
PIM_BASELINES = ("FC-offload", "attention-offload")
#: Other fixed-recipe PIM baselines: shown in the latency and energy tables and plots when a record has one,
#: never one of the recipes of either comparison.
PIM_VARIANTS = ("FC-offload (fit)",)
BASELINE_COLUMNS = ("GPU-AR", "GPU-SI", *PIM_BASELINES)
COMPARED = (*BASELINE_COLUMNS, "heuristic", "exact")  # latency/energy table columns and plot bars


# ------------------------------------------------------------------------------------------------
# Records grouped by scenario
# ------------------------------------------------------------------------------------------------
@dataclass
class ScenarioResults:
    name: str
    family: str
    batch_size: int
    objective_name: str
    by_method: dict[str, Record] = field(default_factory=dict)  # baseline names, "heuristic", "exact"
    ladder: dict[str, Record] = field(default_factory=dict)  # step name -> record
    pareto: Record | None = None

    def solved(self, name: str) -> Record | None:
        """The record of a method or baseline if it produced a design (None if missing or infeasible)."""
        r = self.by_method.get(name)
        return r if r is not None and r.solved else None

    def latency(self, name: str) -> float | None:
        r = self.solved(name)
        return None if r is None else r.metrics.latency_ns_per_token

    def energy(self, name: str) -> float | None:
        r = self.solved(name)
        return None if r is None else r.metrics.energy_pj_per_token

    def ttft(self, name: str) -> float | None:
        """Time to first token (the prompt's prefill, ns) of a method's design; None before it was priced."""
        r = self.solved(name)
        return None if r is None else r.metrics.ttft_ns

    def objective(self, name: str) -> float | None:
        """The scenario's objective (latency, energy or EDP per token) of a method's design."""
        r = self.solved(name)
        return None if r is None else r.metrics.value(self.objective_name)

    def best_pim_baseline(self) -> str | None:
        """The better of the PIM recipes (PIM_BASELINES) by the scenario's objective (None: none has a design)."""
        cands = [n for n in PIM_BASELINES if self.solved(n) is not None]
        return min(cands, key=self.objective) if cands else None

    def best_design(self) -> Record | None:
        return self.solved("exact") or self.solved("heuristic")


def compared_methods(groups: Sequence[ScenarioResults]) -> tuple[str, ...]:
    """COMPARED, with the PIM variants that some scenario has a record of after the recipes."""
    variants = tuple(v for v in PIM_VARIANTS if any(v in s.by_method for s in groups))
    return (*BASELINE_COLUMNS, *variants, "heuristic", "exact")


def group(records: Sequence[Record]) -> list[ScenarioResults]:
    out: dict[str, ScenarioResults] = {}
    for r in sorted(records, key=sort_key):
        s = out.get(r.scenario)
        if s is None:
            s = out[r.scenario] = ScenarioResults(r.scenario, r.family, r.batch_size, r.scenario_objective)
        if r.method == "ladder":
            s.ladder[r.part] = r
        elif r.method == "pareto":
            s.pareto = r
        else:
            s.by_method[r.part] = r  # baselines are keyed by their name, solvers by method
    return sorted(out.values(), key=lambda s: (s.family, s.batch_size, s.name))


def ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or den is None or den == 0 else num / den


def geomean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def scaled(v: float | None, factor: float) -> float | None:
    return None if v is None else v * factor


def fmt(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}g}" if abs(v) < 10 ** digits - 0.5 else f"{v:,.0f}"  # 999.7: "1,000", not "1e+03"


def fmt_excess(r: float | None) -> str:
    """A ratio >= 1 as the percentage above 1 (how far a heuristic is from the optimum)."""
    if r is None:
        return "-"
    return "0%" if r == 1 else f"{100 * (r - 1):.2g}%"


def fmt_gap(r: Record | None) -> str:
    if r is None or r.gap is None:
        return "-"
    return "0%" if r.gap == 0 else f"{100 * r.gap:.2g}%"


def ladder_latencies(s: ScenarioResults) -> list[float | None]:
    return [s.ladder[st].metrics.latency_ns_per_token if st in s.ladder and s.ladder[st].solved else None
            for st in LADDER_STEPS]


NESTED_STEPS = LADDER_STEPS[2:]  # each of these steps' space contains the previous step's


def consistency_checks(groups: Sequence[ScenarioResults]) -> list[str]:
    """Cross-checks between independent methods; each line is a violation (a bug somewhere)."""
    out = []
    for s in groups:
        ex = s.solved("exact")
        if ex is not None and ex.status == "OPTIMAL":
            for m in ("GPU-SI", *PIM_BASELINES, *PIM_VARIANTS, "heuristic"):
                if s.objective(m) is not None and s.objective(m) < s.objective("exact") * (1 - 1e-12):
                    out.append(f"{s.name}: {m} ({s.objective(m):,.6g}) beats the proven exact optimum "
                               f"({s.objective('exact'):,.6g}) on {s.objective_name}")
            front = (s.pareto.front if s.pareto else None) or ()
            lat, en = s.latency("exact"), s.energy("exact")
            for q in front:
                ql, qe = q.metrics.latency_ns_per_token, q.metrics.energy_pj_per_token
                if ql >= lat and qe > en * (1 + 1e-12):
                    out.append(f"{s.name}: Pareto point ({ql / 1e3:,.1f} us, "
                               f"{qe / 1e9:,.1f} mJ) is dominated by the exact latency "
                               f"optimum ({lat / 1e3:,.1f} us, {en / 1e9:,.1f} mJ)")
        lat = ladder_latencies(s)
        for i, step in enumerate(LADDER_STEPS):
            r = s.ladder.get(step)
            if (step in NESTED_STEPS and lat[i] is not None and lat[i - 1] is not None and lat[i] > lat[i - 1]
                    and r.status == "OPTIMAL" and s.ladder[LADDER_STEPS[i - 1]].status == "OPTIMAL"):
                out.append(f"{s.name}: ladder step {step} ({lat[i] / 1e3:,.1f} us) is slower than "
                           f"{LADDER_STEPS[i - 1]} ({lat[i - 1] / 1e3:,.1f} us) although its space is larger")
    return out


@dataclass(frozen=True)
class Report:
    text: str  # for the terminal
    markdown: str  # summary.md
    files: list[Path]
