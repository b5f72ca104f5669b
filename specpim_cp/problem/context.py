"""Attention contexts per model: the keys a decode step reads and the positions its KV cache keeps, capped
by the model's sliding window (formulations/costs.md WIN-1, WIN-2), and the keys a prompt's prefill reads
(formulations/prefill.md PRE-2). A model without a window (`sliding_window = 0`) keeps the full context."""

from __future__ import annotations

from specpim_cp.catalog import ModelSpec
from specpim_cp.problem.scenario import Scenario


def kv_positions(sc: Scenario, model: ModelSpec) -> int:
    """[WIN-1] Positions one sequence's KV cache keeps per layer: the maximum context, or the window (a
    rolling buffer of the last `sliding_window` positions) when that is shorter."""
    w = model.sliding_window
    return min(sc.max_context, w) if w else sc.max_context


def decode_context(sc: Scenario, model: ModelSpec) -> int:
    """[WIN-2] Keys the average decode step reads: the context c of a step runs over [P, P + G] (P prompt,
    G generated tokens) and a step reads min(c, W) keys; the mean over that span, rounded down. Without a
    window (or W >= P + G) it is P + G // 2, the scenario's average context."""
    p, g, w = sc.prompt_tokens, sc.generated_tokens, model.sliding_window
    if not w or w >= p + g:
        return sc.average_context
    if w <= p:
        return w
    # integral of c over [P, W] plus W over [W, P + G], divided by G
    return ((w * w - p * p) + 2 * (p + g - w) * w) // (2 * g)


def pass_context(sc: Scenario, model: ModelSpec, tokens_per_sequence: int) -> int:
    """Keys a pass of `tokens_per_sequence` query tokens per sequence reads per query: the decode context
    plus the pass's own earlier tokens (a draft chain or tree under its mask), at most the window."""
    ctx = decode_context(sc, model) + max(0, tokens_per_sequence - 1)
    w = model.sliding_window
    return min(ctx, w) if w else ctx


def prefill_attended(prompt_tokens: int, window: int) -> int:
    """[PRE-2] Keys all of one sequence's prompt queries read under the causal mask: sum over i = 1..P of
    min(i, W) (P(P + 1)/2 without a window)."""
    p, w = prompt_tokens, window
    if not w or w >= p:
        return p * (p + 1) // 2
    return w * (w + 1) // 2 + (p - w) * w
