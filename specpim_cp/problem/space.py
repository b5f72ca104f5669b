"""The design space of a scenario: every option per decision, membership, construction.

One `DesignSpace` answers "which designs exist" for the evaluator, the exact model, the brute force
and the heuristic alike:

- options: per model its architectures (memory type, PIM units, devices) and, per architecture and
  operator, its placements; per drafter its DrafterChoices (draft, staging); the pipeline modes;
- membership: `violations(design)` names every rule a design breaks (the field and the limit);
- construction: `build(archs, placements, choice)`.

`DesignSpace(scenario, catalog)` is the scenario's *restricted* space (its `[space]` table: fixed
memory type or PIM units, a mapping rule, pipeline, draft lengths, staging); `DesignSpace.free(...)`
drops those restrictions (share levels are kept: they define the placements), which is what the
evaluator accepts (baselines and fixed recipes live outside a restricted space). Only the free space
admits a model marked `spill` (a fixed recipe that moves what does not fit over the external bus every
pass, `ModelDesign.spill`): a scenario's own space, which every optimizer searches, is capacity-checked.
A space with drafters also offers not speculating (`NO_SPEC`, a design with no drafters): the verifier
alone, on up to the whole device budget (formulations/speculation_rounds.md [NOSPEC]).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from specpim_cp.catalog import Catalog, MemorySpec, ModelSpec
from specpim_cp.catalog.slices import parse_slice
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.design import (
    DEVICE_COUNTS,
    NO_SPEC,
    ArchConfig,
    Design,
    DrafterChoice,
    Placement,
    SpecChoice,
    Staging,
)
from specpim_cp.problem.edge import (
    pim_runs,
    shared_device_violations,
    sharing,
    slice_options,
    weight_precisions,
    whole_device,
)
from specpim_cp.problem.heads import (
    HeadSpec,
    arch_on_verifier,
    arch_own,
    head_archs,
    needs_hidden_states,
    with_heads,
)
from specpim_cp.problem.mapping_rules import rule_allows
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import ModelEntry, Scenario, Space, scenario_catalog
from specpim_cp.problem.trees import (
    Dominance,
    MenuTooLarge,
    RankedVector,
    dominant_profiles,
    positional_vector,
    rank_by_probability,
)

#: Most token-tree width profiles one drafter may offer after dominance ([TREE-4]); each is a speculation
#: choice of the exact model (solve times of large menus: formulations/speculation_rounds.md [TREE-4]).
MAX_TREE_PROFILES = 4096
#: Most profiles of the tree space the menu's generator enumerates (its time: speculation_rounds.md [TREE-4]).
MAX_TREE_ENUMERATION = 1_000_000
#: Most speculation choices (the drafters' joint options times the pipeline modes) a design space lists:
#: the exact model builds one literal, one price row and one CUT-3 bound per choice, about 1 ms and 50 KB
#: each (two default-tree drafters, 52,048 choices: 47 s and 2.7 GB before CP-SAT starts). 10,000 holds one
#: drafter's largest menu (MAX_TREE_PROFILES trees and its chains, pipelined or not) and every built-in
#: scenario (at most 2,612); the check counts the choices before any is built.
MAX_SPEC_CHOICES = 10_000
#: Most (speculation choice, device-count tuple) pairs the exact model's CUT-3 bounds price, about 10 us
#: each (at most about 5 s); the built-in sets need at most 32,768 (1,024 choices x 32 tuples).
MAX_CHOICE_DEVICE_PAIRS = 500_000


class ChoiceSpaceTooLarge(ScenarioError):
    """The drafters' joint choice space exceeds MAX_SPEC_CHOICES or MAX_CHOICE_DEVICE_PAIRS (counted, not
    built); the message names the limit and the fields that shrink it."""


class TreeMenuTooLarge(ScenarioError):
    """A drafter's exact tree menu exceeds `MAX_TREE_PROFILES` or `MAX_TREE_ENUMERATION` (the message names
    `tree.max_nodes`); the exact solver then refines tree classes instead ([TREE-6]) where it can."""


# ------------------------------------------------------------------------------------------------
# Placements a memory system offers (physics only; mapping rules below)
# ------------------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def placement_options(memory: MemorySpec, arch: ArchConfig, share_levels: int,
                      memory_model: str = "time-shared") -> tuple[Placement, ...]:
    """Host placements with every layout the memory model allows, then PIM on each share.

    time-shared: k = 0 -> host "normal"; 0 < k < U -> "normal" and "spread"; k = U -> "spread" (all
    units are PIM units, read in normal mode). partitioned: host "normal" only, and none when k = U.
    """
    k, units = arch.pim_units, memory.units_per_group
    layouts: tuple[str, ...]
    if memory_model == "partitioned":
        layouts = ("normal",) if k < units else ()
    else:
        layouts = ("normal",) if k == 0 else ("spread",) if k == units else ("normal", "spread")
    out = [Placement(engine="host", share=0, layout=lay) for lay in layouts]
    if k > 0:
        out += [Placement(engine="pim", share=s) for s in range(1, share_levels + 1)]
    return tuple(out)


@dataclass(frozen=True)
class ModelOptions:
    """One model's architecture options and, per architecture and operator, its placements."""

    index: int  # 0 = verifier, i + 1 = drafter i
    label: str  # "verifier", "drafters[0]", ...: the design field it fills
    entry: ModelEntry
    spec: ModelSpec
    archs: tuple[ArchConfig, ...]
    placements: dict[ArchConfig, dict[str, tuple[Placement, ...]]]  # arch -> op -> allowed placements

    def allowed(self, arch: ArchConfig, op: str) -> tuple[Placement, ...]:
        return self.placements[arch][op]


class DesignSpace:
    """Options, membership and construction of a scenario's designs (see the module docstring)."""

    def __init__(self, scenario: Scenario, catalog: Catalog, allow_spill: bool = False,
                 tree_menus: Sequence[tuple[tuple[int, ...], ...]] | None = None):
        """`tree_menus`: per drafter, the tree profiles to offer instead of its exact menu (`tree_options`);
        the column solver's real columns ([TREE-6], solvers/exact/tree_column_set.py)."""
        self.scenario = scenario
        #: [NOSPEC] whether the space holds the verifier decoding alone (a choice and a design like any other);
        #: `[space] speculation = "on"` leaves it out (so does a workload mix's every cell), and so does
        #: `pipeline = "on"` (every design pipelines its drafters); on an interleaved shared device the verifier
        #: alone carries the whole device's idle power ([EDGE-3], physics/shared_device.py)
        self.offers_no_spec = (bool(scenario.drafters) and scenario.space.speculation == "free"
                               and scenario.space.pipeline != "on")
        self._tree_menus = None if tree_menus is None else tuple(tuple(m) for m in tree_menus)
        self.catalog = catalog = with_heads(catalog, scenario)
        self.allow_spill = allow_spill  # whether a model may be marked `spill` (fixed recipes only)
        self.space: Space = scenario.space
        self.share_levels = scenario.space.share_levels
        self.rule = scenario.space.mapping
        self.memory_model = scenario.assumptions.memory_model
        self.precisions = weight_precisions(scenario)
        self.models: list[ModelOptions] = []
        for j, (label, entry) in enumerate(model_labels(scenario)):  # a head's options read the verifier's
            self.models.append(self._model_options(j, label, entry))
        # one device's NPU is time-shared, and a head that reads the verifier's hidden states drafts after each
        # verification: no pipeline for either
        no_pipeline = (not scenario.drafters or bool(scenario.shared_device)
                       or any(needs_hidden_states(d.kind) for d in scenario.drafters))
        self.pipeline_options: tuple[bool, ...] = (
            (False,) if no_pipeline else {"free": (False, True), "on": (True,), "off": (False,)}[
                scenario.space.pipeline])

    @classmethod
    def free(cls, scenario: Scenario, catalog: Catalog) -> DesignSpace:
        """The scenario's space without its `[space]` restrictions (share levels kept), fixed recipes'
        spilled models included: what the evaluator prices."""
        unrestricted = Space(share_levels=scenario.space.share_levels)
        return cls(scenario.model_copy(update={"space": unrestricted}), catalog, allow_spill=True)

    def with_archs(self, archs: Sequence[ArchConfig]) -> DesignSpace:
        """The same space with model j's architectures restricted to `archs[j]` alone (each must be one of
        its own): a fixed hardware's space, every other option unchanged."""
        out = copy.copy(self)
        models = []
        for mo, a in zip(self.models, archs, strict=True):
            if a not in mo.archs:
                raise ScenarioError(f"{mo.label}: {a.label()} is not among its architectures")
            models.append(replace(mo, archs=(a,)))
        out.models = models
        return out

    # -- options -----------------------------------------------------------------------------
    @cached_property
    def drafter_options(self) -> list[tuple[DrafterChoice, ...]]:
        """Per drafter its options: chains (with every staging), then its tree profiles. Built on first use
        (membership, `violations`, needs no menu: the evaluator checks designs of a tree space beyond it)."""
        return [tuple(DrafterChoice(g, st) for g in self.gamma_options(i) for st in self.staging_options(i))
                + tuple(DrafterChoice(len(w), None, w) for w in self.tree_options(i))
                for i in range(len(self.scenario.drafters))]

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_drafters(self) -> int:
        return len(self.models) - 1

    @property
    def model_names(self) -> list[str]:
        return [m.spec.name for m in self.models]

    def device_options(self, index: int) -> tuple[int, ...]:
        """Device counts model `index` (0 = verifier) may take."""
        entry = self.scenario.verifier if index == 0 else self.scenario.drafters[index - 1]
        if self.scenario.shared_device:  # [EDGE-2] one device, split by channels
            return (1,)
        if entry.devices is not None:
            return (entry.devices,)
        budget = self.scenario.device_budget or 1
        # every other model with devices of its own needs at least one, except that the verifier alone
        # ([NOSPEC]) may take them
        others = (0 if index == 0 and self.offers_no_spec else
                  self.drafter_devices_floor() - (index > 0 and entry.owns_devices) + (index > 0))
        return tuple(n for n in DEVICE_COUNTS if n <= min(entry.max_devices, budget - others))

    def alone_only(self, index: int, arch: ArchConfig) -> bool:
        """Whether model `index` may take `arch` only when not speculating: a verifier on the devices the
        drafters would have had (more than the budget leaves after one device per drafter) [NOSPEC-2]."""
        budget = self.scenario.device_budget
        if index == 0 and self.offers_no_spec and sharing(self.scenario) == "channels":  # the drafters' channels
            parsed = parse_slice(arch.memory_type)
            return parsed is not None and arch.memory_type not in slice_options(self.scenario, self.catalog,
                                                                                parsed[0], 0)
        return (index == 0 and self.offers_no_spec and budget is not None
                and arch.devices > budget - self.drafter_devices_floor())

    def drafter_devices_floor(self) -> int:
        """Devices the drafters take at least when speculating: one per drafter that owns devices."""
        return sum(d.owns_devices for d in self.scenario.drafters)

    def memory_options(self) -> tuple[str, ...]:
        return (self.space.memory_type,) if self.space.memory_type else tuple(self.scenario.memory_types)

    def model_memory_options(self, j: int) -> tuple[str, ...]:
        """Memory types model j may take: the allowed ones, or on a shared device their channel slices."""
        if sharing(self.scenario) != "channels":
            return self.memory_options()
        out = tuple(s for m in self.memory_options() for s in slice_options(self.scenario, self.catalog, m, j))
        if j == 0 and self.offers_no_spec and self.scenario.verifier.channels is None:  # [NOSPEC-2] alone: all
            out += tuple(s for m in self.memory_options() if (s := whole_device(self.catalog, m)) not in out)
        return out

    def pim_unit_options(self, memory_type: str) -> tuple[int, ...]:
        if self.space.pim_units is not None:
            return (self.space.pim_units,)
        return tuple(range(self.catalog.memory(memory_type).max_pim_units + 1))

    def gamma_options(self, i: int) -> tuple[int, ...]:
        return draft_length_options(self.scenario, i, self.models[i + 1].spec if len(self.models) > i + 1 else None)

    def staging_options(self, i: int) -> tuple[Staging | None, ...]:
        st = self.scenario.drafters[i].staging
        if st is None or self.space.staging == "off":
            return (None,)
        opts: list[Staging | None] = [] if st.required else [None]
        for d2 in st.draft2:
            opts += [Staging(draft2=d2, draft_length=g2) for g2 in range(1, st.max_draft_length + 1)]
        return tuple(opts)

    def tree_options(self, i: int) -> tuple[tuple[int, ...], ...]:
        """Drafter i's exact menu of tree profiles ([TREE-4], `tree_options`), or the profiles given as
        `tree_menus`."""
        if self._tree_menus is not None:
            return self._tree_menus[i]
        return tree_options(self.scenario, i, self.catalog)

    def choice_count(self) -> int:
        """How many speculation choices `choices` lists, counted without listing them."""
        total = 0
        for pipeline in self.pipeline_options:
            if pipeline and self.n_drafters > 1:  # `choice_allowed`: chains only
                total += math.prod(sum(1 for d in opts if d.tree is None) for opts in self.drafter_options)
            else:
                total += math.prod(len(opts) for opts in self.drafter_options)
        return total + self.offers_no_spec

    def device_tuple_count(self) -> int:
        """How many tuples of device counts (one per model) the device budget admits (at most 4^5)."""
        counts = [self.device_options(j) for j in range(self.n_models)]
        budget = self.scenario.device_budget
        if budget is None:
            return math.prod(len(c) for c in counts)
        return sum(1 for t in itertools.product(*counts) if sum(t) <= budget)

    def check_choice_count(self) -> int:
        """The number of speculation choices, or ChoiceSpaceTooLarge (one line naming the limit) when listing
        them, or pricing each at every device-count tuple, would exceed MAX_SPEC_CHOICES or
        MAX_CHOICE_DEVICE_PAIRS: sized before any choice is built."""
        n = self.choice_count()
        sizes = " x ".join(f"{len(o):,}" for o in self.drafter_options)
        modes = " and ".join("on" if p else "off" for p in self.pipeline_options)
        modes += "; and not speculating" if self.offers_no_spec else ""
        shrink = "lower max_draft_length or tree.max_nodes, give fewer drafters a tree"
        if n > MAX_SPEC_CHOICES:
            raise ChoiceSpaceTooLarge(
                f"drafters: their joint options ({sizes}; pipeline {modes}) "
                f"make {n:,} speculation choices, more than the {MAX_SPEC_CHOICES:,} the exact model lists "
                f"(MAX_SPEC_CHOICES: about 1 ms and 50 KB each); {shrink}, or fix [space] draft_lengths")
        pairs = n * self.device_tuple_count()
        if pairs > MAX_CHOICE_DEVICE_PAIRS:
            raise ChoiceSpaceTooLarge(
                f"drafters: {n:,} speculation choices at {pairs // n:,} device-count tuples make {pairs:,} "
                f"pairs, more than the {MAX_CHOICE_DEVICE_PAIRS:,} the exact model's bounds price "
                f"(MAX_CHOICE_DEVICE_PAIRS); fix devices of some models, set device_budget lower, or {shrink}")
        return n

    def choices(self) -> Iterator[SpecChoice]:
        """Every speculation choice: the product of the drafters' options and the pipeline modes, except
        pipelined choices that hold a token tree when there are several drafters ([TREE]: a wider tree
        lowers the other drafters' continuation, so its optimality is only proven without that coupling).
        ChoiceSpaceTooLarge (`check_choice_count`) before the first one when they are too many."""
        self.check_choice_count()
        for combo in itertools.product(*self.drafter_options):
            for pipeline in self.pipeline_options:
                choice = SpecChoice(tuple(combo), pipeline)
                if self.choice_allowed(choice):
                    yield choice
        if self.offers_no_spec:  # [NOSPEC-1] last, so the speculating choices keep their indices
            yield NO_SPEC

    @staticmethod
    def choice_allowed(choice: SpecChoice) -> bool:
        """The pairing rule of `choices`: no pipelined token tree next to another drafter."""
        return not (choice.pipeline and len(choice.drafters) > 1 and any(d.tree is not None for d in choice.drafters))

    @cached_property
    def choice_list(self) -> tuple[SpecChoice, ...]:
        return tuple(self.choices())

    def drafter_neighbours(self, i: int, k: int) -> tuple[int, ...]:
        """Indices of drafter i's options one step from option k: one draft node more or fewer (a chain
        one longer or shorter, a tree with one node added or removed at one depth) with the same staging,
        or another staging with the same draft (local moves of a search)."""
        opts = self.drafter_options[i]
        a = opts[k]
        out = []
        for n, b in enumerate(opts):
            if n == k:
                continue
            same_draft = b.draft_length == a.draft_length and b.tree == a.tree
            if (b.staging == a.staging and _widths_distance(a, b) == 1) or (same_draft and b.staging != a.staging):
                out.append(n)
        return tuple(out)

    def nearest_drafter_option(self, i: int, choice: DrafterChoice) -> int:
        """Index of drafter i's option closest to `choice` (same staging first, then draft length)."""
        opts = self.drafter_options[i]
        return min(range(len(opts)), key=lambda n: (opts[n].staging != choice.staging,
                                                    _widths_distance(opts[n], choice), n))

    def _model_options(self, j: int, label: str, entry: ModelEntry) -> ModelOptions:
        spec = self.catalog.model(entry.model, f"{label}.model")
        archs, placements = [], {}
        if j and entry.kind != "model":  # a head: the verifier's architectures, devices of its own, or both
            archs, placements = head_archs(self.models[0], entry, lambda a: placement_options(
                self.catalog.memory(a.memory_type), a, self.share_levels, self.memory_model))
        for mem in (self.model_memory_options(j) if not j or entry.needs_devices else ()):
            memory = self.catalog.memory(mem)
            for k in self.pim_unit_options(mem):
                for n in self.device_options(j):
                    arch = ArchConfig(mem, k, n)
                    physical = placement_options(memory, arch, self.share_levels, self.memory_model)
                    per_op = {op: tuple(p for p in physical if rule_allows(self.rule, op, p.engine)
                                        and pim_runs(memory, self.precisions[spec.name], op, p.engine))
                              for op in PLACEABLE_OPS}
                    if all(per_op.values()):  # [MAP-2] every operator can run somewhere
                        archs.append(arch)
                        placements[arch] = per_op
        if not archs:
            raise ScenarioError(
                f"space: no architecture of {label} ({entry.model}) can run every operator under mapping "
                f"'{self.rule}' (pim_units={self.space.pim_units}, memory_type={self.space.memory_type}): "
                "host operators need normal memory units and PIM operators need PIM units [MAP-2]")
        return ModelOptions(j, label, entry, spec, tuple(archs), placements)

    # -- membership --------------------------------------------------------------------------
    def violations(self, design: Design) -> list[str]:
        """Every rule `design` breaks, one line each naming the design field (empty: it is in the space)."""
        sc = self.scenario
        if not design.drafters and self.offers_no_spec:
            return self._no_spec_violations(design)
        if len(design.drafters) != self.n_drafters:
            n = len(design.drafters)
            alone = " (or none: the verifier alone, no speculation)" if self.offers_no_spec else ""
            return [f"design.drafters: the scenario has {self.n_drafters} drafters{alone}, the design {n}"]
        out = []
        if design.pipeline not in self.pipeline_options:
            out.append("design.pipeline: a pipeline needs at least one drafter" if not sc.drafters else
                       f"design.pipeline: {'on' if design.pipeline else 'off'} is excluded by space.pipeline")
        if design.pipeline and len(design.drafters) > 1 and any(md.tree is not None for md in design.drafters):
            out.append("design.pipeline: a pipelined round drafts chains when there are several drafters "
                       "(a token tree is drafted with the pipeline off)")
        for opts, (label, md) in zip(self.models, design.models(), strict=True):
            out += self._model_violations(opts, label, md)
        if sc.shared_device:
            out += shared_device_violations(sc, [(md.memory_type, md.pim_units) for _, md in design.models()
                                                 if not md.colocated])  # an n-gram lookup takes no channel
        v = design.verifier.arch
        for label, md in design.models():
            if md.colocated and (md.memory_type, md.pim_units, md.devices) != (v.memory_type, v.pim_units, v.devices):
                out.append(f"design.{label}: a head on the verifier's devices has the verifier's architecture "
                           f"({v.label()}), not {md.arch.label()}")
        if sc.device_budget is not None:
            total = sum(md.arch.own_devices for _, md in design.models())
            if total > sc.device_budget:
                out.append(f"design: {total} devices exceed device_budget {sc.device_budget}")
        return out

    def _no_spec_violations(self, design: Design) -> list[str]:
        """[NOSPEC] The verifier alone: its part as in any design, no pipeline, its devices within the budget."""
        out = (["design.pipeline: a pipeline needs a drafter (this design does not speculate)"]
               if design.pipeline else [])
        out += self._model_violations(self.models[0], "verifier", design.verifier)
        budget = self.scenario.device_budget
        if budget is not None and design.verifier.devices > budget:
            out.append(f"design: {design.verifier.devices} devices exceed device_budget {budget}")
        return out

    def _model_violations(self, opts: ModelOptions, label: str, md) -> list[str]:
        where = f"design.{label}"
        if md.model != opts.entry.model:
            return [f"{where}.model: '{md.model}' but the scenario has '{opts.entry.model}'"]
        out = []
        if md.spill and not self.allow_spill:
            out.append(f"{where}.spill: a spilled model (tensors moved over the external bus every pass) is a fixed "
                       "recipe's, outside the scenario's capacity-checked space")
        arch = md.arch
        if md.colocated and (opts.index == 0 or not arch_on_verifier(self.scenario, opts.index - 1)):
            return [f"{where}.colocated: only a head with placement 'free' or 'verifier' sits on the verifier's devices"]
        if not md.colocated and opts.index and not arch_own(self.scenario, opts.index - 1):
            return [f"{where}.colocated: drafters[{opts.index - 1}] ({md.model}) runs on the verifier's devices "
                    + "(colocated = true, the verifier's architecture)"]
        if arch not in opts.placements:
            out.append(self._arch_violation(opts, where, arch))
        missing = [op for op in PLACEABLE_OPS if op not in md.placement]
        extra = [op for op in md.placement if op not in PLACEABLE_OPS]
        if missing or extra:
            out.append(f"{where}.placement: missing {missing} / unknown {extra}")
        elif arch in opts.placements:
            for op in PLACEABLE_OPS:
                p = md.placement[op]
                if p.key not in {q.key for q in opts.allowed(arch, op)}:
                    out.append(f"{where}.placement.{op}: {self._placement_violation(arch, op, p)}")
        if opts.index == 0:
            if md.draft_length is not None or md.staging is not None:
                out.append(f"{where}: draft_length/staging belong to drafters")
            return out
        i = opts.index - 1
        gammas = self.gamma_options(i)
        if md.tree is not None:
            return out + self._tree_violations(i, where, md)
        if md.draft_length not in gammas:
            out.append(f"{where}.draft_length: {md.draft_length} is outside {_span(gammas)}")
        if md.staging not in self.staging_options(i):
            st = self.scenario.drafters[i].staging
            if md.staging is None:
                out.append(f"{where}.staging: the drafter must be staged (staging.required)")
            elif st is None or md.staging.draft2 not in st.draft2 or self.space.staging == "off":
                out.append(f"{where}.staging.draft2: '{md.staging.draft2}' is not offered by the scenario")
            else:
                out.append(f"{where}.staging.draft_length: {md.staging.draft_length} is outside "
                           f"1..{st.max_draft_length}")
        return out

    def _tree_violations(self, i: int, where: str, md) -> list[str]:
        tree_space = self.scenario.drafters[i].tree
        widths = tuple(md.tree)
        if tree_space is None:
            return [f"{where}.tree: drafters[{i}] ({md.model}) has no [drafters.tree] table in the scenario"]
        if self.space.trees == "off":
            return [f"{where}.tree: token trees are excluded by space.trees = 'off'"]
        if all(w == 1 for w in widths):
            return [f"{where}.tree: {list(widths)} is a chain; give draft_length {len(widths)} instead"]
        if len(widths) > self.scenario.max_draft_length:
            return [f"{where}.tree: depth {len(widths)} exceeds max_draft_length {self.scenario.max_draft_length}"]
        if len(widths) not in self.gamma_options(i):
            return [f"{where}.tree: depth {len(widths)} is outside the draft lengths {_span(self.gamma_options(i))}"]
        if sum(widths) > tree_space.max_nodes:
            return [f"{where}.tree: {sum(widths)} nodes exceed tree.max_nodes {tree_space.max_nodes}"]
        prev = 1
        for d, w in enumerate(widths):
            if w > prev * tree_space.max_children:
                return [f"{where}.tree: {w} nodes at depth {d + 1} exceed {prev} x max_children {tree_space.max_children}"]
            prev = w
        return []

    def _arch_violation(self, opts: ModelOptions, where: str, arch: ArchConfig) -> str:
        mems = self.model_memory_options(opts.index)
        if arch.memory_type not in mems:
            return f"{where}.memory_type: '{arch.memory_type}' is not allowed ({list(mems)})"
        ks = self.pim_unit_options(arch.memory_type)
        if arch.pim_units not in ks:
            return f"{where}.pim_units: {arch.pim_units} is outside {_span(ks)} for {arch.memory_type}"
        devs = self.device_options(opts.index)
        if arch.devices not in devs:
            fixed = opts.entry.devices is not None
            return (f"{where}.devices: {arch.devices} but the scenario fixes {opts.entry.devices}" if fixed else
                    f"{where}.devices: {arch.devices} is not an allowed device count {list(devs)}")
        return f"{where}: architecture {arch.label()} cannot run every operator under mapping '{self.rule}' [MAP-2]"

    def _placement_violation(self, arch: ArchConfig, op: str, p: Placement) -> str:
        physical = placement_options(self.catalog.memory(arch.memory_type), arch, self.share_levels,
                                     self.memory_model)
        if p.key in {q.key for q in physical}:
            return f"{p.engine} breaks mapping rule '{self.rule}'"
        if p.engine == "pim" and arch.pim_units == 0:
            return "pim is impossible: no PIM units (pim_units = 0)"
        if p.engine == "host":
            if any(q.engine == "host" for q in physical):
                return (f"host layout '{p.layout}' is impossible on {arch.label()} under the "
                        f"{self.memory_model} memory model")
            return "host is impossible: no normal memory left for the host"
        return f"pim is impossible: share must be 1..{self.share_levels}"

    def check(self, design: Design) -> None:
        """ScenarioError naming the first rule the design breaks."""
        bad = self.violations(design)
        if bad:
            raise ScenarioError(bad[0])

    # -- construction ------------------------------------------------------------------------
    def build(self, archs: Sequence[ArchConfig], placements: Sequence[dict[str, Placement]],
              choice: SpecChoice) -> Design:
        return Design.assemble(self.model_names, list(archs), list(placements), choice)


def draft_length_options(scenario: Scenario, i: int, spec: ModelSpec | None = None) -> tuple[int, ...]:
    """Draft lengths drafter i may take: `[space].draft_lengths[i]`, else 1..max_draft_length; a head with a
    limit (`HeadSpec.max_draft`: Medusa's K heads, MTP's D modules) drafts at most that many."""
    top = scenario.max_draft_length
    if isinstance(spec, HeadSpec) and spec.max_draft:
        top = min(top, spec.max_draft)
    if scenario.space.draft_lengths is not None:
        g = scenario.space.draft_lengths[i]
        if g > top:
            raise ScenarioError(f"space.draft_lengths: {g} for drafters[{i}] exceeds the {top} positions its "
                                f"{spec.kind} head drafts")
        return (g,)
    return tuple(range(1, top + 1))


def tree_options(scenario: Scenario, i: int, catalog: Catalog | None = None) -> tuple[tuple[int, ...], ...]:
    """Drafter i's token-tree width profiles (chains excluded: they are the chain options): depth within
    its draft lengths, at most `tree.max_nodes` nodes and `tree.max_children` children per node, minus
    the profiles another one dominates for every hardware and mapping ([TREE-4], `dominant_profiles`);
    none without a `[drafters.tree]` table or with `[space] trees = "off"`. `catalog`: the scenario's
    (default `scenario_catalog`), for the acceptance vector and the models' price monotonicity.
    TreeMenuTooLarge beyond the limits; `solve` then refines relaxed tree classes where it can ([TREE-6])."""
    tree = scenario.drafters[i].tree
    if tree is None or scenario.space.trees == "off":
        return ()
    catalog = catalog or scenario_catalog(scenario)
    catalog = with_heads(catalog, scenario)
    drafter = catalog.model(scenario.drafters[i].model, f"drafters[{i}].model")
    depths = draft_length_options(scenario, i, drafter)
    p = drafter_tree_vector(scenario, catalog, i)
    assert p is not None
    # [TREE-4] premise: a mixture-of-experts model's prices are not proven monotone in tokens
    rule = Dominance(joint=len(scenario.drafters) > 1,
                     exact_verify=catalog.model(scenario.verifier.model, "verifier.model").is_moe,
                     exact_passes=drafter.is_moe)
    try:
        return dominant_profiles(p, tree.max_children, depths, tree.max_nodes, rule,
                                 limit=MAX_TREE_PROFILES, work_limit=MAX_TREE_ENUMERATION)
    except MenuTooLarge as exc:
        shape = (f"{tree.max_nodes} nodes, max_children {tree.max_children}, depth up to {max(depths)}"
                 f"{', several drafters' if rule.joint else ''}")
        what = (f"{exc.count:,}+ width profiles remain after dominance, exceeding the {exc.limit:,} the exact model "
                "takes" if exc.what.startswith("left") else
                f"the tree space holds {exc.count:,} width profiles, exceeding the {exc.limit:,} its exact menu "
                "enumerates")
        raise TreeMenuTooLarge(f"drafters[{i}].tree.max_nodes: {shape}: {what} ([TREE-4]); lower tree.max_nodes, "
                               "tree.max_children or max_draft_length") from None


def drafter_alpha(scenario: Scenario, catalog: Catalog, i: int) -> float:
    """Drafter i's acceptance rate: the scenario's value, else the largest entry of its token trees'
    acceptance_vector (its rank 1 once ranked by probability), else the catalog's (pair, family, default)."""
    e = scenario.drafters[i]
    if e.acceptance is not None:
        return e.acceptance
    if e.tree is not None and e.tree.acceptance_vector is not None:
        return max(e.tree.acceptance_vector)
    return with_heads(catalog, scenario).default_acceptance(e.model, scenario.verifier.model)


@dataclass(frozen=True)
class AcceptanceOrigin:
    """Where drafter i's acceptance rate comes from: `origin` is "scenario" (its acceptance), "tree vector"
    (rank 1 of its tree's acceptance_vector), "pair", "family" (the catalog's entry for the drafter-verifier
    pair or their families) or "default"; `entry` the field or acceptance.toml entry, `source` its source."""

    drafter: str
    alpha: float
    origin: str
    entry: str
    source: str

    def as_dict(self) -> dict:
        return {"drafter": self.drafter, "acceptance": self.alpha, "origin": self.origin, "entry": self.entry,
                "source": self.source}


def acceptance_origin(scenario: Scenario, catalog: Catalog, i: int) -> AcceptanceOrigin:
    """`drafter_alpha` with where it came from (the order `drafter_alpha` reads them in)."""
    e = scenario.drafters[i]
    alpha = drafter_alpha(scenario, catalog, i)
    if e.acceptance is not None:
        return AcceptanceOrigin(e.model, alpha, "scenario", f"drafters[{i}].acceptance", "the scenario")
    if e.tree is not None and e.tree.acceptance_vector is not None:
        return AcceptanceOrigin(e.model, alpha, "tree vector", f"drafters[{i}].tree.acceptance_vector",
                                "the scenario (rank 1 of the vector)")
    entry = catalog.acceptance_entry(e.model, scenario.verifier.model)
    origin = "default" if entry == "default" else "pair" if entry.startswith("pairs.") else "family"
    return AcceptanceOrigin(e.model, alpha, origin, entry, catalog.acceptance_sources.get(entry, "(none given)"))


def drafter_tree_vector(scenario: Scenario, catalog: Catalog, i: int,
                        alpha: float | None = None) -> RankedVector | None:
    """Drafter i's positional acceptance vector p_1..p_R (R = tree.max_children; None without a [tree]
    table): the scenario's acceptance_vector ranked by probability ([TREE-5], `rank_by_probability`: its
    `note` says when it was re-ranked or cut), else alpha (default `drafter_alpha`) with the catalog's
    conditional tail ([TREE])."""
    t = scenario.drafters[i].tree
    if t is None:
        return None
    if t.acceptance_vector is not None:
        try:
            return rank_by_probability(t.acceptance_vector, t.max_children, f"drafters[{i}].tree.acceptance_vector")
        except ValueError as exc:
            raise ScenarioError(str(exc)) from None
    alpha = drafter_alpha(scenario, catalog, i) if alpha is None else alpha
    tail = catalog.tree_conditional_tail
    if len(tail) < t.max_children - 1:
        raise ScenarioError(f"drafters[{i}].tree.max_children: {t.max_children} needs {t.max_children - 1} "
                            f"conditional rates but the catalog's tree_conditional_tail has {len(tail)}; "
                            "give tree.acceptance_vector")
    try:
        return RankedVector(positional_vector(alpha, tail, t.max_children))
    except ValueError:
        raise ScenarioError(
            f"drafters[{i}].tree: acceptance {alpha:g} is below the catalog's rank-2 conditional rate "
            f"{tail[0]:g} / (1 + {tail[0]:g}), so its default vector would rank a worse candidate above the best; "
            "give tree.acceptance_vector") from None


def model_labels(scenario: Scenario) -> list[tuple[str, ModelEntry]]:
    """(design field label, scenario entry) of every model, verifier first."""
    return [("verifier", scenario.verifier)] + [(f"drafters[{i}]", d) for i, d in enumerate(scenario.drafters)]


def _widths_distance(a: DrafterChoice, b: DrafterChoice) -> int:
    """Draft nodes added or removed between two drafts, depth by depth (a chain is widths (1,) * length)."""
    wa = a.tree if a.tree is not None else (1,) * a.draft_length
    wb = b.tree if b.tree is not None else (1,) * b.draft_length
    return sum(abs(x - y) for x, y in itertools.zip_longest(wa, wb, fillvalue=0))


def _span(values: Sequence[int]) -> str:
    vals = sorted(values)
    if len(vals) > 2 and vals == list(range(vals[0], vals[-1] + 1)):
        return f"{vals[0]}..{vals[-1]}"
    return str(vals)
