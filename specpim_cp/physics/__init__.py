"""The physics: the one price of a design. Imports only `problem`, `catalog` and `kernels`.

- `speculation`: expected accepted tokens per round (chains, trees, staging, pipeline), exact integers;
- `rounds`: tokens per pass and round arithmetic shared by the evaluator, the exact model and the heuristic;
- `costs`: per-operator cost tables (op, engine, architecture, token count) -> ns, pJ, bytes;
- `schedule`: one decoder layer's schedule on host and PIM units;
- `evaluate`: the evaluator, Scenario x Design -> Metrics with breakdown (the single source of truth);
- `mix`: a mix design's tensor-copy capacity and exact mix objectives.
"""
