"""Files in and out, shared by every stage: the one TOML/JSON reader (scenarios, designs, mixes, grids,
catalogs, Hugging Face configs) and atomic writes, safe file names and TOML text for output."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Literal

from specpim_cp.errors import ScenarioError

#: Mode of every file written: readable by all, writable by the owner (mkstemp alone gives 0600).
FILE_MODE = 0o644


def read_data(path: Path, what: str, *, syntax: Literal["TOML", "JSON"] | None = None, label: str | None = None,
              if_empty: str | None = None) -> Any:
    """The value in a TOML or JSON file (`syntax`, else by the suffix: `.json` is JSON, the rest TOML).

    Every problem is a ScenarioError of one line that starts with `label` (default: the path) and calls
    the file `what` ("a scenario"): cannot read, not UTF-8, blank (only when `if_empty` gives the message),
    not valid TOML/JSON (with the parser's message), nested too deeply.
    """
    label = label or str(path)
    kind = syntax or ("JSON" if path.suffix == ".json" else "TOML")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ScenarioError(f"{label}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        form = syntax or "a TOML or JSON file"
        raise ScenarioError(f"{label}: not UTF-8 text (byte {exc.start}: {exc.reason}); {what} is {form}") from None
    if if_empty is not None and not text.strip():
        raise ScenarioError(f"{label}: {if_empty}")
    try:
        return json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{label}: not valid {kind} ({' '.join(str(exc).split())})") from None
    except ValueError as exc:  # Python's int-from-text limit (sys.get_int_max_str_digits) in either parser
        if "integer string conversion" not in str(exc):
            raise
        raise ScenarioError(f"{label}: an integer with more than {sys.get_int_max_str_digits():,} digits; "
                            "no field accepts a number that large") from None
    except RecursionError:
        raise ScenarioError(f"{label}: not {what} (nested too deeply)") from None


def read_table(path: Path, what: str, *, syntax: Literal["TOML", "JSON"] | None = None, label: str | None = None,
               if_empty: str | None = None) -> dict:
    """`read_data` of a file that must hold a table (a JSON object); anything else is a ScenarioError."""
    data = read_data(path, what, syntax=syntax, label=label, if_empty=if_empty)
    if not isinstance(data, dict):
        raise ScenarioError(f"{label or path}: {what} is a JSON object (a table of fields), got {type(data).__name__}")
    return data


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@,-]+")


def safe_stem(name: str, fallback: str = "unnamed") -> str:
    """`name` as a file stem that stays in its folder: path separators, `..`, control and shell
    characters become `_`, leading dots are dropped (no hidden files), at most 100 characters."""
    stem = _UNSAFE.sub("_", name).replace("..", "_").lstrip(".")[:100]
    return stem or fallback


#: Longest name (scenario, grid, mix) that names output files and folders; with a prefix and a suffix it
#: stays well below the 255 bytes a file name may have on common file systems.
MAX_NAME_LENGTH = 100


def name_problem(name: str) -> str | None:
    """Why `name` cannot name an output file or folder as it is (None: it can). The one rule for the
    `name` of scenarios, grids and mixes: no `/`, `\\`, `..` or control characters, no leading `.`, no
    surrounding spaces, at most MAX_NAME_LENGTH characters."""
    bad = any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in name)
    if bad or ".." in name or name.startswith(".") or name != name.strip():
        return (f"must not contain '/', '\\', '..' or control characters, start with '.' or have surrounding "
                f"spaces (it names output files and folders), got {name!r}")
    if not name:
        return "must not be empty (it names output files and folders)"
    if len(name) > MAX_NAME_LENGTH:
        return f"at most {MAX_NAME_LENGTH} characters (it names output files and folders), got {len(name)}"
    return None


def safe_name(name: str, fallback: str = "unnamed") -> str:
    """`name` itself when it obeys `name_problem`'s rule, else `safe_stem(name, fallback)`: a name a user
    chose keeps its spelling, one that came from elsewhere (an old record, a file's stem) cannot escape."""
    return name if name_problem(name) is None else safe_stem(name, fallback)


def path_in(folder: str | Path, name: str, suffix: str = "", *, prefix: str = "", fallback: str = "unnamed") -> Path:
    """`folder / (prefix + safe_name(name) + suffix)`: the one way a name becomes a path. The result is a
    direct child of `folder` (checked, not assumed), so no name can write outside the chosen folder."""
    folder = Path(folder)
    leaf = prefix + safe_name(name, fallback) + suffix
    path = folder / leaf
    if (leaf in ("", ".", "..") or any(c in leaf for c in "/\\\x00") or path.parent != folder
            or path.name != leaf):
        raise ScenarioError(f"{folder}: the name {name!r} cannot name a file in this folder")
    return path


def write_atomic(path: str | Path, content: str | bytes) -> None:
    """Temporary file + rename, so a failed or killed run never leaves a half-written file.

    The file gets mode 0644. Nothing is written, and no folder is left behind, when the write cannot succeed:
    a parent that is a file, a name too long for the file system, an existing file the user may not write
    (`check_replaceable`). An OSError names `path` (the user's file), never the hidden temp file.
    """
    path = Path(path)
    check_writable(path)
    created = missing_folders(path.parent)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the temp name stays within NAME_MAX however long the target's name is
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:TEMP_STEM]}.", suffix=".tmp")
    except OSError as exc:
        remove_empty(created)
        raise OSError(exc.errno, f"cannot write ({exc.strerror})", str(path)) from None
    try:
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w",
                       **({} if isinstance(content, bytes) else {"encoding": "utf-8"})) as fh:
            fh.write(content)
            os.fchmod(fh.fileno(), FILE_MODE)
        check_replaceable(path)  # again just before the rename: the file may have appeared meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        remove_empty(created)
        raise OSError(exc.errno, exc.strerror if exc.filename == str(path) else f"cannot write ({exc.strerror})",
                      str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        remove_empty(created)
        raise


#: Characters of the target's name kept in its temporary file's name (`.NAME.xxxxxxxx.tmp`).
TEMP_STEM = 100


def check_writable(path: str | Path) -> None:
    """OSError naming `path` (one line) when a write to it cannot succeed, before any folder is made: a parent
    that is a file, a folder or file name longer than the file system allows, a protected existing file."""
    path = Path(path)
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():  # mkdir's "File exists" would not say which file
        raise NotADirectoryError(errno.ENOTDIR, f"cannot write: '{existing}' is a file, not a folder", str(path))
    limit = _name_max(existing or Path("."))
    for part in [*(p.name for p in missing_folders(path.parent)), path.name]:
        if len(os.fsencode(part)) > limit:
            raise OSError(errno.ENAMETOOLONG, f"cannot write: the name {part[:40]!r}... is longer than the "
                          f"{limit} bytes a file name may have here", str(path))
    check_replaceable(path)


def check_replaceable(path: str | Path) -> None:
    """PermissionError naming `path` when it is an existing file the user may not write (`os.access`; for
    root, whom the kernel lets write anything, a file with no write bit). A rename would replace
    it anyway, since that needs only the folder's permission, so the write is refused instead."""
    try:
        st = os.stat(path)
    except OSError:  # absent (or unreachable: the write itself will say why)
        return
    if stat.S_ISREG(st.st_mode) and not _writable_by_user(path, st):
        raise PermissionError(errno.EACCES, f"cannot write: the file is read-only (mode {stat.S_IMODE(st.st_mode):04o})"
                              "; make it writable (chmod u+w) or choose another path", str(path))


def _writable_by_user(path: str | Path, st: os.stat_result) -> bool:
    """Whether the user may write the file: the kernel's answer, except for root, whom the kernel lets write
    anything; for root a file with no write bit at all is protected."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return bool(st.st_mode & 0o222)
    return os.access(path, os.W_OK)


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system of `folder` takes (255 where it does not say)."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


def missing_folders(folder: str | Path) -> list[Path]:
    """`folder` and its ancestors that do not exist yet, deepest first (what a `mkdir -p` would create)."""
    out = []
    for p in [Path(folder), *Path(folder).parents]:
        if os.path.lexists(p):  # False, not an error, for a name too long to exist
            break
        out.append(p)
    return out


def remove_empty(folders: list[Path]) -> None:
    """Remove `folders` (deepest first, as `missing_folders` lists them) while they are empty: the folders a
    failed write or run created are not left behind."""
    for p in folders:
        try:
            p.rmdir()
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):  # never made (mkdir -p failed at or below it)
                continue
            return  # not empty (or not ours to remove): neither are its parents


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_text(data: dict) -> str:
    """A JSON-like table (str, int, float, bool, lists, nested dicts; None values left out) as TOML text
    that `tomllib.loads` reads back to `data` without its None values: top-level scalars, then one
    `[table]` or `[[array of tables]]` per top-level table, deeper tables inline."""

    def key(k: str) -> str:
        return k if _BARE_KEY.match(k) else toml_string(k)

    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            if math.isnan(v):
                return "nan"
            return ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        if isinstance(v, str):
            return toml_string(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items() if x is not None) + "}"
        raise TypeError(f"toml_text: cannot write a {type(v).__name__}")

    def is_table_array(v) -> bool:
        return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, dict) for x in v)

    def body(table: dict) -> list[str]:
        return [f"{key(k)} = {value(v)}" for k, v in table.items() if v is not None]

    lines = body({k: v for k, v in data.items() if not isinstance(v, dict) and not is_table_array(v)})
    for k, v in data.items():
        if isinstance(v, dict):
            lines += ["", f"[{key(k)}]", *body(v)]
        elif is_table_array(v):
            for item in v:
                lines += ["", f"[[{key(k)}]]", *body(item)]
    return "\n".join(lines) + "\n"


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(s: str) -> str:
    """`s` as a TOML basic string that `tomllib` reads back to `s`: quotes, backslashes and control characters
    (U+0000-U+001F, U+007F) escaped, every other character as itself. ValueError for a lone surrogate (an
    undecodable byte of a file name or argument, which no TOML or UTF-8 text can hold)."""
    out = []
    for c in s:
        code = ord(c)
        if 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"{s!r} holds an undecodable byte (a lone surrogate {code:#06x}), not text")
        out.append(_TOML_ESCAPES.get(c) or (f"\\u{code:04X}" if code < 0x20 or code == 0x7F else c))
    return '"' + "".join(out) + '"'
