"""Price tables of the exact model: every coefficient it writes into its rows, asked of the evaluator once.

`PriceTable.build(evaluator, space)` walks the options of the scenario's `DesignSpace` (per model its
architectures, per architecture and operator its placements, the token counts of its passes over every
speculation choice) and keeps the evaluator's integer answers in one frozen value:

- operator, all-reduce and embedding-lookup (time ns, energy nJ) per model x architecture x placement
  (or LM-head layout) x token count: DUR-1..3, TREE-3, CUT-1..3;
- whether a host layout shares channels with the PIM units per architecture: SCH-1/2, CUT-1;
- capacities, tensor splits per layout and draft2 models' KiB (`Evaluator.capacity_table`,
  `Evaluator.draft2_split`): CAP-1/2, MIX-3/4, and each architecture's whole-memory test (MIX-10/11);
- draft2 steps per architecture (`Evaluator.draft2_step`, None where the draft2 model cannot run): CYC-1/2,
  CUT-3;
- idle power per architecture (EN-2, CUT-3), the round's sync latency (RND-3, CUT-3), the share levels
  (SCH) and the integer round statistics of every speculation choice (SPEC-2, RND, EN).

`SpecModel` (model.py) and the mix model (solvers/mix/cpsat_model.py) read only the table while they add constraints,
so a model is priced from one snapshot and never calls back into the cost model. The evaluator stays the
single source of truth: the table holds its answers, not a second cost formula, and every design the
solvers claim is still re-priced by `Evaluator.evaluate` (finish.py). `scenario_prices` keeps the last few
scenarios' tables (a bounded LRU keyed by content), so the solves of one process price a scenario once.
"""

from __future__ import annotations

from dataclasses import dataclass

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.physics.costs import OpCost
from specpim_cp.physics.evaluate import Evaluator
from specpim_cp.physics.rounds import RoundStats, pass_tokens, round_stats, tree_pass_tokens
from specpim_cp.problem.design import HOST, ArchConfig, ModelDesign, Placement, SpecChoice, Staging
from specpim_cp.problem.operators import PLACEABLE_OPS
from specpim_cp.problem.scenario import Scenario
from specpim_cp.problem.space import DesignSpace, ModelOptions
from specpim_cp.solvers.bounded import BoundedCache
from specpim_cp.solvers.shared_evaluator import evaluator_key

#: Per token count of a pass: its (time ns, energy nJ).
ByTokens = dict[int, OpCost]


@dataclass(frozen=True)
class ModelPrices:
    """One model's coefficients over its architectures (`ModelOptions.archs`), its placements per
    architecture and operator (`ModelOptions.allowed`) and the token counts of its passes (`tokens`).
    Read-only: the dicts are the table's, never to be modified."""

    tokens: tuple[int, ...]  # every pass of the model over every speculation choice (TREE-3's too)
    op_cost: dict[tuple[str, ArchConfig, Placement], ByTokens]  # (op, arch, allowed placement)
    allreduce: dict[ArchConfig, ByTokens]
    embedding: dict[tuple[ArchConfig, str], ByTokens]  # (arch, a layout of some LM-head placement)
    contends: dict[tuple[ArchConfig, str], bool]  # (arch, a host layout): shares channels with PIM units
    capacity_kib: dict[ArchConfig, tuple[int, int]]  # (PIM side, normal side) of all the model's devices
    tensor_kib: dict[tuple[ArchConfig, str, str], tuple[int, int]]  # (arch, op, layout): `tensor_split`
    total_kib: dict[ArchConfig, int]  # every tensor (weights, KV cache at the maximum context, embedding)
    draft2_kib: dict[tuple[ArchConfig, str], tuple[int, int] | None]  # (arch, draft2): None if it cannot
    draft2_step: dict[tuple[ArchConfig, str], OpCost | None]  # (arch, draft2): one step, None if impossible
    idle_power_mw: dict[ArchConfig, int]


@dataclass(frozen=True)
class PriceTable:
    """Every coefficient of one scenario's exact model (`models[j]` for model j: 0 the verifier, i + 1
    drafter i), with the space it was priced over (`space`) and its speculation choices' statistics."""

    space: DesignSpace
    stats: tuple[RoundStats, ...]  # per `space.choice_list` entry
    share_levels: int
    round_sync_ns: int  # the host's sync latency per round, 0 without drafters
    models: tuple[ModelPrices, ...]
    #: The model's speculation choices when they are not the space's: the column solver's real columns and
    #: relaxed columns ([TREE-6], columns.py), `stats` per entry. None: `space.choice_list`.
    columns: tuple[SpecChoice, ...] | None = None

    @classmethod
    def build(cls, evaluator: Evaluator, space: DesignSpace) -> PriceTable:
        """The table of `space` (the scenario's restricted space), every entry asked of `evaluator` once."""
        choices = space.choice_list
        if not choices:
            raise ScenarioError("space: no speculation choice is left (draft lengths, staging, pipeline)")
        scenario = space.scenario
        costs = evaluator.costs
        b = scenario.batch_size
        models = tuple(model_prices(evaluator, d, pass_token_counts(b, choices, d.index),
                                    draft2_names(choices, d.index)) for d in space.models)
        return cls(space, tuple(round_stats(c, evaluator.acceptance) for c in choices), costs.share_levels,
                   costs.host.sync_latency_ns if scenario.drafters else 0, models)

    @property
    def choices(self) -> tuple[SpecChoice, ...]:
        return self.space.choice_list if self.columns is None else self.columns


#: How many scenarios' price tables `scenario_prices` keeps (least recently used dropped first).
PRICE_CACHE_SIZE = 8
_PRICE_CACHE: BoundedCache[PriceTable] = BoundedCache(PRICE_CACHE_SIZE)


def scenario_prices(evaluator: Evaluator, scenario: Scenario, catalog: Catalog) -> PriceTable:
    """`PriceTable.build(evaluator, DesignSpace(scenario, catalog))`, reused across the solves of one process
    (a solve, then its ranges or front; `batch` over several objectives) while the scenario's and catalog's
    content is unchanged: a bounded LRU of `PRICE_CACHE_SIZE` tables keyed by `evaluator_key` (the scenario's and the catalog's content), a table reused only
    when a fresh space has its options (architectures, placements, speculation choices: the space's own
    limits may refuse or change them). A table is a frozen value read by every model built from it, so
    sharing it changes no coefficient."""
    space = DesignSpace(scenario, catalog)
    choices = space.choice_list  # the space's refusals (a tree menu too large, ...) as without the cache
    key = evaluator_key(scenario, catalog)
    table = _PRICE_CACHE.get(key)
    if table is not None and table.space.choice_list == choices and table.space.models == space.models:
        return table
    return _PRICE_CACHE.put(key, PriceTable.build(evaluator, space))


def pass_token_counts(batch: int, choices: tuple[SpecChoice, ...], j: int) -> tuple[int, ...]:
    """Token counts of model j's passes over every choice: its verification or cycle pass (SPEC-2) and,
    for a drafter, the depth passes of its token trees (TREE-3)."""
    # a drafter runs no pass when not speculating ([NOSPEC]: a choice without drafters)
    tokens = {pass_tokens(batch, c, j) for c in choices if j == 0 or c.speculates}
    if j > 0:
        choices = tuple(c for c in choices if c.speculates)
        tokens.update(t for c in choices if c.drafters[j - 1].tree is not None
                      for t in tree_pass_tokens(batch, c.drafters[j - 1]))
    return tuple(sorted(tokens))


def draft2_names(choices: tuple[SpecChoice, ...], j: int) -> tuple[str, ...]:
    """The draft2 models that stage model j (a drafter) in some choice (none for the verifier)."""
    if j == 0:
        return ()
    choices = tuple(c for c in choices if c.speculates)
    return tuple(dict.fromkeys(c.drafters[j - 1].staging.draft2 for c in choices
                               if c.drafters[j - 1].staging is not None))


def model_prices(ev: Evaluator, d: ModelOptions, tokens: tuple[int, ...],
                 draft2: tuple[str, ...]) -> ModelPrices:
    """Model `d`'s coefficients at `tokens`, with the draft2 models `draft2` on its devices."""
    c = ev.costs
    model = d.spec
    by_op = {}  # each operator's placements on every architecture, priced at once (`placements_costs`)
    for op in PLACEABLE_OPS:
        pairs = [(a, p) for a in d.archs for p in d.allowed(a, op)]
        by_op.update(zip(((op, a, p) for a, p in pairs), c.placements_costs(model, op, pairs, tokens)))
    op_cost = {(op, a, p): by_op[(op, a, p)] for a in d.archs for op in PLACEABLE_OPS for p in d.allowed(a, op)}
    allreduce = {a: {t: c.allreduce_cost(model, a, t) for t in tokens} for a in d.archs}
    placed = [p for a in d.archs for op in PLACEABLE_OPS for p in d.allowed(a, op)]
    lm_layouts = sorted({p.layout for a in d.archs for p in d.allowed(a, "lm_head")})
    embedding = {(a, lay): {t: c.embedding_cost(model, a, lay, t) for t in tokens}
                 for a in d.archs for lay in lm_layouts}
    host_layouts = sorted({p.layout for p in placed if p.engine == "host"})
    contends = {(a, lay): c.host_contends_with_pim(a, lay) for a in d.archs for lay in host_layouts}
    capacity_kib, tensor_kib, total_kib = {}, {}, {}
    for a in d.archs:
        tab = ev.capacity_table(model.name, a)
        capacity_kib[a] = tab.capacity_kib
        for o, op in enumerate(PLACEABLE_OPS):
            for lay in tab.ops[o]:
                tensor_kib[(a, op, lay)] = tab.tensor_split(o, lay)
        total_kib[a] = c.tensor_bytes(model, a.devices).total_kib()
    draft2_kib = {(a, name): draft2_split(ev, model.name, a, name) for a in d.archs for name in draft2}
    draft2_step = {(a, name): draft2_step_cost(ev, model.name, a, name) for a in d.archs for name in draft2}
    return ModelPrices(tokens, op_cost, allreduce, embedding, contends, capacity_kib, tensor_kib, total_kib,
                       draft2_kib, draft2_step, {a: c.idle_power_mw(a) for a in d.archs})


def draft2_split(ev: Evaluator, model_name: str, arch: ArchConfig, draft2: str) -> tuple[int, int] | None:
    """(PIM-side, normal-side) KiB of draft2 model `draft2` on model `model_name`'s devices
    (`Evaluator.draft2_split`); (0, 0) for an n-gram model (it stores nothing, as `Evaluator.capacity_of`
    counts it); None when the host may use no memory (CYC-2 then excludes the pair)."""
    if draft2 not in ev.catalog.models:
        return 0, 0
    try:
        return ev.draft2_split(model_name, arch, draft2)
    except ScenarioError:
        return None


def draft2_step_cost(ev: Evaluator, model_name: str, arch: ArchConfig, draft2: str) -> OpCost | None:
    """One step of draft2 model `draft2` on model `model_name`'s devices (`Evaluator.draft2_step`, which
    depends on the architecture and the draft2 model only); None when it cannot run there (CYC-2)."""
    probe = ModelDesign(model=model_name, memory_type=arch.memory_type, pim_units=arch.pim_units,
                        devices=arch.devices, placement={op: HOST for op in PLACEABLE_OPS}, draft_length=1,
                        staging=Staging(draft2=draft2, draft_length=1))
    try:
        return ev.draft2_step(probe)
    except ScenarioError:
        return None


__all__ = ["ModelPrices", "PriceTable", "scenario_prices"]
