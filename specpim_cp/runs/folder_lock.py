"""One writer per output folder: an exclusive `fcntl.flock` on `OUT/.lock`, held for a whole run.

The kernel drops a flock when the last descriptor of its open file goes away, so a killed run (even
`kill -9`) never leaves the folder locked. The holder writes its pid into the file so the next run can
say who is writing, and removes the file when it releases the lock (an ended run, or one that failed,
leaves no `.lock`); a run that locked a file since removed tries again on the new one. Worker processes forked by the local pool inherit the descriptor; they close their
copy when they start (`inherited_fds`), so an orphaned worker does not keep the lock after its driver
died.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import final

from specpim_cp.errors import ScenarioError
from specpim_cp.files import check_writable, missing_folders, remove_empty

LOCK_FILE = ".lock"


@final
class FolderLock:
    """`with FolderLock(out):` -- raises ScenarioError (one line, naming the folder and the holder's pid)
    if another process holds it."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.fd: int | None = None
        self.created: list[Path] = []  # the folders `acquire` made (deepest first)

    def acquire(self) -> FolderLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover -- not a POSIX system: no lock
            return self
        check_writable(self.folder)  # a name too long, a parent that is a file: refused before any mkdir
        self.created = missing_folders(self.folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.fd = self._lock(fcntl)
        except BaseException:  # a run that cannot start leaves no folder behind
            remove_empty(self.created)
            raise
        return self

    def _lock(self, fcntl) -> int:
        """The descriptor of `.lock`, locked, with this process's pid in it."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not O_TRUNC: the holder's pid stays readable
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode(errors="replace").strip()
                os.close(fd)
                who = f"pid {holder}" if holder.isdigit() else "pid unknown"
                raise ScenarioError(f"{self.folder}: another batch or grid run ({who}) is writing to this folder; "
                                    "wait for it to finish or choose another --out") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the holder released and removed this file meanwhile: lock the current one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)  # still held: nobody locks the removed file after this
            os.close(self.fd)  # closing the last descriptor releases the flock
            self.fd = None

    @property
    def inherited_fds(self) -> tuple[int, ...]:
        """Descriptors a forked worker should close."""
        return () if self.fd is None else (self.fd,)

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, exc_type, *exc) -> None:
        self.release()
        if exc_type is not None:  # a run that failed leaves no folder it made and did not fill
            remove_empty(self.created)


def _same_file(fd: int, path: Path) -> bool:
    """The open file `fd` is the one at `path` now (not one removed and re-created since it was opened)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)
