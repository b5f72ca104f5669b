"""Baselines (formulations/baselines.md); each returns a Design that the evaluator prices.

- GPU-AR: the verifier alone, autoregressive, plain memory (no PIM), host-only.
- GPU-SI: speculative inference on the scenario's devices, all plain memory, vanilla rounds.
- GPU-SI trees (only for scenarios whose drafters have token trees): GPU-SI with the best chain or
  top-ranked token tree per drafter for those devices (Sequoia, Chen et al. 2024, on GPUs).
- FC-offload PIM ("FC-offload", the recipe SpecPIM compares against): every FC operator on PIM,
  attention and its KV cache on the host, identical half-PIM devices for every model; the FC weights the
  PIM units cannot hold are kept in the normal units and moved into the PIM units over the external bus
  on every pass, priced by the evaluator (`ModelDesign.spill`) and reported (`spills`) (Samsung's HBM-PIM
  GEMV offload, ISCA 2021; `fc_offload`); "FC-offload (fit)" buys the PIM units instead (`fc_offload_fit`).
- attention-offload PIM: attention and its KV cache on PIM, FC on the host with its weights wherever
  the host reads them at full bandwidth (AttAcc, ASPLOS 2024; NeuPIMs, ASPLOS 2024), identical half-PIM
  devices.
- off-the-shelf: HBM-PIM as sold (Aquabolt-XL: 4 of 8 dies PIM) and AiM as sold (every GDDR package
  AiM), each with the better of its fixed mapping rules.
A baseline's draft lengths and host layouts are the best for its recipe, every layout assignment checked
against both sides' capacity (`recipe_layouts`, [LAYOUT]); staging is off and rounds are vanilla.
formulations/baselines.md has the recipes, their sources and the spill rule.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import GIB_IN_KIB, CapacityUse, Evaluation, Evaluator
from specpim_cp.physics.rounds import drafter_cycle_tokens, tree_pass_tokens, verifier_tokens
from specpim_cp.problem.design import (
    DEVICE_COUNTS,
    ArchConfig,
    Design,
    DrafterChoice,
    ModelDesign,
    Placement,
    SpecChoice,
)
from specpim_cp.problem.heads import arch_on_verifier
from specpim_cp.problem.mapping_rules import fit_layouts, rule_placement
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.space import draft_length_options, model_labels, tree_options
from specpim_cp.solvers.bounded import BoundedCache
from specpim_cp.solvers.edge_baselines import EDGE_BASELINES
from specpim_cp.solvers.shared_evaluator import evaluator_key, shared_evaluator

HALF = "half"
TREES = "trees"  # a baseline that needs a drafter with token trees
#: Most designs one baseline enumerates (its drafts x host layouts).
MAX_RECIPE_DESIGNS = 50_000


@dataclass(frozen=True)
class BaselineResult:
    name: str
    description: str
    evaluation: Evaluation | None
    error: str | None = None

    @property
    def devices(self) -> int | None:
        """Devices the baseline's design uses, over every model (None when infeasible)."""
        return None if self.evaluation is None else sum(md.devices for _, md in self.evaluation.design.models())

    def as_dict(self) -> dict:
        if self.evaluation is None:
            return {"name": self.name, "description": self.description, "design": None, "metrics": None,
                    "devices": None, "error": self.error}
        ev = self.evaluation.as_dict()
        design = ev.pop("design")
        return {"name": self.name, "description": self.description, "design": design, "devices": self.devices,
                "host_kernel_model": ev.pop("host_kernel_model"), "catalog_files": ev.pop("catalog_files"),
                "spill": [s.as_dict() for s in spills(self.evaluation)], "metrics": ev}


@dataclass(frozen=True)
class Spill:
    """A spilled model of a baseline's design: what it moves every pass, and what that costs."""

    label: str  # "verifier", "drafters[0]", ...
    model: str
    spill_gib: float  # the PIM units' overflow, kept in the normal units
    spill_ns: int  # moving it, per pass (read from the normal units + write into the PIM units)
    pass_time_ns: int  # the pass the breakdown reports, spill included

    @property
    def share(self) -> float:
        return self.spill_ns / self.pass_time_ns if self.pass_time_ns else 0.0

    def as_dict(self) -> dict:
        return {"label": self.label, "model": self.model, "spill_gib": self.spill_gib, "spill_ns": self.spill_ns,
                "pass_time_ns": self.pass_time_ns, "spill_share_of_pass": self.share}


def spills(evaluation: Evaluation) -> list[Spill]:
    """The models of an evaluated design that spill, from the evaluator's breakdown."""
    return [Spill(label, mb.model, mb.capacity.spill_kib / GIB_IN_KIB, mb.spill_ns, mb.pass_time_ns)
            for label, mb in evaluation.breakdown.models() if mb.capacity.spill_kib]


def baseline_devices(scenario: Scenario) -> list[int]:
    """Scenario's fixed device counts; under a budget, one per drafter (or its fixed count) and the most the
    rest allows for the verifier (up to its max_devices). A baseline without drafters is priced on the
    scenario without them, so its verifier takes the whole budget (fair GPU-AR, formulations/baselines.md)."""
    entries = model_labels(scenario)
    if all(e.devices is not None for _, e in entries):
        return [e.devices for _, e in entries]
    budget = scenario.device_budget or len(entries)
    fixed = [e.devices or 1 for _, e in entries]
    rest = min(budget - sum(fixed[1:]), scenario.verifier.max_devices)
    fixed[0] = scenario.verifier.devices or max(n for n in DEVICE_COUNTS if n <= max(1, rest))
    return fixed


def _memory(scenario: Scenario, preferred: str) -> str:
    return preferred if preferred in scenario.memory_types else scenario.memory_types[0]


@dataclass(frozen=True)
class RecipeLayout:
    """One model's host layouts under a fixed recipe and whether it spills (`ModelDesign.spill`)."""

    placement: dict[str, Placement]
    spill: bool = False


def best_fixed_recipe(scenario: Scenario, catalog: Catalog, archs: list[ArchConfig], rule: str | list[str],
                      pipeline: bool = False, trees: bool = False, spill: bool = False) -> Evaluation:
    """Best draft lengths (and, with `trees`, token-tree shapes) and host layouts for a fixed architecture
    and mapping rule, or one rule per model (exhaustive, via the evaluator). `spill`: a model whose PIM units
    cannot hold its PIM-side tensors moves the overflow over the external bus every pass (FC-offload as
    SpecPIM ran it)."""
    rules = [rule] * len(archs) if isinstance(rule, str) else rule
    ev = shared_evaluator(scenario, catalog)  # the exact solve's and the other recipes' memoised prices
    n = len(scenario.drafters)
    names = [e.model for _, e in model_labels(scenario)]
    archs = recipe_archs(scenario, archs)
    drafts = [[DrafterChoice(g) for g in draft_length_options(scenario, i, ev.catalog.models[names[i + 1]])]
              + ([DrafterChoice(len(w), None, w) for w in tree_options(scenario, i)] if trees else [])
              for i in range(n)]
    n_drafts = math.prod(len(d) for d in drafts)
    if n_drafts > MAX_RECIPE_DESIGNS:
        raise ScenarioError(f"{n_drafts} draft combinations exceed {MAX_RECIPE_DESIGNS} for one baseline; give "
                            "token trees to fewer drafters or lower tree.max_nodes")
    tokens = recipe_pass_tokens(scenario.batch_size, drafts, pipeline)
    per_model = [recipe_layouts(ev, label, name, a, rules[j], tokens[j], spill)
                 for j, ((label, _), name, a) in enumerate(zip(model_labels(scenario), names, archs, strict=True))]
    layouts = list(itertools.product(*per_model))
    combos = n_drafts * len(layouts)
    if combos > MAX_RECIPE_DESIGNS:
        raise ScenarioError(f"{combos} draft and layout combinations exceed {MAX_RECIPE_DESIGNS} for one "
                            "baseline; give token trees to fewer drafters or lower tree.max_nodes")
    best: Design | None = None
    best_value = None
    last_error: ScenarioError | None = None
    for chosen in layouts:
        # the architecture, placement and capacity do not depend on the drafts: check them once per layout
        # (the draft options come from the space), then price every draft without re-checking
        checked = False
        for combo in itertools.product(*drafts):
            design = _assemble(names, archs, chosen, SpecChoice(tuple(combo), pipeline))
            try:
                m = ev.metrics(design, check=not checked)
            except ScenarioError as exc:
                last_error = exc
                if not checked:
                    break  # this layout is outside the space whatever the drafts
                continue
            checked = True
            value = m.objective(scenario.objective)
            if best_value is None or value < best_value:
                best, best_value = design, value
    if best is None:
        raise last_error or ScenarioError("no feasible design")
    return ev.evaluate(best)


def recipe_archs(scenario: Scenario, archs: list[ArchConfig]) -> list[ArchConfig]:
    """A fixed recipe's architectures with every head that may sit on the verifier's devices placed there (as
    serving engines run EAGLE-3, MTP, Medusa and prompt lookup: formulations/drafter_kinds.md)."""
    return [dataclasses.replace(archs[0], colocated=True) if j and arch_on_verifier(scenario, j - 1) else a
            for j, a in enumerate(archs)]


def _assemble(names: list[str], archs: list[ArchConfig], chosen: tuple[RecipeLayout, ...],
              choice: SpecChoice) -> Design:
    design = Design.assemble(names, archs, [c.placement for c in chosen], choice)
    if not any(c.spill for c in chosen):
        return design
    models = [md.model_copy(update={"spill": c.spill}) for (_, md), c in zip(design.models(), chosen, strict=True)]
    return design.model_copy(update={"verifier": models[0], "drafters": models[1:]})


def recipe_pass_tokens(batch: int, drafts: list[list[DrafterChoice]], pipeline: bool) -> list[tuple[int, ...]]:
    """Per model (verifier first), every token count of a pass a recipe's drafts make it run: the
    verification passes of every draft combination; a drafter's step, or its token trees' passes."""
    verify = {verifier_tokens(batch, SpecChoice(tuple(c), pipeline)) for c in itertools.product(*drafts)}
    out = [tuple(sorted(verify))]
    for options in drafts:
        counts = set()
        for d in options:
            counts.update(tree_pass_tokens(batch, d) if d.tree is not None else (drafter_cycle_tokens(batch, d),))
        out.append(tuple(sorted(counts)))
    return out


def recipe_layouts(ev: Evaluator, label: str, model: str, arch: ArchConfig, rule: str, tokens: tuple[int, ...],
                   spill: bool = False) -> list[RecipeLayout]:
    """The host layouts of a fixed recipe on one model's architecture worth pricing: every assignment of
    the layouts the architecture offers to the rule's host operators (at most 2^5), kept if both sides'
    capacity holds it (or, with `spill`, if the normal units also hold the PIM units' overflow), then
    only those no other kept layout matches or beats in pass time and energy at every token count in
    `tokens` (the round's time and energy grow with each pass's, so this loses no optimum). ScenarioError
    with the least shortfall when none fits: the enumeration is the proof that no layout exists."""
    share = ev.scenario.space.share_levels
    offered = ev.costs.placements(arch)
    base = fit_layouts(rule_placement(rule, share, "normal"), offered)
    host_ops = [op for op in PLACEABLE_OPS if base[op].engine == "host"]
    host_layouts = [p.layout for p in offered if p.engine == "host"] or [base[op].layout for op in host_ops[:1]]
    fitting: list[tuple[ModelDesign, RecipeLayout]] = []
    short: tuple[int, ModelDesign, CapacityUse] | None = None
    combos = list(itertools.product(host_layouts, repeat=len(host_ops)))
    for combo in combos:
        place = dict(base)
        place.update({op: Placement(engine="host", share=0, layout=lay) for op, lay in zip(host_ops, combo)})
        md = ModelDesign(model=model, memory_type=arch.memory_type, pim_units=arch.pim_units, devices=arch.devices,
                         placement=place, colocated=arch.colocated)
        cap = ev.capacity(md)
        if not cap.holds and spill:
            md = md.model_copy(update={"spill": True})
            cap = ev.capacity(md)
        if cap.holds:
            fitting.append((md, RecipeLayout(place, md.spill)))
            continue
        _, need, have = cap.overflow()
        if short is None or need - have < short[0]:
            short = (need - have, md, cap)
    if not fitting:
        assert short is not None
        try:
            ev.check_capacity(label, short[1], short[2])  # raises, naming the least shortfall
        except ScenarioError as exc:
            if len(combos) == 1:
                raise
            raise ScenarioError(f"{exc} (the least shortfall of the recipe's {len(combos)} host layouts: none "
                                "fits)") from None
    prices = [tuple(_pass(ev, md, t) for t in tokens) for md, _ in fitting]
    kept = []
    for k, price in enumerate(prices):
        # beaten: an equal price met earlier in the enumeration (kept instead), or a dominating one
        beaten = any((other == price and m < k) or (other != price and _dominates(other, price))
                     for m, other in enumerate(prices))
        if not beaten:
            kept.append(fitting[k][1])
    return kept


def _pass(ev: Evaluator, md: ModelDesign, tokens: int) -> tuple[int, int]:
    p = ev.pass_price(md, tokens)
    return p.time_ns, p.energy_nj


def _dominates(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    """Whether pass prices `a` are no more than `b` in time and energy at every token count."""
    return all(ta <= tb and ea <= eb for (ta, ea), (tb, eb) in zip(a, b, strict=True))


def _run(name: str, description: str, fn) -> BaselineResult:
    try:
        return BaselineResult(name, description, fn())
    except ScenarioError as exc:
        return BaselineResult(name, description, None, str(exc))


def gpu_ar(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    catalog = catalog or scenario_catalog(scenario)
    ar = scenario.model_copy(update={"drafters": []})
    dev = baseline_devices(ar)[0]  # no drafter: the verifier takes every device the budget allows
    mem = _memory(scenario, "hbm")
    return best_fixed_recipe(ar, catalog, [ArchConfig(mem, 0, dev)], "host-only")


def gpu_si(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    catalog = catalog or scenario_catalog(scenario)
    mem = _memory(scenario, "hbm")
    archs = [ArchConfig(mem, 0, n) for n in baseline_devices(scenario)]
    return best_fixed_recipe(scenario, catalog, archs, "host-only")


def gpu_si_trees(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    """GPU-SI with token trees (Sequoia's setting): plain memory, vanilla rounds, and for every drafter
    with a [drafters.tree] table the best chain or top-ranked tree for these devices."""
    catalog = catalog or scenario_catalog(scenario)
    mem = _memory(scenario, "hbm")
    archs = [ArchConfig(mem, 0, n) for n in baseline_devices(scenario)]
    return best_fixed_recipe(scenario, catalog, archs, "host-only", trees=True)


def _identical(scenario: Scenario, catalog: Catalog, mem: str, k: int | str) -> list[ArchConfig]:
    units = catalog.memory(mem).max_pim_units
    kk = units // 2 if k == HALF else int(k)
    return [ArchConfig(mem, kk, n) for n in baseline_devices(scenario)]


def fc_offload(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    """SpecPIM's FC-offload baseline as the paper ran it (formulations/baselines.md): every FC operator on
    PIM, attention and its KV cache on the host, identical half-PIM devices for every model; where the PIM
    units cannot hold the FC weights (OPT-13B on 2 x 40 GB: 20 GiB of PIM for 24 GiB of weights) the
    overflow is kept in the normal units and moved into the PIM units over the external bus on every pass
    (SPILL-1, `ModelDesign.spill`), priced by the evaluator and reported in its breakdown."""
    catalog = catalog or scenario_catalog(scenario)
    return best_fixed_recipe(scenario, catalog, _identical(scenario, catalog, _memory(scenario, "hbm"), HALF),
                             "fc-offload", spill=True)


def fc_offload_fit(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    """FC-offload that buys PIM units instead of spilling: half-PIM devices, or the fewest PIM units per
    device above half that hold the FC weights (with time-shared channels an operator runs on PIM only
    on tensors in its PIM units, formulations/physics.md P1; Samsung's FC offload stores the weights in
    the PIM banks). Capacity-checked, so a design of the optimizer's space."""
    catalog = catalog or scenario_catalog(scenario)
    mem = _memory(scenario, "hbm")
    last: ScenarioError | None = None
    for k in range(catalog.memory(mem).max_pim_units // 2, catalog.memory(mem).max_pim_units + 1):
        try:
            return best_fixed_recipe(scenario, catalog, _identical(scenario, catalog, mem, k), "fc-offload")
        except ScenarioError as exc:
            last = exc  # the error at the most PIM units names the least shortfall
    assert last is not None
    raise last


def attention_offload(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    catalog = catalog or scenario_catalog(scenario)
    return best_fixed_recipe(scenario, catalog, _identical(scenario, catalog, _memory(scenario, "hbm"), HALF),
                             "attention-offload")


def _best_of(scenario: Scenario, catalog: Catalog, archs: list[ArchConfig], rules: list[str]) -> Evaluation:
    results, errors = [], []
    for rule in rules:
        try:
            results.append(best_fixed_recipe(scenario, catalog, archs, rule))
        except ScenarioError as exc:
            errors.append(exc)
    if not results:
        raise errors[-1]
    return min(results, key=lambda e: e.metrics.objective(scenario.objective))


def off_the_shelf_hbm_pim(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    catalog = catalog or scenario_catalog(scenario)
    archs = _identical(scenario, catalog, "hbm", HALF)
    return _best_of(scenario, catalog, archs, ["fc-offload", "attention-offload", "host-only"])


def off_the_shelf_aim(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    catalog = catalog or scenario_catalog(scenario)
    archs = _identical(scenario, catalog, "gddr", catalog.memory("gddr").max_pim_units)
    return _best_of(scenario, catalog, archs, ["all-pim"])


BASELINES = (
    ("GPU-AR", "verifier alone, autoregressive, plain memory", gpu_ar, None),
    ("GPU-SI", "speculative inference, plain memory, vanilla rounds", gpu_si, None),
    ("GPU-SI trees", "GPU-SI with the best token tree per drafter (Sequoia), plain memory", gpu_si_trees, TREES),
    ("FC-offload", "FC operators on PIM, identical half-PIM devices, what does not fit moved every pass (SpecPIM)",
     fc_offload, None),
    ("FC-offload (fit)", "FC operators on PIM, identical devices with the fewest PIM units (half+) that hold them",
     fc_offload_fit, None),
    ("attention-offload", "attention + KV cache on PIM, identical half-PIM devices", attention_offload, None),
    ("HBM-PIM as sold", "Aquabolt-XL stacks (4 of 8 dies PIM), best fixed mapping", off_the_shelf_hbm_pim, "hbm"),
    ("AiM as sold", "every GDDR6 package an AiM, everything on PIM", off_the_shelf_aim, "gddr"),
)


#: How many scenarios' baselines `run_baselines` keeps (a solve's first incumbent and the batch's baselines
#: instance of the same scenario read them once). A batch worker meets a scenario's baselines up to three
#: times (its baselines instance, its exact solve's and its ladder steps' first incumbents) with a whole
#: benchmark set between them (12 scenarios in `paper`, 21 in `paper-full`); one scenario's are about 20 KB.
BASELINES_CACHE_SIZE = 64
_BASELINES: BoundedCache[tuple[BaselineResult, ...]] = BoundedCache(BASELINES_CACHE_SIZE)


def run_baselines(scenario: Scenario, catalog: Catalog | None = None) -> list[BaselineResult]:
    """Every baseline of the scenario (fixed recipes, each best over its free choices), priced by the
    evaluator; kept per scenario content (`evaluator_key`), since the recipes are deterministic."""
    catalog = catalog or scenario_catalog(scenario)
    return list(_BASELINES.get_or_make(evaluator_key(scenario, catalog),
                                       lambda: tuple(_all_baselines(scenario, catalog))))


def _all_baselines(scenario: Scenario, catalog: Catalog) -> list[BaselineResult]:
    if scenario.shared_device:  # one device split by channels (formulations/edge.md)
        return [_run(name, desc, lambda fn=fn: fn(scenario, catalog, best_fixed_recipe))
                for name, desc, fn in EDGE_BASELINES if name == "GPU-AR" or scenario.drafters]
    out = []
    for name, desc, fn, needs in BASELINES:
        if needs == TREES:
            if any(tree_options(scenario, i) for i in range(len(scenario.drafters))):
                out.append(_run(name, desc, lambda fn=fn: fn(scenario, catalog)))
            continue
        if needs is not None and needs not in scenario.memory_types:
            out.append(BaselineResult(name, desc, None, f"memory type '{needs}' is not allowed by the scenario"))
            continue
        if name != "GPU-AR" and not scenario.drafters:
            continue
        out.append(_run(name, desc, lambda fn=fn: fn(scenario, catalog)))
    return out
