"""Draft heads (EAGLE-3, multi-token prediction, Medusa, n-gram lookup): their scenario fields, the shape each
derives from its verifier (`derive_head`), their operators and graph, and the catalog a scenario with heads
is priced with (`with_heads`). The mathematics and sources: formulations/drafter_kinds.md.

A head is priced as a model: its operators are the layer operators of `operators.PLACEABLE_OPS`, some made
of several kernels (`OpShape.parts`): EAGLE-3's `fc` (k x hidden -> hidden) and MTP's projection (2 x hidden
-> hidden) run with the QKV operator, on its engine; Medusa's residual blocks and LM heads make its LM-head
operator (it has no decoder layer); an n-gram lookup is host time per drafted token and no tensor.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Literal

import networkx as nx
from pydantic import Field

from specpim_cp.catalog import Catalog, ModelSpec
from specpim_cp.catalog.heads import HEAD_KINDS, HIDDEN_STATE_KINDS, HeadSpec
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.design import MAX_DRAFT_LENGTH, ArchConfig, StrictModel
from specpim_cp.problem.operators import OpShape, op_shapes

#: The n-gram lookup's catalog entry ([ngrams."ngram"]) its host time defaults to.
NGRAM_ENTRY = "ngram"
#: EAGLE-3's reduced draft vocabulary (SafeAILab/EAGLE, `draft_vocab_size` of the released heads).
EAGLE_DRAFT_VOCAB = 32000
#: The acceptance family of each head kind (catalog acceptance.toml, "FAMILY>any").
HEAD_FAMILIES = {"eagle": "eagle3", "mtp": "mtp", "medusa": "medusa", "ngram": "prompt-lookup"}
#: EAGLE-3's fused verifier layers (low, middle, high).
EAGLE_FUSED_LAYERS = 3


class HeadFields(StrictModel):
    """A head's own fields (`[drafters.head]`); the rest of its shape is the verifier's."""

    fused_layers: int = Field(default=EAGLE_FUSED_LAYERS, ge=1, le=8)  # EAGLE-3: k verifier layers fused
    draft_vocab: int = Field(default=EAGLE_DRAFT_VOCAB, ge=1)  # EAGLE-3: its LM head's vocabulary
    hidden_size: int | None = Field(default=None, ge=1)  # EAGLE-3: the target width it was trained for
    intermediate_size: int | None = Field(default=None, ge=1)  # EAGLE-3: its layer's FFN width (default: verifier's)
    depth: int = Field(default=1, ge=1, le=MAX_DRAFT_LENGTH)  # MTP: D sequential modules
    heads: int = Field(default=5, ge=1, le=MAX_DRAFT_LENGTH)  # Medusa: K heads (FasterDecoding/Medusa MedusaConfig: 5)
    layers: int = Field(default=1, ge=1, le=4)  # Medusa: residual blocks per head
    lm_head: Literal["own", "shared"] = "own"  # Medusa: K LM heads of its own, or the verifier's
    lookup_ns_per_token: int | None = Field(default=None, ge=1, le=10**7)  # n-gram: host ns per drafted token


def head_name(kind: str, verifier: str) -> str:
    """The model name a head of `kind` on `verifier` takes in designs and reports."""
    return f"{kind}:{verifier}"


def check_head_entry(kind: str, head: HeadFields | None, placement: str, has_staging: bool,
                     has_tree: bool) -> None:
    """The rules a drafter's kind puts on its own fields (ValueError naming the field)."""
    if kind == "model":
        if head is not None:
            raise ValueError("head: a [drafters.head] table belongs to a head drafter (kind = eagle, mtp, medusa "
                             "or ngram)")
        if placement != "free":
            raise ValueError("placement: a drafter model always has devices of its own (placement is a head's)")
        return
    if has_staging:
        raise ValueError(f"staging: a {kind} head drafts by itself (staging stages drafter models)")
    if has_tree and kind in ("mtp", "ngram"):
        raise ValueError(f"tree: a {kind} drafter drafts chains (token trees are EAGLE's and Medusa's)")
    if kind == "ngram" and placement == "own":
        raise ValueError("placement: an n-gram lookup runs on the verifier's host ('own' devices hold no tensor)")


def derive_head(kind: str, fields: HeadFields | None, verifier: ModelSpec, catalog: Catalog,
                where: str) -> HeadSpec:
    """The head's shape from the verifier's plus its fields; ScenarioError (one line naming `where`) when
    they do not fit together (an EAGLE head built for another width, an MoE verifier with no FFN width)."""
    f = fields or HeadFields()
    v, h = verifier, verifier.hidden
    name = head_name(kind, v.name)
    common = {"name": name, "family": HEAD_FAMILIES.get(kind, kind), "tokenizer": v.tokenizer, "hidden": h, "heads": v.heads,
              "kv_heads": v.kv_heads, "head_dim": v.head_dim, "ffn": v.ffn, "ffn_kind": v.ffn_kind,
              "parallel_block": False, "vocab": v.vocab, "tied_embeddings": False,
              "bytes_per_param": v.bytes_per_param, "nominal_params_b": 0.0, "kind": kind, "verifier": v.name,
              "source": f"derived from {v.name}'s shape (formulations/drafter_kinds.md)"}
    if kind == "eagle":
        if f.hidden_size is not None and f.hidden_size != h:
            raise ScenarioError(f"{where}.hidden_size: an EAGLE head of width {f.hidden_size} cannot draft for "
                                f"'{v.name}' (hidden size {h}): its fc reads the verifier's hidden states")
        if v.is_moe and f.intermediate_size is None:
            raise ScenarioError(f"{where}.intermediate_size: required for an EAGLE head on the MoE verifier "
                                f"'{v.name}' (its decoder layer is dense)")
        k = f.fused_layers
        return HeadSpec(**{**common, "ffn": f.intermediate_size or v.ffn, "ffn_kind": "gated",
                           "vocab": min(f.draft_vocab, v.vocab)}, layers=1, hidden_states=k,
                        shared=("embedding",), embedding_vocab=v.vocab, fuse_in=k * h, qkv_in=2 * h)
    if kind == "mtp":
        moe = {n: getattr(v, n) for n in ("experts", "experts_per_token", "shared_experts", "shared_expert_ffn",
                                          "distinct_experts_measured")}
        return HeadSpec(**common, **moe, layers=1, stored_layers=f.depth, hidden_states=1,
                        shared=("embedding", "lm_head"), embedding_vocab=v.vocab, fuse_in=2 * h,
                        max_draft=f.depth)
    if kind == "medusa":
        return HeadSpec(**common, layers=0, hidden_states=1, per_token=False,
                        shared=("lm_head/medusa_lm",) if f.lm_head == "shared" else (), medusa_heads=f.heads,
                        medusa_layers=f.layers, own_lm_heads=f.lm_head == "own", max_draft=f.heads, one_pass=True)
    if kind == "ngram":
        ng = catalog.ngrams.get(NGRAM_ENTRY)
        if f.lookup_ns_per_token is None and ng is None:
            raise ScenarioError(f"{where}.lookup_ns_per_token: required (the catalog has no [ngrams.ngram] entry)")
        ns = f.lookup_ns_per_token or ng.step_ns
        nj = 0 if ng is None else -(-ng.energy_nj_per_step * ns // ng.step_ns)  # the entry's power, scaled
        return HeadSpec(**common, layers=0, lookup_ns_per_token=ns, lookup_nj_per_token=nj)
    raise ScenarioError(f"{where}: unknown drafter kind '{kind}' (known: model, {', '.join(HEAD_KINDS)})")


def head_op_shapes(spec: HeadSpec) -> dict[str, OpShape]:
    """The head's placeable operators (shapes before tensor parallelism): the layer operators of its block
    with the fused projection as the QKV operator's first kernel (EAGLE-3, MTP), or Medusa's blocks and LM
    heads as its LM-head operator. A head without a layer (Medusa, n-gram) has `layers` = 0: its layer
    operators are never run nor stored."""
    shapes = op_shapes(spec)
    h = spec.hidden
    if spec.fuse_in:
        qkv = shapes["qkv"]
        shapes["qkv"] = OpShape("qkv", "fc", parts=(OpShape("fuse", "fc", spec.fuse_in, h),
                                                    OpShape("qkv", "fc", spec.qkv_in or h, qkv.out_features)))
    if spec.kind == "medusa":
        k = spec.medusa_heads
        # the K heads' blocks of one depth read the same hidden state: one h x K.h matrix (same bytes, MACs)
        blocks = tuple(OpShape(f"resblock{n}", "fc", h, k * h) for n in range(spec.medusa_layers))
        lm = (OpShape("medusa_lm", "fc", h, k * spec.vocab) if spec.own_lm_heads else
              OpShape("medusa_lm", "fc", h, spec.vocab, token_factor=k))  # the verifier's LM head, K inputs
        shapes["lm_head"] = OpShape("lm_head", "fc", parts=(*blocks, lm))
    return shapes


def head_graph(spec: HeadSpec) -> nx.DiGraph:
    """The head's operator DAG for one draft step (nodes: kernel name, kind, the placeable operator it runs
    in), from the verifier's hidden states (or the context, for an n-gram lookup) to the draft tokens."""
    g = nx.DiGraph()
    if spec.kind == "ngram":
        g.add_node("context", kind="input", op=None)
        g.add_node("lookup", kind="host", op="lm_head")
        g.add_edge("context", "lookup")
        return g
    g.add_node("hidden_states", kind="input", op=None, count=spec.hidden_states)
    if spec.kind == "medusa":
        prev = "hidden_states"
        for n in range(spec.medusa_layers):
            g.add_node(f"resblock{n}", kind="fc", op="lm_head")
            g.add_edge(prev, f"resblock{n}")
            prev = f"resblock{n}"
        g.add_node("medusa_lm", kind="fc", op="lm_head")
        g.add_edge(prev, "medusa_lm")
        return g
    g.add_node("embedding", kind="lookup", op=None)
    g.add_node("fuse", kind="fc", op="qkv")
    g.add_edges_from([("hidden_states", "fuse"), ("embedding", "fuse")])
    chain = ["fuse", "qkv", "score", "context", "o_proj", "ffn_up", "ffn_down", "lm_head"]
    for node in chain[1:]:
        g.add_node(node, kind="attention" if node in ("score", "context") else "fc", op=node)
    g.add_edges_from(itertools.pairwise(chain))
    return g


def head_specs(scenario, catalog: Catalog) -> dict[str, HeadSpec]:
    """The heads of a scenario (`Scenario`), by model name."""
    out = {}
    heads = [(i, d) for i, d in enumerate(scenario.drafters) if d.kind != "model"]
    if not heads:
        return out
    v = catalog.model(scenario.verifier.model, "verifier.model")
    for i, d in heads:
        out[d.model] = derive_head(d.kind, d.head, v, catalog, f"drafters[{i}].head")
    return out


def with_heads(catalog: Catalog, scenario) -> Catalog:
    """`catalog` with the scenario's heads among its models (the same catalog when it has them or there are
    none), so every stage looks a head up by name as it looks up a model."""
    heads = head_specs(scenario, catalog)
    if all(catalog.models.get(n) == s for n, s in heads.items()):
        return catalog
    return dataclasses.replace(catalog, models={**catalog.models, **heads})


def arch_on_verifier(scenario, i: int) -> bool:
    """Whether drafter i may sit on the verifier's devices (a head not pinned to devices of its own)."""
    d = scenario.drafters[i]
    return d.kind != "model" and d.placement != "own"


def arch_own(scenario, i: int) -> bool:
    """Whether drafter i may take devices of its own."""
    return scenario.drafters[i].needs_devices


def head_archs(verifier, entry, physical: Callable[[ArchConfig], tuple]) -> tuple[list[ArchConfig], dict]:
    """A head's architectures on the verifier's devices (`verifier`: the verifier's `ModelOptions`): each of
    the verifier's, marked colocated, with the verifier's placements (an n-gram lookup: the first of the
    architecture's `physical` placements for every operator, whatever the mapping rule: it runs none of them
    on the devices). Empty when the head has devices of its own only."""
    if entry.placement == "own":
        return [], {}
    archs, placements = [], {}
    for a in verifier.archs:
        c = dataclasses.replace(a, colocated=True)
        per_op = verifier.placements[a]
        if entry.kind == "ngram":
            per_op = {op: physical(a)[:1] for op in per_op}
        archs.append(c)
        placements[c] = dict(per_op)
    return archs, placements


def is_head(spec: ModelSpec) -> bool:
    return isinstance(spec, HeadSpec)


def needs_hidden_states(kind: str) -> bool:
    return kind in HIDDEN_STATE_KINDS


__all__ = [
    "HEAD_KINDS",
    "HeadFields",
    "HeadSpec",
    "arch_on_verifier",
    "arch_own",
    "check_head_entry",
    "derive_head",
    "head_archs",
    "head_graph",
    "head_name",
    "head_op_shapes",
    "head_specs",
    "is_head",
    "needs_hidden_states",
    "with_heads",
]
