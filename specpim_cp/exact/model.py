"""CP-SAT model of the whole design space of one scenario (formulations/*.md has the mathematics).

One method per constraint family; each carries the family's ID from `formulations/`. Every cost
coefficient is an integer taken from the shared cost tables (`CostModel`) and speculation tables
(`speculation`), linked by linear equalities enforced on one-hot Booleans, so the model prices a
design with exactly the evaluator's integers.

Decision variables (all Boolean one-hots):
  x[j][a]      model j uses architecture a (memory type, PIM units per group, device count)
  y[j][o][p]   operator o of model j takes placement p (host, or PIM on p of share_levels slots)
  z[c]         speculation choice c (draft length and staging of every drafter, pipeline on/off)
Derived integer variables: operator durations and energies, one layer's schedule (intervals), pass
times and energies, spill, drafting phases per outcome, round time T (ns) and energy per round (nJ).
"""

from __future__ import annotations

from fractions import Fraction

import networkx as nx
from ortools.sat.python import cp_model

from specpim_cp import speculation as spec
from specpim_cp.catalog import Catalog, ModelSpec
from specpim_cp.design import HOST, ArchConfig, Design, ModelDesign, Placement, SpecChoice, Staging
from specpim_cp.errors import ScenarioError
from specpim_cp.evaluate import Evaluator
from specpim_cp.graph import LAYER_OPS, PLACEABLE_OPS, is_chain, layer_graph, layer_order
from specpim_cp.passes import RoundStats, pass_tokens, round_stats
from specpim_cp.scenario import Scenario
from specpim_cp.space import DesignSpace, ModelOptions


def ub(var: cp_model.IntVar) -> int:
    """Upper bound of a variable's domain (positive index: negative indexing is broken in 9.15, G1)."""
    dom = list(var.proto.domain)
    return dom[len(dom) - 1]


def add_ceil(m: cp_model.CpModel, target, numerator, denominator: int, enforce) -> None:
    """target == ceil(numerator / denominator), enforced: two-sided rows leave no slack to shave."""
    m.add(denominator * target >= numerator).only_enforce_if(enforce)
    m.add(denominator * target <= numerator + denominator - 1).only_enforce_if(enforce)


def ceil_frac(x: Fraction) -> int:
    return -(-x.numerator // x.denominator)


class SpecModel:
    """Builds the CP-SAT model; `solve.py` drives it (Dinkelbach, epsilon-constraint)."""

    def __init__(self, scenario: Scenario, catalog: Catalog, evaluator: Evaluator | None = None):
        self.scenario = scenario
        self.catalog = catalog
        self.ev = evaluator or Evaluator(scenario, catalog)
        self.costs = self.ev.costs
        self.space = DesignSpace(scenario, catalog)
        self.m = cp_model.CpModel()
        self.n_drafters = len(scenario.drafters)
        self.data: list[ModelOptions] = self.space.models
        self.choices: tuple[SpecChoice, ...] = self.space.choice_list
        if not self.choices:
            raise ScenarioError("space: no speculation choice is left (draft lengths, staging, pipeline)")
        self.stats: list[RoundStats] = [round_stats(c, self.ev.acceptance) for c in self.choices]
        self.assumption_families: dict[str, cp_model.IntVar] = {}
        self.build()

    def places(self, j: int, op: str) -> list[Placement]:
        """Every placement of model j's operator `op` over all its architectures (the y literals)."""
        d = self.data[j]
        return list(dict.fromkeys(p for a in d.archs for p in d.allowed(a, op)))

    def valid(self, j: int, a: ArchConfig, op: str, p: Placement) -> bool:
        return p in self.data[j].placements[a][op]

    # ------------------------------------------------------------------------------------------
    # model
    # ------------------------------------------------------------------------------------------
    def build(self) -> None:
        m = self.m
        self.x = [{a: m.new_bool_var(f"x[{j}][{a.label()}]") for a in d.archs} for j, d in enumerate(self.data)]
        self.y = [{op: {p: m.new_bool_var(f"y[{j}][{op}][{p.engine}{p.share}]") for p in self.places(j, op)}
                   for op in PLACEABLE_OPS} for j in range(len(self.data))]
        self.z = [m.new_bool_var(f"z[{k}]") for k in range(len(self.choices))]
        self.add_architecture()            # [ARCH-1], [ARCH-2]
        self.add_placement()               # [MAP-1], [MAP-2]
        self.add_speculation_choice()      # [SPEC-1], [SPEC-2]
        self.pass_time = []
        self.pass_energy = []
        for j in range(len(self.data)):
            self.add_model(j)              # [CAP-*], [DUR-*], [EN-1], [SCH-*], [PASS-*]
        self.add_cycles()                  # [SPEC-3]
        self.add_round()                   # [RND-1..3]
        self.add_energy()                  # [EN-2..4]

    # [ARCH-1] exactly one architecture per model; [ARCH-2] device budget
    def add_architecture(self) -> None:
        m = self.m
        for xs in self.x:
            m.add_exactly_one(xs.values())
        if self.scenario.device_budget is not None:
            lit = m.new_bool_var("assume[ARCH-2]")
            self.assumption_families["ARCH-2 device budget"] = lit
            m.add(sum(a.devices * v for xs in self.x for a, v in xs.items())
                  <= self.scenario.device_budget).only_enforce_if(lit)

    # [MAP-1] one placement per operator; [MAP-2] the placement exists on the chosen architecture
    def add_placement(self) -> None:
        m = self.m
        for j, d in enumerate(self.data):
            for op in PLACEABLE_OPS:
                m.add_exactly_one(self.y[j][op].values())
                for a, xa in self.x[j].items():
                    for p, yp in self.y[j][op].items():
                        if not self.valid(j, a, op, p):
                            m.add_bool_or([~xa, ~yp])

    # [SPEC-1] one speculation choice; [SPEC-2] each model's pass token count follows from it
    def add_speculation_choice(self) -> None:
        m = self.m
        m.add_exactly_one(self.z)
        self.tokens_micro = sum(st.tokens_micro * z for st, z in zip(self.stats, self.z))
        self.kb: list[dict[int, cp_model.IntVar]] = []
        for j in range(len(self.data)):
            groups: dict[int, list[cp_model.IntVar]] = {}
            for c, z in zip(self.choices, self.z):
                groups.setdefault(pass_tokens(self.scenario.batch_size, c, j), []).append(z)
            kb = {}
            for tokens, zs in sorted(groups.items()):
                b = m.new_bool_var(f"tokens[{j}]={tokens}")
                m.add(b == sum(zs))
                kb[tokens] = b
            self.kb.append(kb)
        # staging literal per drafter and option
        self.stage_lit: list[dict[Staging | None, cp_model.IntVar]] = []
        for i in range(self.n_drafters):
            groups2: dict = {}
            for c, z in zip(self.choices, self.z):
                groups2.setdefault(c.staging[i], []).append(z)
            lits = {}
            for st, zs in groups2.items():
                b = m.new_bool_var(f"stage[{i}]={st}")
                m.add(b == sum(zs))
                lits[st] = b
            self.stage_lit.append(lits)

    def add_model(self, j: int) -> None:
        m = self.m
        d = self.data[j]
        model = d.spec
        c = self.costs
        kb = self.kb[j]
        tokens = sorted(kb)
        levels = c.share_levels
        # engine literal per operator (PIM on any share)
        on_pim = {}
        for op in PLACEABLE_OPS:
            pim_lits = [v for p, v in self.y[j][op].items() if p.engine == "pim"]
            b = m.new_bool_var(f"pim[{j}][{op}]")
            m.add(b == sum(pim_lits)) if pim_lits else m.add(b == 0)
            on_pim[op] = b

        # [DUR-1] operator durations and [EN-1] energies from the tables
        dur, energy = {}, {}
        for op in PLACEABLE_OPS:
            vals_t, vals_e = [], []
            for a in d.archs:
                for p in self.y[j][op]:
                    if not self.valid(j, a, op, p):
                        continue
                    for t in tokens:
                        oc = c.op_cost(model, op, p.engine, p.share, a, t)
                        vals_t.append(oc.time_ns)
                        vals_e.append(oc.energy_nj)
            dv = m.new_int_var(0, max(vals_t), f"dur[{j}][{op}]")
            ev = m.new_int_var(0, max(vals_e), f"en[{j}][{op}]")
            for a, xa in self.x[j].items():
                for p, yp in self.y[j][op].items():
                    if not self.valid(j, a, op, p):
                        continue
                    costs_t = {t: c.op_cost(model, op, p.engine, p.share, a, t) for t in tokens}
                    m.add(dv == sum(costs_t[t].time_ns * kb[t] for t in tokens)).only_enforce_if([xa, yp])
                    m.add(ev == sum(costs_t[t].energy_nj * kb[t] for t in tokens)).only_enforce_if([xa, yp])
            dur[op], energy[op] = dv, ev
        # [DUR-2] all-reduce durations and energies
        ar_t = {(a, t): c.allreduce_cost(model, a, t) for a in d.archs for t in tokens}
        ar_d = m.new_int_var(0, max(v.time_ns for v in ar_t.values()), f"ar[{j}]")
        ar_e = m.new_int_var(0, max(v.energy_nj for v in ar_t.values()), f"ar_en[{j}]")
        for a, xa in self.x[j].items():
            m.add(ar_d == sum(ar_t[(a, t)].time_ns * kb[t] for t in tokens)).only_enforce_if(xa)
            m.add(ar_e == sum(ar_t[(a, t)].energy_nj * kb[t] for t in tokens)).only_enforce_if(xa)

        # [SCH-0..4] one layer's schedule
        horizon = sum(ub(dur[op]) for op in LAYER_OPS) + 2 * ub(ar_d)
        mk = m.new_int_var(0, horizon, f"makespan[{j}]")
        if is_chain(model.parallel_block):  # [SCH-0] a chain runs its nodes one after another
            n_ar_nodes = sum(1 for n in layer_order(model.parallel_block) if n.startswith("allreduce"))
            m.add(mk == sum(dur[op] for op in LAYER_OPS) + n_ar_nodes * ar_d)
        else:
            self._add_schedule(j, model, dur, ar_d, mk, horizon, levels)

        # [CAP-1] bytes fit the devices; [CAP-2] spill = overflow of each side; [CAP-3] its cost
        store_ub = 0
        rate_t, rate_e = Fraction(0), Fraction(0)
        for a in d.archs:
            store_ub = max(store_ub, self._stored_kib_ub(j, a))
            ns, nj = c.spill_rates(a)
            rate_t, rate_e = max(rate_t, ns), max(rate_e, nj)
        spill = m.new_int_var(0, store_ub, f"spill[{j}]")
        spill_t = m.new_int_var(0, ceil_frac(store_ub * rate_t), f"spill_ns[{j}]")
        spill_e = m.new_int_var(0, ceil_frac(store_ub * rate_e), f"spill_nj[{j}]")
        cap_lit = m.new_bool_var(f"assume[CAP-1][{j}]")
        self.assumption_families[f"CAP-1 capacity of {d.label} ({model.name})"] = cap_lit
        for a, xa in self.x[j].items():
            tb = c.tensor_bytes(model, a.devices)
            pim_cap, normal_cap = c.capacity_kib(a)
            pim_need = sum(tb.op_kib[op] * on_pim[op] for op in PLACEABLE_OPS)
            host_need = sum(tb.op_kib[op] * (1 - on_pim[op]) for op in PLACEABLE_OPS)
            if model.tied_embeddings:
                host_need += tb.embedding_kib * on_pim["lm_head"]
            else:
                host_need += tb.embedding_kib
            if j > 0:
                for st, lit in self.stage_lit[j - 1].items():
                    if st is not None and st.draft2 in self.catalog.models:
                        d2 = self.catalog.models[st.draft2]
                        host_need += c.tensor_bytes(d2, a.devices).total_kib() * lit
            m.add(pim_need + host_need <= pim_cap + normal_cap).only_enforce_if([xa, cap_lit])
            sp_pim = m.new_int_var(0, store_ub, f"spill_pim[{j}][{a.label()}]")
            sp_host = m.new_int_var(0, store_ub, f"spill_host[{j}][{a.label()}]")
            m.add_max_equality(sp_pim, [0, pim_need - pim_cap])    # [CAP-2]
            m.add_max_equality(sp_host, [0, host_need - normal_cap])
            m.add(spill == sp_pim + sp_host).only_enforce_if(xa)
            ns, nj = c.spill_rates(a)
            add_ceil(m, spill_t, spill * ns.numerator, ns.denominator, xa)   # [CAP-3]
            add_ceil(m, spill_e, spill * nj.numerator, nj.denominator, xa)
        # [PASS-1] pass time; [PASS-2] pass energy
        layers = model.layers
        n_ar = 1 if model.parallel_block else 2
        pt_ub = layers * horizon + ub(dur["lm_head"]) + ub(spill_t)
        pe_ub = (layers * (sum(ub(energy[op]) for op in LAYER_OPS) + n_ar * ub(ar_e)) + ub(energy["lm_head"])
                 + ub(spill_e))
        pt = m.new_int_var(0, pt_ub, f"pass_ns[{j}]")
        pe = m.new_int_var(0, pe_ub, f"pass_nj[{j}]")
        m.add(pt == layers * mk + dur["lm_head"] + spill_t)
        m.add(pe == layers * (sum(energy[op] for op in LAYER_OPS) + n_ar * ar_e) + energy["lm_head"] + spill_e)
        pt_cut, pe_cut = self._bound_cuts(j, tokens)
        for a, xa in self.x[j].items():  # [CUT-1]
            m.add(pt >= sum(pt_cut[a][t] * kb[t] for t in tokens)).only_enforce_if(xa)
            m.add(pe >= sum(pe_cut[a][t] * kb[t] for t in tokens)).only_enforce_if(xa)
        # [CUT-2] the same bounds at the best architecture, unconditional (visible to the LP relaxation)
        m.add(pt >= sum(min(pt_cut[a][t] for a in d.archs) * kb[t] for t in tokens))
        m.add(pe >= sum(min(pe_cut[a][t] for a in d.archs) * kb[t] for t in tokens))
        self.pass_time.append(pt)
        self.pass_energy.append(pe)

    def _add_schedule(self, j: int, model: ModelSpec, dur, ar_d, mk, horizon: int, levels: int) -> None:
        """One layer of a parallel block, with no free start times (so no slack to shave).

        At most two operators of the layer can run at once (the graph's width is 2: one per branch), so
        the host's unary resource and the PIM units' cumulative resource reduce exactly to pairwise
        conflicts between incomparable operators u, v: both on the host, or both on PIM with shares
        summing above `levels`. [SCH-1]/[SCH-2] a conflicting pair is ordered by a Boolean o[u,v] or
        o[v,u]; a non-conflicting pair is not ordered. [SCH-3] every start is the earliest one: the
        maximum of its predecessors' ends and the ends of operators ordered before it. [SCH-4] the
        makespan is the latest end. Every feasible schedule induces such orders and the earliest-start
        schedule of those orders is no longer, so the minimum over orders is the optimal makespan.
        """
        m = self.m
        g = layer_graph(model)
        order = layer_order(model.parallel_block)
        ops = [n for n in order if not n.startswith("allreduce")]
        reach = {u: nx.descendants(g, u) for u in g.nodes}
        pairs = [(u, v) for a, u in enumerate(ops) for v in ops[a + 1:] if v not in reach[u] and u not in reach[v]]
        assert all(len(c) <= 2 for c in nx.antichains(g.subgraph(ops))), "pairwise reduction needs width <= 2"
        before: dict[str, list] = {n: [] for n in order}  # (order literal, earlier node)
        for u, v in pairs:
            o_uv = m.new_bool_var(f"order[{j}][{u}<{v}]")
            o_vu = m.new_bool_var(f"order[{j}][{v}<{u}]")
            m.add_bool_or([~o_uv, ~o_vu])
            for pu, yu in self.y[j][u].items():
                for pv, yv in self.y[j][v].items():
                    conflict = (pu.engine == pv.engine == "host") or (
                        pu.engine == pv.engine == "pim" and pu.share + pv.share > levels)
                    if conflict:
                        m.add_bool_or([~yu, ~yv, o_uv, o_vu])
                    else:
                        m.add_bool_or([~yu, ~yv, ~o_uv])
                        m.add_bool_or([~yu, ~yv, ~o_vu])
            before[v].append((o_uv, u))
            before[u].append((o_vu, v))
        start, end = {}, {}
        for node in order:  # topological: predecessors' ends exist; ordered partners get their own vars
            end[node] = m.new_int_var(0, horizon, f"e[{j}][{node}]")
        for node in order:
            terms = [end[p] for p in g.predecessors(node)]
            for lit, u in before[node]:
                w = m.new_int_var(0, horizon, f"w[{j}][{u}<{node}]")
                m.add(w == end[u]).only_enforce_if(lit)
                m.add(w == 0).only_enforce_if(~lit)
                terms.append(w)
            s_node = m.new_int_var(0, horizon, f"s[{j}][{node}]")
            if terms:
                m.add_max_equality(s_node, terms)
            else:
                m.add(s_node == 0)
            m.add(end[node] == s_node + (ar_d if node.startswith("allreduce") else dur[node]))
            start[node] = s_node
        m.add_max_equality(mk, list(end.values()))
        # the same schedule as interval variables: host no-overlap and cumulative PIM shares. They are
        # implied by the orders above (redundant) and let CP-SAT's scheduling propagators reason on it.
        host_iv, pim_iv, pim_dem = [], [], []
        for node in ops:
            for p, yp in self.y[j][node].items():
                iv = m.new_optional_interval_var(start[node], dur[node], end[node], yp, f"iv[{j}][{node}]{p}")
                if p.engine == "host":
                    host_iv.append(iv)
                else:
                    pim_iv.append(iv)
                    pim_dem.append(p.share)
        m.add_no_overlap(host_iv)                    # [SCH-1]
        if pim_iv:
            m.add_cumulative(pim_iv, pim_dem, levels)  # [SCH-2]

    def _bound_cuts(self, j: int, tokens: list[int]) -> tuple[dict, dict]:
        """[CUT-1] per architecture and token count, a pass is no faster (no cheaper) than its critical
        path with every operator at its fastest (cheapest) placement: valid and redundant; it gives the
        LP relaxation the scale of each architecture's pass time."""
        d = self.data[j]
        model = d.spec
        c = self.costs
        pt_cut, pe_cut = {}, {}
        n_ar = 1 if model.parallel_block else 2
        for a in d.archs:
            lb_t, lb_e = {}, {}
            for t in tokens:
                bt, be = {}, {}
                for op in PLACEABLE_OPS:
                    opts = [c.op_cost(model, op, p.engine, p.share, a, t) for p in d.allowed(a, op)]
                    bt[op] = min((o.time_ns for o in opts), default=0)
                    be[op] = min((o.energy_nj for o in opts), default=0)
                ar = c.allreduce_cost(model, a, t)
                if model.parallel_block:
                    path = max(bt["qkv"] + bt["score"] + bt["context"] + bt["o_proj"], bt["ffn_up"] + bt["ffn_down"])
                else:
                    path = sum(bt[op] for op in LAYER_OPS)
                lb_t[t] = model.layers * (path + n_ar * ar.time_ns) + bt["lm_head"]
                lb_e[t] = model.layers * (sum(be[op] for op in LAYER_OPS) + n_ar * ar.energy_nj) + be["lm_head"]
            pt_cut[a], pe_cut[a] = lb_t, lb_e
        return pt_cut, pe_cut

    # [SPEC-3] drafter cycle: one step (unstaged) or gamma2 draft2 steps + one pass (staged)
    def add_cycles(self) -> None:
        m = self.m
        self.cycle_t, self.cycle_e = [], []
        for i in range(self.n_drafters):
            j = i + 1
            steps = {}
            for st in self.stage_lit[i]:
                for a, xa in self.x[j].items():
                    if st is None:
                        continue
                    try:
                        steps[(st, a)] = self.ev.draft2_step(self._probe_design(j, a, st))
                    except ScenarioError:  # a draft2 model cannot run on a host without normal memory
                        m.add_bool_or([~xa, ~self.stage_lit[i][st]])
            extra_t = max((st.draft_length * v.time_ns for (st, _), v in steps.items()), default=0)
            extra_e = max((st.draft_length * v.energy_nj for (st, _), v in steps.items()), default=0)
            ct = m.new_int_var(0, ub(self.pass_time[j]) + extra_t, f"cycle_ns[{i}]")
            ce = m.new_int_var(0, ub(self.pass_energy[j]) + extra_e, f"cycle_nj[{i}]")
            for st, lit in self.stage_lit[i].items():
                if st is None:
                    m.add(ct == self.pass_time[j]).only_enforce_if(lit)
                    m.add(ce == self.pass_energy[j]).only_enforce_if(lit)
                    continue
                for a, xa in self.x[j].items():
                    if (st, a) not in steps:
                        continue
                    step = steps[(st, a)]
                    m.add(ct == self.pass_time[j] + st.draft_length * step.time_ns).only_enforce_if([lit, xa])
                    m.add(ce == self.pass_energy[j] + st.draft_length * step.energy_nj).only_enforce_if([lit, xa])
            self.cycle_t.append(ct)
            self.cycle_e.append(ce)

    def _stored_kib_ub(self, j: int, a: ArchConfig) -> int:
        """Every byte model j could store on architecture a (weights, KV, embedding, draft2 models)."""
        c = self.costs
        tb = c.tensor_bytes(self.data[j].spec, a.devices)
        total = tb.total_kib()
        if j > 0:
            total += max((c.tensor_bytes(self.catalog.models[st.draft2], a.devices).total_kib()
                          for st in self.stage_lit[j - 1] if st is not None and st.draft2 in self.catalog.models),
                         default=0)
        return total

    def _probe_design(self, j: int, a: ArchConfig, st: Staging) -> ModelDesign:
        """A ModelDesign carrying arch + staging, to price a draft2 step (independent of placement)."""
        return ModelDesign(model=self.data[j].spec.name, memory_type=a.memory_type, pim_units=a.pim_units,
                           devices=a.devices, placement={op: HOST for op in PLACEABLE_OPS}, draft_length=1,
                           staging=st)

    # [RND-1] drafting phase per outcome slot; [RND-2] outcome round time; [RND-3] expected round time
    def add_round(self) -> None:
        m = self.m
        V = self.pass_time[0]
        sync = self.costs.host.sync_latency_ns if self.n_drafters else 0
        n_slots = max(len(st.outcomes) for st in self.stats)
        max_r = max((r for st in self.stats for rs, _ in st.outcomes for r in rs), default=0)
        d_ub = max_r * max((ub(ct) for ct in self.cycle_t), default=0)
        r_ub = d_ub + ub(V)
        self.T = m.new_int_var(0, r_ub + sync, "round_ns")
        D = [m.new_int_var(0, d_ub, f"D[{k}]") for k in range(n_slots)]
        MX = [m.new_int_var(0, r_ub, f"maxDV[{k}]") for k in range(n_slots)]
        R = [m.new_int_var(0, r_ub, f"R[{k}]") for k in range(n_slots)]
        for k in range(n_slots):
            m.add_max_equality(MX[k], [D[k], V])
        m.add(self.T >= V + sync)  # [CUT-2] every round contains one verification pass
        for c, st, z in zip(self.choices, self.stats, self.z):
            for k, (rs, _prob) in enumerate(st.outcomes):
                if rs:  # [RND-1]
                    m.add_max_equality(D[k], [r * self.cycle_t[i] for i, r in enumerate(rs)]).only_enforce_if(z)
                else:  # no drafters: autoregressive rounds
                    m.add(D[k] == 0).only_enforce_if(z)
                if c.pipeline:                                                      # [RND-2]
                    add_ceil(m, R[k], (spec.Q_SCALE - st.q) * MX[k] + st.q * (D[k] + V), spec.Q_SCALE, z)
                else:
                    m.add(R[k] == D[k] + V).only_enforce_if(z)
            add_ceil(m, self.T - sync, sum(prob * R[k] for k, (_rs, prob) in enumerate(st.outcomes)),  # [RND-3]
                     spec.OUTCOME_SCALE, z)

    # [EN-2] drafting energy (+ wasted optimistic drafts); [EN-3] static; [EN-4] energy per round
    def add_energy(self) -> None:
        m = self.m
        parts = [self.pass_energy[0]]
        for i in range(self.n_drafters):
            max_rounds = max(st.rounds_scaled[i] for st in self.stats)
            e_ub = -(-max_rounds * ub(self.cycle_e[i]) // spec.OUTCOME_SCALE)
            expected = m.new_int_var(0, e_ub, f"draft_expected_nj[{i}]")
            total = m.new_int_var(0, 2 * e_ub, f"draft_nj[{i}]")
            for st, z in zip(self.stats, self.z):
                add_ceil(m, expected, st.rounds_scaled[i] * self.cycle_e[i], spec.OUTCOME_SCALE, z)
                waste = st.drafter_q[i]
                add_ceil(m, total, (spec.Q_SCALE + waste) * expected, spec.Q_SCALE, z)
            parts.append(total)
        for j in range(len(self.data)):
            p_max = max(self.costs.static_power_mw(a) for a in self.x[j])
            p_min = min(self.costs.static_power_mw(a) for a in self.x[j])
            st = m.new_int_var(0, -(-p_max * ub(self.T) // 1000), f"static_nj[{j}]")
            for a, xa in self.x[j].items():
                add_ceil(m, st, self.costs.static_power_mw(a) * self.T, 1000, xa)
            m.add(1000 * st >= p_min * self.T)  # [CUT-2] unconditional static-energy floor
            parts.append(st)
        self.energy = m.new_int_var(0, sum(ub(p) for p in parts), "energy_nj")
        m.add(self.energy == sum(parts))

    # ------------------------------------------------------------------------------------------
    # solutions
    # ------------------------------------------------------------------------------------------
    def decode(self, value) -> Design:
        """Design from a solution (`value(var) -> int`)."""
        archs, places = [], []
        for j in range(len(self.data)):
            archs.append(next(a for a, v in self.x[j].items() if value(v)))
            places.append({op: next(p for p, v in self.y[j][op].items() if value(v)) for op in PLACEABLE_OPS})
        c = next(c for c, z in zip(self.choices, self.z) if value(z))
        return self.space.build(archs, places, c)

    def choice_index(self, design: Design) -> int:
        return self.choices.index(design.choice)

    def decision_literals(self, design: Design) -> list[tuple[cp_model.IntVar, int]]:
        """(variable, value) for every decision Boolean; raises if the design is outside the space."""
        bad = self.space.violations(design)
        if bad:
            raise ScenarioError(f"hint: {bad[0]}")
        out = []
        for j, (_, md) in enumerate(design.models()):
            out += [(v, int(b == md.arch)) for b, v in self.x[j].items()]
            for op in PLACEABLE_OPS:
                key = md.placement[op].key
                out += [(v, int(q.key == key)) for q, v in self.y[j][op].items()]
        k = self.choice_index(design)
        out += [(z, int(i == k)) for i, z in enumerate(self.z)]
        return out

    def enforce_families(self, model: cp_model.CpModel) -> None:
        """Switch on every constraint family that carries an assumption literal (all but diagnosis)."""
        for v in self.assumption_families.values():
            model.add(model.get_bool_var_from_proto_index(v.index) == 1)

    def min_tokens_micro(self) -> int:
        return min(st.tokens_micro for st in self.stats)
