"""Single-cell solves of a workload mix: each cell's own optimum (any hardware) and each cell's best
dataflow on fixed hardware, both by the single-scenario optimizer (`exact/solve.py`).

On fixed hardware the cells of a mix are independent except for the tensor-copy capacity (MIX-3/4);
dropping it relaxes the mix problem, so when the cells' separate optima fit together under the
tensor-copy rule they are the mix's optimum on that hardware (formulations/mix.md, "Fixed hardware").
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from specpim_cp.catalog import Catalog, default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluation, Evaluator
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.mix import Mix
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.deadline import check
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.exact.ratio import RatioObjective, minimize_ratio
from specpim_cp.solvers.exact.session import SolverOptions, SolveSession
from specpim_cp.solvers.exact.solve import solve as solve_scenario
from specpim_cp.solvers.result import SolveResult


def cell_kind(objective: str) -> str:
    """The single-cell objective a mix objective needs: energy for energy, latency otherwise."""
    return "energy" if objective == "energy" else "latency"


def _own_optimum(args: tuple[Scenario, str, SolverOptions]) -> SolveResult:
    scenario, kind, opts = args
    check(opts.deadline, f"solving the cells alone ({scenario.name})")
    return solve_scenario(scenario, objective=kind, options=opts)


def cell_optima(mix: Mix, objective: str, opts: SolverOptions, jobs: int = 1,
                on_cell: Callable[[str], None] | None = None) -> list[SolveResult]:
    """Each cell's own optimum over the whole space (any hardware), `jobs` cells at a time (each solve
    on one CP-SAT worker, so the results do not depend on `jobs`)."""
    kind = cell_kind(objective)
    one_worker = replace(opts, workers=1)
    tasks = [(c.scenario, kind, one_worker) for c in mix.cells]
    out: list[SolveResult] = []
    try:
        if jobs <= 1 or len(tasks) == 1:
            for c, t in zip(mix.cells, tasks, strict=True):
                if on_cell is not None:
                    on_cell(f"cell {c.index + 1}/{len(mix.cells)} alone ({c.label})")
                out.append(_own_optimum(t))
        else:
            if on_cell is not None:
                on_cell(f"{len(tasks)} cells alone, {jobs} at a time")
            ctx = multiprocessing.get_context("spawn")  # no fork of a process that has run CP-SAT threads
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                out = list(pool.map(_own_optimum, tasks))
    except ScenarioError as exc:
        c = len(out)
        raise ScenarioError(f"mix.cells[{c}] ({mix.cells[c].label}): {exc}") from None
    return out


class FixedHardware:
    """Per cell, its best dataflow on given hardware (one SpecModel per cell, built on first use; the
    architecture one-hots fixed; Dinkelbach, `solve.minimize_ratio`), cached per hardware."""

    def __init__(self, mix: Mix, evaluators: Sequence[Evaluator], objective: str, opts: SolverOptions,
                 catalog: Catalog | None = None, prices: Sequence[PriceTable] | None = None):
        """`prices`: the cells' price tables when already built (the mix model's), else each cell's model
        builds its own."""
        self.mix = mix
        self.prices = list(prices) if prices is not None else [None] * len(mix.cells)
        self.evaluators = list(evaluators)
        self.kind = cell_kind(objective)
        self.opts = opts
        self.catalog = catalog or default_catalog()
        self.models: list[SpecModel | None] = [None] * len(mix.cells)
        self.cache: dict[tuple, tuple[str, Evaluation | None]] = {}
        self.solves = 0

    def cell(self, c: int, archs: Sequence[ArchConfig]) -> tuple[str, Evaluation | None]:
        """(status, evaluation) of cell c's best dataflow on `archs` (INFEASIBLE: nothing fits)."""
        return self.cell_with_layouts(c, archs, {})

    def cell_model(self, c: int) -> SpecModel:
        """Cell c's single-scenario model (built on first use)."""
        return self._model(c)

    def _model(self, c: int) -> SpecModel:
        sm = self.models[c]
        if sm is None:
            sm = self.models[c] = SpecModel(self.mix.cells[c].scenario, self.catalog, self.evaluators[c],
                                            prices=self.prices[c])
        return sm

    def cell_with_layouts(self, c: int, archs: Sequence[ArchConfig], layouts: dict[tuple[int, str], str]
                          ) -> tuple[str, Evaluation | None]:
        """Cell c's best dataflow on `archs` with the weight layout of each (model j, operator) in `layouts`
        fixed to `layouts[(j, op)]` (one weight copy per operator; cached)."""
        key = (c, tuple(archs), tuple(sorted(layouts.items())))
        if key in self.cache:
            return self.cache[key]
        if self.opts.expired:  # the command's deadline: no answer (not cached)
            return "UNKNOWN", None
        sm = self._model(c)
        if any(a not in sm.x[j] for j, a in enumerate(archs)):
            self.cache[key] = ("INFEASIBLE", None)
            return self.cache[key]
        lits = [(v, int(a == archs[j])) for j, xs in enumerate(sm.x) for a, v in xs.items()]
        bans = [v for (j, op), lay in layouts.items() for p, v in sm.y[j][op].items() if p.layout != lay]

        def fix(model) -> None:
            for v, val in lits:
                model.add(model.get_bool_var_from_proto_index(v.index) == val)
            for v in bans:
                model.add(model.get_bool_var_from_proto_index(v.index) == 0)

        status, design, _obj, _bound = minimize_ratio(SolveSession(sm, self.opts), RatioObjective(sm, self.kind), fix)
        self.solves += 1
        self.cache[key] = (status, None if design is None else self.evaluators[c].evaluate(design))
        return self.cache[key]

    def best_excluding(self, c: int, excluded: Sequence[Sequence[ArchConfig]]) -> tuple[str, Evaluation | None]:
        """Cell c's own optimum over every hardware but the `excluded` tuples (one no-good row each:
        sum_j x[j][a_j] <= n_models - 1); (status, evaluation), INFEASIBLE when nothing else fits."""
        if self.opts.expired:  # the command's deadline: no answer
            return "UNKNOWN", None
        sm = self._model(c)
        rows = [[sm.x[j][a] for j, a in enumerate(archs)] for archs in excluded
                if all(a in sm.x[j] for j, a in enumerate(archs))]

        def exclude(model) -> None:
            for row in rows:
                model.add(sum(model.get_bool_var_from_proto_index(v.index) for v in row) <= len(row) - 1)

        status, design, _obj, _bound = minimize_ratio(SolveSession(sm, self.opts), RatioObjective(sm, self.kind), exclude)
        self.solves += 1
        return status, None if design is None else self.evaluators[c].evaluate(design)

    def all(self, archs: Sequence[ArchConfig]) -> tuple[str, list[Evaluation] | None]:
        """Every cell's best dataflow on `archs`: (OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN, evaluations)."""
        cells = self.mix.cells
        evals: list[Evaluation | None] = [None] * len(cells)
        statuses = []
        # the largest KV caches first: hardware that cannot hold them is rejected after one solve
        for c in sorted(range(len(cells)), key=lambda c: (-cells[c].batch_size * cells[c].scenario.max_context, c)):
            status, e = self.cell(c, archs)
            if e is None:
                return ("INFEASIBLE" if status == "INFEASIBLE" else "UNKNOWN"), None
            evals[c] = e
            statuses.append(status)
        return ("OPTIMAL" if all(s == "OPTIMAL" for s in statuses) else "FEASIBLE"), [e for e in evals if e is not None]
