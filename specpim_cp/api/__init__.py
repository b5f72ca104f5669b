"""The front door: every function takes its input and one options value whose defaults are its command's,
and returns a record; the `specpim-cp` commands call only these and format what they return.

    import specpim_cp as sp
    sc = sp.load_scenario("paper/opt-13b-b1")
    res = sp.solve(sc, sp.SolveOptions(time_limit_s=60, deterministic=True))

Names are imported on first use (`options` and `limits` are cheap; the solvers load with `solving`), so
that `import specpim_cp` and `specpim-cp --help` import no solver.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the submodule of `specpim_cp.api` that defines it.
EXPORTS = {
    **dict.fromkeys(("SolveOptions", "ParetoOptions", "RangesOptions", "HeuristicOptions", "CompareOptions",
                     "MixOptions", "SensitivityOptions", "SweepOptions", "SimulateOptions", "TreeOptions"),
                    "options"),
    **dict.fromkeys(("load_scenario", "load_mix", "load_design", "scenario_catalog", "user_catalog",
                     "default_catalog", "check_output", "Design"), "inputs"),
    **dict.fromkeys(("solve", "heuristic", "pareto", "ranges", "compare", "evaluate", "baselines",
                     "baseline_results", "simulate", "check_hint", "warm_start", "no_fit_detail"), "solving"),
    **dict.fromkeys(("solve_mix", "sensitivity", "sweep", "batch_options", "batch_inputs", "run_batch",
                     "load_grid", "run_grid", "build_report"), "studies"),
    **dict.fromkeys(("export_tree", "kernel_latency_us", "validation_rows", "import_hf_toml"), "tools"),
}
__all__ = ["CompareOptions", "Design", "HeuristicOptions", "MixOptions", "ParetoOptions", "RangesOptions",
           "SensitivityOptions", "SimulateOptions", "SolveOptions", "SweepOptions", "TreeOptions",
           "baseline_results", "baselines", "batch_inputs", "batch_options", "build_report", "check_hint",
           "check_output", "compare", "default_catalog", "evaluate", "export_tree", "heuristic",
           "import_hf_toml", "kernel_latency_us", "load_design", "load_grid", "load_mix", "load_scenario",
           "no_fit_detail", "pareto", "ranges", "run_batch", "run_grid", "scenario_catalog", "sensitivity",
           "simulate", "solve", "solve_mix", "sweep", "user_catalog", "validation_rows", "warm_start"]


def __getattr__(name: str) -> Any:
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specpim_cp.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"specpim_cp.api.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(EXPORTS))
