"""Where batch instances run: in this process, in a local process pool, or as Ray tasks.

An executor runs one function (`batch.run_instance`, which never raises) on tasks and hands back
`(task, result)` pairs; it knows nothing of records, keys or files. The driver (`batch.run_instances`)
keeps the scheduling, the single JSONL writer and the content-hash resume, so a run can move between
executors and be resumed on either. The interface: `slots` (tasks kept in flight), `submit(task)`,
`wait()` (block until at least one task finished; a worker that died is a `WorkerLost` result) and
`close(abort)` (release the workers; `abort` cancels what still runs).

With Ray each task is a remote task needing `workers` CPUs (the CP-SAT workers of one solve) and is
not retried (a task whose worker died is a `WorkerLost`, recorded as ERROR and retried by a re-run).
How many tasks run at once (`--jobs`, `check_jobs`) is bounded before any process starts: a local pool
or a local Ray runtime forks at most this machine's CPUs (`os.cpu_count()`, at least the default 2); on
a Ray cluster at most MAX_CLUSTER_JOBS tasks are in flight (jobs 0, no --jobs: as many as its CPUs
allow). A Ray task needing more CPUs than the whole cluster has would wait forever: refused when it
connects.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import logging
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol

from specpim_cp.errors import ScenarioError
from specpim_cp.runs.limits import shown

EXECUTORS = ("local", "ray")
RAY_MISSING = "--executor ray: Ray is not installed (pip install -e '.[ray]', or pip install ray)"
CONNECT_TIMEOUT_S = 5.0
DEFAULT_LOCAL_JOBS = 2  # `--jobs` of the local executor when not given
MAX_CLUSTER_JOBS = 1024  # Ray tasks in flight on a cluster (Ray queues those beyond its free CPUs)


def machine_cpus() -> int:
    """This machine's CPUs (os.cpu_count())."""
    return os.cpu_count() or 1


def on_cluster(ray_address: str | None) -> bool:
    """Ray joins a cluster (--ray-address or $RAY_ADDRESS), else starts a local runtime."""
    return bool(ray_address or os.environ.get("RAY_ADDRESS"))


def check_jobs(jobs: int, executor: str, ray_address: str | None = None) -> int:
    """`jobs`, or ScenarioError naming --jobs and its limit: 1 to this machine's CPUs (at least the default
    2) for the local pool and a local Ray runtime, 1 to MAX_CLUSTER_JOBS on a Ray cluster; with Ray, 0 (the
    default, no --jobs) is as many as the CPUs allow."""
    ray = executor == "ray"
    if ray and on_cluster(ray_address):
        high, why = MAX_CLUSTER_JOBS, "Ray tasks in flight on a cluster"
    else:
        high, why = max(DEFAULT_LOCAL_JOBS, machine_cpus()), f"this machine has {machine_cpus()} CPUs"
    if ray:
        why += "; without --jobs: as many as the CPUs allow"
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not (0 if ray else 1) <= jobs <= high:
        raise ScenarioError(f"--jobs: must be an integer from 1 to {high} ({why}), got {shown(jobs)}")
    return jobs


@dataclass(frozen=True)
class WorkerLost:
    """The result of a task whose worker process died before it returned."""

    reason: str


class Executor(Protocol):
    slots: int

    def submit(self, task: Any) -> None: ...

    def wait(self) -> list[tuple[Any, Any]]: ...

    def close(self, abort: bool = False) -> None: ...


# ------------------------------------------------------------------------------------------------
class InlineExecutor:
    """Every task in this process, one at a time (`--jobs 1`)."""

    slots = 1

    def __init__(self, run: Callable[[Any], Any]):
        self._run = run
        self._queue: list[Any] = []

    def submit(self, task: Any) -> None:
        self._queue.append(task)

    def wait(self) -> list[tuple[Any, Any]]:
        task = self._queue.pop(0)
        return [(task, self._run(task))]

    def close(self, abort: bool = False) -> None:
        self._queue.clear()


def _close_inherited(fds: Sequence[int]) -> None:
    """Pool worker initializer: drop descriptors forked from the driver (its output folder's lock)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class PoolExecutor:
    """A local process pool of `jobs` workers. A worker that dies breaks the pool: the tasks in flight
    come back as `WorkerLost` and the next `submit` starts a fresh pool."""

    def __init__(self, run: Callable[[Any], Any], jobs: int, inherited_fds: Sequence[int] = ()):
        self._run = run
        self.slots = check_jobs(jobs, "local")
        self._fds = tuple(inherited_fds)
        self._pool: cf.ProcessPoolExecutor | None = None
        self._broken = False
        self._running: dict[cf.Future, tuple[Any, cf.ProcessPoolExecutor]] = {}

    def _fresh_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = cf.ProcessPoolExecutor(max_workers=self.slots, initializer=_close_inherited,
                                            initargs=(self._fds,))
        self._broken = False
        return self._pool

    def submit(self, task: Any) -> None:
        pool = self._pool if self._pool is not None and not self._broken else self._fresh_pool()
        try:
            fut = pool.submit(self._run, task)
        except BrokenProcessPool:  # broke since the last wait()
            pool = self._fresh_pool()
            fut = pool.submit(self._run, task)
        self._running[fut] = (task, pool)

    def wait(self) -> list[tuple[Any, Any]]:
        done, _ = cf.wait(self._running, return_when=cf.FIRST_COMPLETED)
        out = []
        for fut in done:
            task, pool = self._running.pop(fut)
            try:
                out.append((task, fut.result()))
            except BrokenProcessPool:
                if pool is self._pool:
                    self._broken = True
                out.append((task, WorkerLost("worker process died (killed or out of memory)")))
        return out

    def close(self, abort: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=not abort, cancel_futures=abort)
            self._pool = None
        self._running.clear()


# ------------------------------------------------------------------------------------------------
def ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None


def _check_reachable(address: str) -> None:
    """Fail fast on an address nothing listens on (ray.init would retry for minutes)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ScenarioError(f"--ray-address: expected HOST:PORT (e.g. 10.0.0.1:6379), got '{address}'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise ScenarioError(f"--ray-address {address}: cannot connect ({why}); is `ray start --head` "
                            "running there?") from None


class RayExecutor:
    """Each task a Ray remote task needing `workers` CPUs; at most `slots` in flight (default: as many
    as the cluster's CPUs allow). Connects to `address`, or starts a local Ray runtime of `local_cpus`
    CPUs (all if None); an already initialised Ray (a test's `ray.init`) is used as it is."""

    def __init__(self, run: Callable[[Any], Any], workers: int, jobs: int = 0, address: str | None = None,
                 local_cpus: int | None = None):
        if not ray_available():
            raise ScenarioError(RAY_MISSING)
        import ray

        self._ray = ray
        self._owner = False
        address = address or os.environ.get("RAY_ADDRESS") or None  # what ray.init would use
        if address:
            _check_reachable(address)
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False,
                                      "logging_level": logging.ERROR}
            if not address:
                kwargs["num_cpus"] = local_cpus
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ScenarioError(f"--ray-address {address or '(local)'}: cannot start or join Ray ({msg})") \
                    from None
            self._owner = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        if workers > cpus:  # no node could ever run a task: it would wait forever
            if self._owner:
                ray.shutdown()
            raise ScenarioError(f"--workers {workers}: each Ray task needs {workers} CPUs, the Ray cluster has "
                                f"{cpus}")
        self.slots = jobs if jobs >= 1 else max(1, cpus // workers)
        self._remote = ray.remote(num_cpus=workers, max_retries=0)(run)
        self._running: dict[Any, Any] = {}  # ObjectRef -> task

    def submit(self, task: Any) -> None:
        self._running[self._remote.remote(task)] = task

    def wait(self) -> list[tuple[Any, Any]]:
        ray = self._ray
        refs = list(self._running)
        ready, _ = ray.wait(refs, num_returns=1)
        more, _ = ray.wait([r for r in refs if r not in ready], num_returns=len(refs) - len(ready), timeout=0)
        out = []
        for ref in [*ready, *more]:
            task = self._running.pop(ref)
            try:
                out.append((task, ray.get(ref)))
            except ray.exceptions.RayError as exc:  # worker or node died, task cancelled, unpicklable result
                first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
                out.append((task, WorkerLost(f"Ray task failed: {type(exc).__name__}: {first.strip()}")))
        return out

    def close(self, abort: bool = False) -> None:
        if abort:
            for ref in self._running:
                self._ray.cancel(ref, force=True)
        self._running.clear()
        if self._owner:
            self._ray.shutdown()
            self._owner = False


def open_executor(kind: str, run: Callable[[Any], Any], *, jobs: int, workers: int = 1,
                  ray_address: str | None = None, inherited_fds: Sequence[int] = ()) -> Executor:
    """The executor of `--executor` (local: in this process for one job, else a process pool); `jobs` within
    `check_jobs`'s limit."""
    if kind in EXECUTORS:
        check_jobs(jobs, kind, ray_address)
    if kind == "ray":
        return RayExecutor(run, workers, jobs, ray_address, local_cpus=jobs * workers if jobs >= 1 else None)
    if kind != "local":
        raise ScenarioError(f"--executor: unknown executor '{kind}' (known: {', '.join(EXECUTORS)})")
    return InlineExecutor(run) if jobs <= 1 else PoolExecutor(run, jobs, inherited_fds)
