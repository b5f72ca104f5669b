"""The integer-range guard (guards.check_integer_range) screens every row at once; it must name the same
row, variable and sum as CP-SAT's rule read row by row (tests/oracles/row_check.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from oracles.row_check import worst_row
from ortools.sat.python import cp_model
from test_cli_corpus import OPT13

from specpim_cp.problem.scenario import load_scenario
from specpim_cp.solvers.exact.guards import INT_LIMIT, IntegerRangeError, check_integer_range
from specpim_cp.solvers.exact.proto_rows import linear_rows


def _guard(model: cp_model.CpModel) -> str | None:
    """The guard's message on `model`, None when it passes."""
    try:
        check_integer_range(SimpleNamespace(m=model, scenario=load_scenario(OPT13)))
    except IntegerRangeError as exc:
        return str(exc)
    return None


def _model(rows: list[tuple[list[tuple[int, int]], int, int]]) -> cp_model.CpModel:
    """Rows of (coefficient, variable bound b) terms, bounds [lo, hi]; odd terms' variables lie in [-b, b],
    even ones in [0, b], and the last term enters with a minus sign."""
    m = cp_model.CpModel()
    for r, (terms, lo, hi) in enumerate(rows):
        xs = [m.new_int_var(-b if t % 2 else 0, b, f"v{r}_{t}") for t, (_, b) in enumerate(terms)]
        expr = sum(k * x for (k, _), x in zip(terms[:-1], xs[:-1])) - terms[-1][0] * xs[-1]
        m.add_linear_constraint(expr, lo, hi)
    return m


HALF = 1 << 31


@pytest.mark.parametrize("rows, named", [
    ([([(3, 10), (5, 7)], 0, 100)], None),  # far within the limit
    ([([(HALF - 1, HALF), (1, 1)], 0, 0)], None),  # a hair below 2^62
    ([([(1, 1), (1, 1)], 0, 0), ([(HALF, HALF), (1, 1)], 0, 0)], 1),  # 2^62 + 1: over, the second row
    ([([(HALF, HALF), (1, 1)], 0, 0), ([(HALF, HALF), (1, 1)], 0, 0)], 0),  # equal rows: the first is named
    ([([(1, 1), (-HALF, HALF)], 0, 0), ([(HALF, 2 * HALF), (1, 1)], 0, 0)], 1),  # the larger of two, negated
    ([([(1, 1), (1, 1)], -(INT_LIMIT + 1), 0), ([(HALF, 2 * HALF), (1, 1)], 0, 0)], 0),  # a bound first
])
def test_guard_names_the_row_the_row_by_row_rule_names(rows, named):
    m = _model(rows)
    oracle = worst_row(m, INT_LIMIT)
    message = _guard(m)
    if named is None:
        assert message is None and oracle[0] == "part" and oracle[2] <= INT_LIMIT
        return
    assert oracle[1] == named and message is not None
    if oracle[0] == "rhs":
        assert f"a row's bound is {oracle[2]:.3g}" in message
    else:
        _, idx, k = oracle[3]
        assert f"(v{named}_{idx - 2 * named}) can reach" in message
        assert f"multiplies it by {abs(k):,}, summing to {oracle[2]:.3g}" in message


def test_arrays_read_the_proto_as_the_wrapper_does():
    """`linear_rows`' terms, signs and bounds equal the wrapper's, term by term."""
    m = _model([([(3, 10), (-5, 7), (2, 4)], 0, 100), ([(7, 1), (1, 9)], -5, 5)])
    m.add_bool_or([m.new_bool_var("b")])  # not a linear row
    lr = linear_rows(m)
    assert list(lr.rows) == [0, 1]
    expect = []
    for c in (m.proto.constraints[0], m.proto.constraints[1]):
        for ref, k in zip(c.linear.vars, c.linear.coeffs):
            expect.append((ref if ref >= 0 else -ref - 1, k if ref >= 0 else -k))
    assert list(zip(lr.var.tolist(), lr.coeff.tolist())) == expect
    assert lr.hi.tolist() == [list(v.domain)[-1] for v in m.proto.variables]


def test_without_a_temporary_directory_the_wrapper_is_read(monkeypatch):
    """No writable temporary directory: the rows are read through OR-Tools' wrapper, with the same answer."""
    m = _model([([(HALF, HALF), (1, 1)], 0, 0)])
    expect = _guard(m)
    def unwritable(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr("tempfile.TemporaryDirectory", unwritable)
    lr = linear_rows(m)
    assert not hasattr(lr.proto, "SerializeToString")  # the wrapper's proto
    assert _guard(m) == expect is not None
