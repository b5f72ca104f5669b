"""[EDGE-2] The shared device in the CP-SAT model (formulations/edge.md), under the literal `assume[EDGE-2]`:

- by channels: every model's architecture is a channel slice of one memory (EDGE-2a) and the slices take
  each of its channels exactly once (EDGE-2b);
- a head on the verifier's architecture (an n-gram lookup) takes no channel and no capacity of its own;
- interleaved: every model has the same architecture (EDGE-2c) and the models' PIM-side and normal-side
  bytes together fit the device (EDGE-2d), by the same per-tensor coefficients as CAP-1/2;
- [EDGE-3] interleaved, the verifier alone carries the whole device's idle power (EN-2's idle row on z_0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.catalog.slices import parse_slice
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.shared_device import IdleCosts, alone_idle_power_mw
from specpim_cp.problem.design import ArchConfig, Placement, Staging
from specpim_cp.problem.edge import sharing
from specpim_cp.problem.scenario import Scenario
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.exact.rows import add_ceil, capacity_terms


class ModelRows(Protocol):
    """What these rows read of the model builder (model.py SpecModel, which imports this module)."""

    scenario: Scenario
    catalog: Catalog
    prices: PriceTable
    m: cp_model.CpModel
    x: Sequence[dict[ArchConfig, cp_model.IntVar]]
    y: Sequence[dict[str, dict[Placement, cp_model.IntVar]]]
    stage_lit: Sequence[dict[Staging | None, cp_model.IntVar]]
    assumption_families: dict[str, cp_model.IntVar]
    with_capacity: bool
    no_spec: cp_model.IntVar | None
    T: cp_model.IntVar
    costs: IdleCosts

    def valid(self, j: int, a: ArchConfig, op: str, p: Placement) -> bool: ...


def add_shared_device(sm: ModelRows) -> None:
    """The EDGE-2 rows of `sm.scenario`'s sharing; nothing when its models have devices of their own."""
    mode = sharing(sm.scenario)
    if mode is None:
        return
    if mode == "interleaved" and not sm.with_capacity:
        raise ScenarioError("shared_device: an interleaved shared device shares its capacity between the models, "
                            "which a workload mix's capacity rows do not; use shared_device = \"channels\"")
    lit = sm.m.new_bool_var("assume[EDGE-2]")
    sm.assumption_families["EDGE-2 shared device"] = lit
    if mode == "channels":
        _channel_rows(sm, lit)
    else:
        _interleaved_rows(sm, lit)


def _device_models(sm: ModelRows) -> list[int]:
    """The models that take a share of the device: all but heads whose every architecture is the verifier's
    (an n-gram lookup runs on the host, stores nothing and takes no channel)."""
    return [j for j, xs in enumerate(sm.x) if not all(a.colocated for a in xs)]


def _speculating(sm: ModelRows, lit: cp_model.IntVar) -> list:
    """The enforcement of a row tying the drafters to the verifier: the verifier alone has no drafter
    ([NOSPEC]; by channels EDGE-2b then gives it every channel)."""
    return [lit] if sm.no_spec is None else [lit, sm.no_spec.Not()]


def _channel_rows(sm: ModelRows, lit: cp_model.IntVar) -> None:
    m = sm.m
    x = [sm.x[j] for j in _device_models(sm)]
    bases: dict[str, int] = {}
    for xs in x:
        for a in xs:
            parsed = parse_slice(a.memory_type)
            if parsed is None:
                raise ValueError(f"shared device: architecture {a.label()} is no channel slice")
            bases[parsed[0]] = parsed[2]
    for base, total in bases.items():
        on_base = [sum(v for a, v in xs.items() if parse_slice(a.memory_type)[0] == base) for xs in x]
        for j in range(1, len(x)):
            m.add(on_base[j] == on_base[0]).only_enforce_if(_speculating(sm, lit))                 # EDGE-2a
        used = sum(parse_slice(a.memory_type)[1] * v for xs in x for a, v in xs.items()
                   if parse_slice(a.memory_type)[0] == base)
        m.add(used == total * on_base[0]).only_enforce_if(lit)                                     # EDGE-2b


def _interleaved_rows(sm: ModelRows, lit: cp_model.IntVar) -> None:
    m, x = sm.m, sm.x
    models = _device_models(sm)
    for j in models[1:]:
        for a, v in x[0].items():
            m.add(x[j].get(a, 0) == v).only_enforce_if(_speculating(sm, lit))                     # EDGE-2c
    if not sm.with_capacity:
        return
    for a, xa in x[0].items():
        pim, normal = [], []
        for j in models:
            p_need, n_need = capacity_terms(sm, j, a)
            pim += p_need
            normal += n_need
        pim_cap, normal_cap = sm.prices.models[0].capacity_kib[a]
        m.add(sum(pim) <= pim_cap).only_enforce_if([xa, lit])                                      # EDGE-2d
        m.add(sum(normal) <= normal_cap).only_enforce_if([xa, lit])


def idle_energy_var(sm: ModelRows, j: int, power: dict[ArchConfig, int], ub_round_ns: int) -> cp_model.IntVar:
    """EN-2's idle energy of model j per round, I_j = ceil(P_j(a) T / 1000) on its architecture a (nJ, mW x ns /
    1000), with [EDGE-3]'s amendment: on an interleaved shared device the verifier alone (z_0) carries the whole
    device's idle power, not its share. `ub_round_ns`: the round time's upper bound."""
    alone = alone_idle_power_mw(sm.costs) if j == 0 and sm.no_spec is not None else None
    top = max(max(power.values()), alone or 0)
    idle = sm.m.new_int_var(0, -(-top * ub_round_ns // 1000), f"idle_nj[{j}]")
    for a, xa in sm.x[j].items():
        if alone is None or alone == power[a]:
            add_ceil(sm.m, idle, power[a] * sm.T, 1000, xa)
        else:
            add_ceil(sm.m, idle, power[a] * sm.T, 1000, [xa, sm.no_spec.Not()])
            add_ceil(sm.m, idle, alone * sm.T, 1000, [xa, sm.no_spec])                       # EDGE-3
    return idle
