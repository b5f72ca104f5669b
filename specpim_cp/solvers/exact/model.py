"""CP-SAT model of the whole design space of one scenario (formulations/*.md has the mathematics).

One `add_*` method per constraint family, each carrying the family's ID. Every cost coefficient is an integer
of the scenario's `PriceTable` (prices.py), so the model prices a design with the evaluator's integers.

Decision variables (all Boolean one-hots):
  x[j][a]      model j uses architecture a (memory type, PIM units per group, device count)
  y[j][o][p]   operator o of model j takes placement p (host with a tensor layout, or PIM on a share)
  z[c]         speculation choice c (draft and staging of every drafter, pipeline on/off; the last one,
               when the scenario has drafters, is not speculating: the verifier alone, NOSPEC, no_spec.py)
Derived integers: operator, all-reduce and embedding durations and energies, one layer's schedule, pass times
and energies, drafter cycles, drafting phases per outcome, round time T (ns), energy per round (nJ).

Families: ARCH add_architecture, MAP add_placement, SPEC add_speculation_choice, DUR add_durations,
SCH add_layer_schedule, CAP add_capacity, PASS add_passes, CUT add_cuts, CYC add_cycles, RND add_round,
EN add_energy; NOSPEC (no_spec.py) amends ARCH, MAP, CUT-3, RND and EN for the verifier alone. The
canonical optimum's integer levels (OBJ-3) are keys over the decision literals, `tie_break_keys`, whose rows
`add_tie_break` adds to the clones canonical.py solves.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from fractions import Fraction

import networkx as nx
from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog, ModelSpec
from specpim_cp.errors import ScenarioError
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import RoundStats, pass_tokens, tree_pass_tokens
from specpim_cp.problem.design import ArchConfig, Design, DrafterChoice, Placement, SpecChoice, Staging
from specpim_cp.problem.operators import LAYER_OPS, PLACEABLE_OPS, is_chain, layer_graph, layer_order
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.space import DesignSpace, ModelOptions
from specpim_cp.solvers.exact import heads as head_rows
from specpim_cp.solvers.exact import no_spec as nospec
from specpim_cp.solvers.exact import tie_keys
from specpim_cp.solvers.exact.choice_bounds import (
    choice_device_bounds,
    min_draft2_steps,
    min_pass_bounds,
    parallel_layer_bound,
)
from specpim_cp.solvers.exact.energy_bounds import TimePricedEnergy
from specpim_cp.solvers.exact.prices import PriceTable
from specpim_cp.solvers.exact.rows import add_ceil, capacity_terms, ub
from specpim_cp.solvers.exact.shared_device import add_shared_device, idle_energy_var
from specpim_cp.solvers.exact.tie_keys import TieKey


class SpecModel:
    """Builds the CP-SAT model; ratio.py and fronts.py drive it (Dinkelbach, epsilon-constraint)."""

    def __init__(self, scenario: Scenario, catalog: Catalog, evaluator: Evaluator | None = None, *,
                 model: cp_model.CpModel | None = None, shared_x: list[dict] | None = None, tag: str = "",
                 capacity: bool = True, prices: PriceTable | None = None):
        """The defaults build one scenario's model. A workload mix (solvers/mix/cpsat_model.py) builds one copy per cell
        into one `model`: `shared_x` are the architecture one-hots of the first copy (ARCH is then that
        copy's), `tag` suffixes this copy's variable names, `capacity=False` leaves CAP to the mix.
        `prices`: the scenario's price table, if the caller has it (built from the evaluator otherwise);
        every coefficient is read from it. `ev` and `costs` stay for callers that re-price designs."""
        self.scenario = scenario
        self.catalog = catalog
        self.ev = evaluator or Evaluator(scenario, catalog)
        self.costs = self.ev.costs
        self.prices = prices or PriceTable.build(self.ev, DesignSpace(scenario, catalog))
        if self.prices.space.scenario is not scenario and self.prices.space.scenario != scenario:
            raise ValueError("SpecModel: the price table was built for another scenario")
        self.space = self.prices.space
        self.m = model if model is not None else cp_model.CpModel()
        self.settled: list = []  # [NOSPEC-6] the verifier alone's designs `no_spec.settle` found
        self.settled_levels: set[int] = set()  # the levels `no_spec.settle` has settled (round time, energy)
        self._latency_base: tuple[tuple[int, int], cp_model.CpModel] | None = None  # `working_copy`'s
        self.shared_x = shared_x
        self.tag = tag
        self.with_capacity = capacity
        first_var = len(self.m.proto.variables)
        self.n_drafters = len(scenario.drafters)
        self.data: list[ModelOptions] = self.space.models
        self.choices: tuple[SpecChoice, ...] = self.prices.choices  # never empty (`PriceTable.build`)
        self.stats: list[RoundStats] = list(self.prices.stats)
        self.assumption_families: dict[str, cp_model.IntVar] = {}
        self._allowed: dict[tuple[int, ArchConfig, str], frozenset[Placement]] = {}  # `valid`'s
        self.energy_rows: list[int] = []  # rows that only define energies (`drop_energy_rows`)
        self.idle_parts: list[tuple] = []  # EN-2 per model: (j, idle energy variable, idle mW per architecture)
        self.build()
        self._tag_names(first_var)

    def places(self, j: int, op: str) -> list[Placement]:
        """Every placement of model j's operator `op` over all its architectures (the y literals)."""
        d = self.data[j]
        return list(dict.fromkeys(p for a in d.archs for p in d.allowed(a, op)))

    def valid(self, j: int, a: ArchConfig, op: str, p: Placement) -> bool:
        allowed = self._allowed.get((j, a, op))
        if allowed is None:  # a set per (model, architecture, operator): a tuple compares every placement
            allowed = self._allowed[(j, a, op)] = frozenset(self.data[j].placements[a][op])
        return p in allowed

    # ------------------------------------------------------------------------------------------
    # model
    # ------------------------------------------------------------------------------------------
    def build(self) -> None:
        m = self.m
        self.x = self.shared_x if self.shared_x is not None else [
            {a: m.new_bool_var(f"x[{j}][{a.label()}]") for a in d.archs} for j, d in enumerate(self.data)]
        self.y = [{op: {p: m.new_bool_var(f"y[{j}][{op}][{p.engine}{p.share}{p.layout}]") for p in self.places(j, op)}
                   for op in PLACEABLE_OPS} for j in range(len(self.data))]
        self.z = [m.new_bool_var(f"z[{k}]") for k in range(len(self.choices))]
        self.no_spec = nospec.no_spec_literal(self.choices, self.z)  # [NOSPEC] the verifier alone, or None
        self._layout_lits: dict[tuple[int, str, str], cp_model.IntVar] = {}
        if self.shared_x is None:
            self.add_architecture()
        self.colo = head_rows.add_colocation(self)  # [HEAD-2]
        self.add_placement()
        self.add_speculation_choice()
        self.pass_time, self.pass_energy = [], []
        self.tree_pass: list[dict[int, tuple[cp_model.IntVar, cp_model.IntVar]]] = []
        for j in range(len(self.data)):
            if self.with_capacity:
                self.add_capacity(j)
            pt, pe = self._pass_block(j, self.kb[j], "")
            self.pass_time.append(pt)
            self.pass_energy.append(pe)
            self.tree_pass.append(self.add_tree_passes(j))
        add_shared_device(self)  # EDGE-2 one device's channels and capacity (formulations/edge.md)
        self.add_cycles()
        self.head_transfer = head_rows.add_transfers(self)  # [HEAD-4]
        self.add_round()
        self.add_energy()
        self.add_choice_cuts()
        self.add_idle_cut()

    def add_architecture(self) -> None:
        """[ARCH] ARCH-1 exactly one architecture per model (none for a drafter when not speculating,
        NOSPEC-1); ARCH-2 the device budget; NOSPEC-2 the verifier alone on the drafters' devices."""
        m = self.m
        for j, xs in enumerate(self.x):
            nospec.add_one_or_absent(m, xs.values(), j, self.no_spec)
        nospec.add_alone_devices(self)
        if self.scenario.device_budget is not None:
            lit = m.new_bool_var("assume[ARCH-2]")
            self.assumption_families["ARCH-2 device budget"] = lit
            m.add(sum(a.own_devices * v for xs in self.x for a, v in xs.items())
                  <= self.scenario.device_budget).only_enforce_if(lit)

    def add_placement(self) -> None:
        """[MAP] MAP-1 one placement per operator; MAP-2 the placement exists on the chosen architecture."""
        m = self.m
        for j, d in enumerate(self.data):
            for op in PLACEABLE_OPS:
                nospec.add_one_or_absent(m, self.y[j][op].values(), j, self.no_spec)
                for a, xa in self.x[j].items():
                    for p, yp in self.y[j][op].items():
                        if not self.valid(j, a, op, p):
                            m.add_bool_or([~xa, ~yp])

    def add_speculation_choice(self) -> None:
        """[SPEC] SPEC-1 one speculation choice; SPEC-2 each model's pass token count and each drafter's
        staging follow from it."""
        m = self.m
        m.add_exactly_one(self.z)
        self.tokens_micro = sum(st.tokens_micro * z for st, z in zip(self.stats, self.z))
        self.kb: list[dict[int, cp_model.IntVar]] = []
        for j in range(len(self.data)):
            groups: dict[int, list[cp_model.IntVar]] = {}
            for c, z in zip(self.choices, self.z):
                if j and not c.speculates:  # [NOSPEC] a drafter runs no pass
                    continue
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
                if not c.speculates:
                    continue
                groups2.setdefault(c.staging[i], []).append(z)
            lits = {}
            for st, zs in groups2.items():
                b = m.new_bool_var(f"stage[{i}]={st}")
                m.add(b == sum(zs))
                lits[st] = b
            self.stage_lit.append(lits)
        # draft literal per drafter and kind of cycle: (staging, tree) -- chains unstaged or staged, trees
        self.draft_lit: list[dict[tuple, cp_model.IntVar]] = []
        for i in range(self.n_drafters):
            groups3: dict = {}
            for c, z in zip(self.choices, self.z):
                if not c.speculates:
                    continue
                groups3.setdefault((c.drafters[i].staging, c.drafters[i].tree), []).append(z)
            self.draft_lit.append({key: self._lit_sum(f"draft[{i}]={key}", zs) for key, zs in groups3.items()})

    def _pass_block(self, j: int, kb: dict, tag: str) -> tuple[cp_model.IntVar, cp_model.IntVar]:
        """Model j's pass at the token count `kb` selects (a literal per count, or one count at 1):
        durations, layer schedule, pass time and energy, cuts."""
        dur, energy, ar, emb = self.add_durations(j, kb, tag)
        mk = self.add_layer_schedule(j, dur, ar[0], tag)
        pt, pe = self.add_passes(j, dur, energy, ar, emb, mk, tag)
        self.add_cuts(j, pt, pe, kb)
        return pt, pe

    def add_tree_passes(self, j: int) -> dict[int, tuple[cp_model.IntVar, cp_model.IntVar]]:
        """[TREE] TREE-3 a token tree's drafting passes: for every token count t = batch x (1, w_1, ..,
        w_{D-1}) some tree of model j's options needs, one pass block at exactly t tokens (durations,
        schedule, pass time and energy, cuts, on the model's one placement); CYC-1 sums them per tree."""
        return {t: self._pass_block(j, {t: 1}, f"@{t}") for t in self._tree_tokens(j)}

    def _tree_tokens(self, j: int) -> list[int]:
        """Token counts of model j's tree-drafting passes over every speculation choice (none for the
        verifier and for drafters without trees)."""
        if j == 0 or head_rows.one_pass(self, j - 1):  # a one-pass head's tree: its cycle pass [HEAD-3]
            return []
        b = self.scenario.batch_size
        return sorted({t for c in self.choices if c.speculates and c.drafters[j - 1].tree is not None
                       for t in tree_pass_tokens(b, c.drafters[j - 1])})

    def _lit_sum(self, name: str, lits: list) -> cp_model.IntVar:
        """A Boolean equal to the sum of mutually exclusive literals (0 when there are none)."""
        b = self.m.new_bool_var(name)
        self.m.add(b == sum(lits)) if lits else self.m.add(b == 0)
        return b

    def _energy_row(self, row, enforce=None) -> None:
        """Add a row that only defines an energy (enforced on `enforce`) and remember it."""
        ct = self.m.add(row)
        if enforce is not None:
            ct.only_enforce_if(enforce)
        self.energy_rows.append(ct.index)

    def working_copy(self, latency_only: bool = False) -> cp_model.CpModel:
        """A clone of the model with every family enforced, for one solve to add its rows to; `latency_only`:
        with its energy rows emptied (`drop_energy_rows`), from a copy kept until the model gains a row or a
        variable (emptying them costs more than a clone: 38 ms on palm-62b-full-b8)."""
        if not latency_only:
            model = self.m.clone()
            self.enforce_families(model)
            return model
        key = (len(self.m.proto.constraints), len(self.m.proto.variables))
        if self._latency_base is None or self._latency_base[0] != key:
            base = self.m.clone()
            self.enforce_families(base)
            self.drop_energy_rows(base)
            self._latency_base = (key, base)
        return self._latency_base[1].clone()

    def drop_energy_rows(self, model: cp_model.CpModel) -> None:
        """Empty, in a clone of the model, every row that only defines an energy (DUR-1..3 energies, PASS-2,
        CUT-1..3 energy bounds, CYC-1 cycle energies, EN-1..3). Each such row fixes or bounds an energy
        variable from the decisions and T, within a domain wide enough for every design, so it never
        restricts a non-energy variable: a latency solve without energy caps keeps its optimum and
        loses about half its rows (formulations/objectives.md, [OBJ-1] "Latency solves")."""
        for i in self.energy_rows:
            model.proto.constraints[i].clear_linear()

    def layout_literal(self, j: int, op: str, layout: str) -> cp_model.IntVar:
        """1 iff model j's operator `op` keeps its tensor with `layout` (cached)."""
        key = (j, op, layout)
        if key not in self._layout_lits:
            first_var = len(self.m.proto.variables)
            self._layout_lits[key] = self._lit_sum(f"layout[{j}][{op}]={layout}",
                                                   [v for p, v in self.y[j][op].items() if p.layout == layout])
            self._tag_names(first_var)
        return self._layout_lits[key]

    def _tag_names(self, first: int) -> None:
        """Suffix `tag` to the names of the variables from index `first` on (a mix cell's copy)."""
        if self.tag:
            variables = self.m.proto.variables
            for i in range(first, len(variables)):
                variables[i].name += self.tag

    def add_durations(self, j: int, kb: dict, tag: str = ""):
        """[DUR] DUR-1 operator durations and energies from the cost tables, enforced on (architecture,
        placement) at the token count `kb` selects; DUR-2 the all-reduce's; DUR-3 the embedding lookup's
        (on the LM head's layout)."""
        m = self.m
        d = self.data[j]
        pm = self.prices.models[j]
        tokens = sorted(kb)
        selectors = [kb[t] for t in tokens]

        def weighted(coeffs: list[int]):  # sum of coeffs[i] x selectors[i], built by OR-Tools in C++
            return cp_model.LinearExpr.weighted_sum(selectors, coeffs)

        dur, energy = {}, {}
        for op in PLACEABLE_OPS:
            table = {}  # (arch, placement) -> the price at each count of `tokens`
            for a in d.archs:
                for p in d.allowed(a, op):
                    by_tokens = pm.op_cost[(op, a, p)]
                    table[(a, p)] = [by_tokens[t] for t in tokens]
            dv = m.new_int_var(0, max(oc.time_ns for v in table.values() for oc in v), f"dur{tag}[{j}][{op}]")
            ev = m.new_int_var(0, max(oc.energy_nj for v in table.values() for oc in v), f"en{tag}[{j}][{op}]")
            for (a, p), costs_t in table.items():
                lits = [self.x[j][a], self.y[j][op][p]]
                m.add(dv == weighted([oc.time_ns for oc in costs_t])).only_enforce_if(lits)
                self._energy_row(ev == weighted([oc.energy_nj for oc in costs_t]), lits)
            dur[op], energy[op] = dv, ev
        ar_t = {(a, t): pm.allreduce[a][t] for a in d.archs for t in tokens}
        ar_d = m.new_int_var(0, max(v.time_ns for v in ar_t.values()), f"ar{tag}[{j}]")
        ar_e = m.new_int_var(0, max(v.energy_nj for v in ar_t.values()), f"ar_en{tag}[{j}]")
        for a, xa in self.x[j].items():
            m.add(ar_d == weighted([ar_t[(a, t)].time_ns for t in tokens])).only_enforce_if(xa)
            self._energy_row(ar_e == weighted([ar_t[(a, t)].energy_nj for t in tokens]), xa)
        layouts = sorted({p.layout for p in self.y[j]["lm_head"]})
        emb_t = {(a, lay, t): pm.embedding[(a, lay)][t] for a in d.archs for lay in layouts for t in tokens}
        em_d = m.new_int_var(0, max(v.time_ns for v in emb_t.values()), f"emb{tag}[{j}]")
        em_e = m.new_int_var(0, max(v.energy_nj for v in emb_t.values()), f"emb_en{tag}[{j}]")
        for a, xa in self.x[j].items():
            for lay in layouts:
                lits = [xa, self.layout_literal(j, "lm_head", lay)]
                m.add(em_d == weighted([emb_t[(a, lay, t)].time_ns for t in tokens])).only_enforce_if(lits)
                self._energy_row(em_e == weighted([emb_t[(a, lay, t)].energy_nj for t in tokens]), lits)
        return dur, energy, (ar_d, ar_e), (em_d, em_e)

    def add_layer_schedule(self, j: int, dur: dict, ar_d, tag: str = "") -> cp_model.IntVar:
        """[SCH] one layer's makespan: SCH-0 a sequential block is the sum of its nodes; a parallel block
        is scheduled exactly by SCH-1..4 (`_add_schedule`)."""
        m = self.m
        model = self.data[j].spec
        horizon = sum(ub(dur[op]) for op in LAYER_OPS) + 2 * ub(ar_d)
        mk = m.new_int_var(0, horizon, f"makespan{tag}[{j}]")
        if is_chain(model.parallel_block):  # SCH-0: a chain runs its nodes one after another
            n_ar_nodes = sum(1 for n in layer_order(model.parallel_block) if n.startswith("allreduce"))
            m.add(mk == sum(dur[op] for op in LAYER_OPS) + n_ar_nodes * ar_d)
        else:
            self._add_schedule(j, model, dur, ar_d, mk, horizon, self.prices.share_levels, tag)
        return mk

    def add_capacity(self, j: int) -> None:
        """[CAP] CAP-1 the PIM units hold what the layouts put there; CAP-2 the normal units likewise
        (weights and KV cache at the maximum context; an untied embedding beside the LM head; a draft2
        model by `CostModel.draft2_layout`). Every coefficient is the evaluator's, from the price table:
        `CapacityTable.tensor_split` and `Evaluator.draft2_split`, so both count the same KiB."""
        m = self.m
        d = self.data[j]
        model = d.spec
        pm = self.prices.models[j]
        cap_lit = m.new_bool_var(f"assume[CAP][{j}]")
        self.assumption_families[f"CAP capacity of {d.label} ({model.name})"] = cap_lit
        heads_pim, heads_normal = head_rows.colocated_needs(self) if j == 0 else ([], [])  # [HEAD-2]
        for a, xa in self.x[j].items():
            if a.colocated:  # [HEAD-2] counted in the verifier's rows
                continue
            pim_terms, normal_terms = capacity_terms(self, j, a)
            pim_need, normal_need = list(heads_pim) + pim_terms, list(heads_normal) + normal_terms
            pim_cap, normal_cap = pm.capacity_kib[a]
            m.add(sum(pim_need) <= pim_cap).only_enforce_if([xa, cap_lit])        # CAP-1
            m.add(sum(normal_need) <= normal_cap).only_enforce_if([xa, cap_lit])  # CAP-2

    def add_passes(self, j: int, dur: dict, energy: dict, ar, emb, mk,
                   tag: str = "") -> tuple[cp_model.IntVar, cp_model.IntVar]:
        """[PASS] PASS-1 pass time = embedding lookup + layers x makespan + LM head; PASS-2 pass energy."""
        m = self.m
        model = self.data[j].spec
        ar_e, (em_d, em_e) = ar[1], emb
        layers = model.layers
        n_ar = 1 if model.parallel_block else 2
        pt_ub = ub(em_d) + layers * ub(mk) + ub(dur["lm_head"])
        pe_ub = ub(em_e) + layers * (sum(ub(energy[op]) for op in LAYER_OPS) + n_ar * ub(ar_e)) + ub(energy["lm_head"])
        pt = m.new_int_var(0, pt_ub, f"pass_ns{tag}[{j}]")
        pe = m.new_int_var(0, pe_ub, f"pass_nj{tag}[{j}]")
        m.add(pt == em_d + layers * mk + dur["lm_head"])
        self._energy_row(pe == em_e + layers * (sum(energy[op] for op in LAYER_OPS) + n_ar * ar_e)
                         + energy["lm_head"])
        return pt, pe

    def add_cuts(self, j: int, pt, pe, kb: dict) -> None:
        """[CUT] valid redundant bounds: CUT-1 per architecture and token count a pass is no faster (no
        cheaper) than its critical path at every operator's fastest (cheapest) placement; CUT-2 the same
        at the best architecture, unconditional (visible to the LP relaxation)."""
        m = self.m
        d = self.data[j]
        tokens = sorted(kb)
        pt_cut, pe_cut = self._bound_cuts(j, tokens)
        for a, xa in self.x[j].items():  # CUT-1
            m.add(pt >= sum(pt_cut[a][t] * kb[t] for t in tokens)).only_enforce_if(xa)
            self._energy_row(pe >= sum(pe_cut[a][t] * kb[t] for t in tokens), xa)
        m.add(pt >= sum(min(pt_cut[a][t] for a in d.archs) * kb[t] for t in tokens))  # CUT-2
        self._energy_row(pe >= sum(min(pe_cut[a][t] for a in d.archs) * kb[t] for t in tokens))

    def _add_schedule(self, j: int, model: ModelSpec, dur, ar_d, mk, horizon: int, levels: int,
                      tag: str = "") -> None:
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
            o_uv = m.new_bool_var(f"order{tag}[{j}][{u}<{v}]")
            o_vu = m.new_bool_var(f"order{tag}[{j}][{v}<{u}]")
            m.add_bool_or([~o_uv, ~o_vu])
            for pu, yu in self.y[j][u].items():
                for pv, yv in self.y[j][v].items():
                    conflict = self._conflict_literal(j, pu, pv, levels)
                    if conflict is True:
                        m.add_bool_or([~yu, ~yv, o_uv, o_vu])
                    elif conflict is False:
                        m.add_bool_or([~yu, ~yv, ~o_uv])
                        m.add_bool_or([~yu, ~yv, ~o_vu])
                    else:  # a host operator that contends with PIM on some architectures only
                        m.add_bool_or([~yu, ~yv, ~conflict, o_uv, o_vu])
                        m.add_bool_or([~yu, ~yv, conflict, ~o_uv])
                        m.add_bool_or([~yu, ~yv, conflict, ~o_vu])
            before[v].append((o_uv, u))
            before[u].append((o_vu, v))
        start, end = {}, {}
        for node in order:  # topological: predecessors' ends exist; ordered partners get their own vars
            end[node] = m.new_int_var(0, horizon, f"e{tag}[{j}][{node}]")
        for node in order:
            terms = [end[p] for p in g.predecessors(node)]
            for lit, u in before[node]:
                w = m.new_int_var(0, horizon, f"w{tag}[{j}][{u}<{node}]")
                m.add(w == end[u]).only_enforce_if(lit)
                m.add(w == 0).only_enforce_if(~lit)
                terms.append(w)
            s_node = m.new_int_var(0, horizon, f"s{tag}[{j}][{node}]")
            if terms:
                m.add_max_equality(s_node, terms)
            else:
                m.add(s_node == 0)
            m.add(end[node] == s_node + (ar_d if node.startswith("allreduce") else dur[node]))
            start[node] = s_node
        m.add_max_equality(mk, list(end.values()))
        # the same schedule as interval variables: host no-overlap and cumulative PIM shares. They are
        # implied by the orders above (redundant) and let CP-SAT's scheduling propagators reason on it.
        # A host operator that contends with the PIM units takes every PIM slot (as in the evaluator).
        host_iv, pim_iv, pim_dem = [], [], []
        for node in ops:
            for p, yp in self.y[j][node].items():
                iv = m.new_optional_interval_var(start[node], dur[node], end[node], yp, f"iv{tag}[{j}][{node}]{p}")
                if p.engine == "pim":
                    pim_iv.append(iv)
                    pim_dem.append(p.share)
                    continue
                host_iv.append(iv)
                contends = self._conflict_literal(j, p, Placement(engine="pim", share=levels), levels)
                if contends is False:
                    continue
                if contends is not True:
                    present = m.new_bool_var(f"contending{tag}[{j}][{node}]{p}")
                    m.add_bool_and([yp, contends]).only_enforce_if(present)
                    m.add_bool_or([~yp, ~contends, present])
                    iv = m.new_optional_interval_var(start[node], dur[node], end[node], present,
                                                     f"iv_c{tag}[{j}][{node}]{p}")
                pim_iv.append(iv)
                pim_dem.append(levels)
        m.add_no_overlap(host_iv)                    # SCH-1
        if pim_iv:
            m.add_cumulative(pim_iv, pim_dem, levels)  # SCH-2

    def _conflict_literal(self, j: int, pu: Placement, pv: Placement, levels: int):
        """Whether two concurrent operators of model j conflict: True, False, or a literal that is 1
        exactly on the architectures where they do (a host operator whose layout shares channels with
        the PIM units, `CostModel.host_contends_with_pim`, against a PIM operator)."""
        if pu.engine == pv.engine:
            return pu.engine == "host" or pu.share + pv.share > levels
        host = pu if pu.engine == "host" else pv
        archs = self.data[j].archs
        contends = [a for a in archs if self.prices.models[j].contends[(a, host.layout)]]
        if not contends:
            return False
        if len(contends) == len(archs):
            return True
        key = (j, "contends", host.layout)
        if key not in self._layout_lits:
            self._layout_lits[key] = self._lit_sum(f"contends[{j}][{host.layout}]", [self.x[j][a] for a in contends])
        return self._layout_lits[key]

    def add_choice_cuts(self) -> None:
        """[CUT] CUT-3 valid redundant bounds per speculation choice: the round time (energy) of choice c
        is at least its round formula evaluated at every pass's CUT-1 bound, minimised over the device
        counts the budget allows (the formulas are nondecreasing in every pass time and energy); summed
        over the choice literals it gives the LP relaxation the price of long drafts."""
        m = self.m
        b = self.scenario.batch_size
        sync = self.prices.round_sync_ns
        per_n = [self._min_pass_bounds(j) for j in range(len(self.data))]
        budget = self.scenario.device_budget
        counts = [sorted(pn) for pn in per_n]
        tuples = [t for t in itertools.product(*counts) if budget is None or sum(t) <= budget]
        single = [head_rows.one_pass(self, i) for i in range(self.n_drafters)]
        d2_min = [min_draft2_steps(self.prices, self.data[i + 1], i, self.stage_lit[i]) for i in range(self.n_drafters)]
        lb_t, lb_e = [], []
        self.device_bounds: list[list[tuple[tuple[int, ...], int, int]]] = []  # per choice: (devices, ns, nJ)
        self.arch_energy_bounds: dict[int, dict[tuple[int, ArchConfig], int]] = {}  # CUT-4, `tighten_energy`
        self._cut4_done: dict[int, Fraction] = {}  # per choice: the limit `tighten_energy` priced it up to
        self._priced: TimePricedEnergy | None = None
        for c, st in zip(self.choices, self.stats):
            best_t = best_e = None
            self.device_bounds.append([])
            pairs = (zip(tuples, choice_device_bounds(c, st, tuples, per_n, d2_min, b, sync, single))
                     if c.speculates else
                     ((tup, (t, e)) for tup, t, e in nospec.no_spec_bounds(self, c, st, per_n, b)))  # [NOSPEC] CUT-3
            for tup, bound in pairs:
                if bound is None:
                    continue
                self.device_bounds[-1].append((tup, *bound))
                best_t = bound[0] if best_t is None else min(best_t, bound[0])
                best_e = bound[1] if best_e is None else min(best_e, bound[1])
            lb_t.append(best_t or 0)
            lb_e.append(best_e or 0)
        m.add(self.T >= sum(v * z for v, z in zip(lb_t, self.z) if v))      # CUT-3
        self._energy_row(self.energy >= sum(v * z for v, z in zip(lb_e, self.z) if v))
        self.choice_bounds = (tuple(lb_t), tuple(lb_e))  # (round ns, energy nJ) bound per choice, for OBJ-1

    def tighten_energy(self, limit: Fraction, choices: Collection[int] | None = None) -> int:
        """[CUT] CUT-4 raise the energy bound of every choice (of `choices`, default all) whose CUT-3 energy
        per token-micro is at most `limit` (nJ per round / tokens x TOKENS_SCALE; the others cannot beat a
        design of that ratio) to the time-priced bound (`energy_bounds.TimePricedEnergy`), and add the row
        E >= sum_c bound_c z_c. A choice already priced up to `limit` is skipped. Returns how many choices
        it raised."""
        lb_t, lb_e = self.choice_bounds
        if head_rows.skips_cut4(self):  # its envelopes know neither colocated heads nor one-pass trees
            return 0
        new = list(lb_e)
        for k, (c, st) in enumerate(zip(self.choices, self.stats)):
            cut = limit * st.tokens_micro
            done = self._cut4_done.get(k)
            if not c.speculates:  # [NOSPEC] the verifier alone keeps its bounds (NOSPEC-5/6), per architecture CUT-1's
                b = self.scenario.batch_size
                self.arch_energy_bounds.setdefault(k, nospec.arch_energy_bounds(self, *self._bound_cuts(0, [b])))
                continue
            if lb_e[k] > cut or (choices is not None and k not in choices) or (done is not None and done >= limit):
                continue
            self._cut4_done[k] = limit
            if self._priced is None:  # its pass envelopes serve every later call
                self._priced = TimePricedEnergy(self)
            priced = self._priced
            entries = [e for e in self.device_bounds[k] if e[2] <= cut]  # CUT-3's bound of the others is above
            priced_e, arch_lb = priced.choice(c, st, [(devices, t_lb) for devices, t_lb, _ in entries])
            arch_lb = {key: max(v, lb_e[k]) for key, v in arch_lb.items()}
            best = None
            for (devices, _, e_lb), got in zip(entries, priced_e):
                if got is not None:
                    best = max(e_lb, got) if best is None else min(best, max(e_lb, got))
            least: dict[tuple[int, int], int] = {}  # (model, device count) -> least CUT-3 bound, first seen first
            for devices, _, e_lb in self.device_bounds[k]:
                if e_lb > cut:  # these counts cannot beat the limit: their architectures' bound is CUT-3's
                    best = e_lb if best is None else min(best, e_lb)
                    for j, n in enumerate(devices):
                        cur = least.get((j, n))
                        least[(j, n)] = e_lb if cur is None else min(cur, e_lb)
            for (j, n), e_lb in least.items():  # architectures in the order a scan of the entries meets them
                for a in priced.by_devices[j].get(n, ()):
                    arch_lb[(j, a)] = min(arch_lb.get((j, a), e_lb), e_lb)
            new[k] = lb_e[k] if best is None else max(lb_e[k], best)
            self.arch_energy_bounds[k] = arch_lb
        raised = sum(n > o for n, o in zip(new, lb_e))
        if raised:
            self._energy_row(self.energy >= sum(v * z for v, z in zip(new, self.z) if v))  # CUT-4
            self.choice_bounds = (lb_t, tuple(new))
        return raised

    def add_idle_cut(self) -> None:
        """[EN] EN-4 the McCormick underestimator of idle power x round time: 1000 I_j >= P_min T +
        T_min sum_a (P(a) - P_min) x_ja, with T_min the least CUT-3 round-time bound (valid, redundant)."""
        t_min = min(self.choice_bounds[0])
        for j, idle, power in self.idle_parts:
            p_min = min(power.values())
            self._energy_row(1000 * idle >= p_min * self.T + t_min * sum((p - p_min) * self.x[j][a]
                                                                         for a, p in power.items() if p > p_min)
                             - nospec.idle_relief(self, j, p_min))

    def _min_pass_bounds(self, j: int) -> dict[int, dict[int, tuple[int, int, int]]]:
        """`choice_bounds.min_pass_bounds` of model j over its pass token counts, at CUT-1's bounds."""
        tokens = set(self.kb[j]) | set(self.tree_pass[j])
        return min_pass_bounds(self.prices, self.data[j], j, tokens, *self._bound_cuts(j, sorted(tokens)))

    def _bound_cuts(self, j: int, tokens: list[int]) -> tuple[dict, dict]:
        """[CUT-1] per architecture and token count, a pass is no faster (no cheaper) than its critical
        path with every operator at its fastest (cheapest) placement: valid and redundant; it gives the
        LP relaxation the scale of each architecture's pass time."""
        d = self.data[j]
        model = d.spec
        pm = self.prices.models[j]
        pt_cut, pe_cut = {}, {}
        n_ar = 1 if model.parallel_block else 2
        cache = self.__dict__.setdefault("_bound_cache", {})  # (j, arch, t) -> (time, energy) bound
        for a in d.archs:
            lb_t, lb_e = {}, {}
            priced = {op: [pm.op_cost[(op, a, p)] for p in d.allowed(a, op)] for op in PLACEABLE_OPS}
            for t in tokens:
                hit = cache.get((j, a, t))
                if hit is not None:
                    lb_t[t], lb_e[t] = hit
                    continue
                bt, be = {}, {}
                for op in PLACEABLE_OPS:
                    opts = [by_tokens[t] for by_tokens in priced[op]]
                    bt[op] = min((o.time_ns for o in opts), default=0)
                    be[op] = min((o.energy_nj for o in opts), default=0)
                ar = pm.allreduce[a][t]
                embs = [pm.embedding[(a, lay)][t] for lay in {p.layout for p in d.allowed(a, "lm_head")}]
                emb_t, emb_e = min(e.time_ns for e in embs), min(e.energy_nj for e in embs)
                if model.parallel_block:
                    path = parallel_layer_bound(self.prices, self.data[j], j, a, t)
                else:
                    path = sum(bt[op] for op in LAYER_OPS)
                lb_t[t] = emb_t + model.layers * (path + n_ar * ar.time_ns) + bt["lm_head"]
                lb_e[t] = emb_e + model.layers * (sum(be[op] for op in LAYER_OPS) + n_ar * ar.energy_nj) + be["lm_head"]
                cache[(j, a, t)] = (lb_t[t], lb_e[t])
            pt_cut[a], pe_cut[a] = lb_t, lb_e
        return pt_cut, pe_cut

    def add_cycles(self) -> None:
        """[CYC] CYC-1 a drafter's cycle is one pass (unstaged chain), gamma2 draft2 steps + one pass
        (staged chain) or the passes that build a token tree depth by depth (one cycle per round);
        CYC-2 a staged option whose draft2 cannot run on an architecture excludes the pair."""
        m = self.m
        b = self.scenario.batch_size
        self.cycle_t, self.cycle_e = [], []
        for i in range(self.n_drafters):
            j = i + 1
            pm = self.prices.models[j]
            steps = {}
            for st in self.stage_lit[i]:
                for a, xa in self.x[j].items():
                    if st is None:
                        continue
                    step = pm.draft2_step[(a, st.draft2)]
                    if step is None:  # CYC-2: a draft2 model cannot run on this host
                        m.add_bool_or([~xa, ~self.stage_lit[i][st]])
                    else:
                        steps[(st, a)] = step
            single = head_rows.one_pass(self, i)  # [HEAD-3] a Medusa head: its tree from its one cycle pass
            trees = {tree: [self.tree_pass[j][t] for t in tree_pass_tokens(b, DrafterChoice(len(tree), None, tree))]
                     for (_, tree) in self.draft_lit[i] if tree is not None and not single}
            extra_t = max((st.draft_length * v.time_ns for (st, _), v in steps.items()), default=0)
            extra_e = max((st.draft_length * v.energy_nj for (st, _), v in steps.items()), default=0)
            ct_ub = max([ub(self.pass_time[j]) + extra_t] + [sum(ub(p[0]) for p in ps) for ps in trees.values()])
            ce_ub = max([ub(self.pass_energy[j]) + extra_e] + [sum(ub(p[1]) for p in ps) for ps in trees.values()])
            ct = m.new_int_var(0, ct_ub, f"cycle_ns[{i}]")
            ce = m.new_int_var(0, ce_ub, f"cycle_nj[{i}]")
            for (st, tree), lit in self.draft_lit[i].items():
                if tree is not None and not single:
                    m.add(ct == sum(p[0] for p in trees[tree])).only_enforce_if(lit)
                    self._energy_row(ce == sum(p[1] for p in trees[tree]), lit)
                    continue
                if st is None:
                    m.add(ct == self.pass_time[j]).only_enforce_if(lit)
                    self._energy_row(ce == self.pass_energy[j], lit)
                    continue
                for a, xa in self.x[j].items():
                    if (st, a) not in steps:
                        continue
                    step = steps[(st, a)]
                    m.add(ct == self.pass_time[j] + st.draft_length * step.time_ns).only_enforce_if([lit, xa])
                    self._energy_row(ce == self.pass_energy[j] + st.draft_length * step.energy_nj, [lit, xa])
            self.cycle_t.append(ct)
            self.cycle_e.append(ce)

    def add_round(self) -> None:
        """[RND] RND-1 drafting phase per outcome slot; RND-2 outcome round time (vanilla or pipelined);
        RND-3 expected round time; RND-4 every round holds one verification pass (a valid floor)."""
        m = self.m
        V = self.pass_time[0]
        sync = self.prices.round_sync_ns
        n_slots = max(len(st.outcomes) for st in self.stats)
        max_r = max((r for st in self.stats for rs, _ in st.outcomes for r in rs), default=0)
        d_ub = max_r * max((ub(ct) for ct in self.cycle_t), default=0)
        r_ub = d_ub + ub(V)
        self.T = m.new_int_var(0, r_ub + sync + sum(ub(t) for t in self.head_transfer[0]), "round_ns")
        D = [m.new_int_var(0, d_ub, f"D[{k}]") for k in range(n_slots)]
        MX = [m.new_int_var(0, r_ub, f"maxDV[{k}]") for k in range(n_slots)]
        R = [m.new_int_var(0, r_ub, f"R[{k}]") for k in range(n_slots)]
        for k in range(n_slots):
            m.add_max_equality(MX[k], [D[k], V])
        m.add(self.T >= V + nospec.round_floor_sync(self))  # RND-4 (NOSPEC-3: no sync without drafters)
        for c, st, z in zip(self.choices, self.stats, self.z):
            for k, (rs, _prob) in enumerate(st.outcomes):
                if rs:  # RND-1
                    m.add_max_equality(D[k], [r * self.cycle_t[i] for i, r in enumerate(rs)]).only_enforce_if(z)
                else:  # no drafters: autoregressive rounds
                    m.add(D[k] == 0).only_enforce_if(z)
                if c.pipeline:  # RND-2
                    add_ceil(m, R[k], (spec.Q_SCALE - st.q) * MX[k] + st.q * (D[k] + V), spec.Q_SCALE, z)
                else:
                    m.add(R[k] == D[k] + V).only_enforce_if(z)
            add_ceil(m, self.T - nospec.choice_sync(self, c) - sum(self.head_transfer[0]),  # RND-3, [HEAD-4]
                     sum(prob * R[k] for k, (_rs, prob) in enumerate(st.outcomes)), spec.OUTCOME_SCALE, z)

    def add_energy(self) -> None:
        """[EN] EN-1 drafting energy per round (+ wasted optimistic drafts); EN-2 idle energy of every
        model's devices for the round (0 under dynamic accounting) with its unconditional floor;
        EN-3 energy per round."""
        m = self.m
        first_row = len(m.proto.constraints)
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
        for j in range(len(self.data)):  # EN-2
            power = {a: self.prices.models[j].idle_power_mw[a] for a in self.x[j]}
            if max(power.values()) == 0:
                continue
            idle = idle_energy_var(self, j, power, ub(self.T))  # EN-2 ([EDGE-3] the verifier alone)
            m.add(1000 * idle >= min(power.values()) * self.T - nospec.idle_relief(self, j, min(power.values())))
            nospec.add_absent_energy(self, j, idle)
            self.idle_parts.append((j, idle, power))
            parts.append(idle)
        parts += self.head_transfer[1]  # [HEAD-4]
        self.energy = m.new_int_var(0, sum(ub(p) for p in parts), "energy_nj")
        m.add(self.energy == sum(parts))
        self.energy_rows.extend(range(first_row, len(m.proto.constraints)))

    # ------------------------------------------------------------------------------------------
    # solutions
    # ------------------------------------------------------------------------------------------
    def decode(self, value) -> Design:
        """Design from a solution (`value(var) -> int`)."""
        archs, places = [], []
        alone = self.no_spec is not None and value(self.no_spec)
        for j in range(1 if alone else len(self.data)):  # [NOSPEC] the drafters' parts are absent
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
        models = design.models()
        for j in range(len(self.data)):
            md = models[j][1] if j < len(models) else None  # None: a drafter absent ([NOSPEC])
            out += [(v, int(md is not None and b == md.arch)) for b, v in self.x[j].items()]
            for op in PLACEABLE_OPS:
                key = None if md is None else md.placement[op].key
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

    # ------------------------------------------------------------------------------------------
    # canonical optimum (the integer levels of the tie-break, tie_keys.py; canonical.py fixes the ratio levels)
    # ------------------------------------------------------------------------------------------
    def tie_break_keys(self) -> list[TieKey]:
        """[OBJ] OBJ-3 the integer keys of the canonical optimum, in their order (`tie_keys.tie_break_keys`)."""
        return tie_keys.tie_break_keys(self)

    def tie_key_values(self, design: Design, keys: Sequence[TieKey]) -> list[int]:
        """The value of every key for `design` (`tie_keys.tie_key_values`)."""
        return tie_keys.tie_key_values(self, design, keys)

    def add_tie_break(self, model: cp_model.CpModel, keys: Sequence[TieKey], fixed: Sequence[int],
                      minimise: Sequence[TieKey] = ()) -> list[cp_model.IntVar]:
        """[OBJ] OBJ-3 on a clone: fixed keys and a lexicographic minimisation (`tie_keys.add_tie_break`)."""
        return tie_keys.add_tie_break(model, keys, fixed, minimise)
