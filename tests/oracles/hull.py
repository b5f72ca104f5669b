"""The lower-left convex hull of (time, energy) points by the plain monotone chain over the whole staircase,
no point dropped first: what energy_bounds' hull must return, line for line."""

from __future__ import annotations

import numpy as np


def hull_lines(times: np.ndarray, energies: np.ndarray) -> list[tuple[float, float]]:
    order = np.lexsort((energies, times))
    times, energies = times[order], energies[order]
    keep = np.ones(len(times), dtype=bool)
    keep[1:] = energies[1:] < np.minimum.accumulate(energies)[:-1]
    hull: list[tuple[float, float]] = []
    for t, e in zip(times[keep].tolist(), energies[keep].tolist()):
        while len(hull) >= 2:
            (e1, t1), (e2, t2) = hull[-2], hull[-1]
            if (e2 - e1) * (t - t1) >= (e - e1) * (t2 - t1):
                hull.pop()
            else:
                break
        hull.append((e, t))
    return hull
