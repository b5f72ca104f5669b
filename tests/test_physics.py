"""Physical facts the cost model and evaluator must respect (memory rules, costs, speculation, design
space: formulations/physics.md, costs.md, speculation_rounds.md).

Every test checks a quantity against an independent physical expectation (a roofline, a linear law,
a capacity sum, a hand-computed or brute-forced schedule), not just the shape of an output.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import re
from fractions import Fraction
from pathlib import Path

import networkx as nx
import pytest
from helpers import build_design
from oracles.critical_path import makespan_lower_bound

from specpim_cp.catalog import Catalog, MemorySpec, default_catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.kernels.linear import memory_floor
from specpim_cp.physics.costs import COMPONENTS, KIB, CostModel
from specpim_cp.physics.evaluate import GIB_IN_KIB, Evaluator
from specpim_cp.physics.schedule import layer_schedule
from specpim_cp.problem.design import ArchConfig, Placement
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.operators import ATTENTION_OPS, FC_OPS, LAYER_OPS, PLACEABLE_OPS, layer_graph
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.solvers.baselines import gpu_ar

EXAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "examples"
CAT = default_catalog()
GIB = 1 << 30
ATTENTION_BRANCH = ("qkv", "score", "context", "o_proj")
FFN_BRANCH = ("ffn_up", "ffn_down")


def _scenario(verifier: str, devices: int, memory_model: str = "time-shared"):
    """A one-model scenario (batch 1, context 256 + 128) under the given memory model."""
    return parse_scenario({
        "name": "physics",
        "batch_size": 1,
        "prompt_tokens": 256,
        "generated_tokens": 128,
        "verifier": {"model": verifier, "devices": devices},
        "assumptions": {"memory_model": memory_model},
    })


def _with_assumptions(sc, **assumptions):
    """The scenario re-validated with some `[assumptions]` changed."""
    data = sc.model_dump(mode="json")
    data["assumptions"] = {**data["assumptions"], **assumptions}
    return parse_scenario(data)


def _ar_design(sc, arch: ArchConfig, rule: str = "host-only", placement=None, host_layout: str = "normal"):
    place = placement if placement is not None else rule_placement(rule, sc.space.share_levels, host_layout)
    return build_design(sc, [arch], [place], [], [], False)


def _catalog_with_memory(name: str, **fields) -> Catalog:
    """The default catalog with some fields of one memory system replaced."""
    cat = default_catalog()
    mem = dataclasses.replace(cat.memories[name], **fields)
    return dataclasses.replace(cat, memories={**cat.memories, name: mem})


def _full_bandwidth_gbps(mem: str) -> float:
    """One device's external bandwidth with every unit readable (bytes per ns)."""
    m = CAT.memory(mem)
    return m.groups * m.group_external_bandwidth_gbps


# ------------------------------------------------------------------------------------------------
# Channel organisation, built die by die (the independent expectation of the memory-model tests)
# ------------------------------------------------------------------------------------------------
def _channel_map(mem: MemorySpec, k: int) -> list[list[bool]]:
    """One memory group's units by channel group (True: a PIM unit), placed one by one: "spread" deals
    the k PIM units one per channel group in turn, "packed" fills one channel group before the next."""
    per = mem.units_per_channel
    g = mem.units_per_group // per
    groups = [[False] * per for _ in range(g)]
    for i in range(k):
        grp, pos = (i % g, i // g) if mem.pim_arrangement == "spread" else (i // per, i % per)
        groups[grp][pos] = True
    return groups


def _read_fraction(mem: MemorySpec, k: int, layout: str) -> Fraction:
    """Share of the channel groups that hold a tensor with this layout (its bandwidth share)."""
    groups = _channel_map(mem, k)
    if layout == "spread":
        held = groups
    elif layout == "normal":
        held = [grp for grp in groups if not all(grp)]
    else:  # "pim"
        held = [grp for grp in groups if any(grp)]
    return Fraction(len(held), len(groups))


def _contends(mem: MemorySpec, k: int, layout: str) -> bool:
    """Whether a host tensor with this layout shares a channel group with a PIM unit."""
    groups = _channel_map(mem, k)
    if layout == "spread":
        return k > 0
    return any(any(grp) and not all(grp) for grp in groups)


# ------------------------------------------------------------------------------------------------
# GPU-AR against the memory roofline
# ------------------------------------------------------------------------------------------------
def _roofline_ns(sc) -> float:
    """Every weight byte of a device read once per token at the device's full external bandwidth."""
    model = CAT.models[sc.verifier.model]
    weights_per_device = model.parameter_count() * 2 / sc.verifier.devices
    return weights_per_device / _full_bandwidth_gbps("hbm")


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
    b = ev.breakdown.verifier
    model = CAT.models[sc.verifier.model]
    allreduce_total = model.layers * 2 * b.allreduce_ns  # sequential block: 2 all-reduces per layer
    assert b.allreduce_ns > 0
    roof = _roofline_ns(sc)
    lat = ev.metrics.latency_ns_per_token
    assert roof <= lat - allreduce_total <= 2 * roof


def test_gpu_ar_llama_32b_four_devices_within_twice_roofline():
    """With the all-reduce priced by the lower envelope of the NVLink measurements (physics P4), 120
    all-reduces of 6656 elements no longer push GPU-AR past twice the weight roofline (it was 2.19x
    with the running maximum over noisy medians)."""
    sc = load_scenario(EXAMPLES / "llama-32.5b-three-drafters.toml")
    lat = gpu_ar(sc).metrics.latency_ns_per_token
    roof = _roofline_ns(sc)
    assert roof <= lat <= 2 * roof, f"{lat / roof:.2f}x roofline"


# ------------------------------------------------------------------------------------------------
# PIM GEMV: weights streamed once per token at the lanes' bandwidth x the sourced efficiency
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mem,k", [("hbm", 4), ("hbm", 8), ("gddr", 2), ("gddr", 4)])
@pytest.mark.parametrize("op", ["qkv", "o_proj", "ffn_up", "ffn_down", "lm_head"])
def test_pim_gemv_time_linear_in_tokens(mem, k, op):
    """t(M) = per-kernel overhead + M x (weights / derated lane bandwidth + input broadcast + read-back)."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    m = CAT.memory(mem)
    arch = ArchConfig(mem, k, 2)
    full = sc.space.share_levels
    ts = (1, 2, 4, 8, 16)
    times = [cm.op_cost(model, op, "pim", full, arch, t).time_ns for t in ts]
    slopes = [(times[i + 1] - times[i]) / (ts[i + 1] - ts[i]) for i in range(len(ts) - 1)]
    assert slopes[0] > 0
    for s in slopes[1:]:  # constant slope, up to the 1 ns rounding of each value
        assert abs(s - slopes[0]) <= 2.0
    intercept = times[0] - slopes[0]
    assert abs(intercept - m.pim_mode_switch_ns) <= 2
    # per token: the device's share of the weights through its PIM lanes at efficiency eta, the input
    # broadcast to every unit over its own channel, the output read back over all PIM units' channels
    spec = cm.shapes(model)[op]
    in_dev = spec.in_features // 2 if spec.row_parallel else spec.in_features
    out_dev = spec.out_features if spec.row_parallel else spec.out_features // 2
    lanes = m.groups * k * m.pim_lanes_per_unit
    stream = in_dev * out_dev * 2 / (lanes * m.pim_lane_bandwidth_gbps * m.pim_efficiency)
    broadcast = in_dev * 2 / m.unit_external_bandwidth_gbps
    readback = out_dev * 2 / (m.groups * k * m.unit_external_bandwidth_gbps)
    assert slopes[0] == pytest.approx(stream + broadcast + readback, abs=2.0)
    assert stream > broadcast + readback  # a GEMV is bound by streaming its weights


@pytest.mark.parametrize("mem,k", [("hbm", 4), ("gddr", 2)])
@pytest.mark.parametrize("op", ["qkv", "ffn_down", "lm_head"])
def test_pim_streaming_part_is_bytes_over_lane_bandwidth_times_efficiency(mem, k, op):
    """Only the streaming part depends on eta: t(eta) - t(1) = X/(lanes x lane bw) x (1/eta - 1),
    with X = tokens x the device's weight bytes (no reuse across tokens)."""
    sc = _scenario("opt-13b", 2)
    model = CAT.models["opt-13b"]
    m = CAT.memory(mem)
    arch = ArchConfig(mem, k, 2)
    full = sc.space.share_levels
    etas = (m.pim_efficiency, 0.5, 1.0)
    cms = {eta: CostModel(sc, _catalog_with_memory(mem, pim_efficiency=eta)) for eta in etas}
    spec = cms[1.0].shapes(model)[op]
    weight_bytes_dev = spec.in_features * spec.out_features * 2 // 2  # opt-13b splits evenly over 2
    lanes = m.groups * k * m.pim_lanes_per_unit
    for tokens in (1, 3, 8):
        peak_stream = tokens * weight_bytes_dev / (lanes * m.pim_lane_bandwidth_gbps)
        t = {eta: cm.op_cost(model, op, "pim", full, arch, tokens).time_ns for eta, cm in cms.items()}
        assert t[0.5] - t[1.0] == pytest.approx(peak_stream, abs=1)
        assert t[m.pim_efficiency] - t[1.0] == pytest.approx(peak_stream * (1 / m.pim_efficiency - 1), abs=1)


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
    """A PIM byte costs the internal pJ/bit (HBM-PIM 0.55) against the host's external + on-chip
    (5.47 + 12.9), but PIM pays it once per token and the host once per pass."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    arch = ArchConfig("hbm", 4, 2)
    m, host = CAT.memory("hbm"), CAT.host(sc.host)
    # the token count where PIM streaming energy overtakes the host's per-byte energy
    crossover = math.ceil((m.external_energy_pj_per_bit + host.onchip_energy_pj_per_bit)
                          / m.internal_energy_pj_per_bit)
    for op in FC_OPS:
        assert (
            cm.op_cost(model, op, "pim", 4, arch, 1).energy_nj
            < cm.op_cost(model, op, "host", 0, arch, 1).energy_nj
        )
        assert (
            cm.op_cost(model, op, "pim", 4, arch, crossover + 1).energy_nj
            > cm.op_cost(model, op, "host", 0, arch, crossover + 1).energy_nj
        )


# ------------------------------------------------------------------------------------------------
# Memory model, time-shared (rules 1-3): the host reads PIM units in normal mode; layout decides
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("catalog_name", ["default", "hbm-packed"])
def test_layout_bandwidth_and_contention_match_the_die_by_die_channel_map(catalog_name):
    cat = CAT if catalog_name == "default" else _catalog_with_memory("hbm", pim_arrangement="packed")
    sc = _scenario("opt-1.3b", 1)
    cm = CostModel(sc, cat)
    for name in ("hbm", "gddr", "hbm2e"):
        mem = cat.memory(name)
        full = mem.groups * mem.group_external_bandwidth_gbps
        for k in range(mem.units_per_group + 1):
            arch = ArchConfig(name, k, 1)
            assert cm.layout_bandwidth_gbps(arch, "normal") == pytest.approx(
                full * _read_fraction(mem, k, "normal")), (name, k)
            assert cm.host_contends_with_pim(arch, "normal") == _contends(mem, k, "normal"), (name, k)
            if k > 0:
                assert cm.layout_bandwidth_gbps(arch, "spread") == pytest.approx(full), (name, k)
                assert cm.layout_bandwidth_gbps(arch, "pim") == pytest.approx(
                    full * _read_fraction(mem, k, "pim")), (name, k)
                assert cm.host_contends_with_pim(arch, "spread"), (name, k)
    # the two arrangements differ where they should: 2 PIM dies per stack packed fill one channel pair
    packed = cat.memory("hbm").pim_arrangement == "packed"
    assert cm.layout_bandwidth_gbps(ArchConfig("hbm", 2, 1), "normal") == pytest.approx(
        _full_bandwidth_gbps("hbm") * (Fraction(3, 4) if packed else 1))
    assert cm.host_contends_with_pim(ArchConfig("hbm", 2, 1), "normal") is not packed


@pytest.mark.parametrize("op", FC_OPS)
def test_time_shared_hbm_normal_host_fc_keeps_full_bandwidth_next_to_pim_dies(op):
    """Aquabolt-XL's spread arrangement: up to 4 PIM dies per stack, every channel still serves a
    normal die, so a normal-layout FC layer reads at the full external bandwidth (k = 0's time)."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    for tokens in (1, 4, 16):  # memory-bound token counts
        plain = cm.op_cost(model, op, "host", 0, ArchConfig("hbm", 0, 2), tokens, "normal").time_ns
        for k in range(1, 5):
            assert cm.op_cost(model, op, "host", 0, ArchConfig("hbm", k, 2), tokens, "normal").time_ns == plain
        for k in range(1, 9):  # spread: striped over every die, read at full bandwidth
            assert cm.op_cost(model, op, "host", 0, ArchConfig("hbm", k, 2), tokens, "spread").time_ns == plain
        # beyond 4 PIM dies some channels hold only PIM dies: normal data sits on fewer channels
        slower = [cm.op_cost(model, op, "host", 0, ArchConfig("hbm", k, 2), tokens, "normal").time_ns
                  for k in range(4, 8)]
        assert all(b > a for a, b in itertools.pairwise(slower)), slower


@pytest.mark.parametrize("op", ["qkv", "score", "context", "ffn_down", "lm_head"])
def test_time_shared_gddr_normal_host_memory_time_scales_with_normal_packages(op):
    """GDDR6: one package per channel, so normal data on U - k packages streams in U/(U-k) the time;
    spread data uses every package's channels and does not change with k."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    units = CAT.memory("gddr").units_per_group
    host = CAT.host(sc.host)
    # fixed part of one kernel: launch for attention, the linear fit's t0 for FC (memory-bound at M = 1)
    fixed_ns = host.launch_overhead_ns if op in ATTENTION_OPS else 1000 * memory_floor(host.kernel_table)[0]

    def t(k: int, layout: str) -> int:
        return cm.op_cost(model, op, "host", 0, ArchConfig("gddr", k, 2), 1, layout).time_ns

    base = t(0, "normal") - fixed_ns
    for k in range(1, units):
        ratio = (t(k, "normal") - fixed_ns) / base
        if op in ATTENTION_OPS:  # launch + bytes / bandwidth, exactly
            assert t(k, "normal") - fixed_ns == pytest.approx(base * units / (units - k), abs=1)
        else:  # the soft roofline's compute term is small at one token
            assert ratio == pytest.approx(units / (units - k), rel=0.01)
    for k in range(1, units + 1):
        assert t(k, "spread") == t(0, "normal")


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
@pytest.mark.parametrize("op", ["qkv", "score", "ffn_down", "lm_head"])
def test_partitioned_host_slower_and_pim_faster_with_more_pim_units(mem, op):
    """The SpecPIM authors' convention (rule 4): host data only in normal units, host bandwidth =
    external x (U-k)/U; PIM bandwidth grows with k under either memory model."""
    sc = _scenario("opt-13b", 2, memory_model="partitioned")
    cm = CostModel(sc, CAT)
    shared = CostModel(_scenario("opt-13b", 2), CAT)
    model = CAT.models["opt-13b"]
    m = CAT.memory(mem)
    units = m.units_per_group
    for k in range(units):
        expected_bw = m.groups * m.group_external_bandwidth_gbps * (units - k) / units
        assert cm.layout_bandwidth_gbps(ArchConfig(mem, k, 2), "normal") == pytest.approx(expected_bw)
        if k > 0:
            assert cm.op_cost(model, op, "host", 0, ArchConfig(mem, k, 2), 1, "spread") is None
    host = [cm.op_cost(model, op, "host", 0, ArchConfig(mem, k, 2), 1).time_ns for k in range(units)]
    pim = [cm.op_cost(model, op, "pim", 4, ArchConfig(mem, k, 2), 1).time_ns for k in range(1, units + 1)]
    assert all(b > a for a, b in itertools.pairwise(host)), host
    assert all(b < a for a, b in itertools.pairwise(pim)), pim
    assert pim == [shared.op_cost(model, op, "pim", 4, ArchConfig(mem, k, 2), 1).time_ns
                   for k in range(1, units + 1)]
    assert cm.op_cost(model, op, "pim", 4, ArchConfig(mem, 0, 2), 1) is None


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
def test_all_units_pim_host_reads_them_in_normal_mode(mem):
    """k = U (AiM as sold): every unit is a PIM unit, and the host still reads all of them in normal
    mode, spread over every unit at the full external bandwidth: as fast as plain memory."""
    sc = _scenario("opt-1.3b", 1)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-1.3b"]
    k = CAT.memory(mem).max_pim_units
    arch = ArchConfig(mem, k, 1)
    host = [p for p in cm.placements(arch) if p.engine == "host"]
    assert [p.layout for p in host] == ["spread"]
    assert len(cm.placements(arch)) == sc.space.share_levels + 1
    assert cm.capacity_kib(arch)[1] == 0
    assert cm.op_cost(model, "qkv", "host", 0, arch, 1, "normal") is None
    plain = ArchConfig(mem, 0, 1)
    for op in PLACEABLE_OPS:
        assert (cm.op_cost(model, op, "host", 0, arch, 1, "spread").time_ns
                == cm.op_cost(model, op, "host", 0, plain, 1, "normal").time_ns), op
    ev = Evaluator(sc)
    assert ev.evaluate(_ar_design(sc, arch, "all-pim")).metrics.round_time_ns > 0
    # a host-only pass (a sequential block: contention cannot matter) takes GPU-AR's time on plain memory
    spread = ev.evaluate(_ar_design(sc, arch, "host-only", host_layout="spread"))
    assert spread.metrics.round_time_ns == ev.evaluate(_ar_design(sc, plain)).metrics.round_time_ns
    place = dict(rule_placement("all-pim", sc.space.share_levels))
    place["qkv"] = Placement(engine="host")
    with pytest.raises(ScenarioError, match=r"placement\.qkv: host layout 'normal' is impossible"):
        ev.evaluate(_ar_design(sc, arch, placement=place))


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
def test_partitioned_all_units_pim_leaves_no_host(mem):
    sc = _scenario("opt-1.3b", 1, memory_model="partitioned")
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-1.3b"]
    k = CAT.memory(mem).max_pim_units
    arch = ArchConfig(mem, k, 1)
    assert all(p.engine == "pim" for p in cm.placements(arch))
    assert len(cm.placements(arch)) == sc.space.share_levels
    assert ("host", 0, "normal") in [p.key for p in cm.placements(ArchConfig(mem, k - 1, 1))]
    for layout in ("normal", "spread"):
        assert cm.op_cost(model, "qkv", "host", 0, arch, 1, layout) is None
    assert cm.capacity_kib(arch)[1] == 0
    ev = Evaluator(sc)
    assert ev.evaluate(_ar_design(sc, arch, "all-pim")).metrics.round_time_ns > 0
    place = dict(rule_placement("all-pim", sc.space.share_levels))
    place["qkv"] = Placement(engine="host")
    with pytest.raises(ScenarioError, match=r"placement\.qkv: host is impossible: no normal memory"):
        ev.evaluate(_ar_design(sc, arch, placement=place))


# ------------------------------------------------------------------------------------------------
# Capacity (rule 3): each side holds what the layouts put there; nothing spills
# ------------------------------------------------------------------------------------------------
def test_capacity_shortfall_named_and_sized():
    sc = _scenario("opt-66b", 1)
    model = CAT.models["opt-66b"]
    with pytest.raises(ScenarioError, match="short by") as exc:
        Evaluator(sc).evaluate(_ar_design(sc, ArchConfig("hbm", 0, 1)))
    msg = str(exc.value)
    assert "verifier" in msg and "opt-66b" in msg and "normal units" in msg
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
    assert cap.pim_need_kib == 0 and cap.pim_capacity_kib == 0
    assert cap.normal_need_kib * KIB == pytest.approx(model.parameter_count() * 2 + kv, rel=1e-6)
    assert cap.normal_capacity_kib == 2 * 40 * GIB_IN_KIB
    assert ev.evaluate(_ar_design(sc, ArchConfig("hbm", 0, 2))).metrics.round_time_ns > 0
    with pytest.raises(ScenarioError, match="short by"):
        Evaluator(_scenario("opt-30b", 1)).evaluate(
            _ar_design(_scenario("opt-30b", 1), ArchConfig("hbm", 0, 1))
        )


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
def test_split_puts_k_over_u_of_a_spread_tensor_in_pim_units(mem):
    cm = CostModel(_scenario("opt-1.3b", 1), CAT)
    units = CAT.memory(mem).units_per_group
    for k in range(1, units + 1):
        arch = ArchConfig(mem, k, 1)
        for kib in (1, 7, 1000, 123457):
            pim, normal = cm.split_kib(arch, "spread", kib)
            assert pim + normal == kib
            assert kib * k / units <= pim < kib * k / units + 1  # the PIM share, rounded up
            assert cm.split_kib(arch, "normal", kib) == (0, kib)
            assert cm.split_kib(arch, "pim", kib) == (kib, 0)


def test_capacity_use_is_the_hand_sum_over_operators():
    """LLaMA-7B (untied embeddings) with every layout: PIM tensors whole in PIM dies, spread ones k/U
    there, normal ones none; the input embedding table beside the LM head."""
    sc = _scenario("llama-7b", 1)
    model = CAT.models["llama-7b"]
    k, units = 4, CAT.memory("hbm").units_per_group
    pim = Placement(engine="pim", share=sc.space.share_levels)
    normal, spread = Placement(engine="host"), Placement(engine="host", layout="spread")
    place = {"qkv": pim, "score": pim, "context": spread, "o_proj": normal, "ffn_up": spread, "ffn_down": pim,
             "lm_head": spread}
    d, L = model.hidden, model.layers
    kv = L * sc.batch_size * sc.max_context * model.kv_dim * 2  # K (or V), every layer, FP16
    tensor_bytes = {"qkv": L * d * (model.q_dim + 2 * model.kv_dim) * 2, "score": kv, "context": kv,
                    "o_proj": L * model.q_dim * d * 2, "ffn_up": L * d * 2 * model.ffn * 2,
                    "ffn_down": L * model.ffn * d * 2, "lm_head": d * model.vocab * 2}
    pim_share = {"pim": 1, "spread": Fraction(k, units), "normal": 0}
    pim_bytes = sum(b * pim_share[place[op].layout] for op, b in tensor_bytes.items())
    pim_bytes += model.vocab * d * 2 * pim_share["spread"]  # the embedding table, laid out as the LM head
    total = sum(tensor_bytes.values()) + model.vocab * d * 2
    ev = Evaluator(sc)
    design = _ar_design(sc, ArchConfig("hbm", k, 1), placement=place)
    cap = ev.capacity(design.verifier)
    tensors = len(tensor_bytes) + 1  # each rounded up to a KiB, then its PIM share rounded up
    assert cap.pim_need_kib == pytest.approx(pim_bytes / KIB, abs=2 * tensors)
    assert cap.pim_need_kib + cap.normal_need_kib == pytest.approx(total / KIB, abs=tensors)
    assert cap.pim_capacity_kib == 5 * k * 512 * KIB  # 5 stacks x 4 PIM dies x 512 MiB
    assert cap.normal_capacity_kib == 5 * (units - k) * 1024 * KIB
    assert ev.evaluate(design).breakdown.verifier.capacity == cap


@pytest.mark.parametrize("memory_model", ["time-shared", "partitioned"])
def test_pim_side_overflow_is_rejected_and_fits_after_moving_a_tensor(memory_model):
    """OPT-13B's FC weights (23.9 GiB) do not fit 2 x 5 x 4 PIM dies of 512 MiB (20 GiB): the design is
    not a design (nothing spills); with ffn_down's weights in the normal dies it fits."""
    sc = _scenario("opt-13b", 2, memory_model=memory_model)
    model = CAT.models["opt-13b"]
    arch = ArchConfig("hbm", 4, 2)
    ev = Evaluator(sc)
    shapes = CostModel(sc, CAT).shapes(model)
    fc_bytes = {op: (1 if op == "lm_head" else model.layers) * shapes[op].in_features * shapes[op].out_features * 2
                for op in FC_OPS}
    have_gib = 2 * 5 * 4 * 0.5
    with pytest.raises(ScenarioError, match="short by") as exc:
        ev.evaluate(_ar_design(sc, arch, "fc-offload"))
    msg = str(exc.value)
    assert "the PIM units must hold" in msg and "verifier (opt-13b)" in msg
    assert float(re.search(r"must hold ([0-9.]+) GiB", msg).group(1)) == pytest.approx(
        sum(fc_bytes.values()) / GIB, abs=0.01)
    short = float(re.search(r"short by ([0-9.]+) GiB", msg).group(1))
    assert short == pytest.approx(sum(fc_bytes.values()) / GIB - have_gib, abs=0.01)
    place = rule_placement("fc-offload", sc.space.share_levels)
    place["ffn_down"] = Placement(engine="host")
    moved = _ar_design(sc, arch, placement=place)
    assert ev.evaluate(moved).metrics.round_time_ns > 0
    cap = ev.capacity(moved.verifier)
    assert cap.holds
    assert cap.pim_need_kib * KIB == pytest.approx(sum(fc_bytes.values()) - fc_bytes["ffn_down"], abs=KIB * 5)


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
# Layer schedule: nodes (name, duration, host demand, PIM demand, link demand)
# ------------------------------------------------------------------------------------------------
def _host(d: int, pim_slots: int = 0) -> tuple[int, int, int, int]:
    """A host operator; `pim_slots` > 0 when its data shares channels with the PIM units (then it takes
    every PIM slot)."""
    return (d, 1, pim_slots, 0)


def _pim(d: int, share: int) -> tuple[int, int, int, int]:
    return (d, 0, share, 0)


def _link(d: int) -> tuple[int, int, int, int]:
    return (d, 0, 0, 1)


def _nodes(parallel: bool, spec: dict[str, tuple[int, int, int, int]]):
    names = list(LAYER_OPS) + (["allreduce"] if parallel else ["allreduce_attn", "allreduce_ffn"])
    return tuple((n, *spec.get(n, _link(0))) for n in names)


def test_schedule_sequential_block_is_a_chain():
    spec = {
        "qkv": _host(5),
        "score": _pim(3, 4),
        "context": _pim(2, 2),
        "o_proj": _host(4),
        "allreduce_attn": _link(1),
        "ffn_up": _pim(6, 1),
        "ffn_down": _host(7),
        "allreduce_ffn": _link(1),
    }
    makespan, starts = layer_schedule(False, _nodes(False, spec), 4)
    assert makespan == 5 + 3 + 2 + 4 + 1 + 6 + 7 + 1
    assert starts["score"] == 5 and starts["ffn_up"] == 15 and starts["allreduce_ffn"] == 28
    # contention changes nothing where nothing can overlap
    contending = {op: (_host(v[0], 4) if v[1] else v) for op, v in spec.items()}
    assert layer_schedule(False, _nodes(False, contending), 4) == (makespan, starts)


@pytest.mark.parametrize("attn,ffn", [((5, 3, 3, 4), (10, 8)), ((9, 6, 6, 9), (10, 8))])
def test_schedule_palm_parallel_block_overlaps_host_ffn_and_pim_attention(attn, ffn):
    spec = {op: _pim(d, 4) for op, d in zip(ATTENTION_BRANCH, attn)}
    spec.update({op: _host(d) for op, d in zip(FFN_BRANCH, ffn)})
    spec["allreduce"] = _link(2)
    makespan, starts = layer_schedule(True, _nodes(True, spec), 4)
    assert makespan == max(sum(attn), sum(ffn)) + 2
    assert starts["qkv"] == 0 and starts["ffn_up"] == 0


@pytest.mark.parametrize("share", [1, 2, 4])
def test_schedule_contending_host_node_takes_every_pim_slot(share):
    """A host FFN whose data shares channels with the PIM dies cannot run beside a PIM attention
    branch, however small the PIM share: the parallel block becomes the sum of its branches."""
    attn, ffn = (5, 3, 3, 4), (10, 8)
    spec = {op: _pim(d, share) for op, d in zip(ATTENTION_BRANCH, attn)}
    spec.update({op: _host(d, pim_slots=4) for op, d in zip(FFN_BRANCH, ffn)})
    spec["allreduce"] = _link(2)
    makespan, starts = layer_schedule(True, _nodes(True, spec), 4)
    assert makespan == sum(attn) + sum(ffn) + 2
    pim_busy = [(starts[op], starts[op] + d) for op, d in zip(ATTENTION_BRANCH, attn)]
    for op, d in zip(FFN_BRANCH, ffn):
        assert all(starts[op] + d <= s or e <= starts[op] for s, e in pim_busy), op
    # a host attention op next to a PIM FFN: the same rule the other way round
    spec = {op: _host(d, pim_slots=4) for op, d in zip(ATTENTION_BRANCH, attn)}
    spec.update({op: _pim(d, share) for op, d in zip(FFN_BRANCH, ffn)})
    spec["allreduce"] = _link(2)
    assert layer_schedule(True, _nodes(True, spec), 4)[0] == sum(attn) + sum(ffn) + 2


def test_schedule_parallel_block_on_one_engine_serialises():
    all_host = {op: _host(d) for op, d in zip(LAYER_OPS, (5, 3, 3, 4, 10, 8))}
    assert layer_schedule(True, _nodes(True, all_host), 4)[0] == 33
    all_pim_full = {op: _pim(d, 4) for op, d in zip(LAYER_OPS, (5, 3, 3, 4, 10, 8))}
    assert layer_schedule(True, _nodes(True, all_pim_full), 4)[0] == 33


@pytest.mark.parametrize("shares,expected", [((2, 2), 14), ((1, 3), 14), ((3, 3), 21), ((4, 1), 21)])
def test_schedule_pim_shares_are_cumulative(shares, expected):
    # qkv and ffn_up on PIM (10 ns each) on the two branches; the rest is on the host (1 ns each)
    spec = {"qkv": _pim(10, shares[0]), "ffn_up": _pim(10, shares[1])}
    spec.update({op: _host(1) for op in ("score", "context", "o_proj", "ffn_down")})
    makespan, starts = layer_schedule(True, _nodes(True, spec), 4)
    assert makespan == expected
    if expected == 14:
        assert starts["qkv"] == starts["ffn_up"] == 0
    else:
        assert abs(starts["qkv"] - starts["ffn_up"]) >= 10


def _brute_force_makespan(parallel: bool, nodes, cap: int) -> int:
    """Minimum makespan over all integer start times (branch and bound), unit-time resource check."""
    g = nx.DiGraph(layer_graph(CAT.models["palm-8b" if parallel else "opt-13b"]))
    info = {n: (d, (h, p, lk)) for n, d, h, p, lk in nodes}
    order = list(nx.topological_sort(g))
    horizon = sum(d for d, _ in info.values())
    caps = (1, cap, 1)
    tail = {}
    for n in reversed(order):
        tail[n] = info[n][0] + max((tail[s] for s in g.successors(n)), default=0)
    load = [[0] * (horizon + 1) for _ in caps]
    end: dict[str, int] = {}
    best = [horizon]

    def place(i: int, cur: int) -> None:
        if i == len(order):
            best[0] = min(best[0], cur)
            return
        n = order[i]
        dur, dem = info[n]
        ready = max((end[p] for p in g.predecessors(n)), default=0)
        for t in range(ready, horizon - dur + 1):
            if t + tail[n] >= best[0]:
                break
            if any(load[r][u] + dem[r] > caps[r] for r in range(3) for u in range(t, t + dur)):
                continue
            for r in range(3):
                for u in range(t, t + dur):
                    load[r][u] += dem[r]
            end[n] = t + dur
            place(i + 1, max(cur, t + dur))
            for r in range(3):
                for u in range(t, t + dur):
                    load[r][u] -= dem[r]
            del end[n]

    place(0, 0)
    return best[0]


@pytest.mark.parametrize("parallel", [True, False])
def test_schedule_matches_brute_force_on_random_tiny_instances(parallel):
    rng = random.Random(20240501 + parallel)
    names = list(LAYER_OPS) + (["allreduce"] if parallel else ["allreduce_attn", "allreduce_ffn"])
    model = CAT.models["palm-8b" if parallel else "opt-13b"]
    for _ in range(40):
        cap = rng.choice((2, 3, 4))
        nodes = []
        for n in names:
            if n.startswith("allreduce"):
                nodes.append((n, *_link(rng.randint(0, 2))))
            elif rng.random() < 0.5:  # a host node; a third of them contend with the PIM units
                nodes.append((n, *_host(rng.randint(1, 4), cap if rng.random() < 0.33 else 0)))
            else:
                nodes.append((n, *_pim(rng.randint(1, 4), rng.randint(1, cap))))
        nodes = tuple(nodes)
        makespan, starts = layer_schedule(parallel, nodes, cap)
        assert makespan == _brute_force_makespan(parallel, nodes, cap), nodes
        # the returned start times are a feasible schedule of that makespan
        info = {n: (d, (h, p, lk)) for n, d, h, p, lk in nodes}
        for u, v in layer_graph(model).edges:
            assert starts[v] >= starts[u] + info[u][0]
        assert max(starts[n] + info[n][0] for n in info) == makespan
        for r, c in enumerate((1, cap, 1)):
            for t in range(makespan):
                assert sum(dem[r] for n, (d, dem) in info.items() if starts[n] <= t < starts[n] + d) <= c
        assert makespan_lower_bound(model, {n: d for n, (d, _) in info.items()}) <= makespan


def test_evaluator_palm_all_host_layer_serialises_on_the_host():
    sc = load_scenario(EXAMPLES / "palm-8b.toml")
    b = gpu_ar(sc).breakdown.verifier
    host_sum = sum(b.operators[op].time_ns for op in LAYER_OPS)
    assert b.allreduce_ns == 0  # one device
    assert b.layer_makespan_ns == host_sum


def test_evaluator_sequential_all_host_layer_is_sum_of_ops():
    sc = load_scenario(EXAMPLES / "opt-13b.toml")
    b = gpu_ar(sc).breakdown.verifier
    host_sum = sum(b.operators[op].time_ns for op in LAYER_OPS)
    assert b.layer_makespan_ns == host_sum + 2 * b.allreduce_ns
    model = CAT.models["opt-13b"]
    assert b.pass_time_ns == (b.embedding_ns + model.layers * b.layer_makespan_ns
                              + b.operators["lm_head"].time_ns)


@pytest.mark.parametrize("memory_model,mem,k,devices,layout,overlaps", [
    ("time-shared", "gddr", 2, 1, "normal", True),  # one package per channel: normal data avoids PIM's
    ("time-shared", "gddr", 2, 2, "spread", False),  # spread data sits on the PIM packages' channels too
    ("time-shared", "hbm", 4, 1, "normal", False),  # every channel serves one PIM and one normal die
    ("time-shared", "hbm", 2, 1, "normal", False),
    ("partitioned", "hbm", 4, 1, "normal", True),  # the authors' convention: no contention
    ("partitioned", "gddr", 2, 1, "normal", True),
])
def test_evaluator_palm_pim_attention_and_host_ffn_overlap_unless_they_share_channels(
        memory_model, mem, k, devices, layout, overlaps):
    """PaLM's parallel block, attention on PIM and the FFN on the host: the two branches overlap when
    the FFN's data avoids every channel a PIM die computes on, else they run one after the other."""
    if memory_model == "time-shared":  # the die-by-die channel map agrees with the case's label
        assert overlaps is not _contends(CAT.memory(mem), k, layout)
    sc = _scenario("palm-8b", devices, memory_model=memory_model)
    share = sc.space.share_levels
    place = {op: Placement(engine="pim", share=share) if op in ATTENTION_BRANCH
             else Placement(engine="host", layout=layout) for op in PLACEABLE_OPS}
    b = Evaluator(sc).evaluate(_ar_design(sc, ArchConfig(mem, k, devices), placement=place)).breakdown.verifier
    t = {op: b.operators[op].time_ns for op in LAYER_OPS}
    attn = sum(t[op] for op in ATTENTION_BRANCH)
    ffn = sum(t[op] for op in FFN_BRANCH)
    expected = (max(attn, ffn) if overlaps else attn + ffn) + b.allreduce_ns  # one all-reduce per block
    assert b.layer_makespan_ns == expected
    assert (b.layer_makespan_ns < attn + ffn + b.allreduce_ns) is overlaps
    model = CAT.models["palm-8b"]
    assert b.pass_time_ns == b.embedding_ns + model.layers * expected + b.operators["lm_head"].time_ns


# ------------------------------------------------------------------------------------------------
# Embedding lookup [DUR-3]: M rows of the table per pass, one host kernel
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("memory_model,name,devices,mem,k,lm_head,fraction", [
    ("time-shared", "opt-1.3b", 1, "hbm", 0, "normal", Fraction(1)),
    ("time-shared", "llama-7b", 1, "gddr", 2, "normal", Fraction(2, 4)),  # 2 of 4 packages' channels
    ("time-shared", "llama-7b", 2, "hbm", 6, "normal", Fraction(2, 4)),  # 2 of 4 channel pairs keep a normal die
    ("time-shared", "opt-13b", 2, "hbm", 4, "spread", Fraction(1)),
    ("time-shared", "opt-1.3b", 1, "gddr", 2, "pim", Fraction(2, 4)),  # read from the 2 AiM packages
    ("partitioned", "opt-1.3b", 1, "hbm", 4, "pim", Fraction(1)),  # rows moved over the whole bus
])
def test_embedding_lookup_is_launch_plus_rows_over_bandwidth(memory_model, name, devices, mem, k, lm_head,
                                                             fraction):
    if memory_model == "time-shared":
        assert fraction == _read_fraction(CAT.memory(mem), k, lm_head)
    sc = _scenario(name, devices, memory_model=memory_model)
    model = CAT.models[name]
    place = rule_placement("host-only", sc.space.share_levels)
    place["lm_head"] = (Placement(engine="pim", share=sc.space.share_levels) if lm_head == "pim"
                        else Placement(engine="host", layout=lm_head))
    arch = ArchConfig(mem, k, devices)
    md = _ar_design(sc, arch, placement=place).verifier
    ev = Evaluator(sc)
    host = CAT.host(sc.host)
    m = CAT.memory(mem)
    bandwidth = float(fraction) * _full_bandwidth_gbps(mem) * devices  # every device reads its rows
    for tokens in (1, 16):
        rows_bytes = tokens * model.hidden * 2
        expected = math.ceil(host.launch_overhead_ns + rows_bytes / bandwidth - 1e-9)
        p = ev.pass_price(md, tokens)
        assert p.embedding_ns == expected
        assert p.time_ns - model.layers * p.layer_makespan_ns - p.op_time_ns["lm_head"] == expected
        # its energy: the rows' bytes at the memory's external + the host's on-chip pJ/bit
        emb = ev.costs.embedding_cost(model, arch, md.placement["lm_head"].layout, tokens)
        assert emb.parts_nj[0] == math.ceil(rows_bytes * 8 * m.external_energy_pj_per_bit / 1000)
        assert emb.parts_nj[1] == math.ceil(rows_bytes * 8 * host.onchip_energy_pj_per_bit / 1000)
        assert emb.energy_nj == sum(emb.parts_nj)


# ------------------------------------------------------------------------------------------------
# Energy
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "rule,k,pipeline", [("host-only", 0, False), ("fc-offload", 6, True), ("attention-offload", 4, False)]
)
def test_energy_components_sum_to_total_and_idle_energy_is_power_times_round_time(rule, k, pipeline):
    sc = load_scenario(EXAMPLES / "opt-13b.toml")
    archs = [ArchConfig("hbm", k, 2), ArchConfig("hbm", k, 1)]
    place = rule_placement(rule, sc.space.share_levels)
    design = build_design(sc, archs, [place, place], [3], [None], pipeline)
    ev = Evaluator(sc).evaluate(design)
    m = ev.metrics
    rnd = ev.breakdown.round
    assert m.energy_pj_per_token > 0 and m.edp > 0
    # idle: every device of every model powered for the whole round; mW x ns = pJ, rounded up per model
    idle_mw = CAT.host(sc.host).idle_power_mw
    assert rnd.idle_energy_nj == sum(math.ceil(a.devices * idle_mw * m.round_time_ns / 1000) for a in archs)
    watts = idle_mw / 1000 * sum(a.devices for a in archs)
    assert rnd.idle_energy_nj == pytest.approx(watts * m.round_time_ns * 1e-9 * 1e9, abs=len(archs))
    assert rnd.energy_nj_by_component["idle"] == rnd.idle_energy_nj
    dynamic = rnd.verifier_energy_nj + sum(d.drafting_energy_nj_per_round for d in ev.breakdown.drafters)
    assert m.energy_nj_per_round == dynamic + rnd.idle_energy_nj
    # the components add up to the total (each drafter's expected energy is rounded up twice)
    assert set(rnd.energy_nj_by_component) == {*COMPONENTS, "idle"}
    assert all(v >= 0 for v in rnd.energy_nj_by_component.values())
    assert sum(rnd.energy_nj_by_component.values()) == pytest.approx(m.energy_nj_per_round,
                                                                     abs=2 * len(design.drafters))
    per_token = ev.as_dict()["energy_pj_per_token_by_component"]
    assert sum(per_token.values()) == pytest.approx(m.energy_pj_per_token, rel=1e-9)
    on_pim = rule != "host-only"  # only a design with PIM operators streams inside PIM dies
    assert (rnd.energy_nj_by_component["pim_internal"] > 0) is on_pim
    assert m.energy_pj_per_token == pytest.approx(
        m.energy_nj_per_round * 1000 / (m.tokens_per_round * sc.batch_size), rel=1e-9
    )
    assert m.edp == pytest.approx(m.latency_ns_per_token * m.energy_pj_per_token / 1000, rel=1e-9)
    # dynamic accounting: the same rounds, without the idle energy
    dyn = Evaluator(_with_assumptions(sc, energy_accounting="dynamic")).evaluate(design)
    assert dyn.metrics.round_time_ns == m.round_time_ns
    assert dyn.breakdown.round.idle_energy_nj == 0
    assert dyn.breakdown.round.energy_nj_by_component["idle"] == 0
    assert m.energy_nj_per_round - dyn.metrics.energy_nj_per_round == rnd.idle_energy_nj


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
def test_host_energy_per_byte_is_external_plus_onchip(mem):
    """A byte the host streams costs the memory's external pJ/bit (DRAM access) plus the host's on-chip
    pJ/bit, x 8 bits; each MAC the host's pJ/MAC."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    m, host = CAT.memory(mem), CAT.host(sc.host)
    pj_per_byte = 8 * (m.external_energy_pj_per_bit + host.onchip_energy_pj_per_bit)
    for op in FC_OPS:
        spec = cm.shapes(model)[op]
        weight_bytes = spec.in_features * spec.out_features * 2  # both devices' shares (an even split)
        macs = spec.in_features * spec.out_features  # one token
        c = cm.op_cost(model, op, "host", 0, ArchConfig(mem, 0, 2), 1)
        assert c.parts_nj[2:] == (0, 0, 0) and c.energy_nj == sum(c.parts_nj)
        assert c.parts_nj[0] == pytest.approx(weight_bytes * 8 * m.external_energy_pj_per_bit / 1000, abs=1)
        streamed_nj = c.energy_nj - macs * host.mac_energy_pj / 1000
        assert streamed_nj / weight_bytes == pytest.approx(pj_per_byte / 1000, rel=1e-6), op


@pytest.mark.parametrize("mem", ["hbm", "gddr"])
def test_pim_energy_per_streamed_byte_and_mac(mem):
    """A PIM operator pays the internal pJ/bit per byte streamed (once per token) and pJ/MAC per MAC;
    no host DRAM or on-chip energy."""
    sc = _scenario("opt-13b", 2)
    cm = CostModel(sc, CAT)
    model = CAT.models["opt-13b"]
    m = CAT.memory(mem)
    for op in FC_OPS:
        spec = cm.shapes(model)[op]
        for tokens in (1, 8):
            c = cm.op_cost(model, op, "pim", sc.space.share_levels, ArchConfig(mem, 2, 2), tokens)
            streamed = tokens * spec.in_features * spec.out_features * 2  # both devices, every token
            assert c.parts_nj[:2] == (0, 0) and c.energy_nj == sum(c.parts_nj)
            assert c.parts_nj[2] == pytest.approx(streamed * 8 * m.internal_energy_pj_per_bit / 1000, abs=1)
            assert c.parts_nj[3] == pytest.approx(
                tokens * spec.in_features * spec.out_features * m.pim_mac_energy_pj / 1000, abs=1)
            assert c.parts_nj[4] > 0  # the input broadcast and the read-back cross the external bus
