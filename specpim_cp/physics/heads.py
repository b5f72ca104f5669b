"""What a draft head adds to the price of a design (formulations/drafter_kinds.md): its n-gram lookup,
the tensors it reads from the verifier (no copy on the verifier's devices), the capacity it shares with
the verifier there, and the hidden states moved to devices of its own every round ([HEAD-4])."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specpim_cp.catalog import HostSpec, ModelSpec
from specpim_cp.catalog.heads import HeadSpec
from specpim_cp.physics import speculation as spec

BITS_PER_BYTE = 8
PJ_PER_NJ = 1000
KIB = 1024


def lookup_cost(head: HeadSpec, op: str, tokens: int) -> tuple[int, int] | None:
    """(ns, nJ) of an n-gram head's operator over `tokens` drafted tokens: the host lookup is its LM-head
    operator, every other operator is empty; None for any other head."""
    if head.kind != "ngram":
        return None
    if op != "lm_head":
        return 0, 0
    return head.lookup_ns_per_token * tokens, head.lookup_nj_per_token * tokens


def embeds(model: ModelSpec) -> bool:
    """Whether a pass starts with an embedding lookup (a Medusa head reads a hidden state, an n-gram lookup
    the context)."""
    return not isinstance(model, HeadSpec) or model.embedding_vocab > 0


def stored_layers(model: ModelSpec) -> int:
    """Decoder blocks a model stores (MTP: its D modules, of which each draft step runs one)."""
    return (model.stored_layers or model.layers) if isinstance(model, HeadSpec) else model.layers


def embedding_rows(model: ModelSpec) -> int:
    """Rows of the input embedding table a model keeps (a head: the verifier's vocabulary, or none)."""
    return model.embedding_vocab if isinstance(model, HeadSpec) else model.vocab


def shared_tensors(model: ModelSpec, colocated: bool) -> tuple[str, ...]:
    """Tensors (operator names, "embedding") a head on the verifier's devices reads from the verifier
    instead of storing them: [HEAD-2]."""
    return model.shared if colocated and isinstance(model, HeadSpec) else ()


def stored_kib(model: ModelSpec, op: str, kib: int, shapes: dict, colocated: bool) -> int:
    """KiB operator `op` of `model` stores (`kib`: all its tensor) once the tensors a head on the verifier's
    devices reads from the verifier are left out [HEAD-2]: the whole operator, or some of its kernels (a
    Medusa head's LM-head kernel when it uses the verifier's LM head)."""
    shared = shared_tensors(model, colocated)
    if op in shared:
        return 0
    parts = {name.split("/", 1)[1] for name in shared if name.startswith(op + "/")}
    if not parts:
        return kib
    layers = 1 if op == "lm_head" else stored_layers(model)
    kept = sum(p.in_features * p.out_features * max(1, p.experts) for p in shapes[op].parts if p.name not in parts)
    return -(-(layers * kept * model.bytes_per_param) // KIB)


def transfer_cost(model: ModelSpec, host: HostSpec, batch: int, tokens_micro: int) -> tuple[int, int]:
    """[HEAD-4] (ns, nJ) per round of moving the verifier's hidden states to a head on devices of its own:
    k hidden states (bytes_per_param each) of every committed token (EAGLE-3, MTP; expected tokens per
    round x TOKENS_SCALE = `tokens_micro`) or of each sequence's last token (Medusa), over the host link."""
    if not isinstance(model, HeadSpec) or not model.needs_hidden_states:
        return 0, 0
    per_token = model.hidden_states * model.hidden * model.bytes_per_param * batch
    micro = tokens_micro if model.per_token else spec.TOKENS_SCALE
    moved = per_token * micro / spec.TOKENS_SCALE  # bytes per round (expected)
    t_ns = moved / host.link_bandwidth_gbps
    e_nj = moved * BITS_PER_BYTE * host.link_energy_pj_per_bit / PJ_PER_NJ
    return math.ceil(t_ns - 1e-9), math.ceil(e_nj - 1e-9)


def merged_needs(needs: Sequence[tuple[int, int]], colocated: Sequence[bool]) -> tuple[int, int]:
    """[HEAD-2] (PIM-side, normal-side) KiB the verifier's devices hold: the verifier's (first) and every
    head on them."""
    return (sum(p for (p, _), c in zip(needs, colocated) if c) + needs[0][0],
            sum(n for (_, n), c in zip(needs, colocated) if c) + needs[0][1])


__all__ = ["embedding_rows", "embeds", "lookup_cost", "merged_needs", "shared_tensors", "stored_kib", "stored_layers",
           "transfer_cost"]
