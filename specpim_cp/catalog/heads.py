"""A draft head's shape (EAGLE-3, multi-token prediction, Medusa, n-gram lookup): a ModelSpec the scenario
derives from its verifier plus the head's own fields (problem/heads.py builds it; formulations/drafter_kinds.md
has each graph). Every price of a head comes from the same cost model as a model's."""

from __future__ import annotations

from dataclasses import dataclass

from specpim_cp.catalog.entries import ModelSpec

#: Drafter kinds that are heads (a "model" drafter is a catalog model).
HEAD_KINDS = ("eagle", "mtp", "medusa", "ngram")
#: Head kinds that read the verifier's hidden states each round (no run-ahead pipeline for them).
HIDDEN_STATE_KINDS = ("eagle", "mtp", "medusa")


@dataclass(frozen=True)
class HeadSpec(ModelSpec):
    """A head as a decoder shape plus what makes it a head: the verifier it hangs on, the tensors it reads
    from that verifier (`shared`: no copy when it sits on the verifier's devices), the verifier hidden states
    one accepted token hands it (`hidden_states`, moved over the host link when it has devices of its own;
    `per_token`: for every accepted token, else one per sequence), its extra projections and its limits."""

    kind: str = "eagle"
    verifier: str = ""
    hidden_states: int = 0
    per_token: bool = True
    shared: tuple[str, ...] = ()  # "embedding", an operator ("lm_head"), or one kernel of one ("lm_head/medusa_lm")
    stored_layers: int = 0  # blocks stored (MTP: its D modules, one run per draft step); 0: `layers`
    embedding_vocab: int = 0  # rows of the input embedding it reads (the verifier's vocabulary); 0: none
    fuse_in: int = 0  # input width of the projection before its block (EAGLE-3: k x hidden, MTP: 2 x hidden)
    qkv_in: int = 0  # input width of its attention's QKV (EAGLE-3: 2 x hidden); 0: hidden
    medusa_heads: int = 0  # K heads, each `medusa_layers` residual blocks (hidden x hidden) and an LM head
    medusa_layers: int = 0
    own_lm_heads: bool = True  # Medusa: K LM heads of its own, else the verifier's LM head K times
    max_draft: int = 0  # most draft positions one round can take (Medusa K, MTP D); 0: no limit
    one_pass: bool = False  # every draft position from one pass (Medusa)
    lookup_ns_per_token: int = 0  # n-gram: host time per drafted token and sequence
    lookup_nj_per_token: int = 0

    @property
    def needs_hidden_states(self) -> bool:
        return self.kind in HIDDEN_STATE_KINDS
