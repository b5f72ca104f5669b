"""Operator graph of one decoder layer for one decode step, per model family (NetworkX DiGraph).

Nodes carry the operator's kind and shapes (whole layer, before tensor parallelism); edges are data
dependencies. Norms, softmax, activations and residual adds are fused into their producers.
OPT, LLaMA and GPT-2 are sequential blocks; PaLM's attention and FFN branches read the same input and
run in parallel, with one all-reduce for the block. The LM head is one extra operator per step.

A mixture-of-experts layer (formulations/moe.md) keeps the same graph and placeable operators: its FFN
is `ffn_up` = router + the routed experts' gate/up + the shared experts' gate/up, and `ffn_down` = the
routed and shared experts' down projections. Each is an FC operator made of `parts` (kernels run one
after another), so a design places the whole MoE FFN on host or PIM as it places a dense FFN.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import networkx as nx

from specpim_cp.catalog import ModelSpec

#: Operators a design places on host or PIM, in a fixed order (layer operators, then the LM head).
PLACEABLE_OPS = ("qkv", "score", "context", "o_proj", "ffn_up", "ffn_down", "lm_head")
LAYER_OPS = PLACEABLE_OPS[:-1]
FC_OPS = ("qkv", "o_proj", "ffn_up", "ffn_down", "lm_head")
ATTENTION_OPS = ("score", "context")


@dataclass(frozen=True)
class OpShape:
    """A placeable operator. FC: y = x W with W of in_features x out_features. Attention: reads a KV cache.

    An MoE FFN operator has `parts` instead (its kernels, one after another, each an OpShape of kind "fc"):
    a part with `experts` = E holds E matrices of in x out, each token using `experts_per_token` of them
    [MOE-3]; `replicated`: every device holds and computes the whole matrix (the router);
    `shared_input`: the token's k experts read the same input vector (gate/up; down reads k vectors)."""

    name: str
    kind: str  # "fc" | "attention"
    in_features: int = 0
    out_features: int = 0
    row_parallel: bool = False  # tensor parallelism splits the input dimension (o_proj, ffn_down)
    parts: tuple[OpShape, ...] = ()
    experts: int = 0
    experts_per_token: int = 0
    replicated: bool = False
    shared_input: bool = False
    token_factor: int = 1  # inputs per pass token (a Medusa head's K positions through one shared LM head)


def op_shapes(model: ModelSpec) -> dict[str, OpShape]:
    d = model.hidden
    up_out = model.ffn * (2 if model.ffn_kind == "gated" else 1)
    shapes = {
        "qkv": OpShape("qkv", "fc", d, model.q_dim + 2 * model.kv_dim),
        "score": OpShape("score", "attention"),
        "context": OpShape("context", "attention"),
        "o_proj": OpShape("o_proj", "fc", model.q_dim, d, row_parallel=True),
        "ffn_up": OpShape("ffn_up", "fc", d, up_out),
        "ffn_down": OpShape("ffn_down", "fc", model.ffn, d, row_parallel=True),
        "lm_head": OpShape("lm_head", "fc", d, model.vocab),
    }
    if model.is_moe:
        shapes.update(_moe_ffn_shapes(model, up_out))
    return shapes


def _moe_ffn_shapes(model: ModelSpec, up_out: int) -> dict[str, OpShape]:
    """[MOE-3] The MoE FFN as two FC operators of parts: the router (hidden x experts, replicated on every
    device as vLLM's and gpt-fast's Mixtral do), the routed experts and the shared experts (split over the
    devices like a dense FFN: gate/up column-parallel, down row-parallel)."""
    d, e, k = model.hidden, model.experts, model.experts_per_token
    up = [OpShape("router", "fc", d, e, replicated=True),
          OpShape("experts_up", "fc", d, up_out, experts=e, experts_per_token=k, shared_input=True)]
    down = [OpShape("experts_down", "fc", model.ffn, d, row_parallel=True, experts=e, experts_per_token=k)]
    if model.shared_experts:
        width = model.shared_experts * model.shared_expert_ffn  # the shared experts as one dense FFN
        up.append(OpShape("shared_up", "fc", d, width * (2 if model.ffn_kind == "gated" else 1)))
        down.append(OpShape("shared_down", "fc", width, d, row_parallel=True))
    return {"ffn_up": OpShape("ffn_up", "fc", parts=tuple(up)),
            "ffn_down": OpShape("ffn_down", "fc", parts=tuple(down), row_parallel=True)}


def distinct_experts(model: ModelSpec, tokens: int) -> float:
    """Expected distinct routed experts one layer touches in a pass of `tokens` tokens [MOE-1, MOE-2]:
    the model's measured curve, interpolated linearly in tokens (flat beyond its ends), when it has one;
    else uniform routing, E (1 - (1 - k/E)^M). Always within [k, min(E, M k)], so M = 1 gives k."""
    e, k = model.experts, model.experts_per_token
    curve = model.distinct_experts_measured
    if not curve:
        estimate = e * (1.0 - (1.0 - k / e) ** tokens)  # [MOE-1]
    elif tokens <= curve[0][0]:  # [MOE-2]
        estimate = curve[0][1]
    elif tokens >= curve[-1][0]:
        estimate = curve[-1][1]
    else:
        (t0, x0), (t1, x1) = next((a, b) for a, b in itertools.pairwise(curve) if a[0] <= tokens <= b[0])
        estimate = x0 + (x1 - x0) * (tokens - t0) / (t1 - t0)
    return min(max(estimate, float(k)), float(min(e, tokens * k)))


@cache
def block_graph(parallel_block: bool) -> nx.DiGraph:
    g = nx.DiGraph()
    for op in LAYER_OPS:
        g.add_node(op, kind="attention" if op in ATTENTION_OPS else "fc")
    g.add_edges_from([("qkv", "score"), ("score", "context"), ("context", "o_proj"), ("ffn_up", "ffn_down")])
    if parallel_block:
        g.add_node("allreduce", kind="allreduce")
        g.add_edges_from([("o_proj", "allreduce"), ("ffn_down", "allreduce")])
    else:
        g.add_node("allreduce_attn", kind="allreduce")
        g.add_node("allreduce_ffn", kind="allreduce")
        g.add_edges_from([("o_proj", "allreduce_attn"), ("allreduce_attn", "ffn_up"),
                          ("ffn_down", "allreduce_ffn")])
    return g


def layer_graph(model: ModelSpec) -> nx.DiGraph:
    """The DAG of one decoder layer (read-only, shared): placeable operators plus all-reduce nodes."""
    return block_graph(model.parallel_block)


@cache
def layer_order(parallel_block: bool) -> tuple[str, ...]:
    """A deterministic topological order of the layer's nodes."""
    return tuple(nx.lexicographical_topological_sort(block_graph(parallel_block),
                                                     key=lambda n: (LAYER_OPS + ("allreduce", "allreduce_attn",
                                                                    "allreduce_ffn")).index(n)))


@cache
def is_chain(parallel_block: bool) -> bool:
    """Whether every pair of the layer's nodes is ordered (then the makespan is the sum of durations)."""
    g = block_graph(parallel_block)
    order = layer_order(parallel_block)
    return all(g.has_edge(u, v) for u, v in itertools.pairwise(order))
