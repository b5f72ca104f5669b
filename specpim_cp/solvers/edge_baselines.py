"""Baselines on a shared edge device (formulations/edge.md, formulations/baselines.md): the recipes a phone or
laptop runs today and the PIM recipe LP-Spec compares with, each on the best split of the device's channels
(shared by channels) or with every model over the whole device (interleaved).

- GPU-AR: the verifier alone on every channel, autoregressive, host-only, no PIM (on an edge host the "GPU"
  is the SoC's host, its NPU: NPU autoregressive).
- GPU-SI: speculative inference, host-only, no PIM, each model on its channel slice (NPU speculative).
- FC-offload: GEMV-PIM, the "GEMV-accelerated PIM" LP-Spec compares with: every channel carries PIM dies,
  every FC operator whose precision the PIM units run is on PIM, attention on the host (a quantised model
  the units cannot run keeps its FCs on the host).
- attention-offload: attention and its KV cache on PIM on every channel, FCs on the host.
The names are the datacenter baselines' so the batch report compares the same columns. Each takes the
fixed-recipe search (`baselines.best_fixed_recipe`, which imports this module) as `recipe`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from specpim_cp.catalog import Catalog
from specpim_cp.catalog.slices import slice_name
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.edge import device_entries, holds_channels, sharing, weight_precisions
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.space import model_labels

#: `baselines.best_fixed_recipe`: (scenario, catalog, archs, rules per model) -> the recipe's best evaluation
Recipe = Callable[[Scenario, Catalog, list[ArchConfig], list[str]], Evaluation]


def channel_splits(scenario: Scenario, total: int) -> Iterator[tuple[int, ...]]:
    """Every split of `total` channels over the models that hold channels (verifier first, `device_entries`):
    at least one each, given slices kept."""
    given = [e.channels for _, e in device_entries(scenario)]
    ranges = [(g,) if g is not None else range(1, total + 1) for g in given]
    for split in itertools.product(*ranges):
        if sum(split) == total:
            yield split


def _best_split(scenario: Scenario, catalog: Catalog, recipe: Recipe, pim: bool, rules: list[str]) -> Evaluation:
    """The best evaluation of the recipe (`rules` per model, PIM dies on every channel when `pim`) over the
    channel splits; the last error when none is feasible."""
    mem = scenario.space.memory_type or scenario.memory_types[0]
    spec = catalog.memory(mem)
    k = spec.max_pim_units if pim else 0
    best, last = None, None
    holds = [holds_channels(e) for _, e in model_labels(scenario)]
    rules = [r if h else "host-only" for r, h in zip(rules, holds, strict=True)]  # a lookup runs on the host
    if sharing(scenario) == "interleaved":  # every model over the whole device
        layouts = [[ArchConfig(mem, k, 1)] * len(holds)]
    else:  # an n-gram lookup takes no channel: `recipe_archs` puts it on the verifier's
        layouts = [_with_lookups(holds, [ArchConfig(slice_name(mem, c, spec.groups), k, 1) for c in split])
                   for split in channel_splits(scenario, spec.groups)]
    for archs in layouts:
        try:
            e = recipe(scenario, catalog, archs, rules)
        except ScenarioError as exc:
            last = exc
            continue
        if best is None or e.metrics.objective(scenario.objective) < best.metrics.objective(scenario.objective):
            best = e
    if best is None:
        raise last or ScenarioError(f"memory_types: '{mem}' has too few channels for one per model")
    return best


def _with_lookups(holds: list[bool], archs: list[ArchConfig]) -> list[ArchConfig]:
    """One architecture per model: the channel holders' in order, the verifier's for the others."""
    it = iter(archs)
    return [next(it) if h else archs[0] for h in holds]


def _pim_memory(scenario: Scenario, catalog: Catalog) -> None:
    mem = scenario.space.memory_type or scenario.memory_types[0]
    if not catalog.memory(mem).pim_capable:
        raise ScenarioError(f"memory '{mem}' has no PIM units (a PIM recipe needs a -pim memory)")


def npu_ar(scenario: Scenario, catalog: Catalog, recipe: Recipe) -> Evaluation:
    ar = scenario.model_copy(update={"drafters": []})
    return _best_split(ar, catalog, recipe, False, ["host-only"])


def npu_si(scenario: Scenario, catalog: Catalog, recipe: Recipe) -> Evaluation:
    return _best_split(scenario, catalog, recipe, False, ["host-only"] * (1 + len(scenario.drafters)))


def gemv_pim(scenario: Scenario, catalog: Catalog, recipe: Recipe) -> Evaluation:
    """FC operators on PIM for every model whose weights' precision the units run (a quantised model on
    FP16-only units keeps its FCs on the host)."""
    _pim_memory(scenario, catalog)
    spec = catalog.memory(scenario.space.memory_type or scenario.memory_types[0])
    precisions = weight_precisions(scenario)
    runs = [precisions[e.model] in spec.pim_precisions for _, e in model_labels(scenario)]
    return _best_split(scenario, catalog, recipe, True, ["fc-offload" if r else "host-only" for r in runs])


def attention_pim(scenario: Scenario, catalog: Catalog, recipe: Recipe) -> Evaluation:
    _pim_memory(scenario, catalog)
    return _best_split(scenario, catalog, recipe, True, ["attention-offload"] * (1 + len(scenario.drafters)))


EDGE_BASELINES: tuple[tuple[str, str, Callable[[Scenario, Catalog, Recipe], Evaluation]], ...] = (
    ("GPU-AR", "NPU autoregressive: the verifier alone on every channel, no PIM", npu_ar),
    ("GPU-SI", "NPU speculative: no PIM, vanilla rounds, the best channel split (or interleaved)", npu_si),
    ("FC-offload", ("GEMV-PIM (LP-Spec's baseline): PIM dies on every channel, FC operators on PIM where the "
                    "units run the weights' precision"), gemv_pim),
    ("attention-offload", "attention + KV cache on PIM dies on every channel, FCs on the host", attention_pim),
)
