"""A Pareto front's status, resolution and cost in one line of words (the CLI's CSV and the batch records end
with it)."""

from __future__ import annotations

from specpim_cp.solvers.exact.fronts import ParetoFront


def front_statement(front: ParetoFront) -> str:
    """One line on the front's status and budget (the CLI's CSV ends with it)."""
    exact = "exact front" if front.resolution == 0 else (
        f"every front point has a listed point no slower whose energy is at most {float(100 * front.resolution):g}% "
        "above it, in units of the listed point's")
    if front.asked is not None:
        exact += (f"; {float(100 * front.asked):g}% asked, widened to list at most {front.max_points} points "
                  "between the least latency and a proven least energy")
    proven = "every point proven" if front.status == "OPTIMAL" else "cut short by the time limit"
    limit = f"{front.options.time_limit_s:g} {'deterministic units' if front.options.deterministic else 's'}"
    n = len(front.points)
    budget = f", point budget {front.max_points}" if front.max_points else ""
    return (f"front: {front.status} ({proven}), {n} point{'' if n == 1 else 's'}, resolution "
            f"{float(100 * front.resolution):g}% ({exact}); {front.wall_s:.1f} s wall, deterministic time "
            f"{front.deterministic_time:.1f}, {front.solves} CP-SAT solves, time limit {limit}{budget}")
