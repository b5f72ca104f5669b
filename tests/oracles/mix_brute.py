"""Brute-force optimum of a workload mix by enumeration (the oracle `solvers.mix.solve_mix` is checked
against on small mixes).

Every shared architecture tuple (one architecture per model, the same in every cell) is tried:

1. Per cell, its best design on that hardware, by `solvers/brute.py`'s enumeration: per model and architecture
   every placement, an option dropped only when another of the same (architecture, draft2) class is at
   least as good in every quantity the round depends on (`brute.pareto_filter`), combined with every
   speculation choice and priced by the evaluator. Leaving out the tensor-copy coupling of the cells
   (MIX-3/4) relaxes the mix problem on that hardware, so when the cells' best designs fit together
   (`physics.mix.check_mix_capacity`) they are its optimum there.
2. Otherwise, exactly: options are pruned only within one (architecture, draft2, layouts of the weight
   operators) class and with the model's bytes on each memory side added to the dominance vector (a kept
   option adds no weight copy and needs no more memory than one it replaces), every cell's designs on
   that hardware are listed, and a branch and bound over the cells finds the best combination that passes
   `check_mix_capacity`.

A cell's own optimum (the regret denominator) is its best over every tuple. Small spaces only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.evaluate import Evaluator, Metrics
from specpim_cp.physics.mix import cell_metric, check_mix_capacity
from specpim_cp.physics.rounds import drafter_cycle_tokens, tree_pass_tokens, verifier_tokens
from specpim_cp.problem.design import ArchConfig, Design, ModelDesign
from specpim_cp.problem.mix import MIX_OBJECTIVES, Mix
from specpim_cp.problem.operators import FC_OPS
from specpim_cp.problem.scenario import scenario_catalog
from specpim_cp.problem.space import DesignSpace
from specpim_cp.solvers.brute import pareto_filter, priced_options

#: Most designs one cell may list on one hardware in the exact (capacity-coupled) step.
MAX_CELL_DESIGNS = 200_000


@dataclass(frozen=True)
class _Option:
    """One model's (architecture, placement, draft2) with what dominance compares."""

    arch: ArchConfig
    draft2: str | None
    md: ModelDesign
    perf: tuple  # pass time and energy per token count, draft2 step, idle power, devices (solvers/brute.py's vector)
    weights: tuple[str, ...]  # layouts of the weight operators (which copies the model stores)
    kib: tuple[int, int]  # (PIM-side, normal-side) KiB of the model alone


@dataclass(frozen=True)
class BruteMixResult:
    value: Fraction  # the exact mix objective of the best designs (mix.mix_value)
    archs: tuple[ArchConfig, ...]
    designs: tuple[Design, ...]
    metrics: tuple[Metrics, ...]
    own: tuple[Fraction, ...]  # per cell its own optimum of the cell metric over the whole space
    tuples: int  # architecture tuples tried
    coupled: int  # tuples where the cells' best designs broke the tensor-copy rule (step 2 ran)


def _options(ev: Evaluator, space: DesignSpace, j: int, tokens: Sequence[int], draft2s: Sequence[str]) -> list[_Option]:
    return [_Option(o.arch, o.draft2, o.md, o.perf, tuple(o.md.placement[op].layout for op in FC_OPS),
                    (o.capacity.pim_need_kib, o.capacity.normal_need_kib))
            for o in priced_options(ev, space.models[j], j, tokens, draft2s)]


def _prune(options: Sequence[_Option], coupled: bool) -> dict[ArchConfig, list[_Option]]:
    """Per architecture the options no other option of its class dominates (`coupled`: the class also fixes
    the weight layouts and the memory bytes join the vector)."""
    classes: dict[tuple, list[tuple[tuple, _Option]]] = {}
    for o in options:
        cls = (o.arch, o.draft2, o.weights) if coupled else (o.arch, o.draft2)
        classes.setdefault(cls, []).append((o.perf + (o.kib if coupled else ()), o))
    out: dict[ArchConfig, list[_Option]] = {}
    for cls, items in classes.items():
        out.setdefault(cls[0], []).extend(pareto_filter(items))
    return out


class _Cell:
    """One cell's enumeration: per model its options (pruned both ways), its speculation choices."""

    def __init__(self, ev: Evaluator, space: DesignSpace, raw: list[list[_Option]]):
        self.ev = ev
        self.space = space
        self.relaxed = [_prune(r, coupled=False) for r in raw]
        self.exact = [_prune(r, coupled=True) for r in raw]

    def designs(self, archs: Sequence[ArchConfig], coupled: bool):
        """(metrics, design) of every design on `archs` from the pruned options."""
        per_model = [(self.exact if coupled else self.relaxed)[j].get(a, []) for j, a in enumerate(archs)]
        for combo in itertools.product(*per_model):
            for c in self.space.choice_list:
                if any(combo[i + 1].draft2 != (None if dc.staging is None else dc.staging.draft2)
                       for i, dc in enumerate(c.drafters)):
                    continue
                design = self.space.build(archs, [o.md.placement for o in combo], c)
                try:
                    yield self.ev.metrics(design), design
                except ScenarioError:
                    continue


class MixEnumeration:
    """Every cell's options, priced once; `optimum(objective)` for any mix objective."""

    def __init__(self, mix: Mix, catalog: Catalog | None = None):
        self.mix = mix
        self.catalog = catalog = catalog or scenario_catalog(mix.base)
        self.evaluators = [Evaluator(c.scenario, catalog) for c in mix.cells]
        self.cells: list[_Cell] = []
        cache: dict[tuple, list[list[_Option]]] = {}  # per-model options depend on batch and context only
        for cell, ev in zip(mix.cells, self.evaluators, strict=True):
            space = DesignSpace(cell.scenario, catalog)
            sc = cell.scenario
            key = (sc.batch_size, sc.prompt_tokens, sc.generated_tokens)
            if key not in cache:
                tokens: list[set[int]] = [set() for _ in space.models]
                for ch in space.choice_list:
                    tokens[0].add(verifier_tokens(sc.batch_size, ch))
                    for i, dc in enumerate(ch.drafters):
                        tokens[i + 1].add(drafter_cycle_tokens(sc.batch_size, dc))
                        if dc.tree is not None:
                            tokens[i + 1].update(tree_pass_tokens(sc.batch_size, dc))
                draft2s = [[]] + [sorted({st.draft2 for st in space.staging_options(i) if st is not None})
                                  for i in range(space.n_drafters)]
                cache[key] = [_options(ev, space, j, sorted(tokens[j]), draft2s[j]) for j in range(space.n_models)]
            self.cells.append(_Cell(ev, space, cache[key]))
        self.archs = [m.archs for m in self.cells[0].space.models]
        if any([m.archs for m in c.space.models] != self.archs for c in self.cells):
            raise ScenarioError("brute force: the cells offer different architectures")
        self._relaxed: dict[str, dict] = {}

    def relaxed(self, kind: str) -> tuple[dict[tuple[ArchConfig, ...], list[tuple[Fraction, Metrics, Design]]],
                                          tuple[Fraction, ...]]:
        """Per architecture tuple that holds every cell, per cell, its best design there without the coupling
        (latency or energy); and per cell its own optimum over every tuple (also those another cell does
        not fit)."""
        if kind not in self._relaxed:
            out = {}
            own: list[Fraction | None] = [None] * len(self.cells)
            for t in itertools.product(*self.archs):
                bests = []
                for c, cell in enumerate(self.cells):
                    best = None
                    for m, d in cell.designs(t, coupled=False):
                        v = cell_metric(m, kind)
                        if best is None or v < best[0]:
                            best = (v, m, d)
                    bests.append(best)
                    if best is not None and (own[c] is None or best[0] < own[c]):
                        own[c] = best[0]
                if all(b is not None for b in bests):
                    out[t] = bests
            if not out or any(o is None for o in own):
                raise ScenarioError("brute force: no shared hardware holds every cell")
            self._relaxed[kind] = (out, tuple(own))
        return self._relaxed[kind]

    def optimum(self, objective: str = "latency") -> BruteMixResult:
        if objective not in MIX_OBJECTIVES:
            raise ScenarioError(f"objective: '{objective}' is not one of {', '.join(MIX_OBJECTIVES)}")
        kind = "energy" if objective == "energy" else "latency"
        relaxed, own = self.relaxed(kind)
        weights = self.mix.weights

        def aggregate(values: Sequence[Fraction]) -> Fraction:
            if objective == "regret":
                return max(v / o for v, o in zip(values, own, strict=True))
            return sum((w * v for w, v in zip(weights, values, strict=True)), Fraction(0)) / sum(weights)

        # per tuple, best bound first: the relaxation when it fits, else the coupled branch and bound
        best: tuple[Fraction, tuple, list[Metrics], list[Design]] | None = None
        coupled = 0
        for t, bests in sorted(relaxed.items(), key=lambda kv: aggregate([b[0] for b in kv[1]])):
            bound = aggregate([b[0] for b in bests])
            if best is not None and bound >= best[0]:
                break
            designs = [b[2] for b in bests]
            try:
                check_mix_capacity(self.mix, self.evaluators, designs)
                found = (bound, [b[1] for b in bests], designs)
            except ScenarioError:
                coupled += 1
                found = _coupled(self.mix, self.evaluators, self.cells, t, kind, aggregate,
                                 None if best is None else best[0])
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], t, found[1], found[2])
        if best is None:
            raise ScenarioError("brute force: no shared hardware holds every cell under the tensor-copy rule")
        value, t, metrics, designs = best
        return BruteMixResult(value, tuple(t), tuple(designs), tuple(metrics), own, len(relaxed), coupled)


def _coupled(mix: Mix, evaluators: Sequence[Evaluator], cells: Sequence[_Cell], archs: tuple, kind: str, aggregate,
             incumbent: Fraction | None):
    """The best combination of the cells' designs on `archs` that passes the tensor-copy rule (branch and
    bound over cells, each cell's designs by increasing metric), or None."""
    lists = []
    for c, cell in enumerate(cells):
        seen: dict[tuple, tuple[Fraction, Metrics, Design]] = {}
        for n, (m, d) in enumerate(cell.designs(archs, coupled=True)):
            if n >= MAX_CELL_DESIGNS:
                raise ScenarioError(f"brute force: cell {c} has more than {MAX_CELL_DESIGNS} designs on "
                                    f"{', '.join(a.label() for a in archs)}; restrict the space")
            # designs with the same weight copies, memory use and draft2 models differ only in the metric
            sig = tuple((tuple(md.placement[op].layout for op in sorted(md.placement)),
                         None if md.staging is None else md.staging.draft2) for _, md in d.models())
            v = cell_metric(m, kind)
            if sig not in seen or v < seen[sig][0]:
                seen[sig] = (v, m, d)
        if not seen:
            return None
        lists.append(sorted(seen.values(), key=lambda x: x[0]))
    best: list = [incumbent, None]

    def search(c: int, chosen: list) -> None:
        if c == len(lists):
            designs = [x[2] for x in chosen]
            try:
                check_mix_capacity(mix, evaluators, designs)
            except ScenarioError:
                return
            v = aggregate([x[0] for x in chosen])
            if best[0] is None or v < best[0]:
                best[0], best[1] = v, list(chosen)
            return
        rest = [lst[0][0] for lst in lists[c + 1:]]
        for item in lists[c]:
            if best[0] is not None and aggregate([x[0] for x in chosen] + [item[0]] + rest) >= best[0]:
                break  # the list is sorted: every later item is no better
            search(c + 1, [*chosen, item])

    search(0, [])
    if best[1] is None:
        return None
    return best[0], [x[1] for x in best[1]], [x[2] for x in best[1]]
