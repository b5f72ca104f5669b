"""Physical facts the cost model and evaluator must respect (DESIGN.md sections 2-5, HARDWARE.md).

Every test checks a quantity against an independent physical expectation (a roofline, a linear law,
a capacity sum, a hand-computed or brute-forced schedule), not just the shape of an output.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import re
from pathlib import Path

import networkx as nx
import pytest
from helpers import build_design

from specpim_cp.baselines import gpu_ar
from specpim_cp.catalog import default_catalog
from specpim_cp.costs import KIB, CostModel
from specpim_cp.design import ArchConfig, Placement
from specpim_cp.errors import ScenarioError
from specpim_cp.evaluate import GIB_IN_KIB, Evaluator
from specpim_cp.graph import FC_OPS, LAYER_OPS, PLACEABLE_OPS, layer_graph
from specpim_cp.recipes import rule_placement
from specpim_cp.scenario import load_scenario, parse_scenario
from specpim_cp.schedule import layer_schedule, makespan_lower_bound

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
CAT = default_catalog()
GIB = 1 << 30


def _scenario(verifier: str, devices: int, drafters: tuple[tuple[str, int], ...] = (), **extra):
    data = {
        "name": "physics",
        "batch_size": 1,
        "prompt_tokens": 256,
        "generated_tokens": 128,
        "verifier": {"model": verifier, "devices": devices},
        "drafters": [{"model": m, "devices": n} for m, n in drafters],
    }
    data.update(extra)
    return parse_scenario(data)


def _ar_design(sc, arch: ArchConfig, rule: str = "host-only", placement=None):
    place = placement if placement is not None else rule_placement(rule, sc.space.share_levels)
    return build_design(sc, [arch], [place], [], [], False)


# ------------------------------------------------------------------------------------------------
# GPU-AR against the memory roofline
# ------------------------------------------------------------------------------------------------
def _roofline_ns(sc) -> float:
    """Every weight byte of a device read once per token at the device's full external bandwidth."""
    model = CAT.models[sc.verifier.model]
    mem = CAT.memory("hbm")
    device_bw_gbps = mem.groups * mem.group_external_bandwidth_gbps  # bytes per ns
    weights_per_device = model.parameter_count() * 2 / sc.verifier.devices
    return weights_per_device / device_bw_gbps


@pytest.mark.parametrize("name", ["opt-13b", "llama-13b", "palm-8b"])
def test_gpu_ar_between_roofline_and_twice_roofline(name):
    sc = load_scenario(EXAMPLES / f"{name}.toml")
    ev = gpu_ar(sc)
    assert ev.metrics.tokens_per_round == 1.0
    roof = _roofline_ns(sc)
    lat = ev.metrics.latency_ns_per_token
    assert roof <= lat <= 2 * roof, (
        f"{name}: latency {lat:.0f} ns vs roofline {roof:.0f} ns ({lat / roof:.2f}x)"
    )


def test_gpu_ar_llama_32b_four_devices_compute_part_within_roofline_band():
    """LLaMA-32.5B on 4 devices: the time outside all-reduces is within [1, 2] x the roofline."""
    sc = load_scenario(EXAMPLES / "llama-32.5b-three-drafters.toml")
    ev = gpu_ar(sc)
    b = ev.breakdown.as_dict()["verifier"]
    model = CAT.models[sc.verifier.model]
    allreduce_total = model.layers * 2 * b["allreduce_ns"]  # sequential block: 2 all-reduces per layer
    assert b["allreduce_ns"] > 0
    roof = _roofline_ns(sc)
    lat = ev.metrics.latency_ns_per_token
    assert roof <= lat - allreduce_total <= 2 * roof


@pytest.mark.xfail(
    strict=True,
    reason=(
        "FINDING (measured data, not a code bug): the 4-worker A100 NVLink all-reduce table has a ~60-66 us "
        "floor for small messages, so 120 all-reduces of 6656 elements add 7.9 ms and GPU-AR on LLaMA-32.5B "
        "x4 is 2.19x the weight roofline"
    ),
)
def test_gpu_ar_llama_32b_four_devices_within_twice_roofline():
    sc = load_scenario(EXAMPLES / "llama-32.5b-three-drafters.toml")
    lat = gpu_ar(sc).metrics.latency_ns_per_token
    roof = _roofline_ns(sc)
    assert roof <= lat <= 2 * roof, f"{lat / roof:.2f}x roofline"


# ------------------------------------------------------------------------------------------------
# PIM GEMV: linear in tokens (weights re-streamed per token); host FC: flat at small token counts
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mem,k", [("hbm", 4), ("hbm", 8), ("gddr", 2), ("gddr", 4)])
@pytest.mark.parametrize("op", ["qkv", "o_proj", "ffn_up", "ffn_down", "lm_head"])
def test_pim_gemv_time_linear_in_tokens(mem, k, op):
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    arch = ArchConfig(mem, k, 2)
    full = sc.space.share_levels
    ts = (1, 2, 4, 8, 16)
    times = [cm.op_cost(model, op, "pim", full, arch, t).time_ns for t in ts]
    slopes = [(times[i + 1] - times[i]) / (ts[i + 1] - ts[i]) for i in range(len(ts) - 1)]
    assert slopes[0] > 0
    for s in slopes[1:]:  # constant slope, up to the 1 ns rounding of each value
        assert abs(s - slopes[0]) <= 2.0
    intercept = times[0] - slopes[0]
    assert intercept >= CAT.memory(mem).pim_mode_switch_ns - 2
    # the slope is at least one full pass of the device's share of the weights at PIM bandwidth
    spec = cm.shapes(model)[op]
    weight_bytes_dev = spec.in_features * spec.out_features * 2 / 2
    pim_bw = cm.pim_lanes(arch) * CAT.memory(mem).pim_lane_bandwidth_gbps
    stream = weight_bytes_dev / pim_bw
    assert stream - 1 <= slopes[0] <= 1.25 * stream + 1


def test_pim_gemv_half_share_doubles_streaming_time():
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    arch = ArchConfig("hbm", 4, 2)
    full = sc.space.share_levels
    slope = {
        s: cm.op_cost(model, "ffn_up", "pim", s, arch, 9).time_ns
        - cm.op_cost(model, "ffn_up", "pim", s, arch, 1).time_ns
        for s in (full // 2, full)
    }
    assert 1.8 <= slope[full // 2] / slope[full] <= 2.0


@pytest.mark.parametrize("op", FC_OPS)
def test_host_fc_nearly_flat_in_tokens_while_pim_grows(op):
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    arch = ArchConfig("hbm", 4, 2)
    host = [cm.op_cost(model, op, "host", 0, arch, t).time_ns for t in range(1, 17)]
    assert all(b >= a for a, b in itertools.pairwise(host))  # never faster with more tokens
    assert max(host) <= 1.1 * min(host)  # memory-bound: 16 tokens cost about as much as 1
    pim = [cm.op_cost(model, op, "pim", 4, arch, t).time_ns for t in (1, 16)]
    assert pim[1] > 8 * pim[0] - 8 * CAT.memory("hbm").pim_mode_switch_ns


def test_pim_fc_dynamic_energy_cheaper_at_one_token_but_grows_with_tokens():
    """Internal PIM access costs ~3.5x less per bit than external, but is paid once per token."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    arch = ArchConfig("hbm", 4, 2)
    for op in FC_OPS:
        assert (
            cm.op_cost(model, op, "pim", 4, arch, 1).energy_nj
            < cm.op_cost(model, op, "host", 0, arch, 1).energy_nj
        )
        assert (
            cm.op_cost(model, op, "pim", 4, arch, 16).energy_nj
            > cm.op_cost(model, op, "host", 0, arch, 16).energy_nj
        )


# ------------------------------------------------------------------------------------------------
# Rule 2: host bandwidth shrinks as PIM units grow; PIM bandwidth grows
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mem", ["hbm", "gddr"])
@pytest.mark.parametrize("op", ["qkv", "score", "ffn_down", "lm_head"])
def test_rule2_host_slower_and_pim_faster_with_more_pim_units(mem, op):
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    m = CAT.memory(mem)
    units = m.units_per_group
    for k in range(units):
        expected_bw = m.groups * m.group_external_bandwidth_gbps * (units - k) / units
        assert cm.host_bandwidth_gbps(ArchConfig(mem, k, 2)) == pytest.approx(expected_bw)
    host = [cm.op_cost(model, op, "host", 0, ArchConfig(mem, k, 2), 1).time_ns for k in range(units)]
    pim = [cm.op_cost(model, op, "pim", 4, ArchConfig(mem, k, 2), 1).time_ns for k in range(1, units + 1)]
    assert all(b > a for a, b in itertools.pairwise(host)), host
    assert all(b < a for a, b in itertools.pairwise(pim)), pim
    assert cm.op_cost(model, op, "pim", 4, ArchConfig(mem, 0, 2), 1) is None


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
def test_rule2_all_units_pim_leaves_no_host(mem):
    sc = _scenario("opt-1.3b", 1)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-1.3b"]
    k = CAT.memory(mem).max_pim_units
    arch = ArchConfig(mem, k, 1)
    assert all(p.engine == "pim" for p in cm.placements(arch))
    assert len(cm.placements(arch)) == sc.space.share_levels
    assert ("host", 0) in [p.key for p in cm.placements(ArchConfig(mem, k - 1, 1))]
    assert cm.op_cost(model, "qkv", "host", 0, arch, 1) is None
    assert cm.capacity_kib(arch)[1] == 0
    ev = Evaluator(sc)
    all_pim = _ar_design(sc, arch, "all-pim")
    assert ev.evaluate(all_pim).metrics.round_time_ns > 0
    place = dict(rule_placement("all-pim", sc.space.share_levels))
    place["qkv"] = Placement(engine="host")
    with pytest.raises(ScenarioError, match=r"placement\.qkv: host is impossible: no normal memory"):
        ev.evaluate(_ar_design(sc, arch, placement=place))


# ------------------------------------------------------------------------------------------------
# Capacity and spill (rules 1 and 3)
# ------------------------------------------------------------------------------------------------
def test_capacity_shortfall_named_and_sized():
    sc = _scenario("opt-66b", 1)
    model = CAT.models["opt-66b"]
    with pytest.raises(ScenarioError, match="short by") as exc:
        Evaluator(sc).evaluate(_ar_design(sc, ArchConfig("hbm", 0, 1)))
    msg = str(exc.value)
    assert "verifier" in msg and "opt-66b" in msg
    kv = 2 * model.layers * sc.max_context * model.kv_dim * 2  # K and V, batch 1, FP16
    need_gib = (model.parameter_count() * 2 + kv) / GIB
    have_gib = 5 * 8 * 1  # 5 stacks x 8 dies x 1 GiB
    short = float(re.search(r"short by ([0-9.]+) GiB", msg).group(1))
    assert short == pytest.approx(need_gib - have_gib, abs=0.05)


def test_capacity_exact_boundary_total_fits_on_two_devices():
    sc = _scenario("opt-30b", 2)
    ev = Evaluator(sc)
    cap = ev.capacity(_ar_design(sc, ArchConfig("hbm", 0, 2)).verifier)
    model = CAT.models["opt-30b"]
    kv = 2 * model.layers * sc.max_context * model.kv_dim * 2
    assert cap.host_need_kib * KIB == pytest.approx(model.parameter_count() * 2 + kv, rel=1e-6)
    assert cap.normal_capacity_kib == 2 * 40 * GIB_IN_KIB
    assert ev.evaluate(_ar_design(sc, ArchConfig("hbm", 0, 2))).metrics.round_time_ns > 0
    with pytest.raises(ScenarioError, match="short by"):
        Evaluator(_scenario("opt-30b", 1)).evaluate(
            _ar_design(_scenario("opt-30b", 1), ArchConfig("hbm", 0, 1))
        )


def _big_pim_catalog():
    cat = default_catalog()
    hbm = dataclasses.replace(cat.memories["hbm"], pim_unit_capacity_mib=8192)
    return dataclasses.replace(cat, memories={**cat.memories, "hbm": hbm})


def test_spill_is_feasible_and_costs_shuffling_time():
    sc = _scenario("opt-13b", 2)
    arch = ArchConfig("hbm", 2, 2)  # PIM side: 2 x 5 x 2 x 0.5 GiB = 10 GiB < 24 GiB of FC weights
    design = _ar_design(sc, arch, "fc-offload")
    spilled = Evaluator(sc).evaluate(design)
    capb = spilled.breakdown.as_dict()["verifier"]["capacity"]
    assert capb["pim_capacity_gib"] == pytest.approx(10.0)
    assert capb["pim_need_gib"] > capb["pim_capacity_gib"]
    assert capb["spill_gib"] == pytest.approx(capb["pim_need_gib"] - capb["pim_capacity_gib"])
    assert capb["spill_gib"] > 0
    # the same design with PIM dies big enough: no spill, same everything else
    roomy = Evaluator(sc, _big_pim_catalog()).evaluate(design)
    assert roomy.breakdown.as_dict()["verifier"]["capacity"]["spill_gib"] == 0
    assert spilled.metrics.round_time_ns > roomy.metrics.round_time_ns
    spill_ns = spilled.breakdown.as_dict()["verifier"]["capacity"]["spill_ns_per_pass"]
    assert spilled.metrics.round_time_ns - roomy.metrics.round_time_ns == spill_ns
    # shuffling moves the spilled bytes out and back over both devices' external buses
    mem = CAT.memory("hbm")
    bus_gbps = 2 * mem.groups * mem.group_external_bandwidth_gbps
    assert spill_ns == pytest.approx(2 * capb["spill_gib"] * GIB / bus_gbps, rel=1e-3)
    assert spilled.metrics.energy_nj_per_round > roomy.metrics.energy_nj_per_round


# ------------------------------------------------------------------------------------------------
# Catalog data
# ------------------------------------------------------------------------------------------------
def test_released_models_parameter_count_matches_nominal():
    released = [m for m in CAT.models.values() if not m.source.startswith("CONSTRUCTED")]
    assert len(released) >= 15
    for m in released:
        assert m.parameter_count() == pytest.approx(m.nominal_params_b * 1e9, rel=0.05), m.name


def test_every_catalog_entry_has_a_source():
    for entry in list(CAT.hosts.values()) + list(CAT.memories.values()):
        sources = [v for v in entry.sources.values() if isinstance(v, str) and v.strip()]
        assert sources, f"{entry.name} has no source"
    for m in CAT.models.values():
        assert m.source.strip(), m.name
    for n in CAT.ngrams.values():
        assert n.source.strip(), n.name


def test_mqa_kv_cache_smaller_than_mha_of_same_hidden_size():
    sc = _scenario("palm-8b", 1)
    cm = CostModel(sc, CAT)
    palm = CAT.models["palm-8b"]
    llama = CAT.models["llama-7b"]
    assert palm.hidden == llama.hidden and palm.kv_heads == 1 < llama.kv_heads
    per_layer = {m.name: cm.tensor_bytes(m, 1).op_kib["score"] / m.layers for m in (palm, llama)}
    assert per_layer["palm-8b"] * 8 <= per_layer["llama-7b"]
    mha = dataclasses.replace(palm, name="palm-8b-mha", kv_heads=palm.heads)
    assert cm.tensor_bytes(mha, 1).op_kib["score"] == pytest.approx(
        palm.heads * cm.tensor_bytes(palm, 1).op_kib["score"], rel=1e-6
    )
    # K at max context, batch 1: layers x context x kv_dim x 2 bytes
    assert cm.tensor_bytes(palm, 1).op_kib["score"] * KIB == pytest.approx(
        palm.layers * sc.max_context * palm.kv_dim * 2, abs=KIB
    )


# ------------------------------------------------------------------------------------------------
# Tensor parallelism
# ------------------------------------------------------------------------------------------------
def test_tensor_parallel_two_devices_faster_per_op_and_adds_allreduce():
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    one, two = ArchConfig("hbm", 0, 1), ArchConfig("hbm", 0, 2)
    for op in PLACEABLE_OPS:
        t1 = cm.op_cost(model, op, "host", 0, one, 1).time_ns
        t2 = cm.op_cost(model, op, "host", 0, two, 1).time_ns
        assert t2 < t1, op
        if op in FC_OPS:  # memory-bound: half the bytes per device, so well under the 1-device time
            assert t2 < 0.75 * t1, op
    assert cm.allreduce_cost(model, one, 1).time_ns == 0
    assert cm.allreduce_cost(model, one, 1).energy_nj == 0
    assert cm.allreduce_cost(model, two, 1).time_ns > 0
    assert cm.allreduce_cost(model, two, 1).energy_nj > 0


def test_tensor_parallel_mqa_cache_is_replicated_not_split():
    sc = _scenario("palm-8b", 1)
    cm = CostModel(sc, CAT)
    palm = CAT.models["palm-8b"]
    for op in ("score", "context"):
        t1 = cm.op_cost(palm, op, "host", 0, ArchConfig("hbm", 0, 1), 1).time_ns
        t2 = cm.op_cost(palm, op, "host", 0, ArchConfig("hbm", 0, 2), 1).time_ns
        assert t2 == t1  # the single KV head is on both devices; each reads all of it
    assert cm.tensor_bytes(palm, 2).op_kib["score"] == pytest.approx(
        2 * cm.tensor_bytes(palm, 1).op_kib["score"], abs=1
    )


# ------------------------------------------------------------------------------------------------
# Layer schedule
# ------------------------------------------------------------------------------------------------
def _nodes(parallel: bool, spec: dict[str, tuple[str, int, int]]):
    names = list(LAYER_OPS) + (["allreduce"] if parallel else ["allreduce_attn", "allreduce_ffn"])
    return tuple((n, *spec.get(n, ("link", 0, 1))) for n in names)


def test_schedule_sequential_block_is_a_chain():
    spec = {
        "qkv": ("host", 5, 1),
        "score": ("pim", 3, 4),
        "context": ("pim", 2, 2),
        "o_proj": ("host", 4, 1),
        "allreduce_attn": ("link", 1, 1),
        "ffn_up": ("pim", 6, 1),
        "ffn_down": ("host", 7, 1),
        "allreduce_ffn": ("link", 1, 1),
    }
    makespan, starts = layer_schedule(False, _nodes(False, spec), 4)
    assert makespan == 5 + 3 + 2 + 4 + 1 + 6 + 7 + 1
    assert starts["score"] == 5 and starts["ffn_up"] == 15 and starts["allreduce_ffn"] == 28


@pytest.mark.parametrize("attn,ffn", [((5, 3, 3, 4), (10, 8)), ((9, 6, 6, 9), (10, 8))])
def test_schedule_palm_parallel_block_overlaps_host_ffn_and_pim_attention(attn, ffn):
    spec = {op: ("pim", d, 4) for op, d in zip(("qkv", "score", "context", "o_proj"), attn)}
    spec.update({op: ("host", d, 1) for op, d in zip(("ffn_up", "ffn_down"), ffn)})
    spec["allreduce"] = ("link", 2, 1)
    makespan, starts = layer_schedule(True, _nodes(True, spec), 4)
    assert makespan == max(sum(attn), sum(ffn)) + 2
    assert starts["qkv"] == 0 and starts["ffn_up"] == 0


def test_schedule_parallel_block_on_one_engine_serialises():
    all_host = {op: ("host", d, 1) for op, d in zip(LAYER_OPS, (5, 3, 3, 4, 10, 8))}
    assert layer_schedule(True, _nodes(True, all_host), 4)[0] == 33
    all_pim_full = {op: ("pim", d, 4) for op, d in zip(LAYER_OPS, (5, 3, 3, 4, 10, 8))}
    assert layer_schedule(True, _nodes(True, all_pim_full), 4)[0] == 33


@pytest.mark.parametrize("shares,expected", [((2, 2), 14), ((1, 3), 14), ((3, 3), 21), ((4, 1), 21)])
def test_schedule_pim_shares_are_cumulative(shares, expected):
    # qkv and ffn_up on PIM (10 ns each) on the two branches; the rest is on the host (1 ns each)
    spec = {"qkv": ("pim", 10, shares[0]), "ffn_up": ("pim", 10, shares[1])}
    spec.update({op: ("host", 1, 1) for op in ("score", "context", "o_proj", "ffn_down")})
    makespan, starts = layer_schedule(True, _nodes(True, spec), 4)
    assert makespan == expected
    if expected == 14:
        assert starts["qkv"] == starts["ffn_up"] == 0
    else:
        assert abs(starts["qkv"] - starts["ffn_up"]) >= 10


def _brute_force_makespan(parallel: bool, nodes, cap: int) -> int:
    """Minimum makespan over all integer start times (branch and bound), unit-time resource check."""
    g = nx.DiGraph(layer_graph(CAT.models["palm-8b" if parallel else "opt-13b"]))
    info = {n: (r, d, q) for n, r, d, q in nodes}
    order = list(nx.topological_sort(g))
    horizon = sum(d for _, d, _ in info.values())
    caps = {"host": 1, "link": 1, "pim": cap}
    tail = {}
    for n in reversed(order):
        tail[n] = info[n][1] + max((tail[s] for s in g.successors(n)), default=0)
    load = {r: [0] * (horizon + 1) for r in caps}
    end: dict[str, int] = {}
    best = [horizon]

    def place(i: int, cur: int) -> None:
        if i == len(order):
            best[0] = min(best[0], cur)
            return
        n = order[i]
        res, dur, dem = info[n]
        ready = max((end[p] for p in g.predecessors(n)), default=0)
        for t in range(ready, horizon - dur + 1):
            if t + tail[n] >= best[0]:
                break
            if any(load[res][u] + dem > caps[res] for u in range(t, t + dur)):
                continue
            for u in range(t, t + dur):
                load[res][u] += dem
            end[n] = t + dur
            place(i + 1, max(cur, t + dur))
            for u in range(t, t + dur):
                load[res][u] -= dem
            del end[n]

    place(0, 0)
    return best[0]


@pytest.mark.parametrize("parallel", [True, False])
def test_schedule_matches_brute_force_on_random_tiny_instances(parallel):
    rng = random.Random(20240501 + parallel)
    names = list(LAYER_OPS) + (["allreduce"] if parallel else ["allreduce_attn", "allreduce_ffn"])
    for _ in range(40):
        cap = rng.choice((2, 3, 4))
        nodes = []
        for n in names:
            if n.startswith("allreduce"):
                nodes.append((n, "link", rng.randint(0, 2), 1))
            elif rng.random() < 0.5:
                nodes.append((n, "host", rng.randint(1, 4), 1))
            else:
                nodes.append((n, "pim", rng.randint(1, 4), rng.randint(1, cap)))
        nodes = tuple(nodes)
        makespan, starts = layer_schedule(parallel, nodes, cap)
        assert makespan == _brute_force_makespan(parallel, nodes, cap), nodes
        # the returned start times are a feasible schedule of that makespan
        info = {n: (r, d, q) for n, r, d, q in nodes}
        g = layer_graph(CAT.models["palm-8b" if parallel else "opt-13b"])
        for u, v in g.edges:
            assert starts[v] >= starts[u] + info[u][1]
        assert max(starts[n] + info[n][1] for n in info) == makespan
        for res, c in (("host", 1), ("link", 1), ("pim", cap)):
            for t in range(makespan):
                assert (
                    sum(q for n, (r, d, q) in info.items() if r == res and starts[n] <= t < starts[n] + d)
                    <= c
                )
        durations = {n: d for n, (_, d, _) in info.items()}
        assert makespan_lower_bound(CAT.models["palm-8b" if parallel else "opt-13b"], durations) <= makespan


def test_evaluator_palm_all_host_layer_serialises_on_the_host():
    sc = load_scenario(EXAMPLES / "palm-8b.toml")
    b = gpu_ar(sc).breakdown.as_dict()["verifier"]
    host_sum = sum(b["operators"][op]["time_ns"] for op in LAYER_OPS)
    assert b["allreduce_ns"] == 0  # one device
    assert b["layer_makespan_ns"] == host_sum


def test_evaluator_sequential_all_host_layer_is_sum_of_ops():
    sc = load_scenario(EXAMPLES / "opt-13b.toml")
    b = gpu_ar(sc).breakdown.as_dict()["verifier"]
    host_sum = sum(b["operators"][op]["time_ns"] for op in LAYER_OPS)
    assert b["layer_makespan_ns"] == host_sum + 2 * b["allreduce_ns"]
    model = CAT.models["opt-13b"]
    assert b["pass_time_ns"] == model.layers * b["layer_makespan_ns"] + b["operators"]["lm_head"]["time_ns"]


def test_evaluator_palm_pim_attention_overlaps_host_ffn():
    sc = _scenario("palm-8b", 1)
    share = sc.space.share_levels
    place = {
        op: Placement(engine="pim", share=share)
        if op in ("qkv", "score", "context", "o_proj")
        else Placement(engine="host")
        for op in PLACEABLE_OPS
    }
    b = Evaluator(sc).evaluate(_ar_design(sc, ArchConfig("hbm", 4, 1), placement=place)).breakdown.as_dict()["verifier"]
    t = {op: b["operators"][op]["time_ns"] for op in LAYER_OPS}
    attn = t["qkv"] + t["score"] + t["context"] + t["o_proj"]
    ffn = t["ffn_up"] + t["ffn_down"]
    assert b["layer_makespan_ns"] == max(attn, ffn)
    assert b["layer_makespan_ns"] < attn + ffn


# ------------------------------------------------------------------------------------------------
# Energy
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "rule,k,pipeline", [("host-only", 0, False), ("fc-offload", 4, True), ("attention-offload", 4, False)]
)
def test_energy_positive_and_static_energy_is_power_times_round_time(rule, k, pipeline):
    sc = load_scenario(EXAMPLES / "opt-13b.toml")
    archs = [ArchConfig("hbm", k, 2), ArchConfig("hbm", k, 1)]
    place = rule_placement(rule, sc.space.share_levels)
    ev = Evaluator(sc).evaluate(build_design(sc, archs, [place, place], [3], [None], pipeline))
    m = ev.metrics
    assert m.energy_pj_per_token > 0 and m.edp > 0
    static_mw = sum(a.devices * CAT.host(sc.host).static_power_mw for a in archs)
    rnd = ev.breakdown.as_dict()["round"]
    # mW x ns = pJ; integer nJ rounded up (once for the total, or once per model: at most 1 nJ apart each)
    exact_nj = math.ceil(static_mw * m.round_time_ns / 1000)
    assert exact_nj <= rnd["static_energy_nj"] <= exact_nj + len(archs) - 1
    assert rnd["static_energy_nj"] == pytest.approx(
        static_mw * 1e-3 * m.round_time_ns * 1e-9 * 1e9, abs=len(archs)
    )
    dynamic = rnd["verifier_energy_nj"] + sum(
        d["drafting_energy_nj_per_round"] for d in ev.breakdown.as_dict()["drafters"]
    )
    assert m.energy_nj_per_round == dynamic + rnd["static_energy_nj"]
    assert m.energy_pj_per_token == pytest.approx(
        m.energy_nj_per_round * 1000 / (m.tokens_per_round * sc.batch_size), rel=1e-9
    )
    assert m.edp == pytest.approx(m.latency_ns_per_token * m.energy_pj_per_token / 1000, rel=1e-9)
