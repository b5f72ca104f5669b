"""The drafters' joint choice space is counted before any choice is built: beyond MAX_SPEC_CHOICES (or
MAX_CHOICE_DEVICE_PAIRS) every command that lists it refuses in one line naming the limit, and every
built-in scenario stays within both. Timings and memory: benchmarks/bench_bounded_work.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from specpim_cp.cli import main
from specpim_cp.problem import space as space_mod
from specpim_cp.problem.builtin_sets import builtin_sets
from specpim_cp.problem.scenario import load_scenario, scenario_catalog
from specpim_cp.problem.space import (
    MAX_CHOICE_DEVICE_PAIRS,
    MAX_SPEC_CHOICES,
    ChoiceSpaceTooLarge,
    DesignSpace,
    TreeMenuTooLarge,
)
from specpim_cp.runs.mixes import is_mix_file

CASES = Path(__file__).resolve().parent / "data" / "bounded_work"
#: case -> its choices (each drafter's options multiplied, pipeline off; plus the chains, pipeline on; plus
#: not speculating, [NOSPEC])
EXPECTED = {"two-default-trees": 228**2 + 8**2 + 1, "four-8-node-trees": 135**4 + 4**4 + 1,
            "two-128-node-trees-depth2": 1508**2 + 2**2 + 1, "three-8-node-trees-depth4": 135**3 + 4**3 + 1}


def _space(path: Path) -> DesignSpace:
    sc = load_scenario(path)
    return DesignSpace(sc, scenario_catalog(sc))


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_too_many_choices_are_counted_not_built(case, monkeypatch):
    built = []
    real = space_mod.SpecChoice
    monkeypatch.setattr(space_mod, "SpecChoice", lambda *a, **k: built.append(1) or real(*a, **k))
    ds = _space(CASES / f"{case}.toml")
    assert ds.choice_count() == EXPECTED[case] > MAX_SPEC_CHOICES
    with pytest.raises(ChoiceSpaceTooLarge, match="MAX_SPEC_CHOICES"):
        next(ds.choices())
    with pytest.raises(ChoiceSpaceTooLarge):
        _ = ds.choice_list
    assert built == []


@pytest.mark.parametrize("command", [["solve", "--time-limit", "5"], ["ranges", "--time-limit", "5"],
                                     ["pareto", "--time-limit", "5"]])
def test_exact_commands_refuse_in_one_line(command):
    res = CliRunner().invoke(main, [command[0], str(CASES / "four-8-node-trees.toml"), *command[1:]])
    assert res.exit_code == 2, (res.output, res.exception)
    err = res.stderr
    assert err.count("\n") == 1 and err.startswith("error: drafters: ") and "Traceback" not in err, err
    assert f"{EXPECTED['four-8-node-trees']:,} speculation choices" in err and "10,000" in err


def test_device_pairs_are_bounded(monkeypatch):
    """Choices times device-count tuples (CUT-3 prices each pair) have their own limit."""
    sc = load_scenario(builtin_sets()["paper-full"] / "palm-62b-full-b1.toml")
    ds = DesignSpace(sc, scenario_catalog(sc))
    n, tuples = ds.choice_count(), ds.device_tuple_count()
    assert n * tuples <= MAX_CHOICE_DEVICE_PAIRS and tuples > 1
    monkeypatch.setattr(space_mod, "MAX_CHOICE_DEVICE_PAIRS", n * tuples - 1)
    with pytest.raises(ChoiceSpaceTooLarge, match="MAX_CHOICE_DEVICE_PAIRS"):
        ds.check_choice_count()


def test_every_builtin_scenario_is_within_the_limits():
    """The count equals the listing, and every built-in scenario (deep trees: by tree classes) fits."""
    for folder in builtin_sets().values():
        for path in sorted(folder.glob("*.toml")):
            if is_mix_file(path):  # a mix's cells are scenarios of its base, checked as such
                continue
            sc = load_scenario(path)
            if not sc.drafters:
                continue
            ds = DesignSpace(sc, scenario_catalog(sc))
            try:
                n = ds.check_choice_count()
            except TreeMenuTooLarge:  # one drafter beyond its exact menu: the column solver's case
                assert len(sc.drafters) == 1, path
                continue
            assert n == len(ds.choice_list), path
            assert n * ds.device_tuple_count() <= MAX_CHOICE_DEVICE_PAIRS, path
            if len(sc.drafters) > 1:
                assert math.prod(len(o) for o in ds.drafter_options) <= MAX_SPEC_CHOICES, path
