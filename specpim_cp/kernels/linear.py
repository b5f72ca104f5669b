"""Host GPU latency of FP16 linear layers: a fitted memory/compute model with GEMM wave quantization.

``M`` = tokens, ``K`` = in_features, ``N`` = out_features (per-GPU shard sizes), ``s`` = split-K factor,
``SMs`` = streaming multiprocessors (datasheet constant below), ``beta`` = bandwidth_scale::

    t_us   = t0 + (t_mem ** q + t_comp ** q) ** (1 / q)
    t_mem  = 2 * (K*N + M*(K + N)) * us_per_byte / beta         FP16 weights, input and output streamed
    t_comp = min over tiles (tn x tm) in {256x16, 128x64, 256x128} and s in {1, 2, 4} of
             waves * (2 * tm * tn * ceil(K / s) * us_per_flop_sm / speedup_tile + wave_overhead_us)
    waves  = (1 - theta) * ceil(c / SMs) + theta * c / SMs,    c = ceil(N / tn) * ceil(M / tm) * s

Eight parameters per GPU, fitted once per process to the measured table (Levenberg-Marquardt on the
relative residual under a pseudo-Huber loss, from a data-driven start, so the fit is deterministic).
Every term is non-decreasing in M, K and N, so the time is monotone, also past the measured 512 tokens;
``bandwidth_scale`` divides only ``t_mem``. formulations/costs.md ("Host FC kernel model") states the
model; formulations/physics.md P5 gives the parameters and their fitted values, the tiles, the accuracy
(:func:`fit_report`), the extrapolation check and the forms tried.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from specpim_cp.errors import ScenarioError

__all__ = [
    "MAX_FEATURES",
    "MAX_TENSOR_PARALLEL",
    "MAX_TOKENS",
    "TOKEN_RANGES",
    "FitReportRow",
    "TokenRangeError",
    "fit_report",
    "format_fit_report",
    "known_gpus",
    "linear_time_us",
    "memory_floor",
    "predict_linear_us",
]

_DATA_FILE = "gpu_linear_measured.csv"

#: The largest linear layer the kernel models price (they stay finite far beyond; these bound typos).
#: Features: 10x the catalog's widest matrix dimension (10^7, `catalog.MAX_MODEL_DIM`), so a fused q/k/v
#: or gate/up matrix of any catalog model fits; the measured tables stop at 65,536.
MAX_FEATURES = 10**8
#: Tokens of one pass: 60x the most a scenario's pass holds (batch 512 x a 33-token tree), 2,000x the
#: measured 512.
MAX_TOKENS = 10**6
#: GPUs one layer is split over (`kernels predict --tensor-parallel`): the measured tables use 1-8.
MAX_TENSOR_PARALLEL = 1024
_FP16_BYTES = 2
_FLOPS_PER_MAC = 2

# Streaming multiprocessors per GPU. Sources: NVIDIA A100 Tensor Core GPU Architecture whitepaper
# (108 SMs), NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs, SXM5), NVIDIA A40 datasheet /
# GA102 architecture whitepaper (84 SMs).
_SM_COUNT = {"a100": 108, "h100": 132, "a40": 84}

# Thread-block tiles (out_features x tokens): a skinny 256x16 tile standing for cuBLAS's few-token
# (GEMV-like) kernels, and the HMMA GEMM tiles named in its kernels ``*_gemm_fp16_128x64_*`` and
# ``*_gemm_fp16_256x128_*``. The first is the reference of ``tile_speedup``.
_TILES = ((256, 16), (128, 64), (256, 128))
_SPLIT_K = (1, 2, 4)  # split-K factors cuBLAS uses for few-tile, deep-K GEMMs

_FLOOR_MAX_TOKENS = 16  # rows up to this many tokens start the bandwidth fit (weight-streaming bound)
_HUBER_KNEE = 0.03  # relative residual where the loss turns from quadratic to linear (the error scale)
# Levenberg-Marquardt settings (the usual Marquardt/Nielsen choices; the fits converge in 20-40 steps)
_LM_MAX_ITERATIONS = 100
_LM_JACOBIAN_STEP = 1e-6  # forward-difference step on log/logit parameters
_LM_TOLERANCE = 1e-10  # stop when one step improves the loss by less than this fraction
_LM_DAMPING_START, _LM_DAMPING_MIN, _LM_DAMPING_MAX = 1e-3, 1e-9, 1e10
_LM_DAMPING_UP, _LM_DAMPING_DOWN = 4.0, 3.0  # after a rejected / accepted step
_LM_DIAGONAL_FLOOR = 1e-12  # keeps the damped normal matrix invertible for a flat parameter

# Fit starting values that the data do not give directly (the fit moves them)
_START_OVERLAP_Q = 2.0  # a soft roofline
_START_WAVE_OVERHEAD_US = 1.0
_START_T0_US = 1.0  # used only if the memory-floor regression gives a non-positive intercept
_PREDICTION_CACHE_SIZE = 1 << 17  # distinct (gpu, shape, tokens, scale) calls kept; ~30 MB at most

# The formula helpers below run on Python ints (one prediction, the hot path) and on numpy arrays (fit).
_IntLike = int | np.ndarray
_FloatLike = float | np.ndarray

TOKEN_RANGES = ((1, 16), (17, 64), (65, 128), (129, 256), (257, 512))  # fit_report's per-range rows
_EXTRAPOLATION_FIT_MAX_TOKENS = 256  # the extrapolation check fits tokens <= this, tests the rest


@dataclass(frozen=True)
class _Rows:
    """One GPU's measured rows as parallel arrays."""

    tokens: np.ndarray  # int
    in_features: np.ndarray  # int, per GPU shard
    out_features: np.ndarray  # int, per GPU shard
    time_us: np.ndarray  # float
    source_model: np.ndarray  # str

    def subset(self, mask: np.ndarray) -> _Rows:
        return _Rows(*(a[mask] for a in (self.tokens, self.in_features, self.out_features,
                                         self.time_us, self.source_model)))


@dataclass(frozen=True)
class _GemmModel:
    """The fitted parameters of one GPU (see the module docstring for the formula)."""

    sms: int
    t0_us: float
    us_per_byte: float
    us_per_flop_sm: float
    overlap_q: float
    wave_overhead_us: float
    wave_fluid_fraction: float  # theta
    tile_speedup: tuple[float, ...]  # per entry of _TILES, the first is 1


def _ceil_div(a: _IntLike, b: _IntLike) -> _IntLike:
    """``ceil(a / b)`` for non-negative integers or integer arrays (exact, no float rounding)."""
    return -(-a // b)


def _stream_bytes(tokens: _IntLike, in_features: _IntLike, out_features: _IntLike) -> _IntLike:
    """FP16 bytes a linear layer moves: the weights once, the input and output activations once."""
    return _FP16_BYTES * (in_features * out_features + tokens * (in_features + out_features))


def _candidate_geometry(
    tokens: _IntLike, in_features: _IntLike, out_features: _IntLike
) -> Iterator[tuple[int, _IntLike, _IntLike]]:
    """Per (tile, split-K) candidate: (tile index, thread blocks, FLOPs per block); scalars or arrays."""
    for i, (tile_n, tile_m) in enumerate(_TILES):
        tiles = _ceil_div(out_features, tile_n) * _ceil_div(tokens, tile_m)
        for split in _SPLIT_K:
            yield i, tiles * split, _FLOPS_PER_MAC * tile_m * tile_n * _ceil_div(in_features, split)


def _candidate_time_us(
    model: _GemmModel, tile: int, blocks: _IntLike, flops_per_block: _FloatLike
) -> _FloatLike:
    """Compute time of one candidate: waves of thread blocks over the SMs times the per-wave time."""
    theta = model.wave_fluid_fraction
    waves = (1.0 - theta) * _ceil_div(blocks, model.sms) + theta * (blocks / model.sms)
    per_wave = flops_per_block * model.us_per_flop_sm / model.tile_speedup[tile] + model.wave_overhead_us
    return waves * per_wave


def _combine_us(model: _GemmModel, t_mem: _FloatLike, t_comp: _FloatLike) -> _FloatLike:
    """``t0 + (t_mem^q + t_comp^q)^(1/q)``: the soft roofline joining the two bounds."""
    q = model.overlap_q
    return model.t0_us + (t_mem**q + t_comp**q) ** (1.0 / q)


def _time_us(model: _GemmModel, in_features: int, out_features: int, tokens: int, scale: float) -> float:
    """The model for one layer (plain Python arithmetic: this is the hot path of cost-table building)."""
    t_mem = _stream_bytes(tokens, in_features, out_features) * model.us_per_byte / scale
    t_comp = min(_candidate_time_us(model, i, b, f)
                 for i, b, f in _candidate_geometry(tokens, in_features, out_features))
    return float(_combine_us(model, t_mem, t_comp))


# ---------------------------------------------------------------------------------------------------
# fitting


@dataclass(frozen=True)
class _Design:
    """Parameter-independent arrays of a set of rows, computed once per fit."""

    stream_bytes: np.ndarray
    tile: tuple[int, ...]
    blocks: tuple[np.ndarray, ...]
    flops_per_block: tuple[np.ndarray, ...]

    @staticmethod
    def of(rows: _Rows) -> _Design:
        cands = list(_candidate_geometry(rows.tokens, rows.in_features, rows.out_features))
        return _Design(
            stream_bytes=_stream_bytes(rows.tokens, rows.in_features, rows.out_features).astype(float),
            tile=tuple(c[0] for c in cands),
            blocks=tuple(c[1] for c in cands),
            flops_per_block=tuple(c[2].astype(float) for c in cands),
        )

    def predict_us(self, model: _GemmModel) -> np.ndarray:
        t_comp = np.min([_candidate_time_us(model, i, b, f)
                         for i, b, f in zip(self.tile, self.blocks, self.flops_per_block)], axis=0)
        return _combine_us(model, self.stream_bytes * model.us_per_byte, t_comp)


def _model_from_vector(p: np.ndarray, sms: int) -> _GemmModel:
    """Unconstrained fit vector -> parameters (logs keep them positive, the logit keeps theta in (0, 1))."""
    return _GemmModel(
        sms=sms,
        t0_us=float(np.exp(p[0])),
        us_per_byte=float(np.exp(p[1])),
        us_per_flop_sm=float(np.exp(p[2])),
        overlap_q=float(np.exp(p[3])),
        wave_overhead_us=float(np.exp(p[4])),
        wave_fluid_fraction=float(0.5 * (1.0 + np.tanh(0.5 * p[5]))),  # logistic, overflow-free
        tile_speedup=(1.0, *(float(x) for x in np.exp(p[6:]))),
    )


def _relative_lstsq(x: np.ndarray, time_us: np.ndarray) -> np.ndarray:
    """Coefficients of ``t ~ x @ c`` minimising the sum of squared relative residuals."""
    coef, *_ = np.linalg.lstsq(x / time_us[:, None], np.ones_like(time_us), rcond=None)
    return coef


def _start_vector(rows: _Rows, sms: int) -> np.ndarray:
    """Data-driven starting point: memory floor from the few-token rows, FLOP rate at the most tokens."""
    few = rows.tokens <= _FLOOR_MAX_TOKENS
    w = _stream_bytes(rows.tokens[few], rows.in_features[few], rows.out_features[few]).astype(float)
    t0, us_per_byte = _relative_lstsq(np.column_stack([np.ones_like(w), w]), rows.time_us[few])
    if us_per_byte <= 0:
        raise RuntimeError("memory-floor fit gave a non-positive time per byte; check the kernel table")
    most = rows.tokens == rows.tokens.max()
    flops = _FLOPS_PER_MAC * (rows.tokens[most] * rows.in_features[most] * rows.out_features[most])
    us_per_flop_sm = float(np.median(rows.time_us[most] / flops)) * sms
    theta_logit, log_tile_speedups = 0.0, [0.0] * (len(_TILES) - 1)  # theta = 0.5, equal tile rates
    return np.array([np.log(t0 if t0 > 0 else _START_T0_US), np.log(us_per_byte), np.log(us_per_flop_sm),
                     np.log(_START_OVERLAP_Q), np.log(_START_WAVE_OVERHEAD_US), theta_logit,
                     *log_tile_speedups])


def _pseudo_huber(r: np.ndarray) -> np.ndarray:
    """Signed square root of the pseudo-Huber loss, so a least-squares solver minimises that loss."""
    k = _HUBER_KNEE
    return np.sign(r) * np.sqrt(2.0 * k * k * (np.sqrt(1.0 + (r / k) ** 2) - 1.0))


def _levenberg_marquardt(residuals: Callable[[np.ndarray], np.ndarray], p0: np.ndarray) -> np.ndarray:
    """Minimise ``|residuals(p)|^2`` (damped Gauss-Newton, forward-difference Jacobian, deterministic)."""
    p = p0.astype(float)
    r = residuals(p)
    cost = float(r @ r)
    damping = _LM_DAMPING_START
    for _ in range(_LM_MAX_ITERATIONS):
        jac = np.empty((r.size, p.size))
        for j in range(p.size):
            step = np.zeros_like(p)
            step[j] = _LM_JACOBIAN_STEP
            jac[:, j] = (residuals(p + step) - r) / _LM_JACOBIAN_STEP
        a, g = jac.T @ jac, jac.T @ r
        while True:
            trial = p - np.linalg.solve(a + damping * np.diag(np.diag(a) + _LM_DIAGONAL_FLOOR), g)
            r_trial = residuals(trial)
            cost_trial = float(r_trial @ r_trial)
            if np.isfinite(cost_trial) and cost_trial < cost:
                break
            damping *= _LM_DAMPING_UP
            if damping > _LM_DAMPING_MAX:
                return p
        gain = (cost - cost_trial) / cost
        p, r, cost, damping = trial, r_trial, cost_trial, max(damping / _LM_DAMPING_DOWN, _LM_DAMPING_MIN)
        if gain < _LM_TOLERANCE:
            break
    return p


def _fit(rows: _Rows, sms: int) -> _GemmModel:
    """Fit the model to ``rows`` of a GPU with ``sms`` SMs (pseudo-Huber on relative residuals)."""
    design = _Design.of(rows)

    def residuals(p: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return _pseudo_huber((design.predict_us(_model_from_vector(p, sms)) - rows.time_us) / rows.time_us)

    return _model_from_vector(_levenberg_marquardt(residuals, _start_vector(rows, sms)), sms)


# ---------------------------------------------------------------------------------------------------
# data and public API


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, _Rows]:
    text = (files("specpim_cp.kernels") / "data" / _DATA_FILE).read_text(encoding="utf-8")
    cols: dict[str, dict[str, list]] = {}
    rows = csv.reader(io.StringIO(text))
    header = next(rows)  # read by column index: DictReader's dict per row is most of a process's first load
    g, m, k, n, t, src = (header.index(name) for name in ("gpu", "num_tokens", "in_features", "out_features",
                                                          "median_us", "source_model"))
    for r in rows:
        c = cols.setdefault(r[g].strip().lower(), {"m": [], "k": [], "n": [], "t": [], "s": []})
        c["m"].append(int(r[m]))
        c["k"].append(int(r[k]))
        c["n"].append(int(r[n]))
        c["t"].append(float(r[t]))
        c["s"].append(r[src])
    missing = sorted(set(cols) - set(_SM_COUNT))
    if missing:
        raise RuntimeError(f"no SM count for GPU(s) {missing} in the kernel table; add them to _SM_COUNT")
    return {
        g: _Rows(*(np.array(c[x], dtype=np.int64) for x in "mkn"), np.array(c["t"]), np.array(c["s"]))
        for g, c in sorted(cols.items())
    }


def known_gpus() -> list[str]:
    """GPU names with measured linear-layer data (lower case, e.g. ``"a100"``)."""
    return list(_load())


def _gpu_key(gpu: str) -> str:
    key = gpu.strip().lower()
    if key not in _load():
        raise ScenarioError(f"unknown GPU {gpu!r} for the kernel model; known: {', '.join(_load())}")
    return key


@functools.cache
def _fitted(gpu_key: str) -> _GemmModel:
    return _fit(_load()[gpu_key], _SM_COUNT[gpu_key])


def memory_floor(gpu: str) -> tuple[float, float]:
    """The memory-streaming regime of ``gpu``: ``(t0_us, eff_bw_gbps)``, time ~ t0 + bytes / eff_bw.

    This is the fitted model when compute is negligible (a few tokens); ``eff_bw_gbps`` is the bandwidth
    at which the measured GPU streams weights and activations.
    """
    model = _fitted(_gpu_key(gpu))
    return model.t0_us, 1.0 / model.us_per_byte / 1e3  # bytes/us -> GB/s


def _check_shape(in_features: int, out_features: int, tokens: int) -> None:
    if not 1 <= tokens <= MAX_TOKENS:
        raise ValueError(f"tokens must be in [1, {MAX_TOKENS:,}], got {tokens!r}")
    if not (1 <= in_features <= MAX_FEATURES and 1 <= out_features <= MAX_FEATURES):
        raise ValueError(f"in/out features must be in [1, {MAX_FEATURES:,}], got {in_features!r} x {out_features!r}")
    if not (tokens == int(tokens) and in_features == int(in_features) and out_features == int(out_features)):
        raise ValueError(f"tokens and features must be whole numbers, got {in_features!r} x {out_features!r}, "
                         f"{tokens!r} tokens")


@functools.lru_cache(maxsize=_PREDICTION_CACHE_SIZE)
def linear_time_us(
    gpu: str, in_features: int, out_features: int, tokens: int, bandwidth_scale: float = 1.0
) -> float:
    """Latency (us) of an FP16 ``in_features x out_features`` linear layer (per-device shard) on
    ``tokens`` tokens, when the host gets ``bandwidth_scale`` of the measured GPU's memory bandwidth.

    Only the memory-streaming time is divided by ``bandwidth_scale``; the compute (tensor-core) time is
    the measured GPU's. Cached: cost tables call this with the same arguments many times.
    """
    key = _gpu_key(gpu)
    _check_shape(in_features, out_features, tokens)
    if not 0 < bandwidth_scale < float("inf"):
        raise ValueError(f"bandwidth_scale must be a finite number > 0, got {bandwidth_scale!r}")
    return _time_us(_fitted(key), int(in_features), int(out_features), int(tokens), float(bandwidth_scale))


def predict_linear_us(
    gpu: str, in_features: int, out_features: int, tokens: int, tensor_parallel: int = 1
) -> float:
    """Fitted latency (us) of one FP16 ``in_features x out_features`` linear layer on ``tokens`` tokens.

    At the measured GPU's own memory bandwidth. ``in_features``/``out_features`` describe the whole
    layer; with ``tensor_parallel > 1`` each GPU holds ``ceil(out_features / tensor_parallel)`` output
    columns (column parallel: ``1 / tensor_parallel`` of the weight bytes). For a row-parallel layer
    call :func:`linear_time_us` with the shard shape.
    """
    key = _gpu_key(gpu)
    _check_shape(in_features, out_features, tokens)
    if not 1 <= tensor_parallel <= MAX_TENSOR_PARALLEL:
        raise ValueError(f"tensor_parallel must be in [1, {MAX_TENSOR_PARALLEL}], got {tensor_parallel!r}")
    return linear_time_us(key, in_features, _ceil_div(out_features, tensor_parallel), tokens)


# ---------------------------------------------------------------------------------------------------
# accuracy report


@dataclass(frozen=True)
class TokenRangeError:
    """Absolute relative error (fractions, 0.07 = 7 %) over the rows with ``first..last`` tokens."""

    first_tokens: int
    last_tokens: int
    points: int
    median_abs_rel_error: float
    p90_abs_rel_error: float


@dataclass(frozen=True)
class FitReportRow:
    """Leave-one-source-model-out accuracy of the linear-layer model on one GPU.

    Errors are fractions (0.07 = 7 %) of ``|predicted - measured| / measured`` pooled over all held-out
    rows of all folds; ``by_tokens`` splits them by :data:`TOKEN_RANGES`. ``extrapolation`` is a separate
    check: the model fitted on all rows with <= 256 tokens, evaluated on the rows with 257..512 tokens.
    """

    gpu: str
    points: int
    models: int
    median_abs_rel_error: float
    p90_abs_rel_error: float
    by_tokens: tuple[TokenRangeError, ...]
    extrapolation: TokenRangeError


def _range_error(tokens: np.ndarray, errors: np.ndarray, first: int, last: int) -> TokenRangeError:
    sel = (tokens >= first) & (tokens <= last)
    e = errors[sel]
    if e.size == 0:
        return TokenRangeError(first, last, 0, float("nan"), float("nan"))
    return TokenRangeError(first, last, int(e.size), float(np.median(e)), float(np.percentile(e, 90)))


def _abs_rel_errors(model: _GemmModel, rows: _Rows) -> np.ndarray:
    return np.abs(_Design.of(rows).predict_us(model) - rows.time_us) / rows.time_us


def _gpu_report(gpu: str, rows: _Rows) -> FitReportRow:
    sms = _SM_COUNT[gpu]
    models = sorted(set(rows.source_model.tolist()))
    tokens, errors = [], []
    for held_out in models:
        test = rows.source_model == held_out
        tokens.append(rows.tokens[test])
        errors.append(_abs_rel_errors(_fit(rows.subset(~test), sms), rows.subset(test)))
    m, e = np.concatenate(tokens), np.concatenate(errors)
    early = rows.tokens <= _EXTRAPOLATION_FIT_MAX_TOKENS
    late = rows.subset(~early)
    extrap = _abs_rel_errors(_fit(rows.subset(early), sms), late)
    return FitReportRow(
        gpu=gpu,
        points=len(rows.tokens),
        models=len(models),
        median_abs_rel_error=float(np.median(e)),
        p90_abs_rel_error=float(np.percentile(e, 90)),
        by_tokens=tuple(_range_error(m, e, lo, hi) for lo, hi in TOKEN_RANGES),
        extrapolation=_range_error(late.tokens, extrap, _EXTRAPOLATION_FIT_MAX_TOKENS + 1, int(rows.tokens.max())),
    )


@functools.lru_cache(maxsize=1)
def _fit_report() -> tuple[FitReportRow, ...]:
    return tuple(_gpu_report(gpu, rows) for gpu, rows in _load().items())


def fit_report() -> list[FitReportRow]:
    """Leave-one-source-model-out cross-validated error of the linear-layer model, one row per GPU.

    For each source LLM of a GPU the model is refitted on the other LLMs' rows and evaluated on the
    held-out LLM's rows; the absolute relative errors of all held-out rows are pooled, overall and per
    token range. Each row also carries the extrapolation check (fit <= 256 tokens, test 257..512).
    """
    return list(_fit_report())


def _percent_pair(median: float, p90: float) -> str:
    return f"{100 * median:.1f} / {100 * p90:.1f}"


def format_fit_report(rows: list[FitReportRow]) -> str:
    """An aligned text table of :func:`fit_report` rows: median / p90 |error| in percent per column."""
    ranges = [(r.first_tokens, r.last_tokens) for r in rows[0].by_tokens] if rows else list(TOKEN_RANGES)
    header = ("gpu", "points", "models", "all tokens", *(f"{lo}-{hi}" for lo, hi in ranges),
              "extrap >256")
    body = [
        (
            r.gpu,
            str(r.points),
            str(r.models),
            _percent_pair(r.median_abs_rel_error, r.p90_abs_rel_error),
            *(_percent_pair(b.median_abs_rel_error, b.p90_abs_rel_error) for b in r.by_tokens),
            _percent_pair(r.extrapolation.median_abs_rel_error, r.extrapolation.p90_abs_rel_error),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = []
    for line in [header, *body]:
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        lines.append("  ".join(cells))
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("median / p90 |predicted - measured| / measured, %, leave-one-source-model-out; "
                 "extrap: fit on tokens <= 256, tested on 257-512")
    return "\n".join(lines)
