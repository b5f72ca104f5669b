"""Host GPU latency of FP16 linear layers, fitted to measured kernel times.

Model form (per GPU), piecewise-linear in tokens and linear in weight bytes
--------------------------------------------------------------------------
The breakpoints are the measured token counts ``M_j`` (1, 2, 4, 8, 16, 24, ..., 512). At each one,

    t_us(M_j, W) = a_j + b_j * W,        W = in_features * out_features * 2  (FP16 weight bytes per GPU),

fitted by weighted least squares over every row of that GPU at that token count with weights ``1 / t``,
i.e. minimising the sum of squared *relative* residuals (the acceptance criterion is relative error;
plain least squares lets the few largest layers dominate and roughly doubles the error on small ones).
``1 / b_j`` is the effective bandwidth at ``M_j`` (memory bound for few tokens, a FLOP rate times bytes
per FLOP once compute bound) and ``a_j`` the launch / fixed overhead.

Two constraints make the model physical and cost nothing measurable in cross-validated error:

* ``a_j`` and ``b_j`` are each made non-decreasing in ``j`` (isotonic regression, pool adjacent
  violators). The raw per-breakpoint fits wobble by a few percent; with both non-decreasing (and
  ``b_j >= 0``) the time is non-decreasing in tokens for every layer size, and in bytes for every token
  count.
* Between breakpoints ``a`` and ``b`` (hence ``t``) are interpolated linearly in ``M``; below the first
  breakpoint the first fit is used. Beyond the last breakpoint ``t`` is extrapolated linearly in ``M``
  with the slope of the chord from ``M = 256`` to the last breakpoint (512). That chord, not the last
  8-token segment, is used on purpose: 504..512 tokens sit inside one GEMM tile, where time is almost
  flat, so that segment's slope would predict 1024 tokens at ~1.1x the 512-token time; the 256..512 chord
  gives ~1.9x, as compute-bound GEMMs do. Since the slopes are non-negative, the extrapolation is never
  below the value at the last breakpoint.

Richer forms were tried (an extra ``in+out`` activation-bytes term, an ``out`` term, an L1 relative
loss): none lowered the leave-one-source-model-out error by more than a few tenths of a percent on all
three GPUs, so the two-parameter form is kept.

Memory-streaming floor
----------------------
Per GPU, ``t_us = t0_us + W / (eff_bw_gbps * 1e3)`` fitted (same relative-error weighting) over all rows
with ``M <= 16``, where the layers are weight-streaming bound. :func:`linear_time_us` uses it to rescale
a layer when the host gets only a fraction of the measured GPU's memory bandwidth:
``max(fit(M, W), t0 + W / (eff_bw * scale))``.

Accuracy is reported by :func:`fit_report` as leave-one-source-model-out cross-validation (refit without
one LLM's layer shapes, predict that LLM's rows), so the numbers hold for shapes the fit never saw.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from specpim_cp.errors import ScenarioError

__all__ = [
    "FitReportRow",
    "fit_report",
    "format_fit_report",
    "known_gpus",
    "linear_time_us",
    "memory_floor",
    "predict_linear_us",
]

_DATA_FILE = "gpu_linear_measured.csv"
_FP16_BYTES = 2
_FLOOR_MAX_TOKENS = 16  # rows with at most this many tokens define the memory-streaming floor
_EXTRAPOLATION_FROM_TOKENS = 256  # beyond the last breakpoint: slope of the chord from here to the last


@dataclass(frozen=True)
class _Rows:
    """One GPU's measured rows as parallel arrays."""

    tokens: np.ndarray  # int
    weight_bytes: np.ndarray  # float, per GPU shard
    time_us: np.ndarray  # float
    source_model: np.ndarray  # str

    def subset(self, mask: np.ndarray) -> _Rows:
        return _Rows(self.tokens[mask], self.weight_bytes[mask], self.time_us[mask], self.source_model[mask])


@dataclass(frozen=True)
class _PiecewiseFit:
    """``t = a(M) + b(M) * W`` with ``a``, ``b`` given at the breakpoints ``tokens``."""

    tokens: np.ndarray
    intercept_us: np.ndarray
    us_per_byte: np.ndarray

    def evaluate(self, tokens: np.ndarray, weight_bytes: np.ndarray) -> np.ndarray:
        m = np.asarray(tokens, dtype=float)
        w = np.asarray(weight_bytes, dtype=float)
        bp = self.tokens.astype(float)
        a = np.interp(m, bp, self.intercept_us)  # clamps to the end values outside the breakpoints
        b = np.interp(m, bp, self.us_per_byte)
        t = a + b * w
        beyond = m > bp[-1]
        if np.any(beyond) and len(bp) > 1:
            # chord from the last breakpoint <= _EXTRAPOLATION_FROM_TOKENS (at least the second-to-last)
            j0 = min(int(np.searchsorted(bp, _EXTRAPOLATION_FROM_TOKENS, side="right")) - 1, len(bp) - 2)
            j0 = max(j0, 0)
            span = bp[-1] - bp[j0]
            da = (self.intercept_us[-1] - self.intercept_us[j0]) / span
            db = (self.us_per_byte[-1] - self.us_per_byte[j0]) / span
            extra = (m - bp[-1]) * (da + db * w)
            t = np.where(beyond, t + np.maximum(extra, 0.0), t)
        return t


def _isotonic_non_decreasing(y: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit to ``y`` (pool adjacent violators, equal weights)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in y:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, n2 = blocks.pop()
            m1, n1 = blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return np.concatenate([np.full(int(n), m) for m, n in blocks])


def _relative_lstsq(weight_bytes: np.ndarray, time_us: np.ndarray) -> tuple[float, float]:
    """Fit ``t = a + b * W`` minimising the sum of squared relative residuals ``((a + bW - t) / t)^2``."""
    x = np.column_stack([np.ones_like(weight_bytes), weight_bytes]) / time_us[:, None]
    coef, *_ = np.linalg.lstsq(x, np.ones_like(time_us), rcond=None)
    return float(coef[0]), float(coef[1])


def _fit_piecewise(rows: _Rows) -> _PiecewiseFit:
    breakpoints = np.unique(rows.tokens)
    a = np.empty(len(breakpoints))
    b = np.empty(len(breakpoints))
    for j, m in enumerate(breakpoints):
        sel = rows.tokens == m
        a[j], b[j] = _relative_lstsq(rows.weight_bytes[sel], rows.time_us[sel])
    a = _isotonic_non_decreasing(a)
    b = np.maximum(_isotonic_non_decreasing(b), 0.0)
    return _PiecewiseFit(breakpoints, a, b)


def _fit_floor(rows: _Rows) -> tuple[float, float]:
    sel = rows.tokens <= _FLOOR_MAX_TOKENS
    t0, us_per_byte = _relative_lstsq(rows.weight_bytes[sel], rows.time_us[sel])
    if us_per_byte <= 0:
        raise RuntimeError("memory-floor fit gave a non-positive time per byte; check the kernel table")
    return t0, 1.0 / (us_per_byte * 1e3)


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, _Rows]:
    text = (files("specpim_cp.kernels") / "data" / _DATA_FILE).read_text(encoding="utf-8")
    cols: dict[str, dict[str, list]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        c = cols.setdefault(r["gpu"].strip().lower(), {"m": [], "w": [], "t": [], "s": []})
        c["m"].append(int(r["num_tokens"]))
        c["w"].append(float(int(r["in_features"]) * int(r["out_features"]) * _FP16_BYTES))
        c["t"].append(float(r["median_us"]))
        c["s"].append(r["source_model"])
    return {
        g: _Rows(np.array(c["m"]), np.array(c["w"]), np.array(c["t"]), np.array(c["s"]))
        for g, c in sorted(cols.items())
    }


def known_gpus() -> list[str]:
    """GPU names with measured linear-layer data (lower case, e.g. ``"a100"``)."""
    return list(_load())


def _rows(gpu: str) -> tuple[str, _Rows]:
    key = gpu.strip().lower()
    data = _load()
    if key not in data:
        raise ScenarioError(f"unknown GPU {gpu!r} for the kernel model; known: {', '.join(data)}")
    return key, data[key]


@functools.cache
def _fitted(gpu_key: str) -> tuple[_PiecewiseFit, tuple[float, float]]:
    rows = _load()[gpu_key]
    return _fit_piecewise(rows), _fit_floor(rows)


def memory_floor(gpu: str) -> tuple[float, float]:
    """The memory-streaming floor of ``gpu``: ``(t0_us, eff_bw_gbps)``, time = t0 + bytes / eff_bw."""
    key, _ = _rows(gpu)
    return _fitted(key)[1]


def _check_tokens(tokens: float) -> None:
    if not tokens >= 1:
        raise ValueError(f"tokens must be >= 1, got {tokens!r}")


def predict_linear_us(
    gpu: str, in_features: int, out_features: int, tokens: int, tensor_parallel: int = 1
) -> float:
    """Fitted latency (us) of one FP16 ``in_features x out_features`` linear layer on ``tokens`` tokens.

    At the measured GPU's own memory bandwidth. ``in_features``/``out_features`` describe the whole
    layer; with ``tensor_parallel > 1`` each GPU holds ``1 / tensor_parallel`` of the weight bytes.
    """
    key, _ = _rows(gpu)
    _check_tokens(tokens)
    if tensor_parallel < 1:
        raise ValueError(f"tensor_parallel must be >= 1, got {tensor_parallel!r}")
    if in_features < 1 or out_features < 1:
        raise ValueError(f"in/out features must be >= 1, got {in_features!r} x {out_features!r}")
    w = in_features * out_features * _FP16_BYTES / tensor_parallel
    return float(_fitted(key)[0].evaluate(np.array([tokens]), np.array([w]))[0])


def linear_time_us(gpu: str, weight_bytes: float, tokens: int, bandwidth_scale: float = 1.0) -> float:
    """Latency (us) of a linear layer with ``weight_bytes`` per device when the host gets
    ``bandwidth_scale`` of the measured GPU's memory bandwidth.

    ``max(fit(tokens, W), t0 + W / (eff_bw * bandwidth_scale))``: the fitted table time, but never
    faster than streaming the weights at the reduced bandwidth. With scale 1 this is the fit except
    where the memory floor lies above it (by at most a few percent, at small token counts).
    """
    key, _ = _rows(gpu)
    _check_tokens(tokens)
    if not bandwidth_scale > 0:
        raise ValueError(f"bandwidth_scale must be > 0, got {bandwidth_scale!r}")
    if weight_bytes < 0:
        raise ValueError(f"weight_bytes must be >= 0, got {weight_bytes!r}")
    fit, (t0, eff_bw_gbps) = _fitted(key)
    t_fit = float(fit.evaluate(np.array([tokens]), np.array([float(weight_bytes)]))[0])
    t_floor = t0 + weight_bytes / (eff_bw_gbps * bandwidth_scale * 1e3)
    return max(t_fit, t_floor)


@dataclass(frozen=True)
class FitReportRow:
    """Leave-one-source-model-out accuracy of the linear-layer fit on one GPU.

    Errors are fractions (0.07 = 7 %) of ``|predicted - measured| / measured`` pooled over all held-out
    rows of all folds.
    """

    gpu: str
    points: int
    models: int
    median_abs_rel_error: float
    p90_abs_rel_error: float


@functools.lru_cache(maxsize=1)
def _fit_report() -> tuple[FitReportRow, ...]:
    out = []
    for gpu, rows in _load().items():
        models = sorted(set(rows.source_model.tolist()))
        errors = []
        for held_out in models:
            test = rows.source_model == held_out
            fit = _fit_piecewise(rows.subset(~test))
            pred = fit.evaluate(rows.tokens[test], rows.weight_bytes[test])
            errors.append(np.abs(pred - rows.time_us[test]) / rows.time_us[test])
        e = np.concatenate(errors)
        out.append(
            FitReportRow(
                gpu=gpu,
                points=len(rows.tokens),
                models=len(models),
                median_abs_rel_error=float(np.median(e)),
                p90_abs_rel_error=float(np.percentile(e, 90)),
            )
        )
    return tuple(out)


def fit_report() -> list[FitReportRow]:
    """Leave-one-source-model-out cross-validated error of the linear-layer fit, one row per GPU.

    For each source LLM of a GPU the model is refitted on the other LLMs' rows and evaluated on the
    held-out LLM's rows; the absolute relative errors of all held-out rows are pooled.
    """
    return list(_fit_report())


def format_fit_report(rows: list[FitReportRow]) -> str:
    """An aligned text table of :func:`fit_report` rows, errors in percent."""
    header = ("gpu", "points", "models", "median |err|", "p90 |err|")
    body = [
        (
            r.gpu,
            str(r.points),
            str(r.models),
            f"{100 * r.median_abs_rel_error:.1f}%",
            f"{100 * r.p90_abs_rel_error:.1f}%",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = []
    for line in [header, *body]:
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        lines.append("  ".join(cells))
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
