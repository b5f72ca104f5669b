"""Solvers choose designs; the evaluator prices them. Imports `physics` and `problem` below it.

- `result`: `SolveResult` / `SolveReport` values and the inputs hash;
- `baselines`: GPU-AR, GPU-SI, FC-offload, attention-offload, off-the-shelf PIM (fixed recipes);
- `brute`: enumeration of small spaces, the oracle the exact optimizer is checked against;
- `exact/`: the CP-SAT model (`model`), its price table (`prices`) and drivers (`solve`);
- `heuristic/`: the paper's GA + per-model MCTS (`genes`, `pricing`, `mcts`, `ga`, `fill`, `run`);
- `mix/`: workload mixes, one hardware for every cell (`solve_mix`: decomposition or CP-SAT mix model).
"""
