"""The paper's explorer (SpecPIM, ASPLOS 2024): a GA over dataflow with per-model MCTS over architecture.

Entry point: `run_heuristic(scenario, budget="quick" | "paper" | Budget(...), seed=0)`, returning a
`SolveResult` whose design lies in the scenario's restricted space and whose objective is the
evaluator's exact price of that design. Modules, one job each:

- `genes`: gene domains, genomes, projection of outside designs, membership of the restricted space;
- `pricing`: the evaluator behind design-key and per-model caches, and the capacity checker;
- `mcts`: UCT over one model's architecture configs (memory type, PIM units, devices);
- `ga`: the genetic algorithm, which calls the MCTS to fill in each candidate's architectures;
- `run`: budgets, warm starts, objectives, final selection and the report.
"""

from specpim_cp.solvers.heuristic.run import BUDGETS, SELECT_TOLERANCE, Budget, resolve_budget, run_heuristic

__all__ = ["BUDGETS", "SELECT_TOLERANCE", "Budget", "resolve_budget", "run_heuristic"]
