"""Baselines (DESIGN.md section 8). Each returns a Design that the evaluator prices.

- GPU-AR: the verifier alone, autoregressive, plain memory (no PIM), host-only.
- GPU-SI: speculative inference on the scenario's devices, all plain memory, vanilla rounds.
- GPU-SI trees (only for scenarios whose drafters have token trees): GPU-SI with the best chain or
  top-ranked token tree per drafter for those devices (Sequoia, Chen et al. 2024, on GPUs).
- FC-offload PIM: every FC operator on PIM, attention and its KV cache on the host, identical half-PIM
  devices, or the fewest PIM units per device above half that hold the FC weights (Samsung's HBM-PIM
  GEMV offload, ISCA 2021; SpecPIM's FC-offload baseline; `fc_offload`).
- attention-offload PIM: attention and its KV cache on PIM, FC on the host with its weights wherever
  the host reads them at full bandwidth (AttAcc, ASPLOS 2024; NeuPIMs, ASPLOS 2024: the FC layers lose
  no bandwidth to the PIM units' existence), identical half-PIM devices.
- off-the-shelf: HBM-PIM as sold (Aquabolt-XL: 4 of 8 dies PIM) and AiM as sold (every GDDR package
  AiM), each with the better of its fixed mapping rules.
Draft lengths of a baseline are the best for its fixed recipe (enumerated with the evaluator), and so
are the host tensors' layout (normal units, or spread over every unit) where the memory model offers a
choice: a baseline is the best design of its own restricted space; staging is off and rounds are vanilla.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.design import (
    DEVICE_COUNTS,
    ArchConfig,
    Design,
    DrafterChoice,
    ModelDesign,
    Placement,
    SpecChoice,
)
from specpim_cp.problem.mapping_rules import fit_layouts, rule_placement
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.problem.space import draft_length_options, model_labels, tree_options

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

    def as_dict(self) -> dict:
        if self.evaluation is None:
            return {"name": self.name, "description": self.description, "design": None, "metrics": None,
                    "error": self.error}
        ev = self.evaluation.as_dict()
        design = ev.pop("design")
        return {"name": self.name, "description": self.description, "design": design,
                "host_kernel_model": ev.pop("host_kernel_model"), "catalog_files": ev.pop("catalog_files"),
                "metrics": ev}


def baseline_devices(scenario: Scenario) -> list[int]:
    """Scenario's fixed device counts; under a budget, one per drafter and the rest for the verifier."""
    entries = model_labels(scenario)
    if all(e.devices is not None for _, e in entries):
        return [e.devices for _, e in entries]
    budget = scenario.device_budget or len(entries)
    fixed = [e.devices or 1 for _, e in entries]
    rest = budget - sum(fixed[1:])
    fixed[0] = scenario.verifier.devices or max(n for n in DEVICE_COUNTS if n <= max(1, rest))
    return fixed


def _memory(scenario: Scenario, preferred: str) -> str:
    return preferred if preferred in scenario.memory_types else scenario.memory_types[0]


def best_fixed_recipe(scenario: Scenario, catalog: Catalog, archs: list[ArchConfig], rule: str,
                      pipeline: bool = False, trees: bool = False) -> Evaluation:
    """Best draft lengths (and, with `trees`, token-tree shapes) for a fixed architecture and mapping
    rule (exhaustive, via the evaluator)."""
    ev = Evaluator(scenario, catalog)
    n = len(scenario.drafters)
    best: Design | None = None
    last_error: ScenarioError | None = None
    names = [e.model for _, e in model_labels(scenario)]
    per_model = [_layout_options(ev, name, a, rule) for name, a in zip(names, archs, strict=True)]
    layouts = [list(combo) for combo in itertools.product(*per_model)]
    drafts = [[DrafterChoice(g) for g in draft_length_options(scenario, i)]
              + ([DrafterChoice(len(w), None, w) for w in tree_options(scenario, i)] if trees else [])
              for i in range(n)]
    combos = math.prod(len(d) for d in drafts) * len(layouts)
    if combos > MAX_RECIPE_DESIGNS:
        raise ScenarioError(f"{combos} draft and layout combinations exceed {MAX_RECIPE_DESIGNS} for one "
                            "baseline; give token trees to fewer drafters or lower tree.max_nodes")
    best_value = None
    for places in layouts:
        # the architecture, placement and capacity do not depend on the drafts: check them once per layout
        # (the draft options come from the space), then price every draft without re-checking
        checked = False
        for combo in itertools.product(*drafts):
            design = Design.assemble(names, archs, places, SpecChoice(tuple(combo), pipeline))
            try:
                m = ev.metrics(design, check=not checked)
            except ScenarioError as exc:
                last_error = exc
                if not checked:
                    break  # this layout does not fit (or is outside the space) whatever the drafts
                continue
            checked = True
            value = m.objective(scenario.objective)
            if best_value is None or value < best_value:
                best, best_value = design, value
    if best is None:
        raise last_error or ScenarioError("no feasible design")
    return ev.evaluate(best)


def _layout_options(ev: Evaluator, model: str, arch: ArchConfig, rule: str) -> list[dict[str, Placement]]:
    """A fixed recipe's host layouts on one model's architecture: every host tensor in the normal units,
    and every host tensor spread (full bandwidth) with, while the PIM units overflow, the largest host
    tensors moved back to the normal units (a capacity-fitting greedy, deterministic)."""
    share = ev.scenario.space.share_levels
    offered = ev.costs.placements(arch)
    normal = fit_layouts(rule_placement(rule, share, "normal"), offered)
    spread = fit_layouts(rule_placement(rule, share, "spread"), offered)
    out = [normal] if spread == normal else [normal, spread]
    if spread == normal:
        return out
    md = ModelDesign(model=model, memory_type=arch.memory_type, pim_units=arch.pim_units, devices=arch.devices,
                     placement=spread)
    cap = ev.capacity(md)
    if cap.pim_need_kib > cap.pim_capacity_kib:
        sizes = ev.costs.tensor_bytes(ev.catalog.models[model], arch.devices).op_kib
        fitted = dict(spread)
        for op in sorted((op for op, p in spread.items() if p.layout == "spread"), key=lambda op: (-sizes[op], op)):
            fitted[op] = normal[op]
            if ev.capacity(md.model_copy(update={"placement": fitted})).pim_need_kib <= cap.pim_capacity_kib:
                out.append(dict(fitted))
                break
    return out


def _run(name: str, description: str, fn) -> BaselineResult:
    try:
        return BaselineResult(name, description, fn())
    except ScenarioError as exc:
        return BaselineResult(name, description, None, str(exc))


def gpu_ar(scenario: Scenario, catalog: Catalog | None = None) -> Evaluation:
    catalog = catalog or scenario_catalog(scenario)
    ar = scenario.model_copy(update={"drafters": []})
    dev = baseline_devices(scenario)[0]
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
    """Half-PIM devices, or the fewest PIM units per device above half that hold the FC weights: with
    time-shared channels (DESIGN.md rule 1) an operator runs on PIM only on tensors in the PIM units, and
    half of a paper device (OPT-13B on 2 x 40 GB: 20 GiB of PIM) cannot hold the FC weights (24 GiB).
    Samsung's FC offload stores the weights in the PIM banks; the recipe keeps that and buys PIM units."""
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
    ("FC-offload", "FC operators on PIM, identical devices with half (or the fewest that hold the weights) PIM",
     fc_offload, None),
    ("attention-offload", "attention + KV cache on PIM, identical half-PIM devices", attention_offload, None),
    ("HBM-PIM as sold", "Aquabolt-XL stacks (4 of 8 dies PIM), best fixed mapping", off_the_shelf_hbm_pim, "hbm"),
    ("AiM as sold", "every GDDR6 package an AiM, everything on PIM", off_the_shelf_aim, "gddr"),
)


def run_baselines(scenario: Scenario, catalog: Catalog | None = None) -> list[BaselineResult]:
    catalog = catalog or scenario_catalog(scenario)
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
