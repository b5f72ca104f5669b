"""Reference designs for a workload mix, each priced by the evaluator (formulations/mix.md, Comparisons).

(a) every cell on its own optimal hardware (a lower bound on any shared hardware; regret 1 per cell);
(b) the hardware optimal for the weighted-median cell, every cell's dataflow re-optimised on it;
(c) a PAPI-style runtime rule (Lee et al., ASPLOS 2025): fixed hardware, attention always on PIM, each
    FC operator on PIM when batch x tokens per pass is below a threshold fitted over the mix, the best
    chain draft lengths per cell for the rule, vanilla rounds; on identical half-PIM HBM devices with the
    scenario's device counts (like `baselines.fc_offload`), and on the mix-optimal hardware;
(d) GPU-SI per cell (`baselines.gpu_si`).
A reference design set is a mix design: its capacity is checked with the tensor-copy rule
(`physics.mix.check_mix_capacity`), so a rule that switches an FC operator between host and PIM pays for both
copies of its weights.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator, Metrics
from specpim_cp.physics.mix import cell_metric, check_mix_capacity, mix_value, regret
from specpim_cp.physics.rounds import pass_tokens
from specpim_cp.problem.design import ArchConfig, Design, DrafterChoice, Placement, SpecChoice
from specpim_cp.problem.mapping_rules import fit_layouts
from specpim_cp.problem.mix import Mix, median_cell
from specpim_cp.problem.operators import ATTENTION_OPS, FC_OPS, PLACEABLE_OPS
from specpim_cp.problem.space import draft_length_options, model_labels
from specpim_cp.solvers.baselines import gpu_si
from specpim_cp.solvers.mix.records import Comparison, HardwareResult
from specpim_cp.solvers.result import SolveResult

PER_CELL = "per-cell optima"
MEDIAN = "median-cell hardware"
PAPI_HALF = "PAPI-style rule, half-PIM HBM"
PAPI_MIX = "PAPI-style rule, mix hardware"
GPU_SI = "GPU-SI"


def _comparison(name: str, description: str, mix: Mix, evaluations: Sequence[Evaluation] | None, objective: str,
                own: Sequence[Fraction], extra: dict | None = None, error: str | None = None) -> Comparison:
    if evaluations is None:
        return Comparison(name, description, None, None, None, extra or {}, error)
    metrics = [e.metrics for e in evaluations]
    return Comparison(name, description, tuple(evaluations), mix_value(mix, metrics, objective, own),
                      regret(metrics, own, objective), {"archs": [a.label() for a in _archs(evaluations[0].design)],
                                                        **(extra or {})})


def _archs(design: Design) -> list[ArchConfig]:
    return [md.arch for _, md in design.models()]


# -- (d) GPU-SI ------------------------------------------------------------------------------------
def gpu_si_mix(mix: Mix, objective: str, own: Sequence[Fraction], catalog: Catalog):
    desc = "every cell GPU-SI: plain memory (no PIM units), host only, best draft lengths per cell, vanilla rounds"
    try:
        evals = [gpu_si(c.scenario, catalog) for c in mix.cells]
    except ScenarioError as exc:
        return _comparison(GPU_SI, desc, mix, None, objective, own, error=str(exc))
    return _comparison(GPU_SI, desc, mix, evals, objective, own)


# -- (c) PAPI-style rule ---------------------------------------------------------------------------
def rule_placement(arch: ArchConfig, fc_on_pim: bool, host_layout: str, share: int,
                   offered: tuple[Placement, ...]) -> dict[str, Placement]:
    """Attention on PIM and FC on PIM or the host (its tensors in `host_layout`); every operator on the
    host when the architecture has no PIM units."""
    pim = Placement(engine="pim", share=share)
    host = Placement(engine="host", share=0, layout=host_layout)
    if arch.pim_units == 0:
        place = {op: host for op in PLACEABLE_OPS}
    else:
        place = {op: pim if op in ATTENTION_OPS or (op in FC_OPS and fc_on_pim) else host for op in PLACEABLE_OPS}
    return fit_layouts(place, offered)


def papi_rule(mix: Mix, evaluators: Sequence[Evaluator], archs: Sequence[ArchConfig], objective: str,
              own: Sequence[Fraction], name: str, description: str):
    """The rule's best threshold and host layout for fixed hardware `archs` (exhaustive, evaluator-priced)."""
    base = mix.base
    names = [e.model for _, e in model_labels(base)]
    share = base.space.share_levels
    n = len(base.drafters)
    kind = "energy" if objective == "energy" else "latency"
    choices = [[SpecChoice(tuple(DrafterChoice(g) for g in combo), False)
                for combo in itertools.product(*(draft_length_options(c.scenario, i) for i in range(n)))]
               for c in mix.cells]
    values = sorted({pass_tokens(c.batch_size, ch, j) for c, chs in zip(mix.cells, choices, strict=True)
                     for ch in chs for j in range(n + 1)})
    thresholds = values + [values[-1] + 1]  # FC on PIM iff batch x tokens < threshold
    offered = [evaluators[0].costs.placements(a) for a in archs]
    cache: dict[tuple, tuple[Design, Metrics] | None] = {}

    def priced(c: int, ch: SpecChoice, pattern: tuple[bool, ...], layout: str):
        key = (c, ch, pattern, layout)
        if key not in cache:
            places = [rule_placement(a, p, layout, share, off) for a, p, off in zip(archs, pattern, offered,
                                                                                     strict=True)]
            design = Design.assemble(names, list(archs), places, ch)
            try:
                cache[key] = (design, evaluators[c].metrics(design))
            except ScenarioError:
                cache[key] = None
        return cache[key]

    best = None
    for layout in ("normal", "spread"):
        for theta in thresholds:
            designs, metrics = [], []
            for c, cell in enumerate(mix.cells):
                options = []
                for ch in choices[c]:
                    pattern = tuple(pass_tokens(cell.batch_size, ch, j) < theta for j in range(n + 1))
                    p = priced(c, ch, pattern, layout)
                    if p is not None:
                        options.append(p)
                if not options:
                    break
                d, m = min(options, key=lambda o: cell_metric(o[1], kind))
                designs.append(d)
                metrics.append(m)
            else:
                try:
                    check_mix_capacity(mix, evaluators, designs)
                except ScenarioError:
                    continue
                v = mix_value(mix, metrics, objective, own)
                if best is None or v < best[0]:
                    best = (v, theta, layout, designs)
    if best is None:
        return _comparison(name, description, mix, None, objective, own,
                           error="no threshold gives a design that fits every cell (tensor copies)")
    _, theta, layout, designs = best
    evals = [ev.evaluate(d) for ev, d in zip(evaluators, designs, strict=True)]
    return _comparison(name, description, mix, evals, objective, own,
                       {"threshold_tokens": theta, "host_layout": layout,
                        "fc_on_pim_below": f"batch x tokens per pass < {theta}"})


def half_pim_hbm(mix: Mix, catalog: Catalog) -> list[ArchConfig]:
    """Identical half-PIM HBM devices on the scenario's device counts (like `baselines.fc_offload`)."""
    from specpim_cp.solvers.baselines import baseline_devices

    units = catalog.memory("hbm").max_pim_units
    return [ArchConfig("hbm", units // 2, n) for n in baseline_devices(mix.base)]


# -- all of them --------------------------------------------------------------------------------------
def references(mix: Mix, evaluators: Sequence[Evaluator], objective: str, own: Sequence[Fraction],
               catalog: Catalog) -> list[Comparison]:
    """(d) GPU-SI and (c) the PAPI-style rule on half-PIM HBM (both also warm starts of the mix solve)."""
    out = [gpu_si_mix(mix, objective, own, catalog)]
    if "hbm" in mix.base.memory_types:
        out.append(papi_rule(mix, evaluators, half_pim_hbm(mix, catalog), objective, own, PAPI_HALF,
                             "fixed identical half-PIM HBM devices; attention on PIM; FC on PIM below a fitted "
                             "batch x tokens-per-pass threshold; best chain draft lengths per cell; vanilla rounds"))
    return out


def compare(mix: Mix, evaluators: Sequence[Evaluator], objective: str, own: Sequence[Fraction],
            optima: Sequence[SolveResult], archs: Sequence[ArchConfig], refs: Sequence[Comparison],
            median: HardwareResult | None) -> list[Comparison]:
    """(a) per-cell optima, (b) median-cell hardware (`median`: the driver's HardwareResult on it), (c) the
    PAPI-style rule on half-PIM HBM and on the mix hardware `archs`, (d) GPU-SI, in that order."""
    per_cell = _comparison(PER_CELL, "every cell on its own optimal hardware (a lower bound for one hardware)", mix,
                           [r.evaluation for r in optima], objective, own,
                           {"statuses": [r.report.status for r in optima]})
    per_cell = replace(per_cell, extra={k: v for k, v in per_cell.extra.items() if k != "archs"})
    med = median_cell(mix)
    desc = (f"the hardware optimal for the weighted-median cell {med.index} ({med.label}) among those that can "
            "serve every cell, dataflow re-optimised per cell on it")
    if median is None or median.evaluations is None:
        where = "" if median is None else f" on {', '.join(a.label() for a in median.archs)}"
        median_c = _comparison(MEDIAN, desc, mix, None, objective, own, {"median_cell": med.index},
                               error=f"no mix design fits{where} ({'not run' if median is None else median.status})")
    else:
        median_c = _comparison(MEDIAN, desc, mix, median.evaluations, objective, own,
                               {"median_cell": med.index, "status": median.status, "how": median.how.value})
    rule_mix = papi_rule(mix, evaluators, archs, objective, own, PAPI_MIX,
                         "the PAPI-style rule on the mix-optimal hardware (a model without PIM units keeps every "
                         "operator on the host)")
    by_name = {c.name: c for c in refs}
    order = [per_cell, median_c, by_name.get(PAPI_HALF), rule_mix, by_name.get(GPU_SI)]
    return [c for c in order if c is not None]
