"""Operator graph of one decoder layer for one decode step, per model family (NetworkX DiGraph).

Nodes carry the operator's kind and shapes (whole layer, before tensor parallelism); edges are data
dependencies. Norms, softmax, activations and residual adds are fused into their producers.
OPT, LLaMA and GPT-2 are sequential blocks; PaLM's attention and FFN branches read the same input and
run in parallel, with one all-reduce for the block. The LM head is one extra operator per step.
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
    """A placeable operator. FC: y = x W with W of in_features x out_features. Attention: reads a KV cache."""

    name: str
    kind: str  # "fc" | "attention"
    in_features: int = 0
    out_features: int = 0
    row_parallel: bool = False  # tensor parallelism splits the input dimension (o_proj, ffn_down)


def op_shapes(model: ModelSpec) -> dict[str, OpShape]:
    d = model.hidden
    up_out = model.ffn * (2 if model.ffn_kind == "gated" else 1)
    return {
        "qkv": OpShape("qkv", "fc", d, model.q_dim + 2 * model.kv_dim),
        "score": OpShape("score", "attention"),
        "context": OpShape("context", "attention"),
        "o_proj": OpShape("o_proj", "fc", model.q_dim, d, row_parallel=True),
        "ffn_up": OpShape("ffn_up", "fc", d, up_out),
        "ffn_down": OpShape("ffn_down", "fc", model.ffn, d, row_parallel=True),
        "lm_head": OpShape("lm_head", "fc", d, model.vocab),
    }


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
