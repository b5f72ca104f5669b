"""Building designs: mapping rules, uniform designs, and enumeration of a scenario's choices.

Shared by the baselines, the brute-force method, the heuristic and the exact optimizer's decoding,
so every part builds a Design the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from specpim_cp.catalog import Catalog
from specpim_cp.costs import ArchConfig
from specpim_cp.graph import ATTENTION_OPS, FC_OPS, PLACEABLE_OPS
from specpim_cp.scenario import Design, ModelDesign, Placement, Scenario, Staging

HOST = Placement(engine="host", share=0)


def rule_placement(rule: str, share_levels: int) -> dict[str, Placement]:
    """Placement of a fixed mapping rule, PIM operators on all PIM units."""
    pim = Placement(engine="pim", share=share_levels)
    on_pim = {"host-only": (), "fc-offload": FC_OPS, "attention-offload": ATTENTION_OPS,
              "all-pim": PLACEABLE_OPS}[rule]
    return {op: (pim if op in on_pim else HOST) for op in PLACEABLE_OPS}


def rule_allows(rule: str, op: str, engine: str) -> bool:
    """Whether a mapping rule of `[space].mapping` lets `op` run on `engine`."""
    if rule == "free":
        return True
    if rule == "host-only":
        return engine == "host"
    if rule == "fc-offload":
        return engine == ("pim" if op in FC_OPS else "host")
    if rule == "attention-offload":
        return engine == ("pim" if op in ATTENTION_OPS else "host")
    raise ValueError(f"unknown mapping rule {rule!r}")


def model_entries(scenario: Scenario):
    return [("verifier", scenario.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(scenario.drafters)]


def build_design(scenario: Scenario, archs: Sequence[ArchConfig], placements: Sequence[dict[str, Placement]],
                 gammas: Sequence[int], staging: Sequence[Staging | None], pipeline: bool) -> Design:
    models = []
    for j, ((_, entry), arch, place) in enumerate(zip(model_entries(scenario), archs, placements)):
        models.append(ModelDesign(
            model=entry.model, memory_type=arch.memory_type, pim_units=arch.pim_units, devices=arch.devices,
            placement=dict(place),
            draft_length=None if j == 0 else gammas[j - 1],
            staging=None if j == 0 else staging[j - 1],
        ))
    return Design(pipeline=pipeline, verifier=models[0], drafters=models[1:])


def device_options(scenario: Scenario, index: int) -> list[int]:
    """Device counts model `index` (0 = verifier) may take."""
    entry = model_entries(scenario)[index][1]
    if entry.devices is not None:
        return [entry.devices]
    budget = scenario.device_budget or 1
    others = len(scenario.drafters)  # every other model needs at least one device
    return [n for n in (1, 2, 4, 8) if n <= min(entry.max_devices, budget - others)]


def arch_options(scenario: Scenario, catalog: Catalog, index: int) -> list[ArchConfig]:
    """Architecture configs of model `index` allowed by the scenario and its [space] restrictions."""
    sp = scenario.space
    mems = [sp.memory_type] if sp.memory_type else list(scenario.memory_types)
    out = []
    for mem_name in mems:
        mem = catalog.memory(mem_name)
        ks = [sp.pim_units] if sp.pim_units is not None else list(range(mem.max_pim_units + 1))
        for k in ks:
            for n in device_options(scenario, index):
                out.append(ArchConfig(mem_name, k, n))
    return out


def gamma_options(scenario: Scenario, i: int) -> list[int]:
    if scenario.space.draft_lengths is not None:
        return [scenario.space.draft_lengths[i]]
    return list(range(1, scenario.max_draft_length + 1))


def staging_options(scenario: Scenario, i: int) -> list[Staging | None]:
    st = scenario.drafters[i].staging
    if st is None or scenario.space.staging == "off":
        return [None]
    opts: list[Staging | None] = [] if st.required else [None]
    for d2 in st.draft2:
        opts += [Staging(draft2=d2, draft_length=g2) for g2 in range(1, st.max_draft_length + 1)]
    return opts


def pipeline_options(scenario: Scenario) -> list[bool]:
    if not scenario.drafters:
        return [False]
    return {"free": [False, True], "on": [True], "off": [False]}[scenario.space.pipeline]


def speculation_choices(scenario: Scenario) -> Iterator[tuple[tuple[int, ...], tuple[Staging | None, ...]]]:
    """Every (draft lengths, staging) combination of the scenario's drafters."""
    n = len(scenario.drafters)
    gam = [gamma_options(scenario, i) for i in range(n)]
    stg = [staging_options(scenario, i) for i in range(n)]
    for g in itertools.product(*gam):
        for s in itertools.product(*stg):
            yield tuple(g), tuple(s)
