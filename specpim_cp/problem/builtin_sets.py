"""Built-in scenario sets (package data under `specpim_cp/benchmarks/`) and scenario name resolution.

Below the CLI, the batch runner, benchmarks and tests, so none of them imports another to find a set.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from specpim_cp.errors import ScenarioError


def builtin_sets() -> dict[str, Path]:
    """Set name -> folder of its scenario TOML files."""
    root = Path(str(resources.files("specpim_cp") / "benchmarks"))
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir()}


def resolve_scenario_path(name: str) -> Path:
    """A path, or a built-in scenario as `SET/NAME` (e.g. `examples/opt-13b`)."""
    p = Path(name)
    if p.exists():
        return p
    if "/" in name:
        set_name, scen = name.split("/", 1)
        sets = builtin_sets()
        if set_name in sets:
            cand = sets[set_name] / (scen if scen.endswith(".toml") else f"{scen}.toml")
            if cand.exists():
                return cand
    raise ScenarioError(f"{name}: no such scenario file (or built-in SET/NAME, e.g. examples/opt-13b)")
