"""CUT-4's pass envelopes drop dominated points before their hull (energy_bounds._undominated): the hull is
the plain monotone chain's, line for line, on ties, duplicates, collinear runs and wide magnitudes."""

from __future__ import annotations

import numpy as np
import pytest
from oracles.hull import hull_lines

from specpim_cp.solvers.exact import energy_bounds


@pytest.mark.parametrize("seed", range(4))
def test_hull_equals_the_plain_monotone_chain(seed):
    rng = np.random.default_rng(seed)
    for trial in range(400):
        n = int(rng.integers(1, 600))
        scale = int(rng.choice([3, 10, 1000, 10 ** 9, 10 ** 12]))
        t = rng.integers(0, scale, n).astype(float)
        e = rng.integers(0, scale, n).astype(float)
        if trial % 3 == 0:  # collinear runs with duplicates
            t = rng.integers(0, 20, n).astype(float)
            e = 100 - 3 * t + rng.integers(0, 2, n)
        assert energy_bounds._hull_lines(t, e) == hull_lines(t, e)


def test_only_dominated_points_are_dropped():
    t = np.array([1.0, 1.0, 2.0, 3.0, 3.0, 0.5] * 20)
    e = np.array([5.0, 5.0, 4.0, 4.0, 9.0, 7.0] * 20)
    keep = energy_bounds._undominated(t, e)
    kept = set(zip(t[keep].tolist(), e[keep].tolist()))
    assert kept == {(1.0, 5.0), (2.0, 4.0), (0.5, 7.0)}
