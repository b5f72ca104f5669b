"""The exact model's rows for draft heads (formulations/drafter_kinds.md, [HEAD-2] and [HEAD-4]).

A head's architectures include the verifier's, marked colocated (`ArchConfig.colocated`): choosing one is
the placement decision "on the verifier's devices", a Boolean colo_i = sum of those x literals.
[HEAD-2] colo_i and x[i][a'] imply x[0][a] (the same memory type, PIM units and devices); the head's tensors
then count in the verifier's CAP-1/CAP-2 rows (its own rows hold on its own devices only), its devices
not in the budget, its idle power not at all (the price table's is 0 there).
[HEAD-4] a head on devices of its own that reads hidden states adds their transfer to the round time and
energy: per speculation choice c a constant (`physics.heads.transfer_cost` at c's tokens per round),
enforced on z_c and not colo_i.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from specpim_cp.physics.heads import transfer_cost
from specpim_cp.problem.design import ArchConfig
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.solvers.exact.rows import capacity_terms


def base_arch(a: ArchConfig) -> ArchConfig:
    return ArchConfig(a.memory_type, a.pim_units, a.devices)


def add_colocation(sm) -> dict[int, cp_model.IntVar]:
    """[HEAD-2] per head with colocated architectures: colo_j (j its model index) and x[j][a'] => x[0][a]."""
    m = sm.m
    colo = {}
    for j in range(1, len(sm.data)):
        on_v = [(a, v) for a, v in sm.x[j].items() if a.colocated]
        if not on_v:
            continue
        colo[j] = sm._lit_sum(f"colocated[{j - 1}]", [v for _, v in on_v])
        for a, v in on_v:
            base = sm.x[0].get(base_arch(a))
            if base is None:
                m.add(v == 0)
            else:
                m.add_implication(v, base)
    return colo


def colocated_needs(sm) -> tuple[list, list]:
    """[HEAD-2] the (PIM-side, normal-side) KiB terms the colocated heads add to the verifier's capacity rows:
    per head an integer equal to its tensors' KiB on the chosen colocated architecture, 0 when it is not on
    the verifier's devices."""
    m = sm.m
    pim_terms, normal_terms = [], []
    for j, colo in sm.colo.items():
        pm = sm.prices.models[j]
        rows = {}
        for a in sm.x[j]:
            if not a.colocated:
                continue
            rows[a] = capacity_terms(sm, j, a)  # a head has no staging: its placement literals only
        ub_p = max(sum(max((pm.tensor_kib[(a, op, p.layout)][0] for p in sm.y[j][op] if sm.valid(j, a, op, p)),
                           default=0) for op in PLACEABLE_OPS) for a in rows)
        ub_n = max(sum(max((pm.tensor_kib[(a, op, p.layout)][1] for p in sm.y[j][op] if sm.valid(j, a, op, p)),
                           default=0) for op in PLACEABLE_OPS) for a in rows)
        need_p = m.new_int_var(0, ub_p, f"colocated_pim_kib[{j - 1}]")
        need_n = m.new_int_var(0, ub_n, f"colocated_normal_kib[{j - 1}]")
        for a, (pim, normal) in rows.items():
            m.add(need_p == sum(pim)).only_enforce_if(sm.x[j][a])
            m.add(need_n == sum(normal)).only_enforce_if(sm.x[j][a])
        m.add(need_p == 0).only_enforce_if(~colo)
        m.add(need_n == 0).only_enforce_if(~colo)
        pim_terms.append(need_p)
        normal_terms.append(need_n)
    return pim_terms, normal_terms


def add_transfers(sm) -> tuple[list, list]:
    """[HEAD-4] per head that reads hidden states and may have devices of its own: its transfer's ns and
    nJ per round as integers (the choice's constant when on its own devices, 0 on the verifier's)."""
    m = sm.m
    ns_terms, nj_terms = [], []
    host, batch = sm.costs.host, sm.scenario.batch_size
    for j in range(1, len(sm.data)):
        spec = sm.data[j].spec
        if not any(not a.colocated for a in sm.x[j]):
            continue
        # no transfer when not speculating ([NOSPEC]: the head is absent)
        per_choice = [transfer_cost(spec, host, batch, st.tokens_micro) if c.speculates else (0, 0)
                      for c, st in zip(sm.choices, sm.stats)]
        if not any(t or e for t, e in per_choice):
            continue
        t_var = m.new_int_var(0, max(t for t, _ in per_choice), f"head_transfer_ns[{j - 1}]")
        e_var = m.new_int_var(0, max(e for _, e in per_choice), f"head_transfer_nj[{j - 1}]")
        colo = sm.colo.get(j)
        for (t, e), z in zip(per_choice, sm.z):
            lits = [z] if colo is None else [z, ~colo]
            m.add(t_var == t).only_enforce_if(lits)
            sm._energy_row(e_var == e, lits)
        if colo is not None:
            m.add(t_var == 0).only_enforce_if(colo)
            sm._energy_row(e_var == 0, colo)
        ns_terms.append(t_var)
        nj_terms.append(e_var)
    return ns_terms, nj_terms


def one_pass(sm, i: int) -> bool:
    """Whether drafter i drafts every position in one pass (Medusa, [HEAD-3])."""
    return bool(getattr(sm.data[i + 1].spec, "one_pass", False))


def skips_cut4(sm) -> bool:
    """CUT-4's time-priced energy envelopes assume devices of one's own and trees drafted depth by depth:
    a space with a head on the verifier's devices or a one-pass head goes without that optional cut."""
    return bool(sm.colo) or any(one_pass(sm, i) for i in range(sm.n_drafters))
