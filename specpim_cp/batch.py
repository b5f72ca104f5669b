"""Benchmark-set runner: (scenario x method) instances in worker processes, resumable result records.

An *instance* is one scenario solved by one method (`exact`, `heuristic`, `baselines`, one step of the
ablation `ladder`, or the latency-energy `pareto` front of one scenario per model family), or one workload
mix file solved by `solve-mix` (method `mix`, `batch_mix.py`). Its key is
the sha256 of the (possibly restricted) scenario content, the method and the options that change the
answer. Every finished instance appends its records to `OUT/results.jsonl` in one write, flushed and
fsynced: one record per result (one per baseline, one per ladder step), each carrying the instance key,
its `part` name, the instance's record count `parts` and the id of the write (`attempt`). Only a key's
latest attempt counts; it is done when all its parts are there and none is an ERROR, so a re-run skips
what is done, retries what failed or was cut off, and a killed run loses nothing that had finished.
`OUT/results.csv` is regenerated from the JSONL.

Instances run through an executor (`executors.py`: this process, a local process pool, or Ray tasks);
this module keeps the scheduling, the one JSONL writer and the resume, so a run can move between
executors. One run at a time writes a folder (`folder_lock.py`). An instance can wait for another: an
aliased ladder step copies its source's record, and a grid cell (`grid.py`) is warm-started with the
design of its neighbour cell (`hint_of`), which makes its result independent of the executor's timing.

Nothing here prints: progress goes to an optional `BatchProgress` hook (the CLI draws a tqdm bar).
"""

from __future__ import annotations

import csv
import hashlib
import heapq
import io
import json
import math
import os
import re
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.executors import EXECUTORS, RAY_MISSING, WorkerLost, open_executor, ray_available
from specpim_cp.files import write_atomic
from specpim_cp.folder_lock import FolderLock
from specpim_cp.records import FrontPoint, GridCell, PimAllocation, Record, RecordMetrics
from specpim_cp.scenario import Scenario, load_scenario, parse_scenario, scenario_catalog

METHODS = ("exact", "heuristic", "baselines", "ladder")
INTERNAL_METHODS = ("pareto",)  # added when `exact` runs: one front per model family
METHOD_ORDER = ("baselines", "heuristic", "exact", "pareto", "ladder")  # headline results first
NOT_DONE = ("ERROR",)  # statuses that a re-run retries
PARETO_BUDGET = 5  # time limit of a Pareto front, in single-solve time limits
RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"
PARETO_DIR = "pareto"
METRIC_KEYS = ("latency_ns_per_token", "energy_pj_per_token", "throughput_tokens_per_s", "tokens_per_round",
               "round_time_ns", "edp")


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

    def validate(self) -> BatchOptions:
        """Every option checked before any work (the CLI prints the ScenarioError on one line)."""
        if not self.methods:
            raise ScenarioError("--methods: name at least one method")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ScenarioError(f"--methods: unknown method(s) {', '.join(unknown)} "
                                f"(known: {', '.join(METHODS)})")
        t = self.time_limit_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ScenarioError(f"--time-limit: must be a finite number of seconds > 0, got {t}")
        if self.jobs < 0 or (self.jobs == 0 and self.executor != "ray"):
            raise ScenarioError(f"--jobs: must be at least 1, got {self.jobs}")
        if self.workers < 1:
            raise ScenarioError(f"--workers: must be at least 1, got {self.workers}")
        if self.deterministic and self.workers > 1:
            raise ScenarioError(f"--workers {self.workers}: deterministic solving uses one CP-SAT worker (the same "
                                "design every run); add --no-deterministic to use several")
        heuristic_budget(self.heuristic_budget)
        if self.executor not in EXECUTORS:
            raise ScenarioError(f"--executor: unknown executor '{self.executor}' (known: {', '.join(EXECUTORS)})")
        if self.ray_address is not None and self.executor != "ray":
            raise ScenarioError("--ray-address: only with --executor ray")
        if self.executor == "ray" and not ray_available():
            raise ScenarioError(RAY_MISSING)
        from specpim_cp.mix import MIX_OBJECTIVES

        if self.mix_objective not in MIX_OBJECTIVES:
            raise ScenarioError(f"--mix-objective: unknown objective '{self.mix_objective}' "
                                f"(known: {', '.join(MIX_OBJECTIVES)})")
        return self

    def method_options(self, method: str) -> dict:
        """The options that change a method's answer (part of the instance key)."""
        solver = {"time_limit_s": float(self.time_limit_s), "workers": self.workers, "seed": self.seed,
                  "deterministic": self.deterministic}
        if method == "pareto":  # a front is many solves: it gets PARETO_BUDGET time limits in all
            return {**solver, "time_limit_s": PARETO_BUDGET * self.time_limit_s}
        if method in ("exact", "ladder"):
            return solver
        if method == "heuristic":
            return {"budget": self.heuristic_budget, "seed": self.seed}
        if method == "mix":  # the time limit bounds the mix model and each single-cell solve
            return {**solver, "cell_time_limit_s": float(self.time_limit_s), "objective": self.mix_objective}
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
    mix_data: dict | None = None  # `mix` instances: the mix (`batch_mix.mix_data`); scenario_data is its base

    @property
    def waits_for(self) -> str | None:
        return self.alias_of or self.hint_of

    @property
    def label(self) -> str:
        return f"{self.scenario_name}:{self.method}" + (f" {self.step}" if self.step else "")


@dataclass
class BatchSummary:
    out: Path
    total: int
    skipped: int  # done before this run (resume)
    ran: int = 0
    failed: list[str] = field(default_factory=list)  # labels of instances that ended in ERROR
    notes: list[str] = field(default_factory=list)  # methods skipped and why
    wall_s: float = 0.0


class BatchProgress(Protocol):
    """Hook for a progress display (the CLI's tqdm bar); every method is called in the main process."""

    def start(self, total: int, done: int) -> None: ...

    def begin(self, label: str) -> None: ...

    def end(self, label: str, records: list[Record]) -> None: ...

    def close(self) -> None: ...


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
        if not files:
            raise ScenarioError(f"{p}: no scenario files (*.toml, *.json)")
        return p.name, files
    return p.stem, [p]


def load_scenarios(files: Sequence[Path], catalog: Catalog | None = None,
                   extra_catalogs: Sequence[str | Path] = ()) -> list[tuple[Path, Scenario]]:
    """The scenario files, each validated against its own catalog (the built-in one with the scenario's
    `catalog` files and `extra_catalogs` merged in) unless `catalog` is given."""
    out: list[tuple[Path, Scenario]] = []
    seen: dict[str, Path] = {}
    for f in files:
        sc = load_scenario(f, catalog, extra_catalogs=extra_catalogs)
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
            from specpim_cp.exact import pareto_front, solve  # noqa: F401
        except ImportError as exc:
            return f"{method}: skipped, the exact optimizer is not available ({exc})"
    if method == "heuristic":
        try:
            from specpim_cp.heuristic import run_heuristic  # noqa: F401
        except ImportError as exc:
            return f"heuristic: skipped, specpim_cp.heuristic.run_heuristic is not available ({exc})"
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
    from specpim_cp.ladder import ladder_scenarios

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


# ------------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------------
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"specpim-cp {version('specpim-cp')}"
    except PackageNotFoundError:  # pragma: no cover
        return "specpim-cp (not installed)"


def _base_record(inst: Instance, part: str, parts: int) -> Record:
    objective = inst.scenario_data["objective"]
    return Record(key=inst.key, scenario=inst.scenario_name, scenario_file=inst.scenario_file,
                  scenario_hash=inst.scenario_hash, family=inst.family, batch_size=inst.scenario_data["batch_size"],
                  scenario_objective=objective, objective_name=objective, method=inst.method, part=part,
                  parts=parts, step=inst.step, seed=inst.options.get("seed"), options=inst.options,
                  batch=inst.batch, cell=inst.cell)


def _evaluation_fields(ev, catalog: Catalog) -> dict:
    return {"metrics": RecordMetrics.of(ev.metrics), "design": ev.design.model_dump(mode="json"),
            "pim": PimAllocation.of_design(ev.design, catalog)}


def _objective_fields(obj) -> dict:
    return {"objective": float(obj), "objective_exact": f"{obj.numerator}/{obj.denominator}"}


def solve_record(inst: Instance, result, catalog: Catalog, part: str, parts: int = 1) -> Record:
    """A record of a SolveResult (exact, heuristic, ladder step): the claimed objective and its report."""
    rep = result.report
    return _base_record(inst, part, parts).with_(
        **_evaluation_fields(result.evaluation, catalog), **_objective_fields(rep.objective),
        objective_name=rep.objective_name, status=rep.status, bound=None if rep.bound is None else float(rep.bound),
        gap=rep.gap, wall_s=rep.wall_s, seed=rep.seed, solver_version=rep.solver_version,
        inputs_hash=rep.inputs_hash, iterations=rep.iterations)


def _failed_record(inst: Instance, part: str, status: str, error: str, wall_s: float) -> Record:
    return _base_record(inst, part, 1).with_(status=status, error=error, wall_s=wall_s)


# ------------------------------------------------------------------------------------------------
# Methods (run in worker processes)
# ------------------------------------------------------------------------------------------------
def _run_solver(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    from specpim_cp.design import parse_design
    from specpim_cp.exact import solve

    o = inst.options
    kwargs = {"time_limit_s": o["time_limit_s"], "workers": o["workers"], "seed": o["seed"],
              "deterministic": o["deterministic"], "catalog": catalog}
    hint = None
    if inst.hint is not None:
        try:
            hint = parse_design(inst.hint)
        except ScenarioError:  # a neighbour's design from an older record format: no warm start
            hint = None
    if hint is not None:
        try:
            res = solve(sc, hint=hint, **kwargs)
            return [solve_record(inst, res, catalog, inst.step or "exact").with_(hint_from=inst.hint_from)]
        except ScenarioError:
            pass  # solve() skips a hint outside the space; should it ever reject one, solve without it
    res = solve(sc, **kwargs)
    return [solve_record(inst, res, catalog, inst.step or "exact")]


_BUDGET = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def heuristic_budget(value: str):
    """'quick', 'paper' or GENERATIONSxPOPULATIONxLEAVES (e.g. 20x200x500) as run_heuristic's budget."""
    if value in ("quick", "paper"):
        return value
    m = _BUDGET.match(str(value).strip().lower())
    if m is None:
        raise ScenarioError(f"--heuristic-budget: '{value}' is not quick, paper or GENxPOPxLEAVES "
                            "(e.g. 20x200x500)")
    generations, population, leaves = (int(x) for x in m.groups())
    if population < 2:
        raise ScenarioError(f"--heuristic-budget: population must be at least 2, got '{value}'")
    try:
        from specpim_cp.heuristic import Budget
    except ImportError:  # the method is skipped with a note anyway
        return value
    return Budget(generations=generations, population=population, mcts_leaves_per_model=leaves)


def _run_heuristic(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    from specpim_cp.heuristic import run_heuristic

    res = run_heuristic(sc, budget=heuristic_budget(inst.options["budget"]), seed=inst.options["seed"])
    return [solve_record(inst, res, catalog, "heuristic")]


def _run_baselines(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    from specpim_cp.baselines import run_baselines
    from specpim_cp.result import inputs_hash

    t0 = time.perf_counter()
    results = run_baselines(sc, catalog)
    wall = time.perf_counter() - t0
    out = []
    for r in results:
        # one enumeration run prices every baseline: wall_s is the whole instance's time
        rec = _base_record(inst, r.name, len(results)).with_(
            wall_s=wall, solver_version=f"{_version()} (evaluator enumeration)",
            inputs_hash=inputs_hash(sc, {"method": "baselines", "baseline": r.name}), description=r.description)
        if r.evaluation is None:
            rec = rec.with_(status="INFEASIBLE", error=r.error)
        else:
            rec = rec.with_(status="BASELINE", **_evaluation_fields(r.evaluation, catalog),
                            **_objective_fields(r.evaluation.metrics.objective(sc.objective)))
        out.append(rec)
    return out


def _run_pareto(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    from specpim_cp.exact import pareto_front
    from specpim_cp.result import inputs_hash, solver_version

    o = inst.options
    t0 = time.perf_counter()
    front = pareto_front(sc, time_limit_s=o["time_limit_s"], workers=o["workers"], seed=o["seed"],
                         deterministic=o["deterministic"])
    wall = time.perf_counter() - t0
    points = tuple(FrontPoint(**_evaluation_fields(ev, catalog)) for ev in front)
    return [_base_record(inst, "front", 1).with_(status="FRONT", wall_s=wall, front=points,
                                                 solver_version=solver_version(), inputs_hash=inputs_hash(sc, o))]


def _run_mix(inst: Instance, sc: Scenario, catalog: Catalog) -> list[Record]:
    from specpim_cp.batch_mix import run_mix

    return run_mix(inst, sc, catalog)


_RUNNERS: dict[str, Callable[[Instance, Scenario, Catalog], list[Record]]] = {
    "exact": _run_solver, "ladder": _run_solver, "heuristic": _run_heuristic, "baselines": _run_baselines,
    "pareto": _run_pareto, "mix": _run_mix,
}


def run_instance(inst: Instance) -> list[Record]:
    """Solve one instance; never raises (an infeasible scenario and a crash become records)."""
    part = inst.step or inst.method
    t0 = time.perf_counter()
    try:
        sc = parse_scenario(inst.scenario_data)  # with its own catalog files (absolute paths)
        records = _RUNNERS[inst.method](inst, sc, scenario_catalog(sc))
    except ScenarioError as exc:
        records = [_failed_record(inst, part, "INFEASIBLE", str(exc), time.perf_counter() - t0)]
    except Exception as exc:  # noqa: BLE001 -- a bug in a method: record it, a re-run retries
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        records = [_failed_record(inst, part, "ERROR", tb, time.perf_counter() - t0)]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return [r.with_(finished_at=stamp) for r in records]


def alias_records(inst: Instance, source: list[Record]) -> list[Record]:
    """Records of an aliased ladder step: the source instance's record under this instance's key."""
    return [src.with_(key=inst.key, method=inst.method, part=inst.step, parts=1, step=inst.step,
                      copied_from=src.key) for src in source]


# ------------------------------------------------------------------------------------------------
# The result store
# ------------------------------------------------------------------------------------------------
class ResultStore:
    """Append-only JSONL of records; a torn last line (a killed writer) is cut off when opened for
    writing (`repair`; a reader ignores it), and a line that is not a record is skipped (its instance is
    not done and runs again)."""

    def __init__(self, path: Path, repair: bool = True):
        self.path = path
        self._records: list[Record] = []
        self.unreadable = 0
        if path.exists():
            if repair:
                self._repair()
            for line in path.read_text(errors="replace").splitlines():
                if line.strip():
                    try:
                        self._records.append(Record.from_json(json.loads(line)))
                    except ValueError:  # json.JSONDecodeError is a ValueError
                        self.unreadable += 1

    def _repair(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)

    def records(self) -> list[Record]:
        return latest_records(self._records)

    def by_key(self) -> dict[str, list[Record]]:
        out: dict[str, list[Record]] = {}
        for r in self.records():
            out.setdefault(r.key, []).append(r)
        return out

    def done_keys(self) -> set[str]:
        return {k for k, recs in self.by_key().items() if is_done(recs)}

    def append(self, records: Iterable[Record]) -> None:
        """Append one instance's records in one write, flushed and fsynced, under a fresh attempt id."""
        attempt = f"{time.time_ns():x}-{os.getpid()}"
        records = [r.with_(attempt=attempt) for r in records]
        text = "".join(json.dumps(r.to_json(), sort_keys=True) + "\n" for r in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        self._records.extend(records)


def latest_records(records: Iterable[Record]) -> list[Record]:
    """The records of every key's latest attempt (one append), in first-seen order."""
    records = list(records)
    last_attempt = {r.key: r.attempt for r in records}
    latest: dict[tuple[str, str], Record] = {}
    for r in records:
        if r.attempt == last_attempt[r.key]:
            latest[(r.key, r.part)] = r
    return list(latest.values())


def is_done(records: list[Record]) -> bool:
    """All parts of the instance's latest attempt are present and none is an ERROR."""
    if not records:
        return False
    return len({r.part for r in records}) >= records[0].parts and all(r.status not in NOT_DONE for r in records)


def read_records(out: Path) -> list[Record]:
    """The current records of a batch or grid directory (latest per key and part); read only."""
    out = Path(out)
    if not out.is_dir():
        raise ScenarioError(f"{out}: no such directory")
    path = out / RESULTS_JSONL
    if not path.is_file():
        raise ScenarioError(f"{path}: no results (run `specpim-cp batch` or `specpim-cp grid` first)")
    store = ResultStore(path, repair=False)
    if not store.records():
        what = f"{store.unreadable} unreadable lines" if store.unreadable else "the file is empty"
        raise ScenarioError(f"{path}: no readable result records ({what})")
    return store.records()


# ------------------------------------------------------------------------------------------------
# CSV and Pareto files
# ------------------------------------------------------------------------------------------------
CSV_COLUMNS = ("scenario", "family", "batch_size", "method", "part", "status", "objective_name", "objective",
               "bound", "gap", "wall_s", *METRIC_KEYS, "draft_lengths", "pipeline", "pim_allocation",
               "seed", "solver_version", "inputs_hash", "key", "error")


def pim_summary(pim: Sequence[PimAllocation]) -> str:
    return " ".join(f"{p.model}:{p.memory_type}:{p.pim_units}/{p.units_per_group}" for p in pim)


def _draft_lengths(design: dict) -> str:
    return " ".join(str(x["draft_length"]) for x in design["drafters"])


def _csv_row(r: Record) -> dict:
    data = r.to_json()
    row = {c: data.get(c) for c in CSV_COLUMNS}
    for k in METRIC_KEYS:
        row[k] = None if r.metrics is None else getattr(r.metrics, k)
    if r.design:
        row["draft_lengths"] = _draft_lengths(r.design)
        row["pipeline"] = r.design["pipeline"]
    row["pim_allocation"] = pim_summary(r.pim or ())
    return row


def sort_key(r: Record) -> tuple:
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    return (r.family, r.scenario, order.get(r.method, 99))


def records_csv(records: Sequence[Record]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in sorted(records, key=sort_key):  # stable: parts keep their JSONL order
        w.writerow(_csv_row(r))
    return buf.getvalue()


def pareto_csv(record: Record) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["latency_ns_per_token", "energy_pj_per_token", "throughput_tokens_per_s", "tokens_per_round",
                "draft_lengths", "pipeline", "pim_allocation"])
    for p in record.front or ():
        m = p.metrics
        w.writerow([m.latency_ns_per_token, m.energy_pj_per_token, m.throughput_tokens_per_s, m.tokens_per_round,
                    _draft_lengths(p.design), p.design["pipeline"], pim_summary(p.pim)])
    return buf.getvalue()


def write_derived_files(out: Path, records: Sequence[Record] | None = None) -> list[Path]:
    """Regenerate `results.csv` and `pareto/*.csv` from the JSONL records."""
    out = Path(out)
    records = read_records(out) if records is None else records
    written = [out / RESULTS_CSV]
    write_atomic(out / RESULTS_CSV, records_csv(records))
    for r in records:
        if r.method == "pareto" and r.front:
            path = out / PARETO_DIR / f"{r.scenario}.csv"
            write_atomic(path, pareto_csv(r))
            written.append(path)
    return written


# ------------------------------------------------------------------------------------------------
# The runner
# ------------------------------------------------------------------------------------------------
def batch_name(files: Sequence[Path]) -> str:
    """The name of a batch of scenario files: their folder's (a set), or the file's stem."""
    files = [Path(f) for f in files]
    if len(files) == 1:
        return files[0].stem
    parents = {f.resolve().parent for f in files}
    return parents.pop().name if len(parents) == 1 else "batch"


def run_batch(files: Sequence[Path], out: str | Path, options: BatchOptions = BatchOptions(),
              progress: BatchProgress | None = None, catalog: Catalog | None = None,
              name: str | None = None, extra_catalogs: Sequence[str | Path] = ()) -> BatchSummary:
    """Run every missing instance of the scenario files into `out`, then regenerate the CSV files.
    `extra_catalogs` (--catalog) are merged over each scenario's own catalog files; the workers price
    every scenario with its own merged catalog. Mix files (a `[mix]` table) are one `mix` instance each
    (`batch_mix.plan_mixes`); the methods apply to the scenario files."""
    from specpim_cp.batch_mix import is_mix_file, plan_mixes

    options.validate()
    name = name or batch_name(files)
    mix_files = [f for f in files if is_mix_file(f)]
    scenario_files = [f for f in files if f not in mix_files]
    instances: list[Instance] = []
    notes: list[str] = []
    if scenario_files or not mix_files:
        scenarios = load_scenarios(scenario_files, catalog, extra_catalogs)
        instances, notes = plan(scenarios, options, catalog, name)
    if mix_files:
        instances += plan_mixes(mix_files, options, name, extra_catalogs)
    return run_instances(instances, out, options, progress, notes)


def run_instances(instances: Sequence[Instance], out: str | Path, options: BatchOptions,
                  progress: BatchProgress | None = None, notes: Sequence[str] = ()) -> BatchSummary:
    """Run the instances not yet done in `out` (resume) through the options' executor; one writer.

    Raises ScenarioError before any work (and before `progress.start`) if another run holds `out` or
    the executor cannot start.
    """
    t0 = time.perf_counter()
    progress = progress or _NoProgress()
    out = Path(out)
    created = not out.exists()
    with FolderLock(out) as lock:
        path = out / RESULTS_JSONL
        done = ResultStore(path, repair=False).done_keys() if options.resume else set()
        todo = [i for i in instances if i.key not in done]
        summary = BatchSummary(out, total=len(instances), skipped=len(instances) - len(todo), notes=list(notes))
        order = {inst.key: n for n, inst in enumerate(instances)}
        planned = set(order)

        # instances that wait for another (aliased ladder steps, warm-started grid cells)
        waiting: dict[str, list[Instance]] = {}
        ready: list[tuple[int, Instance]] = []
        released: list[tuple[Instance, str]] = []  # (instance, dependency done before this run)
        for inst in todo:
            dep = inst.waits_for
            if dep is None or dep not in planned:
                ready.append((order[inst.key], inst))
            elif dep in done:
                released.append((inst, dep))
            else:
                waiting.setdefault(dep, []).append(inst)
        executor = None
        runnable = bool(ready) or any(i.alias_of is None for i, _ in released) or bool(waiting)
        if runnable:
            try:
                executor = open_executor(options.executor, run_instance, jobs=options.jobs,
                                         workers=options.workers, ray_address=options.ray_address,
                                         inherited_fds=lock.inherited_fds)
            except BaseException:
                if created:  # leave no empty folder behind a run that could not start
                    lock.release()
                    lock.path.unlink(missing_ok=True)
                    out.rmdir()
                raise
        if not options.resume and path.exists():
            os.replace(path, out / (RESULTS_JSONL + ".old"))  # keep the previous run, start afresh
        store = ResultStore(path)

        def finish(inst: Instance, records: list[Record]) -> None:
            store.append(records)
            summary.ran += 1
            if not is_done(records):
                summary.failed.append(inst.label)
            progress.end(inst.label, records)
            for dependent in waiting.pop(inst.key, []):
                release(dependent, records)

        def release(inst: Instance, source: list[Record]) -> None:
            if inst.alias_of is not None:
                progress.begin(inst.label)
                if is_done(source):
                    finish(inst, alias_records(inst, source))
                else:
                    summary.failed.append(inst.label)
                    progress.end(inst.label, [])
                return
            solved = next((r for r in source if r.solved and r.design is not None), None)
            if solved is not None:  # as its JSON line has it, whether the record comes from disk or memory
                hint = json.loads(json.dumps(solved.design, sort_keys=True))
                inst = replace(inst, hint=hint, hint_from=solved.scenario)
            heapq.heappush(ready, (order[inst.key], inst))

        heapq.heapify(ready)
        progress.start(summary.total, summary.skipped)
        aborted = True
        try:
            by_key = store.by_key()
            for inst, dep in released:
                release(inst, by_key[dep])
            in_flight = 0
            while ready or in_flight:
                while ready and in_flight < executor.slots:
                    _, inst = heapq.heappop(ready)
                    progress.begin(inst.label)
                    executor.submit(inst)
                    in_flight += 1
                for inst, result in executor.wait():
                    in_flight -= 1
                    if isinstance(result, WorkerLost):
                        result = [_failed_record(inst, inst.step or inst.method, "ERROR", result.reason, 0.0)
                                  .with_(finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))]
                    finish(inst, result)
            aborted = False
        finally:
            progress.close()
            if executor is not None:
                executor.close(abort=aborted)
            write_derived_files(out, store.records())
    summary.wall_s = time.perf_counter() - t0
    return summary


class _NoProgress:
    def start(self, total: int, done: int) -> None: ...

    def begin(self, label: str) -> None: ...

    def end(self, label: str, records: list[Record]) -> None: ...

    def close(self) -> None: ...
