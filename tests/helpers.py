"""Test conveniences: build a design from parts without a DesignSpace (tests build designs outside the
scenario's restricted space on purpose, e.g. fixed recipes); check a CLI user error."""

from __future__ import annotations

from collections.abc import Sequence

from specpim_cp.problem.design import ArchConfig, Design, DrafterChoice, Placement, SpecChoice, Staging
from specpim_cp.problem.scenario import Scenario


def build_design(sc: Scenario, archs: Sequence[ArchConfig], placements: Sequence[dict[str, Placement]],
                 gammas: Sequence[int], staging: Sequence[Staging | None], pipeline: bool) -> Design:
    names = [sc.verifier.model] + [d.model for d in sc.drafters]
    choice = SpecChoice(tuple(DrafterChoice(g, st) for g, st in zip(gammas, staging, strict=True)), pipeline)
    return Design.assemble(names[:len(archs)], list(archs), list(placements), choice)


def one_line_error(res, *needles: str) -> str:
    """A click CliRunner result that is one user-error line (exit 2, `error: ...`, no traceback) naming
    every needle; returns the line."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    err = res.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    return err
