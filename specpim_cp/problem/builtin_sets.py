"""Built-in scenario sets (package data under `specpim_cp/benchmarks/`) and scenario name resolution.

Below the CLI, the batch runner, benchmarks and tests, so none of them imports another to find a set.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from specpim_cp.errors import ScenarioError

#: What each built-in set is (a set is a folder of `specpim_cp/benchmarks/`; this names the known ones).
SET_DESCRIPTIONS: dict[str, str] = {
    "examples": "one scenario per model family, staged drafting and three drafters (examples/NAME)",
    "paper": "SpecPIM's evaluation: OPT-13B, LLaMA-32.5B, PaLM-62B at batch 1, 2, 4, 8 (the default set)",
    "paper-assumptions": "the 12 `paper` scenarios under the SpecPIM authors' conventions: partitioned channels, "
                         "dynamic energy only (formulations/paper_assumptions.md)",
    "paper-full": "the `paper` families at batch 1 to 64, every drafter up to draft length 8, device counts chosen "
                  "under the paper's device budget",
    "paper-trees": "the 12 `paper` scenarios with token trees enabled for every drafter",
    "paper-trees-large": "opt-13b of `paper-trees` at batch 1-8 with trees of up to 64 and 128 nodes (16 candidates, "
                         "depth <= 2), GPU-SI and PIM spaces (benchmarks/bench_trees_large.py)",
    "paper-trees-deep": "`paper-trees-large` at depth <= 6 (Sequoia's deep trees): beyond an exact menu, solved by "
                        "refining relaxed tree classes ([TREE-6], benchmarks/bench_trees_large.py)",
    "heads": "drafter kinds: Llama-3.1-8B/70B with EAGLE-3, MTP on Mixtral (MoE) and Llama-3.1-8B (dense), Medusa, "
             "prompt lookup; H100/H200 as sold or with HBM3(e)-PIM what-ifs; batch 1-16 (benchmarks/bench_heads.py)",
    "staged": "GPT-2 staged drafting with the pipeline on and off",
    "mix": "workload mixes over the `paper` families (solve-mix)",
    "edge": "on-device speculation on a phone and a laptop (LPDDR5X as sold and with an LPDDR5X-PIM what-if), "
            "Llama 3.x and Qwen2.5 at FP16/INT8/INT4, staged, tree and prompt-lookup drafting, one shared device "
            "(formulations/edge.md)",
}
#: A set whose scenarios are another set's under named changes -> that set (its twins share file names).
TWIN_SETS: dict[str, str] = {"paper-assumptions": "paper", "paper-trees": "paper"}


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


def scenario_files(names: list[str]) -> list[Path]:
    """The scenario files of built-in set names, folders or files, in order (a folder's sorted)."""
    sets = builtin_sets()
    out: list[Path] = []
    for n in names:
        p = sets.get(n, Path(n))
        out += sorted(p.glob("*.toml")) if p.is_dir() else [p]
    return out
