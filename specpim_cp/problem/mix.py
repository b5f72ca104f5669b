"""Workload mixes: one hardware for several operating conditions (cells) of one base scenario.

A mix is its own file that names a base scenario, or a `[mix]` table inside a scenario file:

    name = "opt-13b-mix"                # optional; default: the file's stem
    scenario = "paper/opt-13b-b1"       # a scenario file (relative to this file) or a built-in SET/NAME
    [mix.tasks.summarization]           # per-task acceptance, per drafter (model name)
    "opt-1.3b" = 0.85
    [[mix.cells]]
    batch_size = 4                      # prompt_tokens, generated_tokens: default the base's
    task = "summarization"              # and/or acceptance = {"opt-1.3b" = 0.8} (wins over the task)
    weight = 2.0                        # > 0; the mix objective is the weight-averaged cell metric

Each cell is the base scenario with the cell's batch, context lengths and acceptance rates (a drafter
the cell and its task leave out keeps the base's rate). Every error names the cell and the field
(`mix.cells[3].weight: must be > 0, got 0.0`). A mix has at most MAX_MIX_CELLS cells; its `name` obeys the
scenario `name` rule; its base is a plain scenario (not the mix itself, not another mix, no cycle).
The hardware (per model: memory type, PIM units, devices) is shared by the cells; the dataflow is per
cell. The price of a mix design (tensor-copy capacity, MIX-2..4, and the exact objectives) is
`physics/mix.py`; its solvers are `solvers/mix/`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from specpim_cp.catalog import Catalog, default_catalog
from specpim_cp.errors import ScenarioError, format_validation_error
from specpim_cp.files import name_problem, read_table, safe_name
from specpim_cp.problem.builtin_sets import resolve_scenario_path
from specpim_cp.problem.design import StrictModel
from specpim_cp.problem.operators import ATTENTION_OPS, FC_OPS
from specpim_cp.problem.scenario import (
    Scenario,
    base_scenario_file,
    load_scenario,
    parse_scenario,
    scenario_catalog,
    with_catalog_paths,
)
from specpim_cp.problem.space import drafter_alpha, drafter_tree_vector

#: Objectives of a mix: weighted mean latency or energy per token, or the worst cell's regret.
MIX_OBJECTIVES = ("latency", "energy", "regret")
#: Unit of each mix objective (the evaluator's units; regret is a ratio).
MIX_UNITS = {"latency": "ns/token", "energy": "nJ/token", "regret": "x own optimum"}
#: Weight tensors (stored once per layout any cell uses) and the KV-cache tensors (per cell).
WEIGHT_OPS = FC_OPS
KV_OPS = ATTENTION_OPS
#: Most cells a mix may have: 3x the 21 cells of each built-in mix (benchmarks/bench_mix.py). Each cell is
#: one single-cell solve (up to --cell-time-limit) plus one per screened hardware, and one copy of the
#: dataflow variables in the mix model.
MAX_MIX_CELLS = 64
#: Longest chain of mix files followed to tell a cycle from a mix whose base is another mix.
_MAX_MIX_CHAIN = 16


def _check_rates(rates: dict[str, float]) -> dict[str, float]:
    for k, a in rates.items():
        if isinstance(a, bool) or not 0.0 <= a < 1.0:
            raise ValueError(f"{k}: must be in [0, 1), got {a}")
    return rates


class MixCellEntry(StrictModel):
    """One operating condition: batch, context lengths, acceptance (per drafter or by task), weight."""

    batch_size: int
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    acceptance: dict[str, float] = Field(default_factory=dict)
    task: str | None = None
    weight: float

    @field_validator("weight")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0 or not math.isfinite(v):
            raise ValueError(f"must be > 0, got {v}")
        return v

    @field_validator("acceptance")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        return _check_rates(v)


class MixTable(StrictModel):
    cells: list[MixCellEntry]
    tasks: dict[str, dict[str, float]] = Field(default_factory=dict)

    @field_validator("cells", mode="before")
    @classmethod
    def _at_most(cls, v):
        """Counted before any cell is validated: a mix of 10,000 cells is refused at once."""
        if isinstance(v, list) and len(v) > MAX_MIX_CELLS:
            raise ValueError(f"{len(v):,} cells, more than the limit of {MAX_MIX_CELLS} per mix (each cell is "
                             "solved on its own and in the mix model; split the mix or merge similar cells)")
        return v

    @field_validator("cells")
    @classmethod
    def _not_empty(cls, v: list[MixCellEntry]) -> list[MixCellEntry]:
        if not v:
            raise ValueError("the mix has no cells (give at least one [[mix.cells]] with batch_size and weight)")
        return v

    @field_validator("tasks")
    @classmethod
    def _task_rates(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for name, rates in v.items():
            try:
                _check_rates(rates)
            except ValueError as exc:
                raise ValueError(f"{name}.{exc}") from None
        return v


class MixFile(StrictModel):
    """A mix file: a base scenario (file or built-in SET/NAME) and the `[mix]` table."""

    name: str | None = Field(default=None, min_length=1, max_length=100)
    description: str = ""
    scenario: str
    mix: MixTable

    @field_validator("name")
    @classmethod
    def _file_stem(cls, v: str | None) -> str | None:
        """The name names output files (a batch's heatmap, the policy index): the scenario `name` rule."""
        problem = None if v is None else name_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


@dataclass(frozen=True)
class MixCell:
    index: int
    weight: Fraction  # the user's weight, exactly as written (decimal)
    task: str | None
    acceptance: tuple[tuple[str, float], ...]  # (drafter model, rate) of every drafter, as the cell runs it
    scenario: Scenario

    @property
    def batch_size(self) -> int:
        return self.scenario.batch_size

    @property
    def label(self) -> str:
        """Short text: batch, context when not the base's, task or acceptance rates."""
        sc = self.scenario
        what = self.task if self.task is not None else " ".join(f"a={a:g}" for _, a in self.acceptance)
        return f"b={sc.batch_size} ctx={sc.prompt_tokens}+{sc.generated_tokens} {what}".strip()


@dataclass(frozen=True)
class Mix:
    name: str
    description: str
    base: Scenario
    cells: tuple[MixCell, ...]

    @property
    def weights(self) -> tuple[Fraction, ...]:
        return tuple(c.weight for c in self.cells)

    def integer_weights(self) -> tuple[int, ...]:
        """The weights scaled exactly to coprime integers (a common denominator, then their gcd)."""
        den = math.lcm(*(w.denominator for w in self.weights))
        ints = [int(w * den) for w in self.weights]
        g = math.gcd(*ints)
        return tuple(i // g for i in ints)

    def content_hash(self, options: dict | None = None) -> str:
        blob = json.dumps({"base": self.base.model_dump(mode="json"),
                           "cells": [{"scenario": c.scenario.model_dump(mode="json"), "weight": str(c.weight),
                                      "task": c.task} for c in self.cells],
                           "options": options or {}}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
def load_mix(name: str | Path, catalog: Catalog | None = None, extra_catalogs: Sequence[str | Path] = ()) -> Mix:
    """A mix from a mix file or a scenario file with a `[mix]` table (a path or a built-in SET/NAME).

    `extra_catalogs` (e.g. --catalog files) are added to the base scenario's own `catalog` files, so every
    cell carries them; the default `catalog` is the base scenario's (`scenario_catalog`)."""
    path = resolve_scenario_path(str(name))
    data = read_table(path, "a mix")
    if "mix" not in data:
        raise ScenarioError(f"{path}: mix: missing (a [mix] table with [[mix.cells]], see `specpim-cp solve-mix "
                            "--help`)")
    if "scenario" in data:  # a mix file naming its base
        try:
            mf = MixFile.model_validate(data)
        except ValidationError as exc:
            raise ScenarioError(format_validation_error(exc, root="mix")) from None
        base_file = base_scenario_file(mf.scenario, path, "scenario", "mix", example="paper/opt-13b-b1")
        check_plain_base(path, mf.scenario, base_file)
        base = load_scenario(base_file, catalog, extra_catalogs=extra_catalogs)
        return build_mix(mf.name or safe_name(path.stem, "mix"), mf.description or base.description, base, mf.mix,
                         catalog or scenario_catalog(base))
    raw = dict(data)  # a scenario file with a [mix] table
    table = raw.pop("mix")
    try:
        mt = MixFile.model_validate({"scenario": "", "mix": table}).mix
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, root="mix")) from None
    base = parse_scenario(with_catalog_paths(raw, path.parent, extra_catalogs), catalog)
    return build_mix(base.name, base.description, base, mt, catalog or scenario_catalog(base))


def _mix_base(path: Path) -> tuple[str, Path] | None:
    """(the `scenario` it names, that file) when `path` is a mix file whose base resolves; else None."""
    try:
        data = read_table(path, "a mix")
    except ScenarioError:
        return None
    ref = data.get("scenario")
    if "mix" not in data or not isinstance(ref, str):
        return None
    try:
        return ref, base_scenario_file(ref, path, "scenario", "mix")
    except ScenarioError:
        return None


def check_plain_base(path: Path, ref: str, base_file: Path) -> None:
    """A mix's base is a plain scenario: not the mix file itself, not another mix (a scenario with a [mix]
    table included), and so no cycle of mix files; each is a ScenarioError naming the file and the problem
    (rather than the base's missing `batch_size`)."""
    where = f"{path}: scenario"
    if base_file.resolve() == path.resolve():
        raise ScenarioError(f"{where}: '{ref}' is this mix file itself; a mix's base is a plain scenario file "
                            "(no [mix] table)")
    try:
        data = read_table(base_file, "a scenario")
    except ScenarioError:
        return  # loading the base names its problem
    if "mix" not in data:
        return
    chain, current = [path.resolve(), base_file.resolve()], base_file
    while len(chain) <= _MAX_MIX_CHAIN and (step := _mix_base(current)) is not None:
        current = step[1]
        if current.resolve() in chain:
            cycle = " -> ".join(str(p) for p in [*chain[chain.index(current.resolve()):], current.resolve()])
            raise ScenarioError(f"{where}: '{ref}' is a workload mix in a cycle of mix files naming each "
                                f"other as base ({cycle}); a mix's base is a plain scenario file (no [mix] table)")
        chain.append(current.resolve())
    raise ScenarioError(f"{where}: '{ref}' ({base_file}) is itself a workload mix (it has a [mix] table), not a "
                        "scenario; a mix's base is a plain scenario file (no [mix] table)")


def build_mix(name: str, description: str, base: Scenario, table: MixTable, catalog: Catalog | None = None) -> Mix:
    """The cells of `table` as scenarios derived from `base` (every error names the cell and the field)."""
    catalog = catalog or default_catalog()
    drafters = [d.model for d in base.drafters]
    known = ", ".join(drafters) or "none"

    def check_names(where: str, rates: dict[str, float]) -> None:
        for k in rates:
            if k not in drafters:
                raise ScenarioError(f"{where}.{k}: '{k}' is not a drafter of scenario '{base.name}' (drafters: {known})")

    for t, rates in table.tasks.items():
        check_names(f"mix.tasks.{t}", rates)
    cells = []
    base_data = base.model_dump(mode="json")
    for i, entry in enumerate(table.cells):
        where = f"mix.cells[{i}]"
        rates: dict[str, float] = {}
        if entry.task is not None:
            if entry.task not in table.tasks:
                raise ScenarioError(f"{where}.task: '{entry.task}' is not a task of [mix.tasks] (tasks: "
                                    f"{', '.join(table.tasks) or 'none'})")
            rates.update(table.tasks[entry.task])
        check_names(f"{where}.acceptance", entry.acceptance)
        rates.update(entry.acceptance)
        data = json.loads(json.dumps(base_data))
        data["name"] = f"{base.name}-c{i}"
        data["batch_size"] = entry.batch_size
        for field in ("prompt_tokens", "generated_tokens"):
            if getattr(entry, field) is not None:
                data[field] = getattr(entry, field)
        for d in data["drafters"]:
            if d["model"] in rates:
                d["acceptance"] = rates[d["model"]]
        # the cells share the drafters' hardware: a mix's designs all speculate (formulations/mix.md)
        data["space"]["speculation"] = "on"
        try:
            sc = parse_scenario(data, catalog)
        except ScenarioError as exc:
            raise ScenarioError(f"{where}.{exc}") from None
        rates_run = tuple(zip(drafters, cell_rates(sc, catalog)))
        cells.append(MixCell(i, Fraction(repr(entry.weight)), entry.task, rates_run, sc))
    return Mix(name, description, base, tuple(cells))


def cell_rates(scenario: Scenario, catalog: Catalog) -> tuple[float, ...]:
    """Each drafter's acceptance rate as the cell runs it (`drafter_alpha`). Its token-tree vector is
    resolved too, so a cell whose tree acceptance cannot be priced is refused when the mix loads."""
    alphas = tuple(drafter_alpha(scenario, catalog, i) for i in range(len(scenario.drafters)))
    for i, alpha in enumerate(alphas):
        drafter_tree_vector(scenario, catalog, i, alpha)
    return alphas


def median_cell(mix: Mix) -> MixCell:
    """The weighted median cell, cells ordered by batch x context, then mean acceptance: the first cell
    at which the cumulative weight reaches half the total."""
    order = sorted(mix.cells, key=lambda c: (c.batch_size * c.scenario.max_context,
                                             sum(a for _, a in c.acceptance) / max(1, len(c.acceptance)), c.index))
    half = sum(mix.weights, Fraction(0)) / 2
    acc = Fraction(0)
    for c in order:
        acc += c.weight
        if acc >= half:
            return c
    return order[-1]
