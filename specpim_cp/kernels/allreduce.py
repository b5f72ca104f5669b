"""All-reduce latency between A100s over NVLink: the lower envelope of measured times.

The table (``a100_nvlink_allreduce_measured.csv``, Vidur) holds median all-reduce times for 2 and 4
workers. Its jitter only ever adds time (launch and scheduling delays), so the model is the **lower
envelope**, what the link and NCCL achieve when nothing gets in the way (a decode loop under CUDA graphs),
per worker count:

1. per message size, the fastest measurement (duplicate rows are repeats);
2. made non-decreasing in size (a running minimum from the largest size down);
3. the lower convex hull of those points: a latency plus size over a bandwidth on each segment.

Lookup is linear between hull vertices, flat below the smallest size and proportional to size above the
largest. Other worker counts (e.g. 8) are an unvalidated extrapolation by the ring factor 2(n-1)/n.
Other links keep the curve's latency floor and stretch the time above it by ``TABLE_LINK_GBPS / L``.
formulations/physics.md P4 ([AR-1], [AR-2]) gives the rules, the noise they remove and the limits;
`envelope_fit_report` states how the envelope sits against every measurement.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib.resources import files

import numpy as np

__all__ = ["TABLE_LINK_GBPS", "AllreduceFitRow", "allreduce_us", "envelope_fit_report", "measured_allreduce_workers"]

_DATA_FILE = "a100_nvlink_allreduce_measured.csv"
#: Per-direction bandwidth of the link the table was measured over: A100 NVLink3, 12 links x 25 GB/s =
#: 300 GB/s per direction (NVIDIA A100 datasheet: 600 GB/s total; the pair of Vidur's a100_pairwise_nvlink
#: node is joined by an NVLink bridge of the same 600 GB/s). A fact of the shipped measurement, not of a
#: host: hosts give their own `link_bandwidth_gbps` in the catalog ([AR-2]).
TABLE_LINK_GBPS = 300.0


@functools.lru_cache(maxsize=1)
def _measured() -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per worker count: (sizes ascending, fastest time per size, median time per size), in us."""
    text = (files("specpim_cp.kernels") / "data" / _DATA_FILE).read_text(encoding="utf-8")
    raw: dict[int, dict[int, list[float]]] = {}
    rows = csv.reader(io.StringIO(text))
    header = next(rows)
    w_col, s_col, t_col = (header.index(c) for c in ("num_workers", "size_elements", "median_us"))
    for r in rows:
        raw.setdefault(int(r[w_col]), {}).setdefault(int(r[s_col]), []).append(float(r[t_col]))
    out = {}
    for workers, by_size in sorted(raw.items()):
        sizes = sorted(by_size)
        out[workers] = (np.array(sizes, dtype=float), np.array([min(by_size[s]) for s in sizes]),
                        np.array([_median(by_size[s]) for s in sizes]))
    return out


def _median(xs: list[float]) -> float:
    """np.median of a short list (the middle value, or the mean of the two middle values), without numpy's
    per-call overhead."""
    v = sorted(xs)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def _lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the lower convex hull of points sorted by x (Andrew's monotone chain)."""
    hull: list[tuple[float, float]] = []
    for p in zip(x.tolist(), y.tolist()):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) <= 0:  # not a left turn: drop the middle
                hull.pop()
            else:
                break
        hull.append(p)
    hx, hy = zip(*hull)
    return np.array(hx), np.array(hy)


@functools.lru_cache(maxsize=1)
def _envelopes() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for workers, (sizes, fastest, _median) in _measured().items():
        monotone = np.minimum.accumulate(fastest[::-1])[::-1]
        out[workers] = _lower_hull(sizes, monotone)
    return out


def measured_allreduce_workers() -> list[int]:
    """Worker counts present in the all-reduce table (others are extrapolated)."""
    return list(_envelopes())


def _envelope_us(workers: int, size_elements: float) -> float:
    xs, ys = _envelopes()[workers]
    if size_elements <= xs[0]:
        return float(ys[0])
    if size_elements <= xs[-1]:
        return float(np.interp(size_elements, xs, ys))
    return float(ys[-1] * size_elements / xs[-1])  # bandwidth-bound: time proportional to size


def _ring_factor(n: int) -> float:
    return 2.0 * (n - 1) / n


def _link_scaled_us(workers: int, size_elements: float, link_bandwidth_gbps: float) -> float:
    """[AR-2] A measured worker count's envelope over a link of `link_bandwidth_gbps` per direction: the
    latency floor (the smallest measured message's time) kept, the time above it stretched by
    TABLE_LINK_GBPS / link (exactly the envelope for a 300 GB/s link: the added term is 0.0)."""
    t = _envelope_us(workers, size_elements)
    floor = float(_envelopes()[workers][1][0])
    return t + (TABLE_LINK_GBPS / link_bandwidth_gbps - 1.0) * (t - floor)


@functools.lru_cache(maxsize=1 << 16)
def allreduce_us(workers: int, size_elements: int, link_bandwidth_gbps: float = TABLE_LINK_GBPS) -> float:
    """Time (us) to all-reduce ``size_elements`` fp16 elements across ``workers`` GPUs whose link moves
    ``link_bandwidth_gbps`` per direction (default: the measured A100 NVLink, 300 GB/s).

    0 for one worker (or an empty message). Measured worker counts (2, 4) follow their lower envelope;
    other counts are extrapolated from the nearest measured count by the ring traffic factor. Another
    link keeps the envelope's latency floor and scales the time above it ([AR-2], module docstring).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if size_elements < 0:
        raise ValueError(f"size_elements must be >= 0, got {size_elements!r}")
    if not link_bandwidth_gbps > 0:
        raise ValueError(f"link_bandwidth_gbps must be > 0, got {link_bandwidth_gbps!r}")
    if workers == 1 or size_elements == 0:
        return 0.0
    measured = measured_allreduce_workers()
    if workers in measured:
        return _link_scaled_us(workers, size_elements, link_bandwidth_gbps)
    nearest = min(measured, key=lambda m: (abs(m - workers), -m))
    return _link_scaled_us(nearest, size_elements, link_bandwidth_gbps) * _ring_factor(workers) / _ring_factor(nearest)


@dataclass(frozen=True)
class AllreduceFitRow:
    """How the envelope sits against the measured table for one worker count (over message sizes in
    [min_elements, max_elements], the range the optimizer's messages fall in)."""

    workers: int
    sizes: int
    share_at_or_above: float  # measured medians at or above the envelope (a lower envelope: about 1)
    median_ratio_to_fastest: float  # envelope / fastest measurement, median over sizes (<= 1)
    median_ratio_to_median: float  # envelope / median measurement, median over sizes


def envelope_fit_report(min_elements: int = 1, max_elements: int = 1 << 24) -> list[AllreduceFitRow]:
    out = []
    for workers, (sizes, fastest, median) in _measured().items():
        sel = (sizes >= min_elements) & (sizes <= max_elements)
        model = np.array([_envelope_us(workers, s) for s in sizes[sel]])
        out.append(AllreduceFitRow(
            workers, int(sel.sum()), float(np.mean(median[sel] >= model - 1e-9)),
            float(np.median(model / fastest[sel])), float(np.median(model / median[sel]))))
    return out
