"""The PIM GEMV speed-up the validation rows compare with published figures: a synthetic size x size FP16
GEMV on a memory's PIM units against streaming the same weights over that memory's external bandwidth."""

from __future__ import annotations

from specpim_cp.catalog import Catalog, ModelSpec
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.design import ArchConfig


def gemv_model(size: int) -> ModelSpec:
    """A synthetic model whose o_proj is a size x size FP16 GEMV (the other fields are irrelevant)."""
    return ModelSpec(name=f"gemv-{size}", family="gemv", tokenizer="none", layers=1, hidden=size, heads=size // 128,
                     kv_heads=size // 128, head_dim=128, ffn=size, ffn_kind="two-matrix", parallel_block=False,
                     vocab=size, tied_embeddings=True, bytes_per_param=2, nominal_params_b=0.0,
                     source="synthetic GEMV for validation")


def pim_speedup(catalog: Catalog, memory: str, k: int, size: int = 4096, host: str | None = None,
                verifier: str = "gpt2-small") -> float:
    """A size x size GEMV on PIM (k PIM units per group, every PIM unit) against streaming the same weights
    over the same memory's external bandwidth: the speed-up PIM adds to that memory. `host` and `verifier`
    only make the pricing scenario valid (the scenario's default host, a small model)."""
    from specpim_cp.physics.costs import CostModel
    from specpim_cp.problem.scenario import parse_scenario

    data = {"name": "gemv", "batch_size": 1, "prompt_tokens": 1, "generated_tokens": 1, "memory_types": [memory],
            "verifier": {"model": verifier, "devices": 1}}
    if host is not None:
        data["host"] = host
    sc = parse_scenario(data, catalog)
    mem = catalog.memory(memory)
    arch = ArchConfig(memory, k, 1)
    pim = CostModel(sc, catalog).op_cost(gemv_model(size), "o_proj", "pim", sc.space.share_levels, arch, 1)
    if pim is None:
        raise ScenarioError(f"validate: no PIM units on {arch.label()}")
    external_ns = size * size * 2 / (mem.groups * mem.group_external_bandwidth_gbps)
    return external_ns / pim.time_ns
