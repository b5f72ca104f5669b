"""A report's figures drawn side by side: each is independent of the others, so each is drawn in a worker
process (forked, at most FIGURE_WORKERS at once) where the platform forks and the machine has more than one
CPU, else one after the other in this process. The figure files are the same either way; a figure that
fails is reported as one line, and a pool that breaks leaves the rest to this process."""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress
from typing import Any

#: Most worker processes a report draws its figures in (matplotlib's Agg drawing is single-threaded).
FIGURE_WORKERS = 2

Job = tuple[Callable[..., Any], tuple]


def draw_all(jobs: Sequence[Job]) -> list[tuple[Any, str | None]]:
    """Per job `(fn, args)`, in order: `(fn(*args), None)`, or `(None, why)` when it raised (one line)."""
    workers = min(FIGURE_WORKERS, os.cpu_count() or 1, len(jobs))
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [run_job(job) for job in jobs]
    out: list[tuple[Any, str | None] | None] = [None] * len(jobs)
    fork = multiprocessing.get_context("fork")  # the workers fork with the jobs: only indices are pickled
    with suppress(BrokenProcessPool), ProcessPoolExecutor(workers, mp_context=fork, initializer=inherit,
                                                          initargs=(tuple(jobs),)) as pool:
        futures = [pool.submit(run_forked, n) for n in range(len(jobs))]
        for n, future in enumerate(futures):  # a worker killed: what is left is drawn here
            out[n] = future.result()
    return [got if got is not None else run_job(job) for got, job in zip(out, jobs)]


#: In a worker: the jobs of the `draw_all` it was forked for.
_FORKED_JOBS: tuple[Job, ...] = ()


def inherit(jobs: tuple[Job, ...]) -> None:
    """A worker's initializer: keep the jobs it inherited."""
    global _FORKED_JOBS
    _FORKED_JOBS = jobs


def run_forked(n: int) -> tuple[Any, str | None]:
    """Job `n` of the `draw_all` this worker was forked for."""
    return run_job(_FORKED_JOBS[n])


def run_job(job: Job) -> tuple[Any, str | None]:
    """One job's result, or why it failed (its exception as one line: type and message)."""
    fn, args = job
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 -- a figure that fails is named; the records and tables stand
        return None, traceback.format_exception_only(type(exc), exc)[-1].strip()
