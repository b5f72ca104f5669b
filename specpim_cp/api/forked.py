"""One call run in a forked child process beside this one (on a core this process leaves idle), its small
picklable answer collected later, or the child stopped when the answer is no longer wanted.

Where the platform does not fork, the machine has a single core, or this process runs other threads (a fork
copies only the calling thread: a lock another thread holds would never be released in the child), nothing is
started (`ForkedCall.start` returns None) and the caller runs the call itself. A call that fails in the child is answered as such, never
raised there: the caller decides (a `ScenarioError` is the call's own answer, anything else is run again in
the caller, where it raises as it would have)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

from specpim_cp.errors import ScenarioError


class Outcome(NamedTuple):
    """A forked call's answer: `kind` "ok" (`value` is the call's result), "refused" (`value` is the
    ScenarioError's message) or "lost" (`value` says why: the call failed otherwise, or the child died)."""

    kind: str
    value: Any


def spare_cores() -> int:
    """How many cores this process may run on beyond its own (0 on a single core)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(0, cores - 1)


class ForkedCall:
    """`fn(*args)` in a forked child; `outcome()` waits for its answer, `cancel()` stops the child."""

    def __init__(self, process, conn):
        self._process = process
        self._conn = conn
        self._outcome: Outcome | None = None

    @classmethod
    def start(cls, fn: Callable[..., Any], *args: Any) -> ForkedCall | None:
        """Fork a child that runs `fn(*args)` (None, and nothing started, without fork, a spare core or with
        other threads running)."""
        if spare_cores() < 1 or "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
            return None
        ctx = multiprocessing.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        for stream in (sys.stdout, sys.stderr):  # else the child would write what is buffered here again
            stream.flush()
        process = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
        process.start()
        send.close()
        return cls(process, receive)

    def outcome(self, timeout_s: float | None = None) -> Outcome:
        """The call's answer, waiting for it at most `timeout_s` seconds (None: as long as it takes), the child
        stopped after that (once received, kept)."""
        if self._outcome is None:
            try:
                if not self._conn.poll(timeout_s):
                    self._outcome = Outcome("lost", f"no answer within {timeout_s:.1f} s")
                    self.cancel()
                    return self._outcome
                self._outcome = Outcome(*self._conn.recv())
            except (EOFError, OSError) as exc:
                self._outcome = Outcome("lost", f"the child process ended without an answer ({exc!r})")
            self._close()
        return self._outcome

    def result(self, timeout_s: float | None, otherwise: Callable[[], Any]) -> Any:
        """The call's value; its refusal raised as the ScenarioError it was; `otherwise()` when it was lost
        (it failed otherwise, the child died, or no answer came within `timeout_s`)."""
        outcome = self.outcome(timeout_s)
        if outcome.kind == "ok":
            return outcome.value
        if outcome.kind == "refused":
            raise ScenarioError(outcome.value)
        return otherwise()

    def cancel(self) -> None:
        """Stop the child if it still runs (its answer is no longer wanted)."""
        if self._process.is_alive():
            self._process.terminate()
        self._close()

    def _close(self) -> None:
        self._process.join()
        self._conn.close()


def _child(conn, fn: Callable[..., Any], args: tuple) -> None:
    """The child's whole life: the call, its answer sent, nothing raised (Ctrl-C is the parent's to handle)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        answer = ("ok", fn(*args))
    except ScenarioError as exc:
        answer = ("refused", str(exc))
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, which runs the call again itself
        answer = ("lost", traceback.format_exception_only(type(exc), exc)[-1].strip())
    try:
        conn.send(answer)
    finally:
        conn.close()
