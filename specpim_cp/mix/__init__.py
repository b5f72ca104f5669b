"""Workload mixes: one hardware for several cells (batch, lengths, acceptance), dataflow per cell.

- `spec`: the `[mix]` input (cells, tasks, weights) and its loader;
- `result`: the mix solve's values (report, comparisons, per-cell evaluations);
- `model`: the CP-SAT mix model (shared architecture, weight copies, capacity, cell metrics);
- `bounds`: per-cell lower bounds fed to the mix model;
- `cells`: single-cell solves and claims used by the mix driver;
- `exact`: `solve_mix`, the driver (screening, stages, verification);
- `compare`: the reference designs a mix is compared with (per-cell optima, median cell, PAPI-style, GPU-SI);
- `policy`: per-cell policy files; `text`: the policy table and rule view;
- `brute`: enumeration over shared architectures, the mix oracle.

Imports `solvers`, `physics`, `problem` and `views` below it.
"""
