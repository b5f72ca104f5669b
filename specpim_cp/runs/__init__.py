"""Running many solves: what to run, how, and where the results go.

- `instances`: `BatchOptions`, `Instance`, the plan of a batch (scenarios x methods), content keys;
- `limits`: the limits of `--seed`, `--time-limit`, `--workers` (cheap: `--help` shows them);
- `records`: the typed result record of one instance (JSONL line) and its parts;
- `mixes`: planning and running workload-mix instances; `mix_policy`: a solved mix's per-cell policy files;
- `methods`: one instance run by its method (exact, heuristic, baselines, Pareto, mix) into records;
- `store`: the resumable `results.jsonl` store, derived CSV files;
- `batch`: `run_batch` / `run_instances`, parallel and resumable;
- `grid`: grids of scenarios; `executors`: local processes or Ray; `folder_lock`: one writer per folder.
"""
