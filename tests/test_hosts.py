"""Current GPUs on their own memory (physics.md P8) and the PIM energy basis (physics_sources.md section 4).

- h100-sxm, h200 and mi300x name their native memory (`native_memory`); a scenario naming such a host and
  no memory_types is priced on it; every other host keeps the default ["hbm", "gddr"] (no result moves);
- the HBM3 / HBM3E PIM units are labelled what-ifs that `catalog devices` and the design reports show;
- [AR-2]: all-reduce time follows the host's `link_bandwidth_gbps` (A100 hosts: exactly the measured table);
- HBM-PIM internal energy is on AiM's accounting basis (bank level, activation and MACs included).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import build_design

from specpim_cp.catalog import default_catalog, load_catalog
from specpim_cp.cli import main
from specpim_cp.errors import ScenarioError
from specpim_cp.kernels import ROOFLINE, kernel_model_label
from specpim_cp.kernels.allreduce import TABLE_LINK_GBPS, _envelope_us, allreduce_us
from specpim_cp.physics.costs import CostModel
from specpim_cp.physics.evaluate import GIB_IN_KIB
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.mapping_rules import rule_placement
from specpim_cp.problem.scenario import load_scenario, parse_scenario
from specpim_cp.solvers.baselines import gpu_ar, run_baselines
from specpim_cp.views.tables import design_lines

ROOT = Path(__file__).resolve().parents[1]
CAT = default_catalog()

#: host -> (native memory, GiB, GB/s, stacks, kernel model)
NATIVE = {
    "h100-sxm": ("hbm3", 80, 3350.0, 5, kernel_model_label("h100")),
    "h200": ("hbm3e", 141, 4800.0, 6, kernel_model_label("h100")),
    "mi300x": ("hbm3-mi300x", 192, 5300.0, 8, kernel_model_label(ROOFLINE)),
    "snapdragon-8-gen-3": ("lpddr5x-phone", 12, 68.264, 4, kernel_model_label(ROOFLINE)),
    "snapdragon-x-elite": ("lpddr5x-laptop", 32, 135.168, 8, kernel_model_label(ROOFLINE)),
}


def _scenario(host: str, **extra) -> dict:
    return {"name": "t", "batch_size": 1, "prompt_tokens": 256, "generated_tokens": 128, "host": host,
            "verifier": {"model": "opt-13b", "devices": 2}, "drafters": [{"model": "opt-1.3b", "devices": 1}],
            **extra}


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


# -- the hosts and their memories ---------------------------------------------------------------------------
@pytest.mark.parametrize("host", sorted(NATIVE))
def test_hosts_load_with_their_native_memory(host):
    memory, gib, gbps, stacks, kernels = NATIVE[host]
    h = CAT.host(host)
    assert h.native_memory == memory and "source_native_memory" in h.sources
    assert h.kernel_model == kernels
    m = CAT.memory(memory)
    assert m.groups == stacks
    assert m.groups * m.units_per_group * m.normal_unit_capacity_mib == gib * 1024  # as sold: k = 0
    assert m.groups * m.group_external_bandwidth_gbps == pytest.approx(gbps)
    assert not m.what_if and m.max_pim_units == 0  # as sold: no PIM units
    pim = CAT.memory(f"{memory}-pim")  # the what-if beside it: the same memory with PIM dies
    assert pim.what_if and pim.max_pim_units == pim.units_per_group and pim.groups == m.groups


def test_hosts_without_native_memory_keep_the_default():
    assert {n for n, h in CAT.hosts.items() if h.native_memory} == set(NATIVE)
    for host in ("a100-40gb", "a100-80gb", "a40", "mi100"):
        assert parse_scenario(_scenario(host)).memory_types == ["hbm", "gddr"]
    assert not CAT.memory("hbm").what_if and not CAT.memory("gddr").what_if  # Aquabolt-XL and AiM exist


def test_what_if_pim_dies_keep_aquabolt_xl_ratio():
    """An Aquabolt-XL PIM die streams internally what its whole stack moves externally (32 x 9.6 = 307.2
    GB/s); the HBM3 / HBM3E what-if dies keep that ratio (one unit per two banks, 32 B per tCCD_L)."""
    for name in ("hbm", "hbm3", "hbm3-mi300x", "hbm3e"):
        m = CAT.memory(name)
        assert m.pim_lanes_per_unit * m.pim_lane_bandwidth_gbps == pytest.approx(m.group_external_bandwidth_gbps,
                                                                                   rel=2e-3), name
        assert m.pim_unit_capacity_mib * 2 == m.normal_unit_capacity_mib  # the units take half the array


# -- a scenario naming the host is priced on it -------------------------------------------------------------
def test_h100_scenario_without_memory_types_is_priced_on_hbm3():
    sc = parse_scenario(_scenario("h100-sxm"))
    assert sc.memory_types == ["hbm3"]
    ev = gpu_ar(sc)
    [(_, md)] = ev.design.models()
    assert (md.memory_type, md.pim_units, md.devices) == ("hbm3", 0, 2)
    [(_, mb)] = ev.breakdown.models()
    assert mb.capacity.normal_capacity_kib == 2 * 80 * GIB_IN_KIB  # two H100s, 80 GB each
    cm = CostModel(sc, CAT)
    assert cm.full_bandwidth_gbps(md.arch) == pytest.approx(3350.0)
    # an H100 on its own memory is faster than on the old default (HBM2, 1.5 TB/s)
    old = parse_scenario(_scenario("h100-sxm", memory_types=["hbm", "gddr"]))
    assert old.memory_types == ["hbm", "gddr"]  # given memory types are kept, whatever the host
    assert ev.metrics.latency_ns_per_token < gpu_ar(old).metrics.latency_ns_per_token


def test_native_memory_survives_a_round_trip_and_hashes():
    sc = parse_scenario(_scenario("mi300x"))
    assert sc.memory_types == ["hbm3-mi300x"]
    again = parse_scenario(sc.model_dump(mode="json"))
    assert again.memory_types == ["hbm3-mi300x"] and again.content_hash() == sc.content_hash()


def test_paper_scenarios_keep_their_hashes_and_latencies():
    """The paper set's hosts have no native memory: its scenario hashes match the golden file, and the
    baselines' latencies (2 A100s: all-reduces included) are those before this change."""
    golden = json.loads((ROOT / "tests" / "golden" / "paper.json").read_text())["scenarios"]
    sc = load_scenario(resolve_scenario_path("paper/opt-13b-b1"))
    assert sc.memory_types == ["hbm", "gddr"]
    assert sc.content_hash() == golden["opt-13b-b1"]["scenario_hash"]
    latency = {r.name: r.evaluation.metrics.latency_ns_per_token for r in run_baselines(sc) if r.evaluation}
    before = {"GPU-AR": 12325556.0, "GPU-SI": 7323468.922985786, "FC-offload (fit)": 4122485.95505618,
              "attention-offload": 6973729.213762578, "AiM as sold": 2200423.595505618}
    for name, value in before.items():
        assert latency[name] == pytest.approx(value, rel=1e-12), name


# -- what the reports show ------------------------------------------------------------------------------------
def test_catalog_devices_lists_the_hosts_and_what_ifs():
    res = _run("catalog", "devices")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    for name in ("h200", "mi300x", "hbm3", "hbm3e", "hbm3-mi300x", "native memory", "what-if"):
        assert name in out, name
    assert "h200.source_native_memory:" in out and "mi300x.range_link_bandwidth_gbps: 64 .. 448" in out
    assert "hbm3: HBM3 (H100 SXM" in out and "PIM units: a what-if" in out
    assert "hbm: HBM2 / HBM-PIM (Aquabolt-XL); PIM units: a product" in out


def test_design_lines_mark_what_if_pim_units():
    sc = parse_scenario({**_scenario("h100-sxm"), "memory_types": ["hbm3-pim", "hbm3"]})
    levels = sc.space.share_levels
    chain = rule_placement("attention-offload", levels)

    def lines(k: int) -> list[str]:
        design = build_design(sc, [ArchConfig("hbm3-pim", k, 2), ArchConfig("hbm3-pim", k, 1)], [chain, chain],
                              [2], [None], False)
        return design_lines(sc, design)[:2]

    assert all("hbm3-pim k=4 (what-if PIM units)" in line for line in lines(4))
    host_only = rule_placement("host-only", levels)
    plain = build_design(sc, [ArchConfig("hbm3", 0, 2), ArchConfig("hbm3", 0, 1)], [host_only, host_only], [2],
                         [None], False)
    assert not any("what-if" in line for line in design_lines(sc, plain))
    a100 = parse_scenario(_scenario("a100-40gb"))
    product = build_design(a100, [ArchConfig("hbm", 4, 2), ArchConfig("hbm", 4, 1)], [chain, chain], [2], [None],
                           False)
    assert not any("what-if" in line for line in design_lines(a100, product))


# -- a bad native memory is one line -------------------------------------------------------------------------
def test_bad_native_memory_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[hosts.my-gpu]\nbased_on = "h100-sxm"\nnative_memory = "hbm9"\n'
                   'source_native_memory = "a typo"\n')
    with pytest.raises(ScenarioError) as err:
        load_catalog([bad])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"catalog {bad}: hosts.my-gpu.native_memory: unknown memory type 'hbm9'")
    assert "hbm3" in msg  # the known memory types are listed
    res = _run("catalog", "check", str(bad))
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "native_memory" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout


def test_user_hosts_may_name_shipped_or_their_own_memories(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text('[hosts.my-h100]\nbased_on = "h100-sxm"\nidle_power_mw = 80000\nsource_idle_power_mw = "x"\n'
                    '[memories.my-hbm3]\nbased_on = "hbm3"\ngroups = 6\nsource_groups = "all six sites"\n'
                    '[hosts.my-h100-6]\nbased_on = "h100-sxm"\nnative_memory = "my-hbm3"\n'
                    'source_native_memory = "six stacks"\n')
    cat = load_catalog([mine])
    assert cat.host("my-h100").native_memory == "hbm3" and cat.host("my-h100-6").native_memory == "my-hbm3"
    sc = parse_scenario(_scenario("my-h100-6", catalog=[str(mine)]))
    assert sc.memory_types == ["my-hbm3"]


# -- [AR-2] all-reduce over the host's link ------------------------------------------------------------------
@pytest.mark.parametrize("workers", [2, 4, 8])
def test_allreduce_follows_the_link_bandwidth(workers):
    a100, a40, h100 = (CAT.host(h).link_bandwidth_gbps for h in ("a100-40gb", "a40", "h100-sxm"))
    assert a100 == TABLE_LINK_GBPS
    floor = allreduce_us(workers, 1)
    for size in (64 * 5120, 10**6, 10**8):
        base = allreduce_us(workers, size)
        assert allreduce_us(workers, size, a100) == base  # A100: the measured envelope, bit for bit
        assert allreduce_us(workers, size, a40) > base > allreduce_us(workers, size, h100) >= floor
        # the time above the floor scales with 1 / link bandwidth
        assert allreduce_us(workers, size, a40) - floor == pytest.approx((base - floor) * a100 / a40)
    if workers in (2, 4):
        assert allreduce_us(workers, 10**6) == _envelope_us(workers, 10**6)
    assert allreduce_us(workers, 2048, a40) == allreduce_us(workers, 2048)  # the latency floor is kept


def test_allreduce_cost_reads_the_host_link():
    """An A40 host prices the same all-reduce higher than an A100 host; the A100's is the measured table's."""
    model = CAT.models["opt-13b"]
    arch = ArchConfig("hbm", 0, 2)
    costs = {h: CostModel(parse_scenario(_scenario(h, memory_types=["hbm"])), CAT) for h in ("a100-40gb", "a40")}
    for tokens in (1, 16, 256):
        a100 = costs["a100-40gb"].allreduce_cost(model, arch, tokens)
        a40 = costs["a40"].allreduce_cost(model, arch, tokens)
        assert a40.time_ns > a100.time_ns
        assert a100.time_ns == -int(-(allreduce_us(2, tokens * model.hidden) * 1e3 - 1e-9) // 1)
        assert a40.energy_nj == a100.energy_nj  # the same bytes over links of the same pJ/bit
    # through the evaluator: the same GPU-AR design's all-reduces take longer on the A40's bridge
    ar = {h: gpu_ar(parse_scenario(_scenario(h, memory_types=["hbm"]))).breakdown.verifier.allreduce_ns
          for h in ("a100-40gb", "a40")}
    assert ar["a40"] > ar["a100-40gb"] > 0


# -- HBM-PIM internal energy on AiM's basis ------------------------------------------------------------------
def test_pim_internal_energy_is_like_for_like_with_aim():
    """Per weight bit streamed inside the memory, activation and MACs included: HBM-PIM 0.55 + 0.32 pJ per
    FP16 MAC / 16 bits = 0.57 pJ/bit, AiM 0.50 with its MACs inside (formulations/physics.md, P3)."""
    bits_per_mac = 16

    def all_in(name: str) -> float:
        m = CAT.memory(name)
        return m.internal_energy_pj_per_bit + m.pim_mac_energy_pj / bits_per_mac

    assert all_in("hbm") == pytest.approx(0.57)
    assert all_in("gddr") == pytest.approx(0.50)
    for name in ("hbm", "hbm2e", "hbm3", "hbm3-mi300x", "hbm3e"):
        assert CAT.memory(name).internal_energy_pj_per_bit == 0.55
        assert CAT.memory(name).ranges["internal_energy_pj_per_bit"] == (0.44, 1.56)
