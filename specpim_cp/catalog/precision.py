"""Weight precisions a model may be stored in, as bits per weight with their scales (formulations/edge.md).

INT4 is group-wise quantisation as GPTQ and AWQ store it: groups of 128 weights along the input dimension,
one FP16 scale and one 4-bit zero point per group, so 4 + 16/128 + 4/128 = 4.15625 bits per weight. INT8 is
per-output-channel (one FP16 scale per row of at least 1,024 weights: under 0.02 bit per weight, left out).
Only the decoder layers' linear weights take the precision; the LM head, the embedding table, activations
and the KV cache stay FP16 (GPTQ's and AWQ's defaults keep the LM head in FP16).
"""

from __future__ import annotations

from fractions import Fraction

#: Bits per stored weight, scales and zero points included.
WEIGHT_BITS: dict[str, Fraction] = {
    "fp16": Fraction(16),
    "int8": Fraction(8),
    "int4": Fraction(4) + Fraction(16, 128) + Fraction(4, 128),
}
PRECISIONS = tuple(WEIGHT_BITS)
DEFAULT_PRECISION = "fp16"


def weight_bytes(weights: int, precision: str) -> int:
    """Bytes of `weights` weights stored at `precision`, rounded up to a whole byte."""
    bits = WEIGHT_BITS[precision] * weights
    return -(-bits.numerator // (8 * bits.denominator))


def bytes_per_weight(precision: str) -> Fraction:
    """Bytes per weight at `precision` (a fraction: 133/256 for INT4)."""
    return WEIGHT_BITS[precision] / 8
