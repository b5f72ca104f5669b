"""Host FP16 linear-layer latency for a GPU without measurements: a derated roofline.

A host whose catalog entry says ``kernel_table = "roofline"`` (MI100 in the shipped catalog) has no
measured kernel table to fit (``data/gpu_linear_measured.csv`` covers A100, H100 and A40), so its FC
kernels are priced by the plain roofline, each bound derated by the host's sourced efficiency::

    t_ns = launch_overhead_ns + max(bytes / (bandwidth_gbps x bandwidth_efficiency),
                                    flops / (peak_fp16_tflops x 1e3 x compute_efficiency))
    bytes = 2 (K N + M (K + N))      FP16 weights once, input and output activations once
    flops = 2 M K N

with ``M`` tokens, ``K`` in_features, ``N`` out_features of the per-device shard. GB/s is bytes per ns
and one TFLOPS is 1e3 FLOPs per ns. The host's attention kernels and embedding lookups use the same
bound and efficiencies for every host (``physics/costs.py``), so a roofline host is priced by one consistent
model. It has no wave quantization and no memory/compute overlap term: near the ridge point it is
optimistic by up to the fitted models' overlap penalty (8-25 % on the measured GPUs, ``linear.py``).
Every report labels such a host ``derated roofline (no measurements)`` (`kernel_model_label`).
"""

from __future__ import annotations

from specpim_cp.kernels.linear import MAX_FEATURES, MAX_TENSOR_PARALLEL, MAX_TOKENS

ROOFLINE = "roofline"  # the catalog's `kernel_table` value selecting this model
_FP16_BYTES = 2
_FLOPS_PER_MAC = 2


def kernel_model_label(kernel_table: str) -> str:
    """How a host's FC kernels are priced, in the words every report uses."""
    if kernel_table == ROOFLINE:
        return "derated roofline (no measurements)"
    return f"fitted to Vidur {kernel_table} measurements"


def roofline_linear_ns(in_features: int, out_features: int, tokens: int, *, bandwidth_gbps: float,
                       peak_fp16_tflops: float, bandwidth_efficiency: float, compute_efficiency: float,
                       launch_overhead_ns: float) -> float:
    """Latency (ns) of an FP16 ``in_features x out_features`` linear layer on ``tokens`` tokens."""
    if not (1 <= tokens <= MAX_TOKENS and 1 <= in_features <= MAX_FEATURES and 1 <= out_features <= MAX_FEATURES):
        raise ValueError(f"tokens must be in [1, {MAX_TOKENS:,}] and features in [1, {MAX_FEATURES:,}], got "
                         f"{in_features} x {out_features}, {tokens} tokens")
    if not all(0 < x < float("inf") for x in (bandwidth_gbps, peak_fp16_tflops, bandwidth_efficiency,
                                              compute_efficiency)):
        raise ValueError("bandwidth, peak and efficiencies must be finite numbers > 0")
    moved = _FP16_BYTES * (in_features * out_features + tokens * (in_features + out_features))
    flops = _FLOPS_PER_MAC * tokens * in_features * out_features
    t_mem = moved / (bandwidth_gbps * bandwidth_efficiency)
    t_cmp = flops / (peak_fp16_tflops * 1e3 * compute_efficiency)
    return launch_overhead_ns + max(t_mem, t_cmp)


def host_linear_us(host, in_features: int, out_features: int, tokens: int, tensor_parallel: int = 1) -> float:
    """A catalog host's (`HostSpec`) predicted FP16 linear-layer latency (us), each GPU holding
    ``ceil(out_features / tensor_parallel)`` output columns: its fitted table at the measured GPU's
    bandwidth, or the derated roofline at its ``kernel_table_bandwidth_gbps``."""
    from specpim_cp.kernels.linear import predict_linear_us

    if not 1 <= tensor_parallel <= MAX_TENSOR_PARALLEL:
        raise ValueError(f"tensor_parallel must be in [1, {MAX_TENSOR_PARALLEL}], got {tensor_parallel!r}")
    if host.kernel_table != ROOFLINE:
        return predict_linear_us(host.kernel_table, in_features, out_features, tokens, tensor_parallel)
    shard = -(-out_features // tensor_parallel)
    return roofline_linear_ns(in_features, shard, tokens, bandwidth_gbps=host.kernel_table_bandwidth_gbps,
                              peak_fp16_tflops=host.peak_fp16_tflops,
                              bandwidth_efficiency=host.attention_bandwidth_efficiency,
                              compute_efficiency=host.compute_efficiency,
                              launch_overhead_ns=host.launch_overhead_ns) / 1e3
