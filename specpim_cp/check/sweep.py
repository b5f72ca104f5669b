"""Sensitivity to the acceptance rate: re-solve a scenario exactly as alpha of the drafter(s) varies.

Each point is warm-started with the previous optimum's design as a hint (`solve(..., hint=...)`); the
result lists the optimal latency per point and, where the optimal design changes, what changed (draft
lengths, memory type and PIM units, operator placement, pipeline, staging).
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.files import write_atomic
from specpim_cp.problem.design import Design
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.deadline import TimeLimitReached
from specpim_cp.solvers.exact.session import SolverOptions
from specpim_cp.views.figures import new_figure, save_figure
from specpim_cp.views.tables import draft_text, md_table, table

Solver = Callable[..., object]  # the signature of `specpim_cp.solvers.exact.solve`


#: The finest acceptance step of a sweep: points are rounded to 10 decimals, and an acceptance rate is
#: known to a few percent at best, so a finer step only repeats solves of one design.
MIN_ACCEPTANCE_STEP = 1e-6
#: Points of one sweep: each is an exact solve (up to a minute), so 201 points is already hours.
MAX_SWEEP_POINTS = 201


def parse_range(spec: str) -> list[float]:
    """`LO:HI:STEP` -> [LO, LO+STEP, ..., HI] (HI included when the steps land on it): 0 <= LO <= HI < 1,
    MIN_ACCEPTANCE_STEP <= STEP, at most MAX_SWEEP_POINTS points."""
    try:
        lo, hi, step = (float(x) for x in spec.split(":"))
    except ValueError:
        raise ScenarioError(f"--acceptance: expected LO:HI:STEP (e.g. 0.5:0.9:0.05), got '{spec}'") from None
    if not all(math.isfinite(x) for x in (lo, hi, step)):
        raise ScenarioError(f"--acceptance: LO, HI and STEP must be finite numbers, got '{spec}'")
    if hi < lo:
        raise ScenarioError(f"--acceptance: need HI >= LO, got '{spec}'")
    if lo < 0.0 or hi >= 1.0:
        raise ScenarioError(f"--acceptance: acceptance rates must lie in [0, 1), got '{spec}'")
    if not step >= MIN_ACCEPTANCE_STEP:
        raise ScenarioError(f"--acceptance: STEP must be at least {MIN_ACCEPTANCE_STEP:g} (points are rounded to "
                            f"10 decimals), got '{spec}'")
    n = int((hi - lo) / step + 1e-9)  # hi - lo < 1 and step >= 1e-6: at most 10^6, never an overflow
    if n + 1 > MAX_SWEEP_POINTS:
        raise ScenarioError(f"--acceptance: {n + 1} points; use a coarser STEP (at most {MAX_SWEEP_POINTS} points)")
    return [round(lo + i * step, 10) for i in range(n + 1)]


def drafter_indices(scenario: Scenario, drafter: str | None) -> list[int]:
    if not scenario.drafters:
        raise ScenarioError(f"{scenario.name}: has no drafters, so there is no acceptance rate to vary")
    if drafter is None:
        return list(range(len(scenario.drafters)))
    idx = [i for i, d in enumerate(scenario.drafters) if d.model == drafter]
    if not idx:
        raise ScenarioError(f"--drafter: '{drafter}' is not a drafter of {scenario.name} "
                            f"(drafters: {', '.join(d.model for d in scenario.drafters)})")
    return idx


def with_acceptance(scenario: Scenario, alpha: float, indices: Sequence[int]) -> Scenario:
    drafters = [d.model_copy(update={"acceptance": alpha}) if i in indices else d
                for i, d in enumerate(scenario.drafters)]
    return scenario.model_copy(update={"drafters": drafters})


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    acceptance: float
    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | TIME_LIMIT (not solved: the command's deadline passed)
    latency_ns_per_token: float | None
    energy_pj_per_token: float | None
    gap: float | None
    wall_s: float
    design: Design | None
    changes: tuple[str, ...] = ()  # how the optimal design differs from the previous point's
    error: str | None = None


@dataclass(frozen=True)
class SweepResult:
    scenario: str
    drafters: tuple[str, ...]  # models whose acceptance varies
    points: tuple[SweepPoint, ...]

    def change_points(self) -> list[SweepPoint]:
        return [p for p in self.points if p.changes]


def _pim_ops(md) -> set[str]:
    return {f"{op}@{p.share}" for op, p in md.placement.items() if p.engine == "pim"}


def design_changes(prev: Design | None, cur: Design | None) -> list[str]:
    """Short descriptions of what differs between two optimal designs of one scenario."""
    if prev is None or cur is None:
        return []
    out = []
    gp = [draft_text(d) for d in prev.drafters] or ["none"]  # none: the verifier alone ([NOSPEC])
    gc = [draft_text(d) for d in cur.drafters] or ["none"]
    if gp != gc:
        out.append(f"draft {','.join(gp)}->{','.join(gc)}")
    if prev.pipeline != cur.pipeline:
        out.append(f"pipeline {'on' if cur.pipeline else 'off'}")
    for (_, a), (_, b) in zip(prev.models(), cur.models()):
        if (a.memory_type, a.pim_units, a.devices) != (b.memory_type, b.pim_units, b.devices):
            out.append(f"{b.model}: {a.memory_type} k={a.pim_units} -> {b.memory_type} k={b.pim_units}")
        pa, pb = _pim_ops(a), _pim_ops(b)
        if pa != pb:
            moved = [f"+{op}" for op in sorted(pb - pa)] + [f"-{op}" for op in sorted(pa - pb)]
            out.append(f"{b.model} PIM ops {' '.join(moved)}")
        if a.staging != b.staging:
            st = "off" if b.staging is None else f"{b.staging.draft2} x{b.staging.draft_length}"
            out.append(f"{b.model} staging {st}")
    return out


def sweep_acceptance(scenario: Scenario, alphas: Sequence[float], *, drafter: str | None = None,
                     options: SolverOptions | None = None, solver: Solver | None = None,
                     on_point: Callable[[SweepPoint], None] | None = None) -> SweepResult:
    """Solve the scenario once per acceptance rate, each warm-started from the previous optimum, with
    `options` per solve (default: 60 deterministic time units, one worker, seed 0), all within the command's
    deadline (`SolverOptions.deadline`): a point left when it passes is TIME_LIMIT, unsolved."""
    if solver is None:
        from specpim_cp.solvers.exact import solve as solver
    options = (options or SolverOptions(deterministic=True)).with_deadline()
    indices = drafter_indices(scenario, drafter)
    points: list[SweepPoint] = []
    prev: Design | None = None
    for alpha in alphas:
        sc = with_acceptance(scenario, alpha, indices)
        t0 = time.perf_counter()
        try:
            res = solver(sc, options=options, hint=prev)
        except TimeLimitReached as exc:
            point = SweepPoint(alpha, "TIME_LIMIT", None, None, None, time.perf_counter() - t0, None, error=str(exc))
        except ScenarioError as exc:
            point = SweepPoint(alpha, "INFEASIBLE", None, None, None, time.perf_counter() - t0, None,
                               error=str(exc))
        else:
            m = res.evaluation.metrics
            point = SweepPoint(alpha, res.report.status, m.latency_ns_per_token, m.energy_pj_per_token,
                               res.report.gap, res.report.wall_s, res.design,
                               tuple(design_changes(prev, res.design)))
            prev = res.design
        points.append(point)
        if on_point is not None:
            on_point(point)
    return SweepResult(scenario.name, tuple(scenario.drafters[i].model for i in indices), tuple(points))


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------
HEADERS = ["acceptance", "status", "gap", "us/token", "mJ/token", "draft (length or tree)", "memory:PIM units",
           "design change"]


def _row(p: SweepPoint) -> list[str]:
    d = p.design
    return [f"{p.acceptance:g}", p.status, "-" if p.gap is None else f"{100 * p.gap:.2g}%",
            "-" if p.latency_ns_per_token is None else f"{p.latency_ns_per_token / 1e3:,.1f}",
            "-" if p.energy_pj_per_token is None else f"{p.energy_pj_per_token / 1e9:,.3f}",
            "-" if d is None else ",".join(draft_text(x) for x in d.drafters),
            "-" if d is None else " ".join(f"{md.memory_type}:{md.pim_units}" for _, md in d.models()),
            "; ".join(p.changes) if p.changes else (p.error or "")]


def format_sweep(result: SweepResult) -> str:
    head = (f"scenario {result.scenario}: acceptance of {', '.join(result.drafters)} varied; "
            f"{len(result.change_points())} design change(s)")
    return head + "\n" + table(HEADERS, [_row(p) for p in result.points])


def sweep_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["acceptance", "status", "gap", "latency_ns_per_token", "energy_pj_per_token", "wall_s",
                "draft_lengths", "pim_allocation", "pipeline", "changes", "design"])
    for p in result.points:
        d = p.design
        w.writerow([p.acceptance, p.status, p.gap, p.latency_ns_per_token, p.energy_pj_per_token,
                    round(p.wall_s, 3),
                    "" if d is None else ";".join(draft_text(x) for x in d.drafters),
                    "" if d is None else " ".join(f"{md.model}:{md.memory_type}:{md.pim_units}"
                                                  for _, md in d.models()),
                    "" if d is None else d.pipeline, "; ".join(p.changes) or (p.error or ""),
                    "" if d is None else d.key()])
    return buf.getvalue()


def _draft_tokens(md) -> int:
    return md.draft_length if md.tree is None else sum(md.tree)


def plot_sweep(result: SweepResult, path: Path) -> Path:
    fig = new_figure(8.5, 5.0)
    ax = fig.subplots()
    pts = [p for p in result.points if p.latency_ns_per_token is not None]
    ax.plot([p.acceptance for p in pts], [p.latency_ns_per_token / 1e3 for p in pts], "o-", color="#d62728",
            label="optimal latency")
    ax.set_xlabel(f"acceptance rate alpha of {', '.join(result.drafters)}")
    ax.set_ylabel("optimal latency per token (us)")
    ax.grid(alpha=0.3)
    twin = ax.twinx()
    models = next(([d.model for d in p.design.drafters] for p in pts if p.design.drafters), [])
    for i, model in enumerate(models):  # 0 draft tokens where the optimum does not speculate ([NOSPEC])
        twin.step([p.acceptance for p in pts],
                  [_draft_tokens(p.design.drafters[i]) if p.design.drafters else 0 for p in pts], where="post",
                  linestyle="--", linewidth=1, label=f"draft tokens, {model}")
    twin.set_ylabel("optimal draft tokens (chain length or tree nodes)")
    twin.set_ylim(0, max([_draft_tokens(d) for p in pts for d in p.design.drafters] + [1]) + 1)
    for k, p in enumerate(result.change_points()):
        ax.axvline(p.acceptance, color="grey", linestyle=":", linewidth=1)
        circle = {"boxstyle": "circle", "facecolor": "white", "edgecolor": "grey"}
        ax.annotate(f"{k + 1}", (p.acceptance, 0.98), xycoords=("data", "axes fraction"), ha="center",
                    va="top", fontsize=8, bbox=circle)
    lines, labels = ax.get_legend_handles_labels()
    lines2, labels2 = twin.get_legend_handles_labels()
    ax.legend(lines + lines2, labels + labels2, fontsize=8, loc="lower left")
    ax.set_title(f"{result.scenario}: optimum vs acceptance rate (dotted: the optimal design changes)",
                 fontsize=10)
    return save_figure(fig, path)


def write_sweep(result: SweepResult, out: str | Path) -> list[Path]:
    """sweep.csv, sweep.md (table and the numbered design changes) and sweep.png in `out`."""
    out = Path(out)
    write_atomic(out / "sweep.csv", sweep_csv(result))
    changes = [f"{k + 1}. alpha = {p.acceptance:g}: {'; '.join(p.changes)}"
               for k, p in enumerate(result.change_points())]
    intro = (f"Acceptance of {', '.join(result.drafters)} varied; each point is an exact optimum, "
             "warm-started from the previous one.")
    md = [f"# Acceptance sweep: {result.scenario}", "", intro, "",
          md_table(HEADERS, [_row(p) for p in result.points]), "", "## Design changes", "",
          *(changes or ["none"]), "", "![sweep](sweep.png)", ""]
    write_atomic(out / "sweep.md", "\n".join(md))
    png = plot_sweep(result, out / "sweep.png")
    return [out / "sweep.csv", out / "sweep.md", png]
