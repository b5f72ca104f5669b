"""Which conclusions survive the model's uncertainty: re-solve with each uncertain constant at its ends.

Every catalog constant with a `range_X = [low, high]` (the scenario's host and memory types: idle power,
on-chip energy, PIM efficiency, PIM kernel overhead, external / internal / MAC energy) and every
drafter's acceptance rate (over the `range_KEY` of the acceptance.toml entry it comes from; +- the
catalog's `sensitivity_delta` for a rate the scenario sets or an entry without a range) is moved to its
low and its high value, one at a time, and the scenario is solved exactly again. The result is a tornado
table: the optimum's objective at each end relative to the nominal optimum, whether the optimal design
changes, and GPU-SI's speedup over GPU-AR there (the baseline gain that follows the acceptance rates).

A constant that cannot change the objective (an energy constant under a latency objective) does not
need a new solve: the nominal design stays optimal (latency does not depend on it) and is re-priced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.solvers.deadline import TimeLimitReached
from specpim_cp.solvers.exact.session import SolverOptions
from specpim_cp.views.figures import new_figure, save_figure

#: Constants that change only energy (never a latency), by spec kind.
ENERGY_FIELDS = {"idle_power_mw", "onchip_energy_pj_per_bit", "mac_energy_pj", "external_energy_pj_per_bit",
                 "internal_energy_pj_per_bit", "pim_mac_energy_pj", "link_energy_pj_per_bit"}


@dataclass(frozen=True)
class Constant:
    """One uncertain constant: where it lives, its nominal value and its low and high source values."""

    name: str  # e.g. "memories.hbm.pim_efficiency", "acceptance of drafters[0]"
    nominal: float
    low: float
    high: float
    energy_only: bool
    apply: Callable[[float], tuple[Scenario, Catalog]]  # the scenario and catalog with the constant at a value


@dataclass(frozen=True)
class SensitivityPoint:
    constant: str
    value: float
    objective: Fraction
    relative: float  # objective / nominal objective - 1
    energy_relative: float  # the optimum's energy per token / the nominal optimum's - 1
    design_changed: bool
    summary: str  # the design at this value (one line)
    resolved: bool  # False: the nominal design was re-priced (it provably stays optimal)
    gpu_si_speedup: float | None = None  # GPU-AR's latency per token / GPU-SI's (None: a baseline has no design)


@dataclass(frozen=True)
class SensitivityRow:
    constant: str
    nominal: float
    low: SensitivityPoint
    high: SensitivityPoint

    @property
    def swing(self) -> float:
        return abs(self.high.relative - self.low.relative)


@dataclass(frozen=True)
class SensitivityResult:
    scenario: str
    objective_name: str
    nominal: Fraction
    nominal_energy: Fraction  # energy per token of the nominal optimum (nJ)
    nominal_summary: str
    rows: tuple[SensitivityRow, ...]  # largest swing first
    nominal_gpu_si_speedup: float | None = None  # GPU-AR's latency per token / GPU-SI's, nominal constants
    not_solved: tuple[str, ...] = ()  # constants left when the command's deadline passed (no row)


def uncertain_constants(scenario: Scenario, catalog: Catalog) -> list[Constant]:
    out = []
    host = catalog.host(scenario.host)
    for field, (lo, hi) in sorted(host.ranges.items()):
        def apply(v, field=field):
            hosts = {**catalog.hosts, host.name: dataclasses.replace(host, **{field: type(getattr(host, field))(v)})}
            return scenario, dataclasses.replace(catalog, hosts=hosts)
        out.append(Constant(f"hosts.{host.name}.{field}", float(getattr(host, field)), lo, hi,
                            field in ENERGY_FIELDS, apply))
    for mem_name in scenario.memory_types:
        mem = catalog.memory(mem_name)
        for field, (lo, hi) in sorted(mem.ranges.items()):
            def apply(v, field=field, mem=mem):
                mems = {**catalog.memories, mem.name: dataclasses.replace(mem, **{field: type(getattr(mem, field))(v)})}
                return scenario, dataclasses.replace(catalog, memories=mems)
            out.append(Constant(f"memories.{mem.name}.{field}", float(getattr(mem, field)), lo, hi,
                                field in ENERGY_FIELDS, apply))
    for i, d in enumerate(scenario.drafters):
        alpha, lo, hi, label = acceptance_span(scenario, catalog, i)

        def apply(v, i=i):
            drafters = [dd.model_copy(update={"acceptance": v}) if k == i else dd
                        for k, dd in enumerate(scenario.drafters)]
            return scenario.model_copy(update={"drafters": drafters}), catalog
        out.append(Constant(f"acceptance of drafters[{i}] ({label})", alpha, lo, hi, False, apply))
    return out


def acceptance_span(scenario: Scenario, catalog: Catalog, i: int) -> tuple[float, float, float, str]:
    """Drafter i's acceptance rate, the low and high end `sensitivity` moves it to, and where they come
    from: the `range_KEY` of its catalog entry, else the rate +- the catalog's `sensitivity_delta`
    (within [0, 0.99])."""
    from specpim_cp.physics.rounds import drafter_acceptance

    d = scenario.drafters[i]
    alpha = drafter_acceptance(scenario, catalog, i)
    from_catalog = d.acceptance is None and (d.tree is None or d.tree.acceptance_vector is None)
    entry = catalog.acceptance_entry(d.model, scenario.verifier.model)
    span = catalog.acceptance_ranges.get(entry) if from_catalog else None
    if span is not None:
        return alpha, span[0], span[1], f"{d.model}, catalog {entry} range"
    delta = catalog.acceptance_sensitivity_delta
    where = f"catalog {entry}" if from_catalog else "scenario"
    return alpha, max(0.0, alpha - delta), min(0.99, alpha + delta), f"{d.model}, {where} +-{delta:g}"


def gpu_si_speedup(scenario: Scenario, catalog: Catalog) -> float | None:
    """GPU-AR's latency per token over GPU-SI's (`solvers.baselines`), None when either has no design."""
    from specpim_cp.solvers.baselines import gpu_ar, gpu_si

    if not scenario.drafters:
        return None
    try:
        ar, si = gpu_ar(scenario, catalog), gpu_si(scenario, catalog)
    except ScenarioError:
        return None
    return ar.metrics.latency_ns_per_token / si.metrics.latency_ns_per_token


def selected_constants(scenario: Scenario, catalog: Catalog, only: str | None = None) -> list[Constant]:
    """`uncertain_constants`, or those whose name contains `only` (e.g. "acceptance", "hosts.")."""
    constants = uncertain_constants(scenario, catalog)
    if only is None:
        return constants
    chosen = [c for c in constants if only in c.name]
    if not chosen:
        raise ScenarioError(f"--only {only}: no uncertain constant of '{scenario.name}' has it in its name "
                            f"(constants: {'; '.join(c.name for c in constants) or 'none'})")
    return chosen


def sensitivity(scenario: Scenario, catalog: Catalog | None = None, *, options: SolverOptions | None = None,
                on_point: Callable[[str], None] | None = None, only: str | None = None) -> SensitivityResult:
    """Solve the scenario nominally, then once per constant end (see the module docstring; `only`: just the
    constants whose name contains it), each solve with `options` (default: 60 deterministic time units,
    one worker, seed 0). Every solve shares the command's wall-clock deadline (`SolverOptions.deadline`, the
    time limit in seconds); a constant left when it passes, or whose solve it cut, has no row and is named in
    `not_solved`."""
    from specpim_cp.solvers.exact import solve
    from specpim_cp.views.tables import design_summary

    catalog = catalog or scenario_catalog(scenario)
    options = (options or SolverOptions(deterministic=True)).with_deadline()
    objective = scenario.objective
    base = solve(scenario, options=options, catalog=catalog)
    nominal = base.report.objective
    nominal_energy = base.evaluation.metrics.energy_fraction()
    if nominal == 0 or nominal_energy == 0:
        raise ScenarioError(f"{scenario.name}: the nominal optimum's energy is 0 nJ/token (the energy constants and "
                            "idle power of its host and memories are 0), so a change relative to it is undefined; "
                            "give the energy constants values above 0 for a sensitivity analysis")
    base_summary = design_summary(scenario, base.design)
    nominal_speedup = gpu_si_speedup(scenario, catalog)
    rows = []
    not_solved = []
    for const in selected_constants(scenario, catalog, only):
        if options.expired:
            not_solved.append(const.name)
            continue
        points = []
        for value in (const.low, const.high):
            sc, cat = const.apply(value)
            resolved = not (const.energy_only and objective == "latency")
            if resolved:
                try:
                    res = solve(sc, options=options, catalog=cat, hint=_in_space(base.design, sc, cat))
                except TimeLimitReached:
                    break  # the deadline passed before this end's solve began
                if res.report.status != "OPTIMAL" and options.expired:
                    break  # the deadline cut this end's solve: no proven row
                design, metrics = res.design, res.evaluation.metrics
            else:
                design, metrics = base.design, Evaluator(sc, cat).evaluate(base.design).metrics
            obj, energy = metrics.objective(objective), metrics.energy_fraction()
            summary = design_summary(sc, design)
            # an energy-only constant under a latency objective moves neither baseline's latency nor choice
            speedup = gpu_si_speedup(sc, cat) if resolved else nominal_speedup
            points.append(SensitivityPoint(const.name, value, obj, float(obj / nominal) - 1.0,
                                           float(energy / nominal_energy) - 1.0, summary != base_summary, summary,
                                           resolved, speedup))
            if on_point is not None:
                on_point(f"{const.name} = {value:g}")
        if len(points) < 2:
            not_solved.append(const.name)
            continue
        rows.append(SensitivityRow(const.name, const.nominal, points[0], points[1]))
    rows.sort(key=lambda r: -r.swing)
    return SensitivityResult(scenario.name, objective, nominal, nominal_energy, base_summary, tuple(rows),
                             nominal_speedup, tuple(not_solved))


def _in_space(design: Design, scenario: Scenario, catalog: Catalog) -> Design | None:
    """The nominal optimum as a hint when it is still a valid design (it always is: only constants move)."""
    try:
        Evaluator(scenario, catalog).evaluate(design)
    except ValueError:
        return None
    return design


def format_sensitivity(result: SensitivityResult) -> str:
    from specpim_cp.views.tables import human_objective, table

    def x(speedup: float | None) -> str:
        return "-" if speedup is None else f"{speedup:.3f}x"

    rows = []
    for r in result.rows:
        rows.append([r.constant, f"{r.nominal:g}", f"{r.low.value:g}", f"{100 * r.low.relative:+.1f}%",
                     f"{100 * r.low.energy_relative:+.1f}%", "changes" if r.low.design_changed else "same",
                     x(r.low.gpu_si_speedup), f"{r.high.value:g}", f"{100 * r.high.relative:+.1f}%",
                     f"{100 * r.high.energy_relative:+.1f}%", "changes" if r.high.design_changed else "same",
                     x(r.high.gpu_si_speedup)])
    head = (f"scenario {result.scenario}: nominal optimum {result.objective_name} = "
            f"{human_objective(result.objective_name, result.nominal)}, energy {float(result.nominal_energy) / 1e6:,.3f} mJ/token; "
            f"GPU-SI over GPU-AR {x(result.nominal_gpu_si_speedup)}\n  design: {result.nominal_summary}")
    changed = [p for r in result.rows for p in (r.low, r.high) if p.design_changed]
    tail = "\n".join(f"  {p.constant} = {p.value:g}: {p.summary}" for p in changed)
    body = table(["constant", "nominal", "low", f"{result.objective_name} at low", "energy at low", "design",
                  "GPU-SI/AR at low", "high", f"{result.objective_name} at high", "energy at high", "design",
                  "GPU-SI/AR at high"], rows)
    late = (f"\nnot solved (the time limit passed): {', '.join(result.not_solved)}" if result.not_solved else "")
    return f"{head}\n{body}\n" + (f"designs that change:\n{tail}" if changed else "the optimal design survives every end") \
        + late


def plot_tornado(result: SensitivityResult, path: Path) -> Path:
    rows = list(reversed(result.rows))  # largest swing on top
    fig = new_figure(9.0, 0.42 * len(rows) + 1.6)
    ax = fig.subplots()
    for y, r in enumerate(rows):
        for p, color in ((r.low, "#1f77b4"), (r.high, "#d62728")):
            ax.barh(y, 100 * p.relative, 0.6, color=color, alpha=0.85, hatch="//" if p.design_changed else None,
                    edgecolor="black", linewidth=0.4)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [r.constant for r in rows], fontsize=7)
    ax.set_xlabel(f"optimal {result.objective_name} per token relative to the nominal optimum (%)")
    ax.set_title(f"{result.scenario}: sensitivity of the optimum (blue: low end, red: high end; hatched: the "
                 "optimal design changes)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return save_figure(fig, path)
