"""All-reduce latency between A100s over NVLink, interpolated from measured times.

The table (``a100_nvlink_allreduce_measured.csv``) holds the median all-reduce time for 2 and 4 workers
at message sizes of 2 K to 536 M fp16 elements. It is noisy (small messages jump between ~10 and ~70 us),
so each worker count's curve is cleaned before use:

1. duplicate ``(workers, size)`` rows are replaced by their median;
2. the times are made non-decreasing in size by a running maximum (a larger message never reduces
   faster; the dips are measurement noise, and the running max is the conservative choice).

Lookup: piecewise-linear in ``log(size)`` between measured sizes; below the smallest size, the smallest
size's time; above the largest size, linear in size (the bandwidth term) with the slope of the chord
from half the largest size to the largest size. (The chord over the top factor of two is used instead
of the last two rows, which are 0.1 % apart in size and whose slope is pure noise.)

Worker counts other than the measured ones (e.g. 3 or 8) are an **extrapolation**: the nearest measured
count's curve (the larger one on a tie) is scaled by the ring all-reduce traffic factor ``2(n-1)/n``
relative to that count's factor. This keeps the measured latency floor and topology effects but assumes
the per-link bandwidth of the measured configuration; it has not been validated against measurements.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from importlib.resources import files

import numpy as np

__all__ = ["allreduce_us", "measured_allreduce_workers"]

_DATA_FILE = "a100_nvlink_allreduce_measured.csv"


@functools.lru_cache(maxsize=1)
def _curves() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per worker count: (sizes ascending, cleaned non-decreasing times in us)."""
    text = (files("specpim_cp.kernels") / "data" / _DATA_FILE).read_text(encoding="utf-8")
    raw: dict[int, dict[int, list[float]]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        raw.setdefault(int(r["num_workers"]), {}).setdefault(int(r["size_elements"]), []).append(
            float(r["median_us"])
        )
    out = {}
    for workers, by_size in sorted(raw.items()):
        sizes = np.array(sorted(by_size), dtype=float)
        times = np.array([float(np.median(by_size[int(s)])) for s in sizes])
        out[workers] = (sizes, np.maximum.accumulate(times))
    return out


def measured_allreduce_workers() -> list[int]:
    """Worker counts present in the all-reduce table (others are extrapolated)."""
    return list(_curves())


def _measured_us(workers: int, size_elements: float) -> float:
    sizes, times = _curves()[workers]
    if size_elements <= sizes[0]:
        return float(times[0])
    if size_elements <= sizes[-1]:
        return float(np.interp(math.log(size_elements), np.log(sizes), times))
    half = sizes[-1] / 2
    t_half = float(np.interp(math.log(half), np.log(sizes), times)) if half >= sizes[0] else float(times[0])
    slope = max((float(times[-1]) - t_half) / (sizes[-1] - half), 0.0)
    return float(times[-1] + slope * (size_elements - sizes[-1]))


def _ring_factor(n: int) -> float:
    return 2.0 * (n - 1) / n


def allreduce_us(workers: int, size_elements: int) -> float:
    """Time (us) to all-reduce ``size_elements`` fp16 elements across ``workers`` A100s over NVLink.

    0 for one worker (or an empty message). Measured worker counts (2, 4) are interpolated from the
    table; other counts are extrapolated from the nearest measured count by the ring traffic factor
    ``2(n-1)/n`` (see the module docstring).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    if size_elements < 0:
        raise ValueError(f"size_elements must be >= 0, got {size_elements!r}")
    if workers == 1 or size_elements == 0:
        return 0.0
    measured = measured_allreduce_workers()
    if workers in measured:
        return _measured_us(workers, size_elements)
    nearest = min(measured, key=lambda m: (abs(m - workers), -m))
    return _measured_us(nearest, size_elements) * _ring_factor(workers) / _ring_factor(nearest)
