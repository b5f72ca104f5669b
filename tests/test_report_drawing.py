"""A report's figures drawn side by side (report/drawing.py): every job's result in order, a failing job
named in one line, the same outcome in worker processes as in this one."""

from __future__ import annotations

import os

import pytest

from specpim_cp.report import drawing


def square(x: int) -> int:
    return x * x


def broken(x: int) -> int:
    raise RuntimeError(f"no figure {x}")


def pid(_: int) -> int:
    return os.getpid()


JOBS = [(square, (2,)), (broken, (3,)), (square, (4,))]


@pytest.mark.parametrize("workers", [1, 2])
def test_every_job_in_order_and_a_failure_named(workers, monkeypatch):
    monkeypatch.setattr(drawing, "FIGURE_WORKERS", workers)
    assert drawing.draw_all(JOBS) == [(4, None), (None, "RuntimeError: no figure 3"), (16, None)]
    assert drawing.draw_all([]) == []


def test_two_workers_draw_outside_this_process_one_inside(monkeypatch):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: every figure is drawn in this process")
    pids = {p for p, _ in drawing.draw_all([(pid, (n,)) for n in range(4)])}
    assert os.getpid() not in pids
    monkeypatch.setattr(drawing, "FIGURE_WORKERS", 1)
    assert {p for p, _ in drawing.draw_all([(pid, (n,)) for n in range(4)])} == {os.getpid()}
