"""What a batch runs: `BatchOptions`, one `Instance` per (scenario x method) or mix file, its content key,
and the plan of a batch (cheap methods first, one Pareto front per model family, ladder steps aliased
to the exact solve where the step is the unrestricted space).

An *instance* is one scenario solved by one method (`exact`, `heuristic`, `baselines`, one step of the
ablation `ladder`, or the latency-energy `pareto` front of one scenario per model family), or one workload
mix file solved by `solve-mix` (method `mix`, `mixes.py`). Its key is the sha256 of the (possibly
restricted) scenario content, the method and the options that change the answer.

The limits of the options every command shares are one rule per option (`--seed`, `--time-limit`,
`--workers`, heuristic budgets in `limits.py`, re-exported here; `--jobs` in `executors.py`):
`BatchOptions.validate` and the CLI's option types (`cli/common.py`) both ask them, so every command
refuses the same values with the same words.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.files import read_table
from specpim_cp.problem.ablation_ladder import ladder_scenarios
from specpim_cp.problem.mix import MIX_OBJECTIVES
from specpim_cp.problem.percent import WITHIN_HIGH_PCT, percent
from specpim_cp.problem.scenario import Scenario, load_scenario, scenario_catalog
from specpim_cp.runs.executors import EXECUTORS, RAY_MISSING, check_jobs, ray_available
from specpim_cp.runs.limits import (  # noqa: F401 -- the shared option limits, re-exported
    MAX_GENERATIONS,
    MAX_LEAVES,
    MAX_POPULATION,
    MAX_SEED,
    MAX_TIME_LIMIT_S,
    MAX_WORKERS,
    MIN_TIME_LIMIT_S,
    SEED,
    TIME_LIMIT,
    WORKERS,
    Limit,
    heuristic_budget,
    shown,
)
from specpim_cp.runs.records import GridCell, Record

if TYPE_CHECKING:
    from specpim_cp.solvers.exact.session import SolverOptions

METHODS = ("exact", "heuristic", "baselines", "ladder")
INTERNAL_METHODS = ("pareto",)  # added when `exact` runs: one front per model family
METHOD_ORDER = ("baselines", "heuristic", "exact", "pareto", "ladder")  # headline results first
PARETO_BUDGET = 5  # time limit of a Pareto front, in single-solve time limits




@dataclass(frozen=True)
class BatchOptions:
    """What to run and how. Exact solves default to deterministic single-worker CP-SAT (one core each)."""

    methods: tuple[str, ...] = METHODS
    time_limit_s: float = 60.0
    seed: int = 0
    jobs: int = 2  # instances in flight; local: 1 runs every instance in this process; ray: 0 = cluster's CPUs
    workers: int = 1  # CP-SAT workers per exact solve (CPUs of a Ray task)
    deterministic: bool = True
    heuristic_budget: str = "quick"
    pareto: bool = True  # latency-energy front of one scenario per family (needs `exact`)
    resume: bool = True
    executor: str = "local"  # local | ray
    ray_address: str | None = None  # None: $RAY_ADDRESS, else a local Ray runtime
    mix_objective: str = "latency"  # mix files (method `mix`): latency | energy | regret
    ranges_within: str | None = "1"  # exact: decision ranges within this percent of the optimum (None: none)

    def validate(self) -> BatchOptions:
        """Every option checked before any work (the CLI prints the ScenarioError on one line)."""
        if not self.methods:
            raise ScenarioError("--methods: name at least one method")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ScenarioError(f"--methods: unknown method(s) {', '.join(unknown)} "
                                f"(known: {', '.join(METHODS)})")
        TIME_LIMIT.check(self.time_limit_s, "--time-limit")
        SEED.check(self.seed, "--seed")
        if self.executor not in EXECUTORS:
            raise ScenarioError(f"--executor: unknown executor '{self.executor}' (known: {', '.join(EXECUTORS)})")
        check_jobs(self.jobs, self.executor, self.ray_address)
        WORKERS.check(self.workers, "--workers")
        if self.deterministic and self.workers > 1:
            raise ScenarioError(f"--workers {self.workers}: deterministic solving uses one CP-SAT worker (the same "
                                "design every run); add --no-deterministic to use several")
        heuristic_budget(self.heuristic_budget)
        if self.ray_address is not None and self.executor != "ray":
            raise ScenarioError("--ray-address: only with --executor ray")
        if self.executor == "ray" and not ray_available():
            raise ScenarioError(RAY_MISSING)
        if self.ranges_within is not None:
            ranges_tolerance(self.ranges_within)
        if self.mix_objective not in MIX_OBJECTIVES:
            raise ScenarioError(f"--mix-objective: unknown objective '{self.mix_objective}' "
                                f"(known: {', '.join(MIX_OBJECTIVES)})")
        return self

    def solver_options(self, method: str = "exact") -> SolverOptions:
        """The CP-SAT options of an exact, ladder, pareto or mix instance (for a mix: of its mix model)."""
        from specpim_cp.solvers.exact.session import SolverOptions  # the exact optimizer only where it solves

        # a front is many solves: it gets PARETO_BUDGET time limits in all
        time_limit_s = PARETO_BUDGET * self.time_limit_s if method == "pareto" else float(self.time_limit_s)
        return SolverOptions(time_limit_s, self.workers, self.seed, self.deterministic)

    def method_options(self, method: str) -> dict:
        """The options that change a method's answer (part of the instance key)."""
        if method == "exact" and self.ranges_within is not None:
            return {**self.solver_options(method).as_dict(), "ranges_within": str(self.ranges_within)}
        if method in ("exact", "ladder", "pareto"):
            return self.solver_options(method).as_dict()
        if method == "heuristic":
            return {"budget": self.heuristic_budget, "seed": self.seed}
        if method == "mix":  # the time limit bounds the mix model and each single-cell solve
            return {**self.solver_options(method).as_dict(), "cell_time_limit_s": float(self.time_limit_s),
                    "objective": self.mix_objective}
        return {}


@dataclass(frozen=True)
class Instance:
    key: str
    method: str
    scenario_name: str
    scenario_file: str
    scenario_hash: str  # content hash of the unrestricted scenario (groups records of one scenario)
    family: str
    scenario_data: dict  # the scenario solved (a ladder step's restricted copy for `ladder`)
    options: dict
    step: str | None = None  # ladder step name
    alias_of: str | None = None  # key of an instance whose single record this one copies
    batch: str | None = None  # the set's or grid's name
    cell: GridCell | None = None  # grid cells: axis values
    hint_of: str | None = None  # key of the instance whose design warm-starts this one (it waits for it)
    hint: dict | None = None  # that design, filled in by the driver when the instance is released (not in the key)
    hint_from: str | None = None  # its scenario name
    mix_data: dict | None = None  # `mix` instances: the mix (`mixes.mix_data`); scenario_data is its base

    def solver_options(self) -> SolverOptions:
        """The CP-SAT options in `options` (exact, ladder, pareto and mix instances)."""
        from specpim_cp.solvers.exact.session import SolverOptions

        return SolverOptions.from_dict(self.options)

    @property
    def waits_for(self) -> str | None:
        return self.alias_of or self.hint_of

    @property
    def label(self) -> str:
        return f"{self.scenario_name}:{self.method}" + (f" {self.step}" if self.step else "")

    def record(self, part: str, parts: int) -> Record:
        """A record of this instance's result `part` (one of `parts`), with the instance's fields filled."""
        data = self.scenario_data
        objective = data["objective"]
        return Record(key=self.key, scenario=self.scenario_name, scenario_file=self.scenario_file,
                      scenario_hash=self.scenario_hash, family=self.family,
                      batch_size=data["batch_size"], scenario_objective=objective,
                      objective_name=objective, method=self.method, part=part, parts=parts, step=self.step,
                      seed=self.options.get("seed"), options=self.options, batch=self.batch, cell=self.cell,
                      host=data.get("host"), prompt_tokens=data.get("prompt_tokens"),
                      generated_tokens=data.get("generated_tokens"))


# ------------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------------
def resolve_inputs(target: str | None, sets: dict[str, Path]) -> tuple[str, list[Path]]:
    """(batch name, scenario files) of a built-in set (in `sets`), a scenario file or a directory."""
    if target is None:
        target = "paper"
    p = Path(target)
    if not p.exists():
        if target not in sets:
            raise ScenarioError(f"{target}: no such scenario file, directory or built-in set "
                                f"(sets: {', '.join(sets)})")
        p = sets[target]
    if p.is_dir():
        files = sorted(q for q in p.iterdir() if q.suffix in (".toml", ".json") and q.is_file())
        named = catalogs_named(files)
        files = [q for q in files if q.resolve() not in named]
        if not files:
            raise ScenarioError(f"{p}: no scenario files (*.toml, *.json)")
        return p.name, files
    return p.stem, [p]


def catalogs_named(files: Sequence[Path]) -> set[Path]:
    """The catalog files that the scenario files among `files` name (`catalog = ...`), resolved: a folder's
    scenarios may keep their catalog beside them, and that file is not a scenario of the batch. A file that
    does not read is left to the scenario loader, which names it."""
    out: set[Path] = set()
    for f in files:
        try:
            data = read_table(f, "a scenario")
        except (ScenarioError, OSError):
            continue
        own = data.get("catalog", [])
        for ref in [own] if isinstance(own, str) else own if isinstance(own, list) else []:
            if isinstance(ref, str) and ref.strip():
                out.add((f.parent / ref).resolve())
    return out


def load_scenarios(files: Sequence[Path], catalog: Catalog | None = None,
                   extra_catalogs: Sequence[str | Path] = ()) -> list[tuple[Path, Scenario]]:
    """The scenario files, each validated against its own catalog (the built-in one with the scenario's
    `catalog` files and `extra_catalogs` merged in) unless `catalog` is given."""
    out: list[tuple[Path, Scenario]] = []
    seen: dict[str, Path] = {}
    for f in files:
        try:
            sc = load_scenario(f, catalog, extra_catalogs=extra_catalogs)
        except ScenarioError as exc:  # one of many files: the line names it
            raise ScenarioError(str(exc) if str(exc).startswith(str(f)) else f"{f}: {exc}") from None
        if sc.name in seen:
            raise ScenarioError(f"{f}: scenario name '{sc.name}' is also used by {seen[sc.name]}")
        seen[sc.name] = f
        out.append((f, sc))
    return out


# ------------------------------------------------------------------------------------------------
# Planning
# ------------------------------------------------------------------------------------------------
def instance_key(scenario_data: dict, method: str, options: dict, step: str | None = None) -> str:
    blob = json.dumps({"scenario": scenario_data, "method": method, "step": step, "options": options},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def method_unavailable(method: str) -> str | None:
    """Why a method cannot run in this installation (None: it can)."""
    if method in ("exact", "ladder", "pareto"):
        try:
            from specpim_cp.solvers.exact import pareto_front, solve  # noqa: F401
        except ImportError as exc:
            return f"{method}: skipped, the exact optimizer is not available ({exc})"
    if method == "heuristic":
        try:
            from specpim_cp.solvers.heuristic import run_heuristic  # noqa: F401
        except ImportError as exc:
            return f"heuristic: skipped, specpim_cp.solvers.heuristic.run_heuristic is not available ({exc})"
    return None


def pareto_representatives(scenarios: Sequence[tuple[Path, Scenario]], catalog: Catalog | None = None) -> set[str]:
    """One scenario per verifier family for the Pareto front: the smallest batch (first by name on ties)."""
    best: dict[str, Scenario] = {}
    for _, sc in scenarios:
        if not sc.drafters:
            continue
        fam = (catalog or scenario_catalog(sc)).models[sc.verifier.model].family
        cur = best.get(fam)
        if cur is None or (sc.batch_size, sc.name) < (cur.batch_size, cur.name):
            best[fam] = sc
    return {sc.name for sc in best.values()}


def plan(scenarios: Sequence[tuple[Path, Scenario]], options: BatchOptions,
         catalog: Catalog | None = None, name: str | None = None) -> tuple[list[Instance], list[str]]:
    """Every instance of the batch `name`, cheap methods first, and notes on methods that cannot run."""
    options.validate()
    methods = list(dict.fromkeys(options.methods))
    if options.pareto and "exact" in methods:
        methods.append("pareto")
    notes = []
    for m in list(methods):
        why = method_unavailable(m)
        if why is not None:
            methods.remove(m)
            if m != "pareto":  # the exact optimizer's note covers the fronts
                notes.append(why)
    representatives = pareto_representatives(scenarios, catalog) if "pareto" in methods else set()

    out: list[Instance] = []
    for method in sorted(methods, key=METHOD_ORDER.index):
        opts = options.method_options(method)
        for path, sc in scenarios:
            data = sc.model_dump(mode="json")
            cat = catalog or scenario_catalog(sc)  # the scenario's own catalog files (absolute paths in data)
            common = {"scenario_name": sc.name, "scenario_file": str(path),
                      "scenario_hash": sc.content_hash(), "family": cat.models[sc.verifier.model].family,
                      "options": opts, "batch": name}
            if method == "ladder":
                exact_key = instance_key(data, "exact", options.method_options("exact"))
                for step, restricted in ladder_scenarios(sc, cat):
                    rdata = restricted.model_dump(mode="json")
                    # the last step is the unrestricted space: copy the exact record instead of re-solving
                    alias = exact_key if ("exact" in methods and rdata == data) else None
                    out.append(Instance(instance_key(rdata, method, opts, step), method, scenario_data=rdata,
                                        step=step, alias_of=alias, **common))
                continue
            if method == "pareto" and sc.name not in representatives:
                continue
            out.append(Instance(instance_key(data, method, opts), method, scenario_data=data, **common))
    return out, notes


def batch_name(files: Sequence[Path]) -> str:
    """The name of a batch of scenario files: their folder's (a set), or the file's stem."""
    files = [Path(f) for f in files]
    if len(files) == 1:
        return files[0].stem
    parents = {f.resolve().parent for f in files}
    return parents.pop().name if len(parents) == 1 else "batch"


def ranges_tolerance(value) -> Fraction:
    """`--ranges`: the decision ranges' tolerance in percent as an exact Fraction (0 <= within < 1000);
    ScenarioError naming the option otherwise (the one percentage parser, bounded before any arithmetic)."""
    return percent(value, "--ranges", WITHIN_HIGH_PCT)
