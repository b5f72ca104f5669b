"""[TREE-6] Exact solves over tree spaces too large for a menu: relaxed class columns and refinement.

When a drafter's exact menu ([TREE-4]) exceeds the model's limits, `solve` comes here. The drafter's
tree profiles are covered by real profiles (columns priced like any choice) and classes of profiles
(problem/tree_classes.py), each offered to the model as one *relaxed column*: passes element-wise no wider
than every member's, verifier tokens n + 1, expected tokens at least every member's, the members' depth.
By the [TREE-4] theorem the relaxed column's round time and energy are at most, and its tokens at least,
every member's on every hardware and mapping, so a solve over real and relaxed columns bounds every
profile. Dinkelbach steps at the incumbent's ratio lambda minimise

    F(x) = 2 (N(x) - L_c) + [c real],  L_c = ceil(lambda D_c) - 1 (real c), floor(lambda D_c) (relaxed c)

over the columns c: F <= 1 finds a real design strictly better than lambda (a new incumbent, priced by
the evaluator) or a relaxed column whose ratio is at most lambda (its class is split and the step
repeated); a proven F >= 2 proves lambda optimal over every profile and every design attaining it real.
Relaxed columns never reach the evaluator. The canonical optimum (OBJ-3) is then taken over the real
columns, which hold every optimal design (formulations/speculation_rounds.md, [TREE-6]).

This module keeps the column set (`ColumnSearch`: classes, real profiles, the models over them, the dive on
one hardware); the loop itself is `tree_columns.solve_columns`.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from fractions import Fraction

from ortools.sat.python import cp_model

from specpim_cp.catalog import Catalog
from specpim_cp.physics import speculation as spec
from specpim_cp.physics.evaluate import Evaluator, drafting_energy_nj, idle_energy_nj
from specpim_cp.physics.rounds import RoundStats, round_stats, tree_pass_tokens
from specpim_cp.problem.design import Design, DrafterChoice, SpecChoice
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario, Space
from specpim_cp.problem.space import DesignSpace, draft_length_options, drafter_tree_vector
from specpim_cp.problem.tree_classes import (
    TreeClass,
    initial_classes,
    mass_bound,
    relaxed_passes,
    representative,
    split_class,
)
from specpim_cp.problem.trees import depth_masses
from specpim_cp.solvers.exact.model import SpecModel
from specpim_cp.solvers.exact.prices import PriceTable, model_prices, pass_token_counts

__all__ = ["ColumnSearch", "columns_refusal"]

#: Most classes one dive ([TREE-6], `ColumnSearch.dive`) splits on one hardware before the model is solved again.
DIVE_LIMIT = 2_000


def columns_refusal(scenario: Scenario, catalog: Catalog, objective: str) -> str | None:
    """Why the column solver does not take this scenario (None: it does): one drafter with token trees,
    no mixture-of-experts model (the [TREE-4] premise), a latency or energy objective."""
    if len(scenario.drafters) != 1 or scenario.drafters[0].tree is None or scenario.space.trees == "off":
        return "it covers one drafter with token trees"
    if scenario.drafters[0].kind != "model":  # a head's rounds follow its kind (formulations/drafter_kinds.md)
        return f"it covers drafter models, not a {scenario.drafters[0].kind} head"
    if any(catalog.model(e.model, "model").is_moe for e in (scenario.verifier, scenario.drafters[0])):
        return "a mixture-of-experts model's prices are not proven monotone in tokens ([TREE-4])"
    if objective not in ("latency", "energy"):
        return f"it solves the latency and energy objectives, not {objective}"
    return None


class ColumnSearch:
    """The column set of one scenario (real profiles, classes) and the models built over it."""

    def __init__(self, scenario: Scenario, catalog: Catalog, ev: Evaluator):
        self.scenario, self.catalog, self.ev = scenario, catalog, ev
        tree = scenario.drafters[0].tree
        assert tree is not None
        self.max_children = tree.max_children
        self.p = drafter_tree_vector(scenario, catalog, 0)
        assert self.p is not None
        classes, profiles = initial_classes(self.max_children, draft_length_options(scenario, 0), tree.max_nodes)
        self.classes: set[TreeClass] = set(classes)
        self.profiles: set[tuple[int, ...]] = set(profiles)
        self.refined = 0  # classes split so far
        self.dropped = 0  # classes dropped by their CUT-3 bound
        b = scenario.batch_size
        # every pass any profile can need: verifier b (n + 1), drafter b w (w < n), and the chains' and stagings'
        chain_space = DesignSpace(scenario, catalog, tree_menus=((),))
        self.chain_choices = chain_space.choice_list
        self.pipelines = chain_space.pipeline_options
        tokens = [set(pass_token_counts(b, self.chain_choices, d.index)) for d in chain_space.models]
        tokens[0].update(b * (n + 1) for n in range(1, tree.max_nodes + 1))
        tokens[1].update(b * w for w in range(1, tree.max_nodes))
        drafts2 = tuple(dict.fromkeys(c.drafters[0].staging.draft2 for c in self.chain_choices
                                      if c.speculates and c.drafters[0].staging is not None))
        self.model_prices = tuple(model_prices(ev, d, tuple(sorted(tokens[j])), drafts2 if j else ())
                                  for j, d in enumerate(chain_space.models))
        self.share_levels = ev.costs.share_levels
        self.sync = ev.costs.host.sync_latency_ns
        self._relaxed_stats: dict[tuple[TreeClass, bool], RoundStats] = {}

    def add_design(self, design: Design | None) -> None:
        """Make a design's tree profile a real column (a hint's), when the design is in the space."""
        tree = None if design is None or len(design.drafters) != 1 else design.drafters[0].tree
        if tree is not None and not DesignSpace(self.scenario, self.catalog, tree_menus=((),)).violations(design):
            self.profiles.add(tuple(tree))

    def summary(self) -> dict:
        """What the refinement did, for SolveReport.extra."""
        return {"classes_left": len(self.classes), "real_profiles": len(self.profiles),
                "classes_split": self.refined, "classes_dropped": self.dropped}

    # -- columns -------------------------------------------------------------------------------
    def relaxed_choice(self, cls: TreeClass, pipeline: bool) -> SpecChoice:
        """The relaxed column's choice: a stand-in profile whose passes are `relaxed_passes` and whose last
        width makes n nodes (never a design: `stats` holds the class's statistics, not its own)."""
        passes = relaxed_passes(cls, self.max_children)
        return SpecChoice((DrafterChoice(cls.depth, None, (*passes, cls.nodes - sum(passes))),), pipeline)

    def relaxed_stats(self, cls: TreeClass, pipeline: bool) -> RoundStats:
        """A member's statistics with its expected tokens raised to bound every member's: the depth fixes
        rho, q, q_c and the cycle outcome; tokens_micro(w) - tokens_micro(rep) <= 10^6 (E_w - E_rep) + 1."""
        key = (cls, pipeline)
        if key not in self._relaxed_stats:
            rep = representative(cls, self.max_children)
            st = round_stats(SpecChoice((DrafterChoice(cls.depth, None, rep),), pipeline), self.ev.acceptance)
            e_rep = 1.0 + math.fsum(depth_masses(self.p, rep))
            lift = math.ceil(spec.TOKENS_SCALE * (mass_bound(self.p, cls) - e_rep)) + 2
            self._relaxed_stats[key] = dataclasses.replace(st, tokens_micro=st.tokens_micro + max(lift, 0))
        return self._relaxed_stats[key]

    def build(self, with_classes: bool = True) -> tuple[SpecModel, dict[int, TreeClass]]:
        """The model over the real columns (chains, stagings and the real profiles) and, `with_classes`, one
        relaxed column per class and pipeline mode; the relaxed columns' choice indices -> their class."""
        menu = tuple(sorted(self.profiles, key=lambda ws: (sum(ws), len(ws), ws)))
        space = DesignSpace(self.scenario, self.catalog, tree_menus=(menu,))
        real = space.choice_list
        acc = self.ev.acceptance
        stats = [round_stats(c, acc) for c in real]
        relaxed: dict[int, TreeClass] = {}
        columns = list(real)
        for cls in sorted(self.classes) if with_classes else ():
            for pipeline in self.pipelines:
                relaxed[len(columns)] = cls
                columns.append(self.relaxed_choice(cls, pipeline))
                stats.append(self.relaxed_stats(cls, pipeline))
        table = PriceTable(space, tuple(stats), self.share_levels, self.sync, self.model_prices, tuple(columns))
        return SpecModel(self.scenario, self.catalog, self.ev, prices=table), relaxed

    def refine(self, cls: TreeClass) -> tuple[list[TreeClass], list[tuple[int, ...]]]:
        """Replace a class by its parts (subclasses by the next width, or profiles), which it returns."""
        self.classes.discard(cls)
        subs, profiles = split_class(cls, self.max_children)
        self.classes.update(subs)
        self.profiles.update(profiles)
        self.refined += 1
        return subs, profiles

    # -- refinement at one hardware ---------------------------------------------------------------
    def numerator(self, models: tuple, choice: SpecChoice, stats: RoundStats, ratio_name: str) -> int:
        """Round ns (latency) or energy nJ (energy) of a column on fixed hardware, from the evaluator's pass
        prices and the column's statistics (the round formulas of `Evaluator._price`). Used only to order the
        refinement of [TREE-6]'s dive: a relaxed column is no design and is never priced as one."""
        verifier, drafter = models
        b = self.scenario.batch_size
        dc = choice.drafters[0]
        assert dc.tree is not None
        ev = self.ev
        v = ev.pass_price(verifier, b * (dc.nodes + 1))
        passes = [ev.pass_price(drafter, t) for t in tree_pass_tokens(b, dc)]
        cyc_t, cyc_e = sum(q.time_ns for q in passes), sum(q.energy_nj for q in passes)
        round_ns = spec.round_time_ns(stats.outcomes, [cyc_t], v.time_ns, self.sync, choice.pipeline, stats.q)
        if ratio_name == "latency":
            return round_ns
        return (v.energy_nj + drafting_energy_nj(stats, 0, cyc_e)
                + sum(idle_energy_nj(ev.idle_power_mw(md), round_ns) for md in models))

    def dive(self, design: Design, cls: TreeClass, ratio_name: str, n: int, d: int,
             limit: int | None = DIVE_LIMIT) -> Design | None:
        """[TREE-6] Refine class `cls`, and every class whose relaxed column reaches n/d there, on the hardware
        of `design` (a real design: its models, placements and pipeline mode), best first by the relaxed
        columns' ratio there: split every class whose ratio there is at most the best ratio seen (n/d at first), price every real profile met with the evaluator. Returns
        the best real design found strictly below n/d, or None. Every class split stays split (the column set
        keeps covering every profile); at most `limit` classes are split (None: until no class on the heap can
        reach the best ratio seen, which is then the best over every profile of the classes on this hardware)."""
        models = (design.verifier, design.drafters[0])
        pipeline = design.pipeline
        best: Design | None = None
        best_ratio = Fraction(n, d)
        heap = [(Fraction(0), cls)]
        for other in self.classes - {cls}:  # every class the hardware lets reach n/d is refined there too
            st = self.relaxed_stats(other, pipeline)
            r = Fraction(self.numerator(models, self.relaxed_choice(other, pipeline), st, ratio_name), st.tokens_micro)
            if r <= best_ratio:
                heap.append((r, other))
        heapq.heapify(heap)
        split = 0
        while heap and (limit is None or split < limit):
            value, c = heapq.heappop(heap)
            if value > best_ratio or c not in self.classes:
                continue
            subs, profiles = self.refine(c)
            split += 1
            for ws in profiles:
                choice = SpecChoice((DrafterChoice(len(ws), None, ws),), pipeline)
                cand = design.model_copy(update={"drafters": [design.drafters[0].model_copy(update={
                    "draft_length": len(ws), "tree": ws, "staging": None})]})
                assert cand.choice == choice
                mt = self.ev.metrics(cand)
                num = mt.round_time_ns if ratio_name == "latency" else mt.energy_nj_per_round
                r = Fraction(num, mt.tokens_per_round_micro)
                if r < best_ratio:
                    best, best_ratio = cand, r
            for sub in subs:
                st = self.relaxed_stats(sub, pipeline)
                r = Fraction(self.numerator(models, self.relaxed_choice(sub, pipeline), st, ratio_name),
                             st.tokens_micro)
                if r <= best_ratio:
                    heapq.heappush(heap, (r, sub))
        return best

    def prune(self, sm: SpecModel, relaxed: dict[int, TreeClass], bounds: tuple[int, ...], n: int, d: int) -> None:
        """Drop every class of model `sm` whose relaxed columns' CUT-3 bound ratios all exceed n/d, and every
        real tree profile whose columns all do: none of their members can reach n/d, nor any later, lower
        incumbent. Classes and profiles added since `sm` was built stay."""
        seen: set = set()
        reach: set = set()
        for k, (lb, st) in enumerate(zip(bounds, sm.stats)):
            tree = sm.choices[k].drafters[0].tree if sm.choices[k].speculates else None  # [NOSPEC]: no tree
            key = relaxed.get(k, tree)
            if key is None:
                continue
            seen.add(key)
            if lb * d <= n * st.tokens_micro:
                reach.add(key)
        gone = seen - reach
        classes_gone = {c for c in gone if isinstance(c, TreeClass)}
        self.dropped += len(classes_gone & self.classes)
        self.classes -= classes_gone
        self.profiles -= gone - classes_gone


def hardware(sm: SpecModel, solver: cp_model.CpSolver) -> Design:
    """The solution's architectures, placements and pipeline mode, as a design drafting a chain (the
    solution's own choice may be a relaxed column, which is no design)."""
    archs = [next(a for a, v in sm.x[j].items() if solver.boolean_value(v)) for j in range(len(sm.data))]
    places = [{op: next(p for p, v in sm.y[j][op].items() if solver.boolean_value(v)) for op in PLACEABLE_OPS}
              for j in range(len(sm.data))]
    pipeline = next(c for c, z in zip(sm.choices, sm.z) if solver.boolean_value(z)).pipeline
    chains = [c for c in sm.choices if c.speculates and c.pipeline == pipeline and c.drafters[0].tree is None]
    chain = next((c for c in chains if c.drafters[0].staging is None), chains[0])
    return sm.space.build(archs, places, chain)


def chain_start_scenario(scenario: Scenario) -> Scenario:
    """The scenario with trees off: its baselines are chain designs of the full space (a first incumbent)."""
    space: Space = scenario.space.model_copy(update={"trees": "off"})
    return scenario.model_copy(update={"space": space})
