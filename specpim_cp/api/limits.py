"""The option limits and defaults of the front door, cheap to import (no solver, no pydantic model), so that
`specpim-cp --help` stays fast; the one parser of percentages is `problem/percent.py` (re-exported here).

The plain values below copy constants of the stages they belong to (named in each comment);
tests/test_cli_options.py checks that every copy equals its source.
"""

from __future__ import annotations

from typing import Any

from specpim_cp.problem.percent import (  # noqa: F401 -- the front door's limits, re-exported
    MAX_PERCENT_DIGITS,
    MAX_PERCENT_EXPONENT,
    RESOLUTION_HIGH_PCT,
    WITHIN_HIGH_PCT,
    percent,
)

DEFAULT_RESOLUTION_PCT = "0.1"  # solvers/result.py: a Pareto front's resolution, percent [OBJ-2r]
DEFAULT_MAX_POINTS = 32  # solvers/result.py: a Pareto front's point budget [OBJ-2b]
MAX_FRONT_POINTS = 10_000  # solvers/result.py: the largest point budget
MIX_OBJECTIVES = ("latency", "energy", "regret")  # problem/mix.py
MIX_METHODS = ("auto", "decomposition", "cp-sat")  # solvers/mix/records.py
MAX_FEATURES = 10**8  # kernels/linear.py: a layer's width
MAX_TOKENS = 10**6  # kernels/linear.py: tokens of a pass
MAX_TENSOR_PARALLEL = 1024  # kernels/linear.py: GPUs sharing a layer
MIN_SIMULATE_ROUNDS = 100  # `simulate`: fewer rounds say nothing about a 95% confidence interval
MAX_SIMULATE_ROUNDS = 5_000_000  # check/simulate.py: MAX_ROUNDS


def option_limit(name: str) -> Any:
    """The `Limit` (runs/limits.py) of the option `seed`, `time_limit`, `workers` or `rounds`; imported
    when a command parses or shows its options (no scenario, no solver), not when the package is imported."""
    from specpim_cp.runs.limits import SEED, TIME_LIMIT, WORKERS, Limit

    if name == "rounds":
        return Limit(True, MIN_SIMULATE_ROUNDS, MAX_SIMULATE_ROUNDS, why="at most about 90 s and 250 MB")
    return {"seed": SEED, "time_limit": TIME_LIMIT, "workers": WORKERS}[name]


