"""File output shared by the CLI and the batch runner."""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

#: Mode of every file written: readable by all, writable by the owner (mkstemp alone gives 0600).
FILE_MODE = 0o644

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@,-]+")


def safe_stem(name: str, fallback: str = "unnamed") -> str:
    """`name` as a file stem that stays in its folder: path separators, `..`, control and shell
    characters become `_`, leading dots are dropped (no hidden files), at most 100 characters."""
    stem = _UNSAFE.sub("_", name).replace("..", "_").lstrip(".")[:100]
    return stem or fallback


def write_atomic(path: str | Path, content: str | bytes) -> None:
    """Temporary file + rename, so a failed or killed run never leaves a half-written file.

    The file gets mode 0644. An OSError names `path` (the user's file), never the hidden temp file.
    """
    path = Path(path)
    for parent in path.parents:  # mkdir's "File exists" would not say which file is in the way
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, f"cannot write: '{parent}' is a file, not a folder", str(path))
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write ({exc.strerror})", str(path)) from None
    try:
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w",
                       **({} if isinstance(content, bytes) else {"encoding": "utf-8"})) as fh:
            fh.write(content)
            os.fchmod(fh.fileno(), FILE_MODE)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, f"cannot write ({exc.strerror})", str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_figure(fig, path: str | Path) -> Path:
    """A matplotlib figure written atomically (format from the suffix, PNG without one)."""
    import io

    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix[1:].lower() or "png")
    write_atomic(path, buf.getvalue())
    return path
