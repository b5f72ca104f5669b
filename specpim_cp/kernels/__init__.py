"""Host GPU kernel latency model: FP16 linear layers (fitted memory/compute wave model) and NVLink all-reduce.

Both are built from measured tables in ``data/`` (see ``data/README.md``; MIT-licensed, notice in
``data/LICENSE-vidur-data.txt``), fitted once per process and cached. A host without measurements
(``kernel_table = "roofline"``) uses the derated roofline of ``roofline.py``.
"""

from specpim_cp.kernels.allreduce import allreduce_us, measured_allreduce_workers
from specpim_cp.kernels.linear import (
    MAX_FEATURES,
    MAX_TENSOR_PARALLEL,
    MAX_TOKENS,
    TOKEN_RANGES,
    FitReportRow,
    TokenRangeError,
    fit_report,
    format_fit_report,
    known_gpus,
    linear_time_us,
    memory_floor,
    predict_linear_us,
)
from specpim_cp.kernels.roofline import ROOFLINE, host_linear_us, kernel_model_label, roofline_linear_ns

__all__ = [
    "MAX_FEATURES",
    "MAX_TENSOR_PARALLEL",
    "MAX_TOKENS",
    "ROOFLINE",
    "TOKEN_RANGES",
    "FitReportRow",
    "TokenRangeError",
    "allreduce_us",
    "fit_report",
    "format_fit_report",
    "host_linear_us",
    "kernel_model_label",
    "known_gpus",
    "linear_time_us",
    "measured_allreduce_workers",
    "memory_floor",
    "predict_linear_us",
    "roofline_linear_ns",
]
