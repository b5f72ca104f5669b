"""One writer per output folder: an exclusive `fcntl.flock` on `OUT/.lock`, held for a whole run.

The kernel drops a flock when the last descriptor of its open file goes away, so a killed run (even
`kill -9`) never leaves the folder locked. The holder writes its pid into the file so the next run can
say who is writing. Worker processes forked by the local pool inherit the descriptor; they close their
copy when they start (`inherited_fds`), so an orphaned worker does not keep the lock after its driver
died.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import final

from specpim_cp.errors import ScenarioError

LOCK_FILE = ".lock"


@final
class FolderLock:
    """`with FolderLock(out):` -- raises ScenarioError (one line, naming the folder and the holder's pid)
    if another process holds it."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> FolderLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover -- not a POSIX system: no lock
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not O_TRUNC: the holder's pid stays readable
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            who = f"pid {holder}" if holder.isdigit() else "pid unknown"
            raise ScenarioError(f"{self.folder}: another batch or grid run ({who}) is writing to this folder; "
                                "wait for it to finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor releases the flock; the file stays
            self.fd = None

    @property
    def inherited_fds(self) -> tuple[int, ...]:
        """Descriptors a forked worker should close."""
        return () if self.fd is None else (self.fd,)

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
