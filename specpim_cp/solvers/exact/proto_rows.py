"""The linear rows of a CP-SAT model as flat arrays, for checks that read every row (guards.py).

OR-Tools 9.15's proto wrapper answers field by field, about 10 us a row; the model is instead written once
in the protobuf wire format to a temporary file and parsed by `cp_model_pb2` (the same message, read at C
speed), then flattened: one entry per term with its row's index, so a per-row sum is one `np.bincount`.
Where the file cannot be written, the rows are read through the wrapper (the same arrays, slower).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import numpy as np
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model


@dataclass(frozen=True)
class LinearRows:
    """Every linear constraint of a model, for a float screen before an exact test: `proto` (a
    `cp_model_pb2.CpModelProto`, or the wrapper's proto, whose constraints hold the exact integers), `rows`
    the constraint index of each linear row; per term `term_row` (its row's position in `rows`), `var`
    (positive variable index) and `coeff` (coefficient on that variable, a negated reference's sign folded
    in, as a float); per domain value of a row `dom_row` and `dom`; per variable `lo`, `hi` (floats)."""

    proto: object
    rows: np.ndarray  # int64, constraint indices of the linear rows, ascending
    term_row: np.ndarray  # int64
    var: np.ndarray  # int64
    coeff: np.ndarray  # float64
    dom_row: np.ndarray  # int64
    dom: np.ndarray  # int64, the rows' domain bounds (CP-SAT's int64 sentinels included)
    lo: np.ndarray  # float64
    hi: np.ndarray  # float64

    def constraint(self, position: int):
        """The constraint of the row at `position` of `rows` (exact integers)."""
        return self.proto.constraints[int(self.rows[position])]


def parsed_proto(model: cp_model.CpModel) -> object:
    """The model's proto as a `cp_model_pb2.CpModelProto` (wire-format copy), or the wrapper's own proto
    when the copy cannot be written (no writable temporary directory)."""
    try:
        with tempfile.TemporaryDirectory(prefix="specpim-rows-") as tmp:
            path = os.path.join(tmp, "model.pb")
            if not model.export_to_file(path) or not os.path.exists(path):
                return model.proto
            out = cp_model_pb2.CpModelProto()
            with open(path, "rb") as fh:
                out.ParseFromString(fh.read())
            return out
    except (OSError, RuntimeError):
        return model.proto


def linear_rows(model: cp_model.CpModel) -> LinearRows:
    """`LinearRows` of `model` (every constraint with a linear part, in constraint order)."""
    proto = parsed_proto(model)
    is_pb2 = isinstance(proto, cp_model_pb2.CpModelProto)
    rows, refs, coeffs, counts, doms, dom_counts = [], [], [], [], [], []
    for i, c in enumerate(proto.constraints):
        if not (c.HasField("linear") if is_pb2 else c.has_linear()):
            continue
        rows.append(i)
        lin = c.linear
        vs, dom = list(lin.vars), list(lin.domain)
        refs += vs
        coeffs += list(lin.coeffs)
        counts.append(len(vs))
        doms += dom
        dom_counts.append(len(dom))
    ref = np.array(refs, dtype=np.int64)
    coeff = np.array(coeffs, dtype=np.float64)
    negated = ref < 0
    lo, hi = [], []
    for v in proto.variables:
        dom = list(v.domain)
        lo.append(dom[0])
        hi.append(dom[len(dom) - 1])
    positions = np.arange(len(rows), dtype=np.int64)
    return LinearRows(proto, np.array(rows, dtype=np.int64), np.repeat(positions, counts),
                      np.where(negated, -ref - 1, ref), np.where(negated, -coeff, coeff),
                      np.repeat(positions, dom_counts), np.array(doms, dtype=np.int64),
                      np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64))
