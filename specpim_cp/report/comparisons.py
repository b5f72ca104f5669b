"""The exact design against its baselines, one `Comparison` per scenario, and `comparisons.csv`.

Each ratio is a baseline's latency (speedup) or energy (energy efficiency) per token over the exact
design's; above 1 the exact design is better. Against fixed-recipe PIM there are two
(formulations/baselines.md), over the recipes of `common.PIM_BASELINES` (FC-offload and
attention-offload; variants such as "FC-offload (fit)" are neither):

- vs best PIM recipe: over the recipe with the better objective (latency, energy or EDP, the scenario's),
  speed and energy both against that one recipe;
- vs PIM (paper): the geometric mean of the ratios over the recipes, SpecPIM's definition of its gain over
  fixed-recipe PIM. Rule for a recipe without a design (infeasible, failed or not run): the mean is over the
  recipes that have one, and the value is flagged partial; with none, there is no value.

A geometric mean over scenarios takes the scenarios that have a value (partial ones included).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specpim_cp.report.common import PIM_BASELINES, ScenarioResults, geomean, ratio

COMPARISONS_CSV = "comparisons.csv"
BEST_RECIPE = "best PIM recipe"
PAPER = "PIM (paper: geomean over recipes)"
#: Under the report's table, one line each: the two comparisons, and the rule for a missing recipe.
DEFINITIONS = (
    (f"vs {BEST_RECIPE}: over the better of {' and '.join(PIM_BASELINES)} by the scenario's objective (the "
     f"column 'best PIM recipe'); vs {PAPER}: the geometric mean of the ratios over {' and '.join(PIM_BASELINES)}, "
     "SpecPIM's definition."),
    ("Where one recipe has no design, the paper value is the geometric mean over the recipes that have one, "
     "flagged '(... only)'; with none, '-'. Geometric means are over the scenarios with a value."),
)


@dataclass(frozen=True)
class Ratios:
    """One metric of the baselines over the exact design's (x; None: a design is missing)."""

    vs_gpu_si: float | None
    vs_best_pim_recipe: float | None
    vs_pim_paper: float | None
    vs_recipe: dict[str, float | None]  # each recipe of PIM_BASELINES


@dataclass(frozen=True)
class Comparison:
    """The exact design of one scenario against GPU-SI and the fixed PIM recipes."""

    scenario: str
    family: str
    batch_size: int
    objective_name: str
    exact_status: str | None
    best_pim_recipe: str | None  # by the scenario's objective
    recipes: tuple[str, ...]  # the recipes of PIM_BASELINES with a design (the paper value's)
    speedup: Ratios  # latency ratios
    energy_efficiency: Ratios  # energy ratios
    heuristic_over_exact: float | None  # objective ratio

    @property
    def partial(self) -> bool:
        """The paper value is over fewer recipes than PIM_BASELINES (some, not all, have a design)."""
        return 0 < len(self.recipes) < len(PIM_BASELINES)


Metric = Callable[[ScenarioResults, str], float | None]


def _ratios(s: ScenarioResults, metric: Metric, best: str | None) -> Ratios:
    exact = metric(s, "exact")
    per = {r: ratio(metric(s, r), exact) for r in PIM_BASELINES}
    return Ratios(ratio(metric(s, "GPU-SI"), exact), None if best is None else per[best],
                  geomean(list(per.values())), per)


def compare(s: ScenarioResults) -> Comparison:
    exact = s.by_method.get("exact")
    best = s.best_pim_baseline()
    return Comparison(s.name, s.family, s.batch_size, s.objective_name,
                      None if exact is None else exact.status, best,
                      tuple(r for r in PIM_BASELINES if s.solved(r) is not None),
                      _ratios(s, ScenarioResults.latency, best), _ratios(s, ScenarioResults.energy, best),
                      ratio(s.objective("heuristic"), s.objective("exact")))


def compare_all(groups: Sequence[ScenarioResults]) -> list[Comparison]:
    return [compare(s) for s in groups]


def mean_ratios(comps: Sequence[Comparison], which: Callable[[Comparison], Ratios]) -> Ratios:
    """Geometric means over the scenarios (each over the scenarios that have the value)."""
    rs = [which(c) for c in comps]
    return Ratios(geomean([r.vs_gpu_si for r in rs]), geomean([r.vs_best_pim_recipe for r in rs]),
                  geomean([r.vs_pim_paper for r in rs]),
                  {p: geomean([r.vs_recipe[p] for r in rs]) for p in PIM_BASELINES})


def paper_flag(c: Comparison) -> str:
    """The partial-value flag of the report: which recipes the paper value is over, if not all."""
    return f" ({' + '.join(c.recipes)} only)" if c.partial and c.speedup.vs_pim_paper is not None else ""


# ------------------------------------------------------------------------------------------------
# comparisons.csv: one row per scenario, full precision, empty where there is no value
# ------------------------------------------------------------------------------------------------
def _recipe_column(prefix: str, recipe: str) -> str:
    return f"{prefix}_vs_{recipe}"


CSV_COLUMNS = ("scenario", "family", "batch_size", "objective", "exact_status",
               "speedup_vs_gpu_si", "speedup_vs_best_pim_recipe", "speedup_vs_pim_paper",
               "energy_eff_vs_gpu_si", "energy_eff_vs_best_pim_recipe", "energy_eff_vs_pim_paper",
               "best_pim_recipe", "pim_paper_recipes", "pim_paper_partial",
               *(_recipe_column("speedup", r) for r in PIM_BASELINES),
               *(_recipe_column("energy_eff", r) for r in PIM_BASELINES))


def _csv_row(c: Comparison) -> dict:
    row = {"scenario": c.scenario, "family": c.family, "batch_size": c.batch_size, "objective": c.objective_name,
           "exact_status": c.exact_status, "best_pim_recipe": c.best_pim_recipe,
           "pim_paper_recipes": " ".join(c.recipes), "pim_paper_partial": c.partial}
    for prefix, rs in (("speedup", c.speedup), ("energy_eff", c.energy_efficiency)):
        row |= {f"{prefix}_vs_gpu_si": rs.vs_gpu_si, f"{prefix}_vs_best_pim_recipe": rs.vs_best_pim_recipe,
                f"{prefix}_vs_pim_paper": rs.vs_pim_paper}
        row |= {_recipe_column(prefix, r): v for r, v in rs.vs_recipe.items()}
    return row


def comparisons_csv(comps: Sequence[Comparison]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for c in comps:
        w.writerow(_csv_row(c))  # None is written as an empty field
    return buf.getvalue()
