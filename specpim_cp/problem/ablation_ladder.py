"""The ablation ladder (formulations/objectives.md): each step is a restriction of the scenario's space.

GPU-SI -> +attention offload -> +free operator mapping -> +speculative pipeline -> +free architecture.
Steps 2-4 use identical half-PIM HBM devices (Aquabolt-XL-like) for every model; the last step frees
the memory type and the PIM units per model, i.e. it is the full optimum. A step only restricts what
the scenario itself leaves free (a scenario with the pipeline off keeps it off in every step), and
staging stays as the scenario allows it in every step. Step 2 does not contain step 1 (PIM units are
fixed to half), so its factor over GPU-SI can be below 1; every later step contains the one before.
Steps 1-4 speculate (`[space] speculation = "on"`: they are speculative recipes); the last one is the
scenario's own space, the verifier alone included ([NOSPEC], formulations/speculation_rounds.md).
"""

from __future__ import annotations

from specpim_cp.catalog import Catalog
from specpim_cp.problem.scenario import Scenario, Space, scenario_catalog

LADDER_STEPS = ("GPU-SI", "+attention offload", "+free mapping", "+pipeline", "+free architecture")
#: The [space] fields a ladder step restricts.
LADDER_FIELDS = ("memory_type", "pim_units", "mapping", "pipeline", "speculation")


def unrestricted(scenario: Scenario) -> Scenario:
    """`scenario` with its LADDER_FIELDS at their defaults (every ladder step's space lies in it); the
    scenario itself when they already are."""
    default = Space()
    free = {f: getattr(default, f) for f in LADDER_FIELDS}
    if all(getattr(scenario.space, f) == v for f, v in free.items()):
        return scenario
    return scenario.model_copy(update={"space": scenario.space.model_copy(update=free)})


def ladder_memory(scenario: Scenario) -> str:
    if scenario.space.memory_type is not None:
        return scenario.space.memory_type
    return "hbm" if "hbm" in scenario.memory_types else scenario.memory_types[0]


def ladder_scenarios(scenario: Scenario, catalog: Catalog | None = None) -> list[tuple[str, Scenario]]:
    """(step name, restricted scenario) for every step of the ladder, in order."""
    catalog = catalog or scenario_catalog(scenario)
    mem = ladder_memory(scenario)
    half = catalog.memory(mem).max_pim_units // 2
    base = scenario.space.model_dump()
    steps = {
        "GPU-SI": {"memory_type": mem, "pim_units": 0, "mapping": "host-only", "pipeline": "off",
                   "speculation": "on"},
        "+attention offload": {"memory_type": mem, "pim_units": half, "mapping": "attention-offload",
                               "pipeline": "off", "speculation": "on"},
        "+free mapping": {"memory_type": mem, "pim_units": half, "mapping": "free", "pipeline": "off",
                          "speculation": "on"},
        "+pipeline": {"memory_type": mem, "pim_units": half, "mapping": "free", "pipeline": "free",
                      "speculation": "on"},
        "+free architecture": {"memory_type": None, "pim_units": None, "mapping": "free", "pipeline": "free",
                               "speculation": base["speculation"]},
    }
    # a step only restricts what the scenario leaves free: the scenario's own restrictions win
    own = {k: v for k, v in base.items() if k in ("memory_type", "pim_units") and v is not None}
    own.update({k: base[k] for k in ("mapping", "pipeline") if base[k] != "free"})
    out = []
    for name in LADDER_STEPS:
        space = dict(base, **steps[name])
        space.update(own)
        if not scenario.drafters:
            space["pipeline"] = "off"
        out.append((name, scenario.model_copy(update={"space": scenario.space.model_validate(space)})))
    return out
