"""The canonical mix optimum [MIX-13]: after the mix objective, ties are broken exactly and
lexicographically (the other metric's weighted mean, the shared hardware's PIM units and devices, a fixed
order of the architectures and each cell's decisions), so the same mix gives the same design whatever the
workers.

The oracle enumerates every design of every cell (`brute.every_design`, no pruning) and, per shared
hardware, finds the lexicographic minimum of (weighted objective units, weighted other-metric units, the
keys) among the combinations that pass the tensor-copy rule, at the scales the solve reports.
"""

from __future__ import annotations

import dataclasses
import heapq
from pathlib import Path

import pytest
from test_mix import COUPLED  # one verifier on one GDDR device: the tensor-copy rule binds

from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.mix import check_mix_capacity
from specpim_cp.problem.mix import load_mix
from specpim_cp.problem.scenario import scenario_catalog
from specpim_cp.solvers.brute import every_design
from specpim_cp.solvers.deadline import Deadline
from specpim_cp.solvers.exact import SolverOptions
from specpim_cp.solvers.mix import cpsat, solve_mix
from specpim_cp.solvers.mix.canonical import mix_tie_keys
from specpim_cp.solvers.mix.cpsat_model import MixModel, cell_units
from specpim_cp.solvers.mix.records import MixOptions
from specpim_cp.views.mix import format_mix
from specpim_cp.views.tables import tie_break_line

#: A verifier and a drafter on HBM with two PIM units, attention offload only (2,048 designs per cell).
PAIR = """
name = "pair"
batch_size = 1
prompt_tokens = 64
generated_tokens = 32
memory_types = ["hbm"]
max_draft_length = 1

[verifier]
model = "gpt2-large"
devices = 1

[[drafters]]
model = "gpt2-small"
devices = 1
acceptance = 0.7

[space]
share_levels = 1
mapping = "attention-offload"
pim_units = 2

[[mix.cells]]
batch_size = 1
weight = 2

[[mix.cells]]
batch_size = 4
weight = 1
"""
#: A verifier alone on HBM, PIM units free, host-only mapping: every PIM share gives the same latency and
#: energy (a PIM-units tie).
SOLO = PAIR.replace('[[drafters]]\nmodel = "gpt2-small"\ndevices = 1\nacceptance = 0.7\n', "").replace(
    "max_draft_length = 1\n", "").replace("pim_units = 2\n", "").replace('"attention-offload"', '"host-only"')
OPTIONS = MixOptions(SolverOptions(30, deterministic=True), cell_time_limit_s=30)
OTHER = {"latency": "energy", "energy": "latency"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("canonical-mixes")
    (d / "coupled.toml").write_text(COUPLED)
    (d / "pair.toml").write_text(PAIR)
    (d / "solo.toml").write_text(SOLO)
    return d


def _signature(design) -> tuple:
    """What the tensor-copy rule reads of a cell's design: every model's layouts and its staging (draft2 model)."""
    return tuple((md.arch, md.staging, tuple(sorted((op, p.layout) for op, p in md.placement.items())))
                 for _, md in design.models())


def oracle(mix, objective: str, scales: dict[str, int]):
    """The lexicographic minimum over every mix design of (sum W a, sum W b, hardware keys, each cell's
    keys), a and b the cells' objective and other-metric units at the solve's scales, and its designs.

    With the hardware and every cell's layouts fixed, the cells are independent (the tensor-copy rule
    reads only the layouts), so each cell's lexicographic minimum of (a, b, keys) within its layout
    signature is its part of the minimum; the combinations of signatures are enumerated."""
    catalog = scenario_catalog(mix.base)
    evaluators = [Evaluator(c.scenario, catalog) for c in mix.cells]
    mm = MixModel(mix, catalog, evaluators)
    keys = mix_tie_keys(mm)
    hw = [k for k in keys if not k.name.startswith("cell[")]
    w = mm.weights
    per_cell: list[dict] = []
    for c, cell in enumerate(mix.cells):
        own = [k for k in keys if k.name.startswith(f"cell[{c}].")]
        best: dict = {}
        for e in every_design(cell.scenario, catalog):
            archs = tuple(md.arch for _, md in e.design.models())
            row = (cell_units(e.metrics, objective, scales[objective]),
                   cell_units(e.metrics, OTHER[objective], scales[OTHER[objective]]),
                   tuple(mm.cells[c].tie_key_values(e.design, own)), e.design)
            slot = best.setdefault(archs, {})
            sig = _signature(e.design)
            if sig not in slot or row[:3] < slot[sig][:3]:
                slot[sig] = row
        per_cell.append(best)
    found = None
    for archs in set.intersection(*(set(r) for r in per_cell)):
        lists = [sorted(r[archs].values(), key=lambda t: t[:3]) for r in per_cell]
        head = tuple(mm.cells[0].tie_key_values(lists[0][0][3], hw))  # depends on the architectures alone

        def key_of(idx: tuple[int, ...], lists=lists, head=head) -> tuple:
            rows = [lst[i] for lst, i in zip(lists, idx, strict=True)]
            return (sum(wc * t[0] for wc, t in zip(w, rows, strict=True)),
                    sum(wc * t[1] for wc, t in zip(w, rows, strict=True)), head, *(t[2] for t in rows))

        # the key never falls when one cell moves down its sorted list, so the combinations leave the heap
        # in key order: the first that fits is this hardware's minimum
        start = (0,) * len(lists)
        heap, seen = [(key_of(start), start)], {start}
        while heap:
            key, idx = heapq.heappop(heap)
            if found is not None and key >= found[0]:
                break
            designs = [lst[i][3] for lst, i in zip(lists, idx, strict=True)]
            try:
                check_mix_capacity(mix, evaluators, designs)
            except ScenarioError:
                for c in range(len(lists)):
                    nxt = idx[:c] + (idx[c] + 1,) + idx[c + 1:]
                    if nxt[c] < len(lists[c]) and nxt not in seen:
                        seen.add(nxt)
                        heapq.heappush(heap, (key_of(nxt), nxt))
                continue
            found = (key, designs)
            break
    return found


@pytest.mark.parametrize(("stem", "objective"), [("coupled", "latency"), ("coupled", "energy"),
                                                 ("pair", "latency"), ("pair", "energy"), ("solo", "latency")])
def test_canonical_mix_equals_the_lexicographic_minimum(folder, stem, objective):
    mix = load_mix(folder / f"{stem}.toml")
    res = solve_mix(mix, objective, OPTIONS)
    extra = res.report.extra
    assert res.report.status == "OPTIMAL" and extra["canonical"], extra.get("tie_break_note")
    assert [lv["level"] for lv in extra["tie_break"]] == [objective, OTHER[objective], "pim_units", "devices", "order"]
    assert all(lv["status"] == "OPTIMAL" for lv in extra["tie_break"])
    key, designs = oracle(mix, objective, extra["tie_break_scales"])
    assert [d.key() for d in res.designs] == [d.key() for d in designs]
    assert extra["tie_break_units"] == {objective: key[0], OTHER[objective]: key[1]}


def test_same_design_for_any_workers_and_seed(folder):
    mix = load_mix(folder / "pair.toml")
    one = solve_mix(mix, "latency", OPTIONS)
    two = solve_mix(mix, "latency", MixOptions(SolverOptions(30, workers=2, seed=7), cell_time_limit_s=30))
    assert one.report.extra["canonical"] and two.report.extra["canonical"]
    assert [d.key() for d in one.designs] == [d.key() for d in two.designs]


def test_pim_ties_are_reported_and_broken_towards_fewer_pim_units(folder):
    """Host-only on one HBM device: every PIM share gives the same latency and energy, so the canonical
    design takes no PIM units and the report names the tie."""
    res = solve_mix(load_mix(folder / "solo.toml"), "latency", OPTIONS)
    levels = {lv["level"]: lv for lv in res.report.extra["tie_break"]}
    assert levels["latency"]["ties"] and levels["energy"]["ties"]
    assert levels["pim_units"] == {"level": "pim_units", "status": "OPTIMAL", "ties": False, "value": 0}
    assert res.designs[0].verifier.pim_units == 0
    assert tie_break_line(res.report.extra) == ("tie-break: other designs tie on latency, energy; canonical by "
                                                "PIM units")
    assert "tie-break: other designs tie on latency, energy" in format_mix(res, scenario_catalog(res.mix.base))


def test_regret_levels_and_unproven_tie_breaks(folder, monkeypatch):
    """Regret has its own levels; on the mix model (`--method cp-sat`) a tie-break cut short by the time
    limit keeps the proven optimum and says it is not canonical; an unproven mix objective is not
    tie-broken at all."""
    mix = load_mix(folder / "coupled.toml")
    res = solve_mix(mix, "regret", OPTIONS)
    names = [lv["level"] for lv in res.report.extra["tie_break"]]
    assert names == ["regret", "latency", "energy", "pim_units", "devices", "order"]
    assert res.report.extra["canonical"]
    # a deterministic limit that stops the tie-break; the command's wall-clock deadline (which a deterministic
    # limit in seconds also sets) far away, so only the deterministic limit bites on any machine
    tiny = SolverOptions(0.001, deterministic=True, deadline=Deadline.after(600))
    short = solve_mix(mix, "latency", MixOptions(tiny, cell_time_limit_s=30, method="cp-sat"))
    assert short.report.status == "OPTIMAL" and short.report.extra["canonical"] is False
    assert "time limit" in short.report.extra["tie_break_note"]
    assert "SKIPPED" in [lv["status"] for lv in short.report.extra["tie_break"]]

    real = cpsat._solve_mix_model
    monkeypatch.setattr(cpsat, "_solve_mix_model",
                        lambda *a, **k: dataclasses.replace(real(*a, **k), status="FEASIBLE"))
    unproven = solve_mix(mix, "latency", dataclasses.replace(OPTIONS, method="cp-sat"))
    assert unproven.report.status == "FEASIBLE"
    assert unproven.report.extra["tie_break"] == [] and unproven.report.extra["canonical"] is False
    assert unproven.report.extra["tie_break_note"].startswith("skipped: the mix objective is not proven")
