"""[MIX-15..17] The exact latency optimum of a workload mix by decomposition (formulations/mix.md, "The
decomposition"): a bound for every shared hardware tuple, then a best-first branch and bound over the
hardware tuples and the weight copies each model stores.

A **node** is a hardware tuple h (one architecture per model) and, per model, a state of every weight
copy (operator, layout): stored, banned or open. Its **relaxation** lets every cell use any copy that is
not banned, and charges a cell's capacity with the stored copies plus the open copies the cell itself
uses (and its own KV cache and draft2 model): every mix design on h whose copies agree with the node's
stored and banned ones is feasible for it, cell by cell, so the relaxation's optimum -- each cell's own
best round over its choices of each model's least pass time (`pass_tables.MixTables`) -- bounds theirs
[MIX-15]. When the cells' best designs of the relaxation fit together (the copies they use, with the
stored ones, fit beside every cell's KV cache), they form a mix design of that value: the node is solved.
Otherwise one open copy that overflows a cell is branched on: stored in one child, banned in the other
[MIX-16]. Every mix design on h is in exactly one leaf, so the search over all tuples, best bound first,
ends with a proven optimum at the first solved node whose value is at most every other bound [MIX-17].
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import drafting_energy_nj, idle_energy_nj
from specpim_cp.problem.design import ArchConfig, Design
from specpim_cp.solvers.mix.pass_tables import NONE_NS, WEIGHT_INDEX, ArchTable, MixTables

#: States of one weight copy in a node.
BANNED, STORED, OPEN = 0, 1, 2
#: Relative float margin under which two values are compared exactly (Fractions) instead.
FLOAT_TIE = 1e-9


@dataclass(frozen=True)
class Goal:
    """What the search minimises over mix designs, from each cell's round time T and tokens per round:
    the weighted mean latency (`latency`) or the worst cell's latency over its own optimum (`regret`),
    exactly (Fractions) or, with `scale`, in the mix model's integer units (MIX-5: L_c = ceil(scale T /
    tokens); MIX-8 sum_c W_c L_c; MIX-9 R = max_c ceil(REGRET_SCALE L_c / O_c)). `caps`: per cell the
    largest latency allowed (exact ns/token, or units with `scale`), as regret's second stage asks."""

    kind: str
    weights: tuple[int, ...]
    own: tuple[Fraction, ...] | None = None  # regret: the cells' own optima (exact ns/token)
    scale: int | None = None
    opt_units: tuple[int, ...] | None = None  # regret in units: O_c
    regret_scale: int = 1
    caps: tuple | None = None

    def cell_latency(self, T: int, tok: int):
        if self.scale is None:
            return Fraction(T * spec.TOKENS_SCALE, tok)
        return -(-(self.scale * T) // tok)

    def fits(self, lat: Sequence) -> bool:
        return self.caps is None or all(v <= cap for v, cap in zip(lat, self.caps, strict=True))

    def value(self, lat: Sequence):
        """The goal's value from each cell's latency (`cell_latency`)."""
        if self.kind == "regret":
            if self.scale is None:
                return max(v / o for v, o in zip(lat, self.own, strict=True))
            return max(-(-(self.regret_scale * v) // o) for v, o in zip(lat, self.opt_units, strict=True))
        total = sum(w * v for w, v in zip(self.weights, lat, strict=True))
        return Fraction(total, sum(self.weights)) if self.scale is None else total

    def tuple_bounds(self, grid: np.ndarray) -> np.ndarray:
        """A float lower bound of the value on every hardware tuple from each cell's root bound there
        (`Search.cell_grid`, ns/token): in units, floored with a margin (the grid is a float)."""
        g = grid if self.scale is None else np.floor(grid * (self.scale / spec.TOKENS_SCALE) * (1 - FLOAT_TIE))
        if self.kind == "regret":
            if self.scale is None:
                den = np.array([float(o) for o in self.own]).reshape([-1] + [1] * (grid.ndim - 1))
                return (g / den).max(0)
            den = np.array(self.opt_units, dtype=float).reshape([-1] + [1] * (grid.ndim - 1))
            return np.floor(self.regret_scale * g / den * (1 - FLOAT_TIE)).max(0)
        w = np.array(self.weights, dtype=float)
        total = np.tensordot(w, g, axes=(0, 0))
        return total / w.sum() if self.scale is None else total


# ------------------------------------------------------------------------------------------------
# Rounds of every cell, vectorised over its speculation choices
# ------------------------------------------------------------------------------------------------
class CellRounds:
    """Per cell and speculation choice the integer round statistics as arrays: profile index per model,
    cycles per outcome and drafter, outcome probabilities, pipeline and its q, tokens per round."""

    def __init__(self, tables: MixTables):
        n_cells, n_models = tables.n_cells, tables.n_models
        n_k = max(len(ch) for ch in tables.choices)
        n_out = max(len(st.outcomes) for pt in tables.prices for st in pt.stats)
        n_d = n_models - 1
        self.valid = np.zeros((n_cells, n_k), dtype=bool)
        self.profile = np.zeros((n_cells, n_k, n_models), dtype=np.int64)
        self.cycles = np.zeros((n_cells, n_k, n_out, max(n_d, 1)), dtype=np.int64)
        self.weight = np.zeros((n_cells, n_k, n_out), dtype=np.int64)
        self.pipeline = np.zeros((n_cells, n_k), dtype=bool)
        self.q = np.zeros((n_cells, n_k), dtype=np.int64)
        self.tokens = np.ones((n_cells, n_k), dtype=np.int64)
        self.sync = np.array([pt.round_sync_ns for pt in tables.prices], dtype=np.int64)
        for c, pt in enumerate(tables.prices):
            for k, (ch, st) in enumerate(zip(pt.choices, pt.stats, strict=True)):
                self.valid[c, k] = True
                self.profile[c, k] = tables.profile_index[c][k]
                self.pipeline[c, k] = ch.pipeline
                self.q[c, k] = st.q
                self.tokens[c, k] = st.tokens_micro
                for o, (rs, p) in enumerate(st.outcomes):
                    self.weight[c, k, o] = p
                    for i, r in enumerate(rs):
                        self.cycles[c, k, o, i] = r
        self.n_drafters = n_d

    def round_ns(self, V: np.ndarray, C: Sequence[np.ndarray]) -> np.ndarray:
        """Round time per (cell, choice) as `speculation.round_time_ns` computes it, from the verifier's
        pass `V[c, k]` and each drafter's cycle `C[i][c, k]`."""
        d = np.zeros(self.weight.shape, dtype=np.int64)
        for i, ci in enumerate(C):
            d = np.maximum(d, self.cycles[:, :, :, i] * ci[:, :, None])
        v = V[:, :, None]
        piped = np.maximum(d, v) + -(-(self.q[:, :, None] * np.minimum(d, v)) // spec.Q_SCALE)
        r = np.where(self.pipeline[:, :, None], piped, d + v)
        total = (self.weight * r).sum(2)
        return -(-total // spec.OUTCOME_SCALE) + self.sync[:, None]


# ------------------------------------------------------------------------------------------------
# Nodes
# ------------------------------------------------------------------------------------------------
def open_copies(tab: ArchTable) -> np.ndarray:
    """The root state of a model's copies on an architecture: every layout it offers open, the others
    banned (a layout the architecture does not have is never stored)."""
    u = np.full(tab.copy_kib.shape[:2], BANNED, dtype=np.int64)
    for w, o in enumerate(WEIGHT_INDEX):
        for lay in tab.places[o]:
            u[w, lay] = OPEN
    return u


class ModelMinima:
    """Per (model, architecture, copy state): each cell's least time per profile under the relaxation,
    and the class attaining it (cached; recomputed when a table's bounds were raised)."""

    def __init__(self, tables: MixTables):
        self.tables = tables
        self.cache: dict[tuple, tuple[int, np.ndarray, np.ndarray]] = {}
        self._d2: dict[tuple[int, ArchConfig], np.ndarray | None] = {}

    def draft2_need(self, tab: ArchTable) -> np.ndarray | None:
        """[cell, profile, side] bytes of each profile's draft2 model (None: no profile stages; a draft2
        model that cannot run there counts as the whole capacity plus one)."""
        key = (tab.j, tab.arch)
        if key not in self._d2:
            width = tab.times.shape[1]
            need = np.zeros((tab.times.shape[0], width, 2), dtype=np.int64)
            any_staged = False
            for c, profs in enumerate(tab.profiles):
                for p, prof in enumerate(profs):
                    if prof.draft2 is None:
                        continue
                    any_staged = True
                    split = tab.draft2_kib.get(prof.draft2, np.zeros(2, dtype=np.int64))
                    need[c, p] = tab.capacity + 1 if split is None else split
            self._d2[key] = need if any_staged else None
        return self._d2[key]

    def feasible(self, tab: ArchTable, u: np.ndarray) -> np.ndarray:
        """[cell, profile or 1, class]: the classes the relaxation lets each cell use (copies not banned,
        its capacity charged with the stored copies, the open ones it uses itself, its KV cache and its
        profile's draft2 model)."""
        state = u[np.arange(len(WEIGHT_INDEX))[None, :], tab.layouts[:, list(WEIGHT_INDEX)]]  # [class, w]
        allowed = (state != BANNED).all(1)
        base = (tab.copy_kib * (u == STORED)[:, :, None]).sum((0, 1))
        extra = (tab.weight_kib * (state == OPEN)[:, :, None]).sum(1)  # [class, side]
        need = base + extra + tab.kv_kib  # [cell, class, side]
        d2 = self.draft2_need(tab)
        if d2 is None:
            return (allowed & (need <= tab.capacity).all(2))[:, None, :]
        return allowed & (need[:, None, :, :] + d2[:, :, None, :] <= tab.capacity).all(3)

    def get(self, tab: ArchTable, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """([cell, profile] least time, NONE_NS where no class fits; [cell, profile] its class)."""
        key = (tab.j, tab.arch, u.tobytes())
        hit = self.cache.get(key)
        if hit is not None and hit[0] == tab.version:
            return hit[1], hit[2]
        times = np.where(self.feasible(tab, u), tab.times, NONE_NS)
        arg = times.argmin(2)
        best = np.take_along_axis(times, arg[:, :, None], 2)[:, :, 0]
        self.cache[key] = (tab.version, best, arg)
        return best, arg


@dataclass
class NodeValue:
    """A node's relaxation optimum: per cell its choice, round time, tokens and the class of each model
    (None: some cell has no design at all), its exact weighted mean latency, and the overflow found."""

    feasible: bool
    choice: np.ndarray | None = None  # [cell]
    round_ns: np.ndarray | None = None
    tokens: np.ndarray | None = None
    classes: list[np.ndarray] = field(default_factory=list)  # per model [cell]
    value: Fraction | int | None = None
    branch: tuple[int, int, int] | None = None  # (model, weight operator, layout) to branch on; None: solved
    rows: np.ndarray | None = None  # the cells the arrays are of (every cell unless `evaluate(cells=...)`)


class Search:
    """[MIX-15..17] The decomposition's state: tables, round arrays, the models' relaxation minima."""

    def __init__(self, tables: MixTables, goal: Goal, minima: ModelMinima | None = None,
                 rounds: CellRounds | None = None):
        """`minima`, `rounds`: shared with other searches over the same tables (they do not depend on
        the goal)."""
        self.tables = tables
        self.rounds = rounds or CellRounds(tables)
        self.minima = minima or ModelMinima(tables)
        self.goal = goal
        self.nodes = 0
        self.exactified = 0

    # -- the relaxation ---------------------------------------------------------------------------
    def cell_times(self, h: Sequence[ArchConfig], us: Sequence[np.ndarray]):
        """Per model its [cell, profile] least times and classes at node (h, us), and the round per
        (cell, choice) with validity."""
        mins = [self.minima.get(self.tables.tables[j][a], u) for j, (a, u) in enumerate(zip(h, us, strict=True))]
        prof = self.rounds.profile
        per = [np.take_along_axis(t, prof[:, :, j], 1) for j, (t, _) in enumerate(mins)]  # [cell, choice]
        ok = self.rounds.valid.copy()
        for t in per:
            ok &= t < NONE_NS
        T = self.rounds.round_ns(per[0], per[1:])
        return mins, T, ok

    def best_choices(self, T: np.ndarray, ok: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """Per cell (of `rows`) the first choice of least T / tokens (exact among near ties); None if a
        cell has none."""
        if not ok.any(1).all():
            return None
        tok = self.rounds.tokens[rows]
        lat = np.where(ok, T / tok, np.inf)
        k = lat.argmin(1)
        low = lat[np.arange(len(k)), k]
        near = ok & (lat <= low[:, None] * (1 + FLOAT_TIE))
        for c in np.nonzero(near.sum(1) > 1)[0]:  # exact comparison among near ties, first index wins
            ks = np.nonzero(near[c])[0]
            k[c] = min(ks, key=lambda i: (Fraction(int(T[c, i]), int(tok[c, i])), i))
        return k

    def evaluate(self, h: Sequence[ArchConfig], us: Sequence[np.ndarray],
                 cells: Sequence[int] | None = None) -> NodeValue:
        """The node's relaxation optimum, every entry it uses exact, and whether its designs fit together.
        `cells`: only these cells (their choices and classes; no value, no fit test)."""
        self.nodes += 1
        rows = np.arange(self.tables.n_cells) if cells is None else np.asarray(cells, dtype=np.int64)
        while True:
            mins, T, ok = self.cell_times(h, us)
            T, ok = T[rows], ok[rows]
            k = self.best_choices(T, ok, rows)
            if k is None:
                return NodeValue(False)
            classes = []
            inexact = []
            for j, (a, (_, arg)) in enumerate(zip(h, mins, strict=True)):
                tab = self.tables.tables[j][a]
                p = self.rounds.profile[rows, k, j]
                cls = arg[rows, p]
                classes.append(cls)
                if not tab.chain:
                    inexact += [(tab, int(c), int(pp), int(ll)) for c, pp, ll in zip(rows, p, cls, strict=True)
                                if not tab.exact[c, pp, ll]]
            if not inexact:
                break
            for tab, c, pp, ll in inexact:  # raise the bounds used to exact values, then look again
                tab.exactify(c, pp, ll)
                self.exactified += 1
        idx = np.arange(len(rows))
        rt = T[idx, k]
        tok = self.rounds.tokens[rows, k]
        if cells is not None:
            return NodeValue(True, k, rt, tok, classes, None, None, rows)
        lat = [self.goal.cell_latency(int(t), int(n)) for t, n in zip(rt, tok, strict=True)]
        if not self.goal.fits(lat):
            return NodeValue(False)
        node = NodeValue(True, k, rt, tok, classes, self.goal.value(lat), None, rows)
        node.branch = self.overflow(h, us, node)
        return node

    def overflow(self, h: Sequence[ArchConfig], us: Sequence[np.ndarray], node: NodeValue) -> tuple[int, int, int] | None:
        """None when the cells' designs fit together (every copy any of them uses, with the stored ones,
        beside each cell's KV cache and draft2 model); else the open copy to branch on: of the first model
        that overflows a cell, the largest copy (on the side that overflows) used by other cells only."""
        for j, (a, u) in enumerate(zip(h, us, strict=True)):
            tab = self.tables.tables[j][a]
            cls = node.classes[j]
            used = tab.layouts[cls][:, list(WEIGHT_INDEX)]  # [cell, w]
            stored = u == STORED
            for w in range(len(WEIGHT_INDEX)):
                stored[w, used[:, w]] = True
            base = (tab.copy_kib * stored[:, :, None]).sum((0, 1))
            cells = np.arange(len(cls))
            need = base + tab.kv_kib[cells, cls]
            d2 = self.minima.draft2_need(tab)
            if d2 is not None:
                need = need + d2[cells, self.rounds.profile[cells, node.choice, j]]
            over = (need > tab.capacity).any(1)
            if not over.any():
                continue
            c = int(np.nonzero(over)[0][0])
            side = int(np.argmax(need[c] - tab.capacity))
            best = None
            for w in range(len(WEIGHT_INDEX)):
                for lay in np.nonzero(stored[w] & (u[w] == OPEN))[0]:
                    if used[c, w] == lay:
                        continue
                    kib = int(tab.copy_kib[w, lay, side])
                    if best is None or kib > best[0]:
                        best = (kib, w, int(lay))
            assert best is not None, "a cell overflows with the copies it uses itself: its relaxation let it"
            return j, best[1], best[2]
        return None

    def designs(self, h: Sequence[ArchConfig], node: NodeValue) -> list[Design]:
        """The designs of a node's relaxation optimum, one per cell of `node.rows`: its choice and, per
        model, its class's placements (a mix design when the node is solved)."""
        out = []
        for n, c in enumerate(node.rows):
            pt = self.tables.prices[int(c)]
            k = int(node.choice[n])
            places = []
            for j, a in enumerate(h):
                tab = self.tables.tables[j][a]
                p = int(self.rounds.profile[c, k, j])
                places.append(tab.placements(int(c), p, int(node.classes[j][n])))
            out.append(pt.space.build(list(h), places, pt.choices[k]))
        return out

    def energy_floor(self, h: Sequence[ArchConfig]) -> list[Fraction]:
        """Per cell a lower bound of its energy per token (nJ) on hardware h: over its choices, the least
        verification energy, drafting energies and idle energy at the least round time, each at its own
        least (the evaluator's round rules are non-decreasing in every one of them)."""
        us = self.root_states(h)
        _, T, ok = self.cell_times(h, us)
        least = []  # per model [cell, profile]: the least energy of a class the cell may use
        for j, a in enumerate(h):
            tab = self.tables.tables[j][a]
            least.append(np.where(self.minima.feasible(tab, us[j]), tab.energy, 2 ** 62).min(2))
        idle = [self.tables.tables[j][a].idle_power_mw for j, a in enumerate(h)]
        out = []
        for c, pt in enumerate(self.tables.prices):
            best = None
            for k in np.nonzero(ok[c])[0]:
                st = pt.stats[k]
                prof = self.rounds.profile[c, k]
                energy = int(least[0][c, min(prof[0], least[0].shape[1] - 1)])
                for i in range(1, len(h)):
                    energy += drafting_energy_nj(st, i - 1, int(least[i][c, min(prof[i], least[i].shape[1] - 1)]))
                energy += sum(idle_energy_nj(mw, int(T[c, k])) for mw in idle)
                v = Fraction(energy * spec.TOKENS_SCALE, int(self.rounds.tokens[c, k]) * pt.space.scenario.batch_size)
                best = v if best is None else min(best, v)
            out.append(best if best is not None else Fraction(0))
        return out

    # -- bounds over every tuple -------------------------------------------------------------------
    def root_states(self, h: Sequence[ArchConfig]) -> tuple[np.ndarray, ...]:
        return tuple(open_copies(self.tables.tables[j][a]) for j, a in enumerate(h))

    def cell_grid(self) -> np.ndarray:
        """[cell, tuple grid...] each cell's relaxation optimum at the root of every hardware tuple (its
        best latency on that hardware, capacity its own: a lower bound, exact for chains) in ns/token,
        as floats (exact ties are settled later on exact values)."""
        tables, rounds = self.tables, self.rounds
        archs = tables.archs
        n = len(archs)
        per_model = []
        for j in range(n):
            mins = [self.minima.get(tables.tables[j][a], open_copies(tables.tables[j][a]))[0] for a in archs[j]]
            per_model.append(np.stack(mins, -1))  # [cell, profile, arch]
        shape = tuple(len(a) for a in archs)
        out = np.full((tables.n_cells, *shape), np.inf)
        for c in range(tables.n_cells):
            for k in np.nonzero(rounds.valid[c])[0]:
                prof = rounds.profile[c, k]
                V = per_model[0][c, prof[0]].reshape([-1] + [1] * (n - 1))
                C = [per_model[i][c, prof[i]].reshape([1] * i + [-1] + [1] * (n - 1 - i)) for i in range(1, n)]
                d = np.zeros(1, dtype=np.int64)
                total = 0
                for o in range(rounds.weight.shape[2]):
                    p = int(rounds.weight[c, k, o])
                    if p == 0:
                        continue
                    d = np.zeros(1, dtype=np.int64)
                    for i, ci in enumerate(C):
                        d = np.maximum(d, int(rounds.cycles[c, k, o, i]) * ci)
                    if rounds.pipeline[c, k]:
                        r = np.maximum(d, V) + -(-(int(rounds.q[c, k]) * np.minimum(d, V)) // spec.Q_SCALE)
                    else:
                        r = d + V
                    total = total + p * r
                T = -(-total // spec.OUTCOME_SCALE) + int(rounds.sync[c])
                bad = V >= NONE_NS
                for ci in C:
                    bad = bad | (ci >= NONE_NS)
                lat = np.where(bad, np.inf, T * (spec.TOKENS_SCALE / int(rounds.tokens[c, k])))
                np.minimum(out[c], lat, out=out[c])
        return out


# ------------------------------------------------------------------------------------------------
# The search
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Leaf:
    """A solved node: its hardware, the state of every weight copy per model ((weight operator, layout)
    -> BANNED | STORED | OPEN) and each cell's latency at its relaxation optimum (the goal's units)."""

    archs: tuple[ArchConfig, ...]
    copies: tuple[dict[tuple[int, int], int], ...]
    latency: tuple
    designs: tuple[Design, ...] = ()  # its relaxation's designs: a mix design of the leaf


@dataclass
class Solved:
    """The search's answer: the best mix design found (hardware, designs, value: the goal's), whether it
    is proven optimal (else `bound` is the least open bound when the budget ran out), and with ties kept
    every hardware tuple on which a design attains the optimum (`tied`)."""

    archs: tuple[ArchConfig, ...] | None
    designs: list[Design] | None
    value: Fraction | int | None
    proven: bool
    bound: Fraction | int | None
    nodes: int
    tuples_bounded: int
    tuples_searched: int
    tied: tuple[tuple[ArchConfig, ...], ...] = ()
    seconds: float = 0.0
    leaves: tuple[Leaf, ...] = ()  # with ties kept: every solved node that attains the optimum

    def as_dict(self) -> dict:
        return {"nodes": self.nodes, "tuples_bounded": self.tuples_bounded, "tuples_searched": self.tuples_searched,
                "tied_hardware": [[a.label() for a in h] for h in self.tied], "tied_leaves": len(self.leaves),
                "search_s": self.seconds}


def root_tuples(search: Search, grid: np.ndarray) -> list[tuple[float, tuple[ArchConfig, ...]]]:
    """Every hardware tuple with a finite bound, least bound first (ties in the architectures' order)."""
    bounds = search.goal.tuple_bounds(grid)
    archs = search.tables.archs
    out = []
    for f in np.argsort(bounds, axis=None, kind="stable"):
        b = float(bounds.flat[f])
        if not np.isfinite(b):
            break
        idx = np.unravel_index(int(f), bounds.shape)
        out.append((b, tuple(archs[j][int(i)] for j, i in enumerate(idx))))
    return out


def best_first(search: Search, tuples: Sequence[tuple[float, tuple[ArchConfig, ...]]],
               incumbent: tuple | None = None, deadline: float | None = None, keep_ties: bool = False,
               max_nodes: int | None = None) -> Solved:
    """[MIX-17] Best-first branch and bound over the nodes of `tuples` (each with its root bound, a float
    lower bound of the goal over every mix design on it) from an optional incumbent (value, hardware,
    designs). A node whose value is not below the best found is dropped (`keep_ties`: only one above
    it, so that every tuple attaining the optimum is found). Stops at `deadline` (perf_counter seconds)
    or after `max_nodes` node evaluations, unproven."""
    t0 = time.perf_counter()
    seq = itertools.count()
    best = incumbent
    tied: dict[tuple[ArchConfig, ...], None] = {}
    leaves: list[Leaf] = []

    def above(bound: float) -> bool:  # the bound cannot reach the best value (float margin kept)
        return best is not None and bound > float(best[0]) * (1 + FLOAT_TIE)

    heap = [(bound, next(seq), h, None) for bound, h in tuples if not above(bound)]
    heapq.heapify(heap)
    searched: dict[tuple[ArchConfig, ...], None] = {}
    start_nodes = search.nodes
    while heap and not above(heap[0][0]):
        if (deadline is not None and time.perf_counter() > deadline) or \
                (max_nodes is not None and search.nodes - start_nodes >= max_nodes):
            break
        bound, _, h, us = heapq.heappop(heap)
        searched[h] = None
        us = search.root_states(h) if us is None else us
        node = search.evaluate(h, us)
        if not node.feasible or (best is not None and (node.value > best[0] if keep_ties else node.value >= best[0])):
            continue
        if node.branch is None:
            designs = search.designs(h, node)
            if best is None or node.value < best[0]:
                best = (node.value, h, designs)
                tied, leaves = {}, []
            tied[h] = None
            if keep_ties:
                leaves.append(Leaf(h, tuple({(w, lay): int(u[w, lay]) for w in range(u.shape[0])
                                             for lay in range(u.shape[1])} for u in us),
                                   tuple(search.goal.cell_latency(int(t), int(n))
                                         for t, n in zip(node.round_ns, node.tokens, strict=True)), tuple(designs)))
            continue
        j, w, lay = node.branch
        for state in (STORED, BANNED):
            child = list(us)
            u = child[j].copy()
            u[w, lay] = state
            child[j] = u
            heapq.heappush(heap, (float(node.value), next(seq), h, tuple(child)))
    proven = best is not None and (not heap or above(heap[0][0]))
    bound = best[0] if proven else None
    if not proven and heap:  # the least open bound (a float, rounded down), at most the best value
        low = Fraction(heap[0][0]) * (1 - Fraction(1, 10 ** 9))
        bound = low if best is None else min(low, Fraction(best[0]))
    return Solved(None if best is None else best[1], None if best is None else best[2],
                  None if best is None else best[0], proven, bound, search.nodes - start_nodes, len(tuples),
                  len(searched), tuple(tied), round(time.perf_counter() - t0, 3), tuple(leaves))


__all__ = ["BANNED", "OPEN", "STORED", "CellRounds", "Goal", "Leaf", "Search", "Solved", "best_first", "open_copies",
           "root_tuples"]
