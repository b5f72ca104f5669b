"""One call run in a forked child process beside this one (on a core this process leaves idle), its small
picklable answer collected later, or the child stopped when the answer is no longer wanted. A generator
function answers once per value it yields, read in order (`ForkedCall.following`): the child goes on to its
next step while this process reads the answer before.

Where the platform does not fork, the machine has a single core, or this process runs other threads (a fork
copies only the calling thread: a lock another thread holds would never be released in the child), nothing is
started (`ForkedCall.start` returns None) and the caller runs the call itself. A call that fails in the child
is answered as such, never raised there: the caller decides (a `ScenarioError` is the call's own answer,
anything else is run again in the caller, where it raises as it would have)."""

from __future__ import annotations

import inspect
import multiprocessing
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
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


class _Child:
    """A forked child and the answers received from it so far (several when the call is a generator)."""

    def __init__(self, process, conn, answers: int | None):
        self.process = process
        self.conn = conn
        self.answers = answers  # how many the call sends (1: a plain call; None: a generator's, until it ends)
        self.received: list[Outcome] = []
        self.closed = False

    def answer(self, index: int, timeout_s: float | None) -> Outcome:
        """Answer `index`, waiting for it at most `timeout_s` seconds (None: as long as it takes); the child is
        stopped when none comes in time, and joined once it has sent its last answer."""
        while len(self.received) <= index:
            if self.closed:
                return Outcome("lost", "the child process ended without this answer")
            try:
                if not self.conn.poll(timeout_s):
                    self.stop()
                    return Outcome("lost", f"no answer within {timeout_s:.1f} s")
                got = Outcome(*self.conn.recv())
            except (EOFError, OSError) as exc:
                self.stop()
                return Outcome("lost", f"the child process ended without an answer ({exc!r})")
            self.received.append(got)
            if got.kind != "ok" or len(self.received) == self.answers:  # its last answer: the child ends
                self.stop()
        return self.received[index]

    def stop(self) -> None:
        """Stop the child if it still runs (no later answer is wanted)."""
        if self.closed:
            return
        if self.process.is_alive() and len(self.received) != self.answers:
            self.process.terminate()
        self.process.join()
        self.conn.close()
        self.closed = True


class ForkedCall:
    """`fn(*args)` in a forked child; `outcome()` waits for its answer, `cancel()` stops the child. When `fn`
    is a generator function, `outcome()` is its first value's answer and `following()` a call whose answer
    is the next one."""

    def __init__(self, child: _Child, index: int = 0):
        self._child = child
        self._index = index

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
        return cls(_Child(process, receive, None if inspect.isgeneratorfunction(fn) else 1))

    @property
    def running(self) -> bool:
        """Whether the child process still runs."""
        return self._child.process.is_alive()

    def following(self) -> ForkedCall:
        """The call whose answer is the child's next one (a generator's next value)."""
        return ForkedCall(self._child, self._index + 1)

    def outcome(self, timeout_s: float | None = None) -> Outcome:
        """The call's answer, waiting for it at most `timeout_s` seconds (None: as long as it takes), the child
        stopped after that (once received, kept)."""
        return self._child.answer(self._index, timeout_s)

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
        """Stop the child if it still runs (its answers are no longer wanted)."""
        self._child.stop()


def _answers(fn: Callable[..., Any], args: tuple) -> Iterator[tuple[str, Any]]:
    """The call's answers as (kind, value): its value (each value a generator yields), or how it failed (then
    nothing more)."""
    try:
        got = fn(*args)
        if not inspect.isgenerator(got):
            yield "ok", got
            return
        for value in got:
            yield "ok", value
    except ScenarioError as exc:
        yield "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, which runs the call again itself
        yield "lost", traceback.format_exception_only(type(exc), exc)[-1].strip()


def _child(conn, fn: Callable[..., Any], args: tuple) -> None:
    """The child's whole life: the call, each answer sent, nothing raised (Ctrl-C is the parent's to handle)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for answer in _answers(fn, args):
            conn.send(answer)
    finally:
        conn.close()
