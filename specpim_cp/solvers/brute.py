"""Brute-force optimum by enumeration with the evaluator (the oracle the CP-SAT optimum is checked against).

Per model, every (architecture, placement) option is priced; an option is dropped only when another
option of the same model is at least as good in every quantity the round can depend on (pass time and
pass energy at every token count the model may run, draft2 step cost, idle power, device count); an
option whose tensors do not fit its devices (by their layouts) is dropped. Every objective (latency, energy, EDP per token) is non-decreasing in each of
those quantities, so the pruning cannot lose the optimum (request latency also reads each model's prefill,
which its vector then holds). The surviving options are combined with every speculation choice and each
complete design is priced by the evaluator; the verifier's options alone make the designs that do not
speculate ([NOSPEC]).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import CapacityUse, Evaluation, Evaluator
from specpim_cp.physics.rounds import drafter_cycle_tokens, tree_pass_tokens, verifier_tokens
from specpim_cp.problem.design import ArchConfig, ModelDesign, Staging
from specpim_cp.problem.edge import sharing
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.space import DesignSpace, ModelOptions
from specpim_cp.solvers.head_options import colocation_class, colocation_needs
from specpim_cp.solvers.result import SolveReport, SolveResult, Status, inputs_hash

MAX_OPTIONS_PER_MODEL = 60_000
MAX_DESIGNS = 400_000


def placement_combinations(opts: ModelOptions, arch) -> list[dict]:
    per_op = [opts.allowed(arch, op) for op in PLACEABLE_OPS]
    return [dict(zip(PLACEABLE_OPS, combo)) for combo in itertools.product(*per_op)]


@dataclass(frozen=True)
class PricedOption:
    """One model's (architecture, placement, draft2) option that fits its devices, with the vector that
    dominance compares: pass time and energy per token count, draft2 step, idle power, device count."""

    arch: ArchConfig
    draft2: str | None
    md: ModelDesign
    capacity: CapacityUse
    perf: tuple[int, ...]


def priced_options(ev: Evaluator, opts: ModelOptions, j: int, tokens: Sequence[int], draft2s: Sequence[str],
                   limit: int | None = None, latency_only: bool = False, prefill: bool = False
                   ) -> Iterator[PricedOption]:
    """Every option of model j (index in the design) whose tensors fit, priced at `tokens`; ScenarioError
    once more than `limit` options would be listed. `latency_only`: the vector holds only what a design's
    latency reads (pass and draft2-step times, devices), not the energies nor the idle power; `prefill`: it
    also holds the model's prefill time (what the request objective adds, formulations/prefill.md)."""
    listed = 0
    for a in opts.archs:
        places = placement_combinations(opts, a)
        if limit is not None and listed + len(places) > limit:
            raise ScenarioError(f"brute force: {opts.label} has more than {limit} options; "
                                "restrict the space ([space] memory_type, pim_units, mapping, share_levels)")
        for pl in places:
            for d2 in [None, *draft2s]:
                md = ModelDesign(model=opts.entry.model, memory_type=a.memory_type, pim_units=a.pim_units,
                                 devices=a.devices, placement=pl, draft_length=None if j == 0 else 1,
                                 staging=None if d2 is None else Staging(draft2=d2, draft_length=1),
                                 colocated=a.colocated)
                cap = ev.capacity(md)
                if not cap.holds:
                    continue
                vec = []
                for t in tokens:
                    p = ev.pass_price(md, t)
                    vec += [p.time_ns] if latency_only else [p.time_ns, p.energy_nj]
                if d2 is not None:
                    try:
                        step = ev.draft2_step(md)
                    except ScenarioError:  # the draft2 model cannot run on this host
                        continue
                    vec += [step.time_ns] if latency_only else [step.time_ns, step.energy_nj]
                vec += [a.devices] if latency_only else [ev.costs.idle_power_mw(a), a.devices]
                if prefill:
                    vec.append(ev.prefill.model_prefill(md).time_ns)
                listed += 1
                yield PricedOption(a, d2, md, cap, tuple(vec))


def _dominates(u: tuple, v: tuple) -> bool:
    return all(a <= b for a, b in zip(u, v)) and u != v


def pareto_filter(items: list[tuple[tuple, object]]) -> list[object]:
    items = sorted(items, key=lambda it: it[0])
    kept: list[tuple[tuple, object]] = []
    for vec, obj in items:
        if not any(_dominates(k, vec) or k == vec for k, _ in kept):
            kept.append((vec, obj))
    return [obj for _, obj in kept]


def _space_options(ev: Evaluator, space: DesignSpace, tail: Callable[[int, ModelDesign], tuple] | None = None,
                   latency_only: bool = False, prefill: bool = False
                   ) -> tuple[list[list[tuple[ModelDesign, str | None]]], list[list[tuple[ModelDesign, str | None]]]]:
    """Per model, the (design part, draft2) options kept and those dropped: without `tail`, the options
    no other option of the model matches or beats in every priced quantity (one of equals is kept);
    with `tail`, only those another option beats or matches in every quantity and whose tail (a key of
    the model's part) is smaller (`lexicographic_pareto`)."""
    choices = space.choice_list
    batch = space.scenario.batch_size
    # token counts each model may run, and draft2 options per drafter
    tokens: list[set[int]] = [set() for _ in space.models]
    for c in choices:
        tokens[0].add(verifier_tokens(batch, c))
        for i, dc in enumerate(c.drafters):
            tokens[i + 1].add(drafter_cycle_tokens(batch, dc))
            if dc.tree is not None:
                tokens[i + 1].update(tree_pass_tokens(batch, dc))
    draft2_models = [sorted({st.draft2 for st in space.staging_options(i) if st is not None})
                     for i in range(space.n_drafters)]
    kept_all, dropped_all = [], []
    for j, opts in enumerate(space.models):
        draft2s = draft2_models[j - 1] if j else []
        # prune within each class: its draft2 (capacity depends on it), its colocation class (`head_options`)
        # and, on a shared device, its architecture (every model's is tied to the others', [EDGE-2]);
        # interleaved, its bytes count against the others'
        joint = sharing(space.scenario) == "interleaved"
        raw = [((o.draft2, (colocation_class(space, j, o.md), o.arch if space.scenario.shared_device else None))
                + o.perf + colocation_needs(space, j, o.md, o.capacity)
                + ((o.capacity.pim_need_kib, o.capacity.normal_need_kib) if joint else ()),
                (o.md, o.draft2))
               for o in priced_options(ev, opts, j, sorted(tokens[j]), draft2s, MAX_OPTIONS_PER_MODEL, latency_only,
                                       prefill)]
        kept = []
        for key in dict.fromkeys(k[:2] for k, _ in raw):
            cls = [(k[2:], v) for k, v in raw if k[:2] == key]
            kept += pareto_filter(cls) if tail is None else lexicographic_pareto(cls, lambda v, j=j: tail(j, v[0]))
        kept_all.append(kept)
        ids = {id(v) for v in kept}
        dropped_all.append([v for _, v in raw if id(v) not in ids])
    return kept_all, dropped_all


def lexicographic_pareto(items: list[tuple[tuple, object]], tail: Callable[[object], tuple]) -> list[object]:
    """The items no other item dominates lexicographically: item v drops u when v's vector is at most u's
    in every coordinate and tail(v) < tail(u) (a strict order, so of equal vectors the least tail stays)."""
    items = sorted(items, key=lambda it: tail(it[1]))
    kept: list[tuple[tuple, object]] = []
    for vec, obj in items:  # a dropped dominator has a kept one (transitivity), which sorts earlier
        if not any(all(a <= b for a, b in zip(k, vec)) for k, _ in kept):
            kept.append((vec, obj))
    return [obj for _, obj in kept]


def _designs(space: DesignSpace, options: list[list[tuple[ModelDesign, str | None]]]):
    """Every design of the options' combinations with every speculation choice (draft2 classes matched),
    and the verifier alone on each of its options ([NOSPEC]: the drafters' options play no part)."""
    alone = [c for c in space.choice_list if not c.speculates]
    n_designs = 1
    for o in options:
        n_designs *= max(1, len(o))
    n_designs *= len(space.choice_list) - len(alone)
    n_designs += len(alone) * len(options[0])
    if n_designs > MAX_DESIGNS:
        raise ScenarioError(f"brute force: {n_designs} designs after pruning exceed {MAX_DESIGNS}; restrict the space")
    for c in alone:
        for md, _ in options[0]:
            yield space.build([md.arch], [md.placement], c)
    for combo in itertools.product(*options):
        for c in space.choice_list:
            # a drafter option was priced for one draft2 class (None = unstaged)
            if not c.speculates or any(combo[i + 1][1] != (None if dc.staging is None else dc.staging.draft2)
                   for i, dc in enumerate(c.drafters)):
                continue
            yield space.build([md.arch for md, _ in combo], [md.placement for md, _ in combo], c)


@dataclass(frozen=True)
class Enumeration:
    """The priced designs of a space's kept options (`evaluations`, the capacity-feasible ones) and, per
    model, the options the pruning dropped (`dropped`, with their draft2 class)."""

    space: DesignSpace
    evaluations: list[Evaluation]
    dropped: list[list[tuple[ModelDesign, str | None]]]


def enumerate_designs(scenario: Scenario, *, tail: Callable[[int, ModelDesign], tuple],
                      catalog: Catalog | None = None) -> Enumeration:
    """Every design whose options survive the lexicographic pruning by `tail(j, model part)` (a key of
    model j's part that a canonical tie-break compares after the objectives; `lexicographic_pareto`),
    priced by the evaluator: a design that no other design beats in (objectives, sum of the tails)
    order is among them (the oracle of the canonical optimum's tests)."""
    catalog = catalog or scenario_catalog(scenario)
    ev = Evaluator(scenario, catalog)
    space = DesignSpace(scenario, catalog)
    kept, dropped = _space_options(ev, space, tail)
    out = []
    for design in _designs(space, kept):
        try:
            out.append(ev.evaluate(design))
        except ScenarioError:
            continue
    return Enumeration(space, out, dropped)


def every_design(scenario: Scenario, catalog: Catalog | None = None) -> list[Evaluation]:
    """Every design of the space whose tensors fit, priced by the evaluator, with no pruning (the oracle of
    the decision ranges: a design within a tolerance may use an option that another option dominates)."""
    catalog = catalog or scenario_catalog(scenario)
    ev = Evaluator(scenario, catalog)
    space = DesignSpace(scenario, catalog)
    kept, dropped = _space_options(ev, space)
    out = []
    for design in _designs(space, [k + d for k, d in zip(kept, dropped, strict=True)]):
        try:
            out.append(ev.evaluate(design))
        except ScenarioError:
            continue
    return out


def _key(e: Evaluation, objective: str) -> tuple[Fraction, ...]:
    """What brute force minimises: the objective; for request latency, then the latency per token (as the
    exact solver's request solve breaks ties)."""
    m = e.metrics
    return (m.request_fraction(), m.latency_fraction()) if objective == "request" else (m.objective(objective),)


def brute_force(scenario: Scenario, *, objective: str | None = None, catalog: Catalog | None = None) -> SolveResult:
    """The optimum of the scenario's (restricted) space by enumeration; refuses when the space is too large."""
    t0 = time.perf_counter()
    catalog = catalog or scenario_catalog(scenario)
    objective = objective or scenario.objective
    ev = Evaluator(scenario, catalog)
    space = DesignSpace(scenario, catalog)
    # a latency optimum reads only times: options are compared on them alone (many fewer survive); a
    # request optimum reads the times and each model's prefill
    options, _ = _space_options(ev, space, latency_only=objective in ("latency", "request"),
                                prefill=objective == "request")
    best: Evaluation | None = None
    evaluated = 0
    for design in _designs(space, options):
        try:
            e = ev.evaluate(design)
        except ScenarioError:
            continue
        evaluated += 1
        if best is None or _key(e, objective) < _key(best, objective):
            best = e
    if best is None:
        raise ScenarioError("brute force: no feasible design in the space")
    obj: Fraction = best.metrics.objective(objective)
    report = SolveReport(method="brute-force", objective_name=objective, status=Status.OPTIMAL, objective=obj, bound=obj,
                         wall_s=time.perf_counter() - t0, iterations=evaluated, seed=None,
                         solver_version="enumeration", inputs_hash=inputs_hash(scenario, {"objective": objective}),
                         extra={"designs_evaluated": evaluated, "options_per_model": [len(o) for o in options]})
    return SolveResult(best, report)
