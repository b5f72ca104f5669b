"""Writes leave nothing behind and replace nothing protected: a read-only (0444) file is refused before the
rename, a name too long for the file system makes no folder, a batch that fails leaves no `.lock` and no
folder it made."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.cli import main
from specpim_cp.files import check_replaceable, write_atomic
from specpim_cp.runs.folder_lock import LOCK_FILE, FolderLock

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "specpim_cp" / "benchmarks" / "paper" / "opt-13b-b1.toml"


def run(*args: str):
    """The CLI in this process (click's runner)."""
    return CliRunner().invoke(main, list(args))


def one_line(res) -> str:
    """The one line a user error prints (exit 2, no traceback)."""
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr, res.exception)
    err = res.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_read_only_file_is_not_replaced(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("mine\n")
    target.chmod(0o444)
    with pytest.raises(PermissionError) as err:
        write_atomic(target, "theirs\n")
    assert err.value.filename == str(target) and "read-only (mode 0444)" in err.value.strerror
    assert target.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temp file left


def test_permission_bits_decide_not_root(tmp_path):
    """Running as root, os.access would allow the write; the file's bits still protect it."""
    target = tmp_path / "f"
    target.write_text("x")
    target.chmod(0o644)
    check_replaceable(target)  # writable: no error
    target.chmod(0o400)
    with pytest.raises(PermissionError):
        check_replaceable(target)
    check_replaceable(tmp_path / "absent")


def test_read_only_output_of_the_cli_is_one_line(tmp_path):
    target = tmp_path / "design.json"
    target.write_text("mine\n")
    target.chmod(0o444)
    line = one_line(run("solve", "paper/opt-13b-b1", "--time-limit", "5", "--output", str(target)))
    assert str(target) in line and "read-only" in line
    assert target.read_text() == "mine\n" and stat.S_IMODE(target.stat().st_mode) == 0o444


def test_name_too_long_makes_no_folder(tmp_path):
    target = tmp_path / "a" / "b" / ("x" * 300 + ".json")
    with pytest.raises(OSError) as err:
        write_atomic(target, "{}")
    assert err.value.filename == str(target) and "longer than" in err.value.strerror
    assert list(tmp_path.iterdir()) == []


def test_failed_write_removes_the_folders_it_made(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "a" / "b" / "c.txt", "text")
    assert list(tmp_path.iterdir()) == []


def test_long_name_within_the_limit_is_written(tmp_path):
    target = tmp_path / ("y" * 250)  # its temp file's name must stay within the limit too
    write_atomic(target, "ok")
    assert target.read_text() == "ok"


def test_batch_error_leaves_no_lock(tmp_path):
    out = tmp_path / "D"
    (out / "results.jsonl").mkdir(parents=True)
    line = one_line(run("batch", str(PAPER), "--methods", "baselines", "--out", str(out)))
    assert "results.jsonl" in line
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl"]


def test_batch_out_with_too_long_name_leaves_no_folder(tmp_path):
    out = tmp_path / "new" / ("z" * 300)
    one_line(run("batch", str(PAPER), "--methods", "baselines", "--out", str(out)))
    assert list(tmp_path.iterdir()) == []


def test_lock_file_goes_with_the_lock(tmp_path):
    out = tmp_path / "out"
    with FolderLock(out) as lock:
        assert (out / LOCK_FILE).read_text().strip() == str(os.getpid())
        assert lock.fd is not None
    assert not (out / LOCK_FILE).exists() and out.is_dir()
    with FolderLock(out):  # and can be taken again
        pass
