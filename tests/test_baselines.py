"""The paper's fixed PIM recipes (formulations/baselines.md).

- attention-offload: the host layouts are searched exhaustively against both sides' capacity, so
  PaLM-62B (whose FC weights fit neither side alone) gets a layout, the fastest feasible one;
- FC-offload as SpecPIM ran it: identical half-PIM devices, the FC weights the PIM units cannot hold
  moved over the external bus every pass (SPILL-1, SPILL-2), priced by the evaluator and shown in its
  breakdown; a spilled design is outside every optimizer's (capacity-checked) space;
- "FC-offload (fit)": the former recipe (the fewest PIM units that hold the FC weights), kept by name.
"""

from __future__ import annotations

import itertools
import json
import math
from functools import cache

import pytest
from click.testing import CliRunner

from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import GIB_IN_KIB, Evaluator
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.design import Design, Placement, parse_design
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import load_scenario
from specpim_cp.problem.space import DesignSpace, draft_length_options
from specpim_cp.solvers import baselines
from specpim_cp.views.tables import format_baselines, format_evaluation

PALM = [f"paper/palm-62b-b{b}" for b in (1, 2, 4, 8)]
OPT13_B1 = "paper/opt-13b-b1"


@cache
def _scenario(name: str):
    return load_scenario(resolve_scenario_path(name))


@cache
def _results(name: str) -> dict[str, baselines.BaselineResult]:
    return {r.name: r for r in baselines.run_baselines(_scenario(name))}


def _with_layouts(md, layouts: dict[str, str]):
    """`md` with its host operators' tensors laid out as given."""
    place = dict(md.placement)
    place.update({op: Placement(engine="host", share=0, layout=lay) for op, lay in layouts.items()})
    return md.model_copy(update={"placement": place})


# ------------------------------------------------------------------------------------------------
# attention-offload: the layout search
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", PALM)
def test_attention_offload_finds_a_palm_layout_within_both_capacities(name):
    r = _results(name)["attention-offload"]
    assert r.evaluation is not None, r.error
    for label, mb in r.evaluation.breakdown.models():
        cap = mb.capacity
        assert mb.memory_type == "hbm" and mb.pim_units == 4, label  # identical half-PIM devices
        assert cap.pim_need_kib <= cap.pim_capacity_kib and cap.normal_need_kib <= cap.normal_capacity_kib, label
        assert cap.spill_kib == 0 and mb.spill_ns == 0, label
    for _, md in r.evaluation.design.models():
        assert not md.spill
        assert {op for op, p in md.placement.items() if p.engine == "pim"} == {"score", "context"}
    # the verifier's FC weights fit neither side alone: all in the normal units (the former search's
    # first layout) overflows them, all spread overflows the PIM units
    sc = _scenario(name)
    ev = Evaluator(sc)
    v = r.evaluation.design.verifier
    host_ops = [op for op in PLACEABLE_OPS if v.placement[op].engine == "host"]
    normal = ev.capacity(_with_layouts(v, dict.fromkeys(host_ops, "normal")))
    spread = ev.capacity(_with_layouts(v, dict.fromkeys(host_ops, "spread")))
    assert normal.normal_need_kib > normal.normal_capacity_kib
    assert spread.pim_need_kib > spread.pim_capacity_kib


@pytest.mark.parametrize("name", PALM)
def test_attention_offload_is_the_fastest_feasible_layout(name):
    """Exhaustive: every model's 2^5 host layouts, each with every draft combination (the other models
    as the baseline laid them out); the infeasible ones are refused by the evaluator, and no feasible
    one beats the baseline."""
    sc = _scenario(name)
    ev = Evaluator(sc)
    best = _results(name)["attention-offload"].evaluation
    value = best.metrics.objective(sc.objective)
    drafts = [draft_length_options(sc, i) for i in range(len(sc.drafters))]
    models = [md for _, md in best.design.models()]
    host_ops = [op for op in PLACEABLE_OPS if models[0].placement[op].engine == "host"]
    assert len(host_ops) == 5
    feasible = infeasible = 0
    for j in range(len(models)):
        for layouts in itertools.product(("normal", "spread"), repeat=len(host_ops)):
            changed = list(models)
            changed[j] = _with_layouts(models[j], dict(zip(host_ops, layouts, strict=True)))
            if not ev.capacity(changed[j]).holds:
                infeasible += 1
                continue
            feasible += 1
            for gammas in itertools.product(*drafts):
                ds = [d.model_copy(update={"draft_length": g}) for d, g in zip(changed[1:], gammas, strict=True)]
                design = Design(pipeline=False, verifier=changed[0], drafters=ds)
                assert ev.metrics(design).objective(sc.objective) >= value, (j, layouts, gammas)
    assert feasible >= len(models) and infeasible > 0


def test_attention_offload_proves_that_no_layout_fits():
    """PaLM-62B at batch 32: 119.4 GiB of tensors for 120 GiB, and no assignment of whole tensors to
    normal or spread fits both sides: the enumeration says so, with the least shortfall."""
    r = _results("paper-full/palm-62b-full-b32")["attention-offload"]
    assert r.evaluation is None
    assert "32 host layouts: none fits" in r.error and "short by" in r.error


# ------------------------------------------------------------------------------------------------
# FC-offload as SpecPIM ran it: half-PIM devices and a spill every pass
# ------------------------------------------------------------------------------------------------
def test_fc_offload_spill_is_priced_as_hand_computed():
    """OPT-13B b1 on 2 half-PIM A100-40GB devices. FC weights (40 layers of qkv 3d^2, o_proj d^2, ffn
    2df, and the LM head dV, 2 bytes each) in KiB, minus the PIM units' 2 x 5 stacks x 4 dies x 512 MiB,
    is the overflow; every verifier pass moves it twice (normal units -> host -> PIM units) at the
    devices' external bandwidth, 2 x 5 x 307.2 GB/s, and 5.47 pJ/bit."""
    sc = _scenario(OPT13_B1)
    ev = Evaluator(sc)
    spec = ev.catalog.models["opt-13b"]
    assert (spec.layers, spec.hidden, spec.ffn, spec.vocab, spec.bytes_per_param) == (40, 5120, 20480, 50272, 2)
    d, f = 5120, 20480
    fc_kib = (40 * (4 * d * d + 2 * d * f) + d * 50272) * 2 // 1024
    pim_kib = 2 * 5 * 4 * 512 * 1024
    overflow_kib = fc_kib - pim_kib
    assert overflow_kib == 4_107_200  # 3.92 GiB
    moved = 2 * overflow_kib * 1024
    spill_ns = math.ceil(moved / (2 * 5 * 307.2))
    spill_nj = math.ceil(moved * 8 * 5.47 / 1000)

    r = _results(OPT13_B1)["FC-offload"]
    ev_fc = r.evaluation
    v = ev_fc.design.verifier
    assert v.spill and not ev_fc.design.drafters[0].spill  # only the model that overflows spills
    for _, md in ev_fc.design.models():
        assert md.pim_units == 4
        assert {op for op, p in md.placement.items() if p.engine == "pim"} == {
            "qkv", "o_proj", "ffn_up", "ffn_down", "lm_head"}
    mb = ev_fc.breakdown.verifier
    assert mb.capacity.pim_need_kib == fc_kib and mb.capacity.spill_kib == overflow_kib
    assert mb.capacity.normal_need_kib + overflow_kib <= mb.capacity.normal_capacity_kib  # SPILL-1
    assert mb.spill_ns == spill_ns  # SPILL-2: 2,738 us per pass
    assert mb.spill_share == pytest.approx(spill_ns / mb.pass_time_ns)
    unspilled = ev.pass_price(v.model_copy(update={"spill": False}), mb.pass_tokens)
    assert mb.pass_time_ns - unspilled.time_ns == spill_ns
    assert mb.pass_energy_nj - unspilled.energy_nj == spill_nj
    transfer = list(ev.costs.spill_cost(v.arch, overflow_kib).parts_nj)
    assert transfer == [0, 0, 0, 0, spill_nj]  # the "transfer" energy component

    # the evaluator's breakdown shows it: JSON, text, and the baselines' outputs
    out = ev_fc.as_dict()["breakdown"]["verifier"]
    assert out["spill_ns"] == spill_ns and out["capacity"]["spill_gib"] == overflow_kib / GIB_IN_KIB
    assert out["spill_share_of_pass"] == pytest.approx(spill_ns / mb.pass_time_ns)
    assert ev_fc.as_dict()["breakdown"]["drafters"][0]["spill_ns"] == 0
    assert "spill" in format_evaluation(sc, ev_fc) and "verifier 3.92 GiB, 2,738.1 us per pass" in format_evaluation(
        sc, ev_fc)
    assert r.as_dict()["spill"] == [{"label": "verifier", "model": "opt-13b", "spill_gib": overflow_kib / GIB_IN_KIB,
                                     "spill_ns": spill_ns, "pass_time_ns": mb.pass_time_ns,
                                     "spill_share_of_pass": spill_ns / mb.pass_time_ns}]
    assert "verifier 3.92 GiB 2,738 us/pass" in format_baselines(sc, list(_results(OPT13_B1).values()))


def test_fc_offload_fit_keeps_the_former_recipe():
    r = _results(OPT13_B1)["FC-offload (fit)"]
    assert r.evaluation is not None
    assert r.evaluation.metrics.latency_ns_per_token / 1e3 == pytest.approx(4122.486, rel=1e-4)
    for _, md in r.evaluation.design.models():
        assert md.pim_units == 5 and not md.spill  # the fewest PIM dies per stack above half that hold the FC
    assert r.as_dict()["spill"] == []
    paper = _results(OPT13_B1)["FC-offload"].evaluation.metrics.latency_ns_per_token
    assert paper > r.evaluation.metrics.latency_ns_per_token  # 3.92 GiB moved per verification pass


def test_a_spilled_design_is_outside_the_optimizers_space_but_priced():
    sc = _scenario(OPT13_B1)
    spilled = _results(OPT13_B1)["FC-offload"].evaluation
    bad = DesignSpace(sc, Evaluator(sc).catalog).violations(spilled.design)
    assert bad and "design.verifier.spill" in bad[0]
    assert DesignSpace.free(sc, Evaluator(sc).catalog).violations(spilled.design) == []
    # JSON: the marker is written only when set, and reads back to the same price
    data = json.loads(spilled.design.to_json())
    assert data["verifier"]["spill"] is True and "spill" not in data["drafters"][0]
    again = parse_design(data)
    assert again == spilled.design and Evaluator(sc).evaluate(again).metrics == spilled.metrics
    # without the marker the same design does not fit: it is capacity-checked like every other design
    plain = again.model_copy(update={"verifier": again.verifier.model_copy(update={"spill": False})})
    assert "spill" not in json.loads(plain.to_json())["verifier"]
    with pytest.raises(ScenarioError, match="short by"):
        Evaluator(sc).evaluate(plain)


def test_cli_baselines_json_prices_both_recipes_for_palm():
    res = CliRunner().invoke(main, ["baselines", "paper/palm-62b-b1", "--json"])
    assert res.exit_code == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    fc, att = rows["FC-offload"], rows["attention-offload"]
    assert fc["metrics"] is not None and att["metrics"] is not None
    (spill,) = fc["spill"]
    assert spill["label"] == "verifier" and spill["spill_gib"] == pytest.approx(76.41, abs=0.01)
    assert fc["metrics"]["breakdown"]["verifier"]["spill_ns"] == spill["spill_ns"] > 0
    assert fc["design"]["verifier"]["spill"] is True
    assert att["spill"] == [] and "spill" not in att["design"]["verifier"]
    assert rows["FC-offload (fit)"]["metrics"] is None and "short by" in rows["FC-offload (fit)"]["error"]
