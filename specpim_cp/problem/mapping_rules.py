"""Fixed mapping recipes: which operators a rule puts on PIM (baselines, warm starts, `[space].mapping`).

A mixture-of-experts model's ffn_up and ffn_down (router, routed and shared experts; formulations/moe.md)
are FC operators here, so `fc-offload` puts its experts on PIM and `attention-offload` keeps them on the host.
"""

from __future__ import annotations

from specpim_cp.problem.design import HOST, Placement
from specpim_cp.problem.operators import ATTENTION_OPS, FC_OPS, PLACEABLE_OPS

#: Rules a scenario's `[space].mapping` may name ("all-pim" is a recipe only, for AiM as sold).
MAPPING_RULES = ("free", "fc-offload", "attention-offload", "host-only")
_ON_PIM = {"host-only": (), "fc-offload": FC_OPS, "attention-offload": ATTENTION_OPS, "all-pim": PLACEABLE_OPS}


def rule_placement(rule: str, share_levels: int, host_layout: str = "normal") -> dict[str, Placement]:
    """Placement of a fixed mapping rule: PIM operators on all PIM units, host operators' tensors laid
    out by `host_layout` ("normal" or "spread")."""
    pim = Placement(engine="pim", share=share_levels)
    host = HOST if host_layout == "normal" else Placement(engine="host", share=0, layout=host_layout)
    on_pim = _ON_PIM[rule]
    return {op: (pim if op in on_pim else host) for op in PLACEABLE_OPS}


def fit_layouts(placement: dict[str, Placement], offered: tuple[Placement, ...]) -> dict[str, Placement]:
    """The placement with each host layout the architecture does not offer replaced by one it does."""
    host = [p for p in offered if p.engine == "host"]
    return {op: (p if p.engine == "pim" or p in offered or not host else host[0]) for op, p in placement.items()}


def rule_allows(rule: str, op: str, engine: str) -> bool:
    """Whether a mapping rule of `[space].mapping` lets `op` run on `engine`."""
    if rule == "free":
        return True
    if rule not in _ON_PIM:
        raise ValueError(f"unknown mapping rule {rule!r}")
    return engine == ("pim" if op in _ON_PIM[rule] else "host")
