"""The problem: what is asked and what an answer is. Bottom layer above `catalog` and `kernels`.

- `design`: the answer as values (`Design`, `ModelDesign`, `Placement`, `SpecChoice`, `Staging`);
- `scenario`: the question (verifier, drafters, batch, budgets, `[space]`, `[assumptions]`), TOML/JSON load;
- `space`: `DesignSpace`, the one place that says which designs a scenario allows, and builds them;
- `operators`: the operator graph of one decoder layer per model family;
- `mapping_rules`: fixed operator-to-engine rules (baselines, warm starts, `[space].mapping`);
- `trees`: token-tree shapes and their acceptance profiles;
- `builtin_sets`: the built-in scenario sets and `SET/NAME` resolution;
- `mix`: workload mixes (cells of one base scenario, weights) and their loader;
- `ablation_ladder`: the ablation ladder as restrictions of a scenario's space.

Nothing here prices a design (that is `physics`) or searches (that is `solvers`).
"""
