"""[MIX-14] Pass tables of a workload mix: every model's least pass time per layout class, per cell.

On a fixed hardware tuple and with the weight copies each model stores fixed, the cells of a mix are
independent, and inside a cell each model's placement changes only its own pass (or cycle) time and its
own devices' bytes: the round time (`speculation.round_time_ns`) is non-decreasing in every pass time.
So a cell's best latency is the best round over its speculation choices of each model's *least* pass
time, and that least time is a small enumeration (formulations/mix.md, "The decomposition"):

- A **layout class** of a model on an architecture fixes the layout of every operator's tensors (normal,
  spread or PIM; `costs.placement_options`). The layouts decide every byte the model keeps (weights,
  KV cache, the untied embedding beside the LM head), so they are all capacity sees.
- Within a class, the least time of a **profile** (the passes of one verification or drafting cycle:
  one token count, a token tree's depth passes, a staged cycle's draft2 steps) is: for sequential
  blocks (a chain, SCH-0), per operator the fastest placement with that layout, summed; for a parallel
  block (PaLM), the least exact layer makespan over the PIM shares of its PIM operators
  (`physics.schedule.layer_schedule`, the evaluator's own schedule), found lazily from a lower bound
  (`ArchTable.exactify`).

Every number is the evaluator's (`PriceTable`, `Evaluator.pass_table`): the tables choose, the evaluator
prices. `ArchTable.times` holds lower bounds that are exact for every chain class and for every parallel
class already `exact`; a search closes a node only on exact entries.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import pass_tokens, tree_pass_tokens
from specpim_cp.physics.schedule import layer_schedule
from specpim_cp.problem.design import ArchConfig, DrafterChoice, Placement, SpecChoice
from specpim_cp.problem.mix import KV_OPS, WEIGHT_OPS, Mix
from specpim_cp.problem.operators import LAYER_OPS, PLACEABLE_OPS, is_chain, layer_order
from specpim_cp.solvers.deadline import Deadline, check
from specpim_cp.solvers.exact.prices import PriceTable

#: Tensor layouts, in the order of the class arrays' layout indices.
LAYOUTS = ("normal", "spread", "pim")
#: Positions in PLACEABLE_OPS of the weight operators (one copy per layout any cell uses) and the KV caches.
WEIGHT_INDEX = tuple(PLACEABLE_OPS.index(o) for o in WEIGHT_OPS)
KV_INDEX = tuple(PLACEABLE_OPS.index(o) for o in KV_OPS)
#: Stand-in time (ns) of a profile no class can run: above any real round, small enough that the round
#: arithmetic over it stays inside int64 (8 cycles x 1e11 ns x OUTCOME_SCALE x Q_SCALE-free sums).
NONE_NS = 10 ** 11
#: Positions of the two branches of a parallel block's layer (attention, FFN) in LAYER_OPS.
ATTENTION_BRANCH = (0, 1, 2, 3)
FFN_BRANCH = (4, 5)


@dataclass(frozen=True)
class Profile:
    """What one model runs in one verification or drafting cycle: its passes' token counts (one, or a
    token tree's depth passes) and, for a staged drafter, the draft2 model and its steps per cycle."""

    tokens: tuple[int, ...]
    draft2: str | None = None
    gamma2: int = 0


def profile_of(batch: int, choice: SpecChoice, j: int) -> Profile:
    """Model j's profile under a speculation choice (0: the verification pass; i + 1: drafter i's cycle,
    as `Evaluator.drafter_cycle` prices it)."""
    if j == 0:
        return Profile((pass_tokens(batch, choice, 0),))
    d: DrafterChoice = choice.drafters[j - 1]
    if d.tree is not None:
        return Profile(tree_pass_tokens(batch, d))
    if d.staging is None:
        return Profile((pass_tokens(batch, choice, j),))
    return Profile((pass_tokens(batch, choice, j),), d.staging.draft2, d.staging.draft_length)


class ArchTable:
    """One model on one architecture over every cell of a mix: its layout classes, their bytes, and per
    cell and profile each class's least time (a lower bound until `exact`).

    Arrays: `layouts[l, o]` layout index of operator o in class l; `weight_kib[l, w, side]` the bytes of
    weight operator w (WEIGHT_OPS order) in class l, side 0 the PIM side, 1 the normal side; `kv_kib[c, l,
    side]` cell c's KV caches; `copy_kib[w, layout, side]`; `capacity[side]`; `times[c, p, l]` ns of
    profile p (`profiles[c][p]`) of cell c; `exact[c, p, l]`.
    """

    def __init__(self, j: int, arch: ArchConfig, prices: Sequence[PriceTable], evaluators: Sequence[Evaluator],
                 profiles: Sequence[Sequence[Profile]]):
        self.j, self.arch = j, arch
        self.prices, self.evaluators = prices, evaluators
        pt0 = prices[0]
        mo = pt0.space.models[j]
        self.model = mo.spec
        self.chain = is_chain(mo.spec.parallel_block)
        # placements per operator and layout (the space's, in its order)
        self.places: list[dict[int, list[Placement]]] = []
        for op in PLACEABLE_OPS:
            row: dict[int, list[Placement]] = {}
            for p in mo.allowed(arch, op):
                row.setdefault(LAYOUTS.index(p.layout), []).append(p)
            self.places.append(row)
        self.layouts = np.array(list(itertools.product(*[sorted(r) for r in self.places])), dtype=np.int64)
        n = len(self.layouts)
        pm0 = pt0.models[j]
        self.copy_kib = np.zeros((len(WEIGHT_INDEX), len(LAYOUTS), 2), dtype=np.int64)
        for w, o in enumerate(WEIGHT_INDEX):
            for lay in self.places[o]:
                self.copy_kib[w, lay] = pm0.tensor_kib[(arch, PLACEABLE_OPS[o], LAYOUTS[lay])]
        self.weight_kib = np.stack([self.copy_kib[w, self.layouts[:, o]] for w, o in enumerate(WEIGHT_INDEX)], 1)
        kv = np.zeros((len(prices), n, 2), dtype=np.int64)
        for c, pt in enumerate(prices):
            pm = pt.models[j]
            for o in KV_INDEX:
                split = np.array([pm.tensor_kib[(arch, PLACEABLE_OPS[o], LAYOUTS[lay])] if lay in self.places[o]
                                  else (0, 0) for lay in range(len(LAYOUTS))], dtype=np.int64)
                kv[c] += split[self.layouts[:, o]]
        self.kv_kib = kv
        self.capacity = np.array(pm0.capacity_kib[arch], dtype=np.int64)
        self.draft2_kib = {name: None if split is None else np.array(split, dtype=np.int64)
                           for (a, name), split in pm0.draft2_kib.items() if a == arch}
        self.profiles = [list(ps) for ps in profiles]
        width = max(len(ps) for ps in self.profiles)
        self.times = np.full((len(prices), width, n), NONE_NS, dtype=np.int64)
        self.exact = np.zeros((len(prices), width, n), dtype=bool)
        #: per (cell, profile, class) the least energy (nJ) of the profile over the class's placements: a
        #: pass's energy is the sum of its operators', whatever the schedule, so this is exact per operator
        self.energy = np.zeros((len(prices), width, n), dtype=np.int64)
        self.idle_power_mw = pm0.idle_power_mw[arch]
        #: chains: per (cell, profile, operator, layout) the position of the fastest placement in `places`
        self._fastest: dict[tuple[int, int], np.ndarray] = {}
        #: parallel blocks: the placements of an exact class, per (cell, profile, class)
        self._exact_places: dict[tuple[int, int, int], dict[str, Placement]] = {}
        self.version = 0  # bumped whenever a bound is raised (caches of masked minima compare it)
        for c, pt in enumerate(prices):
            for p, prof in enumerate(self.profiles[c]):
                self._fill(c, p, prof, pt)

    # -- building --------------------------------------------------------------------------------
    def _op_times(self, pm, op: str, prof: Profile) -> dict[int, np.ndarray]:
        """Per layout, the profile's time of each placement of `op` (summed over the profile's passes)."""
        return {lay: np.array([sum(pm.op_cost[(op, self.arch, p)][t].time_ns for t in prof.tokens) for p in ps],
                              dtype=np.int64) for lay, ps in self.places[PLACEABLE_OPS.index(op)].items()}

    def _fixed_ns(self, pm, prof: Profile) -> np.ndarray:
        """Per class, the profile's time outside the layer makespans: the LM head (fastest placement of
        its layout) and the embedding lookup by its layout, plus a staged cycle's draft2 steps."""
        lm = PLACEABLE_OPS.index("lm_head")
        lm_t = self._op_times(pm, "lm_head", prof)
        best = np.zeros(len(LAYOUTS), dtype=np.int64)
        for lay, v in lm_t.items():
            best[lay] = v.min() + sum(pm.embedding[(self.arch, LAYOUTS[lay])][t].time_ns for t in prof.tokens)
        out = best[self.layouts[:, lm]]
        if prof.draft2 is not None:
            step = pm.draft2_step[(self.arch, prof.draft2)]
            out = out + (NONE_NS if step is None else prof.gamma2 * step.time_ns)
        return out

    def _fill(self, c: int, p: int, prof: Profile, pt: PriceTable) -> None:
        pm = pt.models[self.j]
        layers = self.model.layers
        self.energy[c, p] = self._least_energy(pm, prof)
        fixed = self._fixed_ns(pm, prof)
        ar = sum(pm.allreduce[self.arch][t].time_ns for t in prof.tokens)
        per = [self._op_times(pm, op, prof) for op in PLACEABLE_OPS]
        fastest = np.zeros((len(PLACEABLE_OPS), len(LAYOUTS)), dtype=np.int64)
        best = np.zeros((len(PLACEABLE_OPS), len(LAYOUTS)), dtype=np.int64)
        for o, row in enumerate(per):
            for lay, v in row.items():
                fastest[o, lay] = int(v.argmin())
                best[o, lay] = v.min()
        self._fastest[(c, p)] = fastest
        if self.chain:  # SCH-0: the layer's makespan is the sum of its nodes (the all-reduces among them)
            n_ar = sum(1 for name in layer_order(self.model.parallel_block) if name.startswith("allreduce"))
            layer = sum(best[o, self.layouts[:, o]] for o in range(len(LAYER_OPS))) + n_ar * ar
            self.times[c, p] = fixed + layers * layer
            self.exact[c, p] = True
            return
        # a parallel block: a lower bound of the least makespan over the class's PIM shares
        self.times[c, p] = fixed + layers * (self._parallel_bound(c, prof, pm) + ar)

    def _least_energy(self, pm, prof: Profile) -> np.ndarray:
        """Per class, the profile's least energy: per operator the least over its layout's placements (the
        LM head's with the embedding lookup of its layout), the all-reduces, a staged cycle's draft2 steps."""
        n_ar = sum(1 for name in layer_order(self.model.parallel_block) if name.startswith("allreduce"))
        total = np.full(len(self.layouts), n_ar * self.model.layers *
                        sum(pm.allreduce[self.arch][t].energy_nj for t in prof.tokens), dtype=np.int64)
        for o, op in enumerate(PLACEABLE_OPS):
            least = np.zeros(len(LAYOUTS), dtype=np.int64)
            for lay, ps in self.places[o].items():
                least[lay] = min(sum(pm.op_cost[(op, self.arch, q)][t].energy_nj for t in prof.tokens) for q in ps)
                if op == "lm_head":
                    least[lay] += sum(pm.embedding[(self.arch, LAYOUTS[lay])][t].energy_nj for t in prof.tokens)
            total += (1 if op == "lm_head" else self.model.layers) * least[self.layouts[:, o]]
        if prof.draft2 is not None:
            step = pm.draft2_step[(self.arch, prof.draft2)]
            total += 0 if step is None else prof.gamma2 * step.energy_nj
        return total

    def _parallel_bound(self, c: int, prof: Profile, pm) -> np.ndarray:
        """Per class, a lower bound of the least layer makespan (all-reduce excluded) over the shares of
        its PIM operators, summed over the profile's passes: the largest of each branch's sum, the host's
        load, the PIM slots' area over their number, and every set of attention operators with the FFN
        operators that conflict with all of them whatever the shares (both on the host, or one a host
        operator whose channels the PIM units share, `CostModel.host_contends_with_pim`)."""
        ev = self.evaluators[c]
        total = np.zeros(len(self.layouts), dtype=np.int64)
        for t in prof.tokens:
            tab = ev.pass_table(self.model.name, self.arch, t)
            levels = tab.levels
            fast = np.zeros((len(LAYER_OPS), len(LAYOUTS)), dtype=np.int64)   # fastest duration
            area = np.zeros((len(LAYER_OPS), len(LAYOUTS)), dtype=np.int64)   # least slots x duration
            host = np.zeros((len(LAYER_OPS), len(LAYOUTS)), dtype=np.int64)   # duration on the host
            blocks = np.zeros((len(LAYER_OPS), len(LAYOUTS)), dtype=bool)     # takes every PIM slot or the host
            hosted = np.zeros((len(LAYER_OPS), len(LAYOUTS)), dtype=bool)
            share = np.zeros((len(LAYER_OPS), len(LAYOUTS)), dtype=np.int64)  # least PIM slots it takes
            for o in range(len(LAYER_OPS)):
                for lay, ps in self.places[o].items():
                    nodes = [tab.nodes[o][p.key] for p in ps]
                    fast[o, lay] = min(nd[1] for nd in nodes)
                    area[o, lay] = min(nd[1] * nd[3] for nd in nodes)
                    share[o, lay] = min(nd[3] for nd in nodes)
                    if LAYOUTS[lay] != "pim":
                        host[o, lay] = nodes[0][1]
                        hosted[o, lay] = True
                        blocks[o, lay] = nodes[0][3] >= levels
            L = self.layouts
            d = np.stack([fast[o, L[:, o]] for o in range(len(LAYER_OPS))], 1)
            bound = np.maximum(d[:, list(ATTENTION_BRANCH)].sum(1), d[:, list(FFN_BRANCH)].sum(1))
            bound = np.maximum(bound, sum(host[o, L[:, o]] for o in range(len(LAYER_OPS))))
            slots = sum(area[o, L[:, o]] for o in range(len(LAYER_OPS)))
            bound = np.maximum(bound, -(-slots // levels))
            on_host = np.stack([hosted[o, L[:, o]] for o in range(len(LAYER_OPS))], 1)
            blocking = np.stack([blocks[o, L[:, o]] for o in range(len(LAYER_OPS))], 1)
            least = np.stack([share[o, L[:, o]] for o in range(len(LAYER_OPS))], 1)
            busy = d > 0
            for mask in range(1, 1 << len(ATTENTION_BRANCH)):
                members = [ATTENTION_BRANCH[i] for i in range(len(ATTENTION_BRANCH)) if mask >> i & 1]
                group = d[:, members].sum(1)
                for f in FFN_BRANCH:
                    # f conflicts with x whatever the shares: both on the host, either takes every PIM slot
                    # or the host, or their least shares together exceed the slots
                    sure = np.ones(len(L), dtype=bool)
                    for x in members:
                        sure &= busy[:, x] & busy[:, f] & ((on_host[:, x] & on_host[:, f]) | blocking[:, x]
                                                           | blocking[:, f] | (least[:, x] + least[:, f] > levels))
                    group = group + np.where(sure, d[:, f], 0)
                bound = np.maximum(bound, group)
            total += bound
        return total

    # -- exact entries ---------------------------------------------------------------------------
    def exactify(self, c: int, p: int, cls: int) -> int:
        """Make `times[c, p, cls]` exact (a parallel block: the least exact makespan over the class's PIM
        shares, found in the order of a per-combination lower bound) and return it."""
        if self.exact[c, p, cls]:
            return int(self.times[c, p, cls])
        prof = self.profiles[c][p]
        ev = self.evaluators[c]
        lay = self.layouts[cls]
        choices = [self.places[o][int(lay[o])] for o in range(len(LAYER_OPS))]
        combos = list(itertools.product(*[range(len(ps)) for ps in choices]))
        tabs = [ev.pass_table(self.model.name, self.arch, t) for t in prof.tokens]
        keys = [[p_.key for p_ in ps] for ps in choices]
        # per combination: sum over passes of a makespan lower bound (branch sums, host load, PIM area)
        lbs = np.zeros(len(combos), dtype=np.int64)
        idx = np.array(combos, dtype=np.int64).reshape(len(combos), len(LAYER_OPS))
        for tab in tabs:
            dur = [np.array([tab.nodes[o][k][1] for k in keys[o]], dtype=np.int64)[idx[:, o]]
                   for o in range(len(LAYER_OPS))]
            slots = [np.array([tab.nodes[o][k][1] * tab.nodes[o][k][3] for k in keys[o]], dtype=np.int64)[idx[:, o]]
                     for o in range(len(LAYER_OPS))]
            hosts = [np.array([tab.nodes[o][k][1] * tab.nodes[o][k][2] for k in keys[o]], dtype=np.int64)[idx[:, o]]
                     for o in range(len(LAYER_OPS))]
            b = np.maximum(sum(dur[o] for o in ATTENTION_BRANCH), sum(dur[o] for o in FFN_BRANCH))
            b = np.maximum(b, sum(hosts))
            b = np.maximum(b, -(-sum(slots) // tab.levels))
            lbs += b
        order = np.argsort(lbs, kind="stable")
        best, best_combo = None, None
        for i in order:
            if best is not None and lbs[i] >= best:
                break
            combo = combos[int(i)]
            total = 0
            for tab in tabs:
                nodes = tuple(tab.nodes[o][keys[o][combo[o]]] for o in range(len(LAYER_OPS))) + tab.allreduce_nodes
                total += layer_schedule(tab.parallel_block, nodes, tab.levels)[0] - tab.allreduce.time_ns
            if best is None or total < best:
                best, best_combo = total, combo
        assert best is not None and best_combo is not None
        pm_ar = sum(tab.allreduce.time_ns for tab in tabs)
        fixed = int(self._fixed_ns(self.prices[c].models[self.j], prof)[cls])
        value = fixed + self.model.layers * (best + pm_ar)
        assert value >= self.times[c, p, cls], "a parallel block's bound exceeded its exact time"
        self.times[c, p, cls] = value
        self.exact[c, p, cls] = True
        self.version += 1
        places = {LAYER_OPS[o]: choices[o][best_combo[o]] for o in range(len(LAYER_OPS))}
        places["lm_head"] = self._fastest_place(c, p, len(LAYER_OPS), int(lay[len(LAYER_OPS)]))
        self._exact_places[(c, p, cls)] = places
        return value

    def placements(self, c: int, p: int, cls: int) -> dict[str, Placement]:
        """The placement of every operator that attains the exact `times[c, p, cls]`."""
        if not self.exact[c, p, cls]:
            self.exactify(c, p, cls)
        if not self.chain:
            return dict(self._exact_places[(c, p, cls)])
        lay = self.layouts[cls]
        return {op: self._fastest_place(c, p, o, int(lay[o])) for o, op in enumerate(PLACEABLE_OPS)}

    def _fastest_place(self, c: int, p: int, o: int, lay: int) -> Placement:
        return self.places[o][lay][int(self._fastest[(c, p)][o, lay])]


class MixTables:
    """[MIX-14] Every model's `ArchTable` on every architecture of the mix's space, over all cells, and
    per cell the speculation choices with each model's profile index."""

    def __init__(self, mix: Mix, prices: Sequence[PriceTable], evaluators: Sequence[Evaluator],
                 deadline: Deadline | None = None):
        """`deadline`: the command's; building stops between tables once it has passed (`TimeLimitReached`)."""
        self.mix = mix
        self.prices = list(prices)
        self.evaluators = list(evaluators)
        spaces = [pt.space for pt in self.prices]
        self.archs: list[list[ArchConfig]] = [list(mo.archs) for mo in spaces[0].models]
        n_models = len(self.archs)
        self.choices: list[tuple[SpecChoice, ...]] = [pt.choices for pt in self.prices]
        # per cell and model: its distinct profiles, and per choice the index of its profile
        self.profiles: list[list[list[Profile]]] = []
        self.profile_index: list[np.ndarray] = []  # [cell] -> [choice, model]
        for c, pt in enumerate(self.prices):
            b = pt.space.scenario.batch_size
            per_model: list[dict[Profile, int]] = [{} for _ in range(n_models)]
            index = np.zeros((len(pt.choices), n_models), dtype=np.int64)
            for k, ch in enumerate(pt.choices):
                for j in range(n_models):
                    prof = profile_of(b, ch, j)
                    index[k, j] = per_model[j].setdefault(prof, len(per_model[j]))
            self.profiles.append([list(d) for d in per_model])
            self.profile_index.append(index)
        self.tables: list[dict[ArchConfig, ArchTable]] = []
        for j in range(n_models):
            profs = [self.profiles[c][j] for c in range(len(self.prices))]
            tables = {}
            for a in self.archs[j]:
                check(deadline, f"tabulating the pass times of model {j + 1} of {n_models}")
                tables[a] = ArchTable(j, a, self.prices, self.evaluators, profs)
            self.tables.append(tables)

    @property
    def n_cells(self) -> int:
        return len(self.prices)

    @property
    def n_models(self) -> int:
        return len(self.archs)


__all__ = ["LAYOUTS", "NONE_NS", "ArchTable", "MixTables", "Profile", "profile_of"]
