"""Benchmark-set runner: the instances of a plan (`instances.py`) run through an executor, resumable.

The instances not yet done in the folder's `results.jsonl` (`store.py`) run through an executor
(`executors.py`: this process, a local process pool, or Ray tasks), each by its method (`methods.py`);
this module keeps the scheduling, the one JSONL writer and the resume, so a run can move between
executors. One run at a time writes a folder (`folder_lock.py`). An instance can wait for another: an
aliased ladder step copies its source's record, and a grid cell (`grid.py`) is warm-started with the
design of its neighbour cell (`hint_of`), which makes its result independent of the executor's timing.
Workload-mix files are one instance each (`mixes.py`).

Nothing here prints: progress goes to an optional `BatchProgress` hook (the CLI draws a tqdm bar).
"""

from __future__ import annotations

import heapq
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from specpim_cp.catalog import Catalog
from specpim_cp.runs.executors import WorkerLost, open_executor
from specpim_cp.runs.folder_lock import FolderLock
from specpim_cp.runs.instances import BatchOptions, Instance, batch_name, load_scenarios, plan
from specpim_cp.runs.methods import alias_records, failed_record, run_instance
from specpim_cp.runs.mixes import is_mix_file, plan_mixes
from specpim_cp.runs.records import Record
from specpim_cp.runs.store import RESULTS_JSONL, ResultStore, is_done, write_derived_files


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
# The runner
# ------------------------------------------------------------------------------------------------
def run_batch(files: Sequence[Path], out: str | Path, options: BatchOptions | None = None,
              progress: BatchProgress | None = None, catalog: Catalog | None = None,
              name: str | None = None, extra_catalogs: Sequence[str | Path] = ()) -> BatchSummary:
    """Run every missing instance of the scenario files into `out`, then regenerate the CSV files.
    `extra_catalogs` (--catalog) are merged over each scenario's own catalog files; the workers price
    every scenario with its own merged catalog. Mix files (a `[mix]` table) are one `mix` instance each
    (`mixes.plan_mixes`); the methods apply to the scenario files."""
    options = (options or BatchOptions()).validate()
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
            executor = open_executor(options.executor, run_instance, jobs=options.jobs,  # on failure the lock
                                     workers=options.workers, ray_address=options.ray_address,  # removes the
                                     inherited_fds=lock.inherited_fds)  # folders it made
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
                        result = [failed_record(inst, inst.step or inst.method, "ERROR", result.reason, 0.0)
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
