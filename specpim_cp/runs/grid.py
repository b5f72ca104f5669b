"""Grids ("atlases"): one base scenario, axes of values, every combination solved exactly.

A grid file (TOML; README "Grids and clusters" shows one) names a `base` (a built-in SET/NAME, a scenario
file, or an inline [base] table) and an [axes] table: batch_size, acceptance (every drafter, or per
drafter by index or model name), device_budget, memory_types, host, prompt_tokens, generated_tokens,
models. The cells are the product of the axes in the file's order, the last axis varying fastest; a cell
is the base with the cell's values applied (models first, then acceptance, then the rest), named
`BASE_b=4_a=0.8_...`. Every cell is validated before any work; a grid has at most MAX_GRID_CELLS cells,
counted from its axes first; its `name` obeys the scenario `name` rule, and a base that is a workload mix
or the grid file itself is refused.

Running a grid is a batch (`batch.run_instances`) of `exact` and `baselines` instances, one each per cell.
Warm starts: along the first axis with two or more values, a cell at an odd position is solved with the
design of its neighbour one step back (its *parent*, at an even position) as `hint=`, and waits for it. A
fixed parent keeps the hint, and so the result, the same on every executor and on resume; parents are not
warm-started themselves, so the longest wait is two solves. (Chains through the whole grid would make the
critical path `sum(len(axis) - 1) + 1` solves; on benchmarks/bench_grid.py's grid a hint did not shorten
the solves.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.files import name_problem, read_table, safe_name, safe_stem
from specpim_cp.problem.scenario import (
    Scenario,
    base_scenario_file,
    parse_scenario,
    read_scenario_data,
    with_catalog_paths,
)
from specpim_cp.runs.batch import BatchProgress, BatchSummary, run_instances
from specpim_cp.runs.instances import BatchOptions, plan
from specpim_cp.runs.records import GridCell

AXES = ("batch_size", "prompt_tokens", "generated_tokens", "acceptance", "device_budget", "memory_types", "host",
        "models")
SHORT = {"batch_size": "b", "prompt_tokens": "p", "generated_tokens": "g", "acceptance": "a",
         "device_budget": "dev", "memory_types": "mem", "host": "host", "models": "models"}
#: axis label with its unit, for plots and tables
AXIS_TITLES = {"batch_size": "batch size (sequences)", "prompt_tokens": "prompt length (tokens)",
               "generated_tokens": "generated length (tokens)", "acceptance": "acceptance rate α (every drafter)",
               "device_budget": "device budget (devices)", "memory_types": "allowed memory types",
               "host": "host GPU", "models": "models (verifier / drafters)"}
GRID_METHODS = ("exact", "baselines")
_APPLY_ORDER = ("models", "acceptance")  # then the scalar fields
#: Most cells a grid may have, counted from its axes before any cell is built: 50x the 200-cell grid of
#: benchmarks/bench_grid.py. Expanding and planning 10,000 cells (20,000 instances) takes seconds and about
#: 100 MB; solving them takes about 8 hours at the 1,200 cells per hour that grid measures on 2 cores.
MAX_GRID_CELLS = 10_000


@dataclass(frozen=True)
class Axis:
    name: str  # a key of [axes]; per-drafter acceptance: "acceptance[KEY]"
    values: tuple[Any, ...]
    labels: tuple[str, ...]  # the values as text (cell names, tick labels)

    @property
    def kind(self) -> str:
        return self.name.split("[", 1)[0]

    @property
    def drafter(self) -> str | None:
        return self.name[len("acceptance["):-1] if self.name.startswith("acceptance[") else None

    @property
    def title(self) -> str:
        if self.drafter is not None:
            return f"acceptance rate α of drafter {self.drafter}"
        return AXIS_TITLES[self.kind]

    @property
    def short(self) -> str:
        return f"a@{self.drafter}" if self.drafter is not None else SHORT[self.kind]


@dataclass(frozen=True)
class Cell:
    name: str
    index: tuple[int, ...]
    scenario: Scenario
    parent: str | None  # the cell whose design warm-starts this one


@dataclass(frozen=True)
class Grid:
    name: str
    path: Path
    base_name: str
    axes: tuple[Axis, ...]
    cells: tuple[Cell, ...]

    def cell_info(self, cell: Cell) -> GridCell:
        return GridCell(self.name, tuple(a.name for a in self.axes), cell.index,
                        tuple(len(a.values) for a in self.axes),
                        tuple(a.labels[i] for a, i in zip(self.axes, cell.index, strict=True)),
                        tuple(a.values[i] for a, i in zip(self.axes, cell.index, strict=True)))


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------
def load_base(raw: Any, grid_path: Path, extra_catalogs: Sequence[str | Path] = ()) -> dict:
    """The base scenario's fields (not yet validated: a cell may need its axis values to be valid). Its
    `catalog` files resolve against the file that names them (the base scenario file, or the grid file
    for a [base] table's own), then `extra_catalogs` (--catalog) follow."""
    if isinstance(raw, str):
        return _base_file_data(raw, grid_path, f"{grid_path}: base", extra_catalogs)
    if isinstance(raw, dict):
        raw = dict(raw)
        ref = raw.pop("from", None)
        if ref is None:
            return with_catalog_paths(raw, grid_path.parent, extra_catalogs)
        if not isinstance(ref, str):
            raise ScenarioError(f"{grid_path}: base.from: expected a SET/NAME or a scenario file")
        base = _base_file_data(ref, grid_path, f"{grid_path}: base.from")
        # the [base] table's own fields replace the loaded ones; its catalog files are relative to the grid file
        merged = {**base, **with_catalog_paths(raw, grid_path.parent, ())}
        return with_catalog_paths(merged, grid_path.parent, extra_catalogs)
    raise ScenarioError(f"{grid_path}: base: expected a SET/NAME, a scenario file or a [base] table")


def _base_file_data(ref: str, grid_path: Path, where: str, extra_catalogs: Sequence[str | Path] = ()) -> dict:
    """The fields of the scenario file a grid's base names; the grid file itself or a workload mix (a
    file with a [mix] table) is an error naming the field and the file, not a confusing cell error."""
    path = base_scenario_file(ref, grid_path, where, "grid")
    if path.resolve() == grid_path.resolve():
        raise ScenarioError(f"{where}: '{ref}' is this grid file itself; a grid's base is a scenario file")
    data = read_scenario_data(path, extra_catalogs)
    if "mix" in data:
        raise ScenarioError(f"{where}: '{ref}' ({path}) is a workload mix (it has a [mix] table), not a scenario; "
                            "a grid's base is a plain scenario (solve a mix with `specpim-cp solve-mix`)")
    return data


def _fmt_number(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _model_name(entry: Any) -> str:
    return entry.get("model", "?") if isinstance(entry, dict) else str(entry)


def _label(kind: str, v: Any) -> str:
    if kind == "memory_types":
        return "+".join(map(str, v))
    if kind == "models":
        return "+".join([_model_name(v.get("verifier")), *(_model_name(d) for d in v.get("drafters", []))])
    return _fmt_number(v)


def _check_values(where: str, kind: str, values: list) -> None:
    """Shapes that would otherwise give confusing errors (the cells' validation checks the rest)."""
    for v in values:
        if kind == "memory_types" and not (isinstance(v, list) and v and all(isinstance(m, str) for m in v)):
            raise ScenarioError(f"{where}: each value is a list of memory types, e.g. [[\"hbm\"], [\"hbm\", "
                                f"\"gddr\"]], got {v!r}")
        if kind == "models":
            if not isinstance(v, dict) or "verifier" not in v or set(v) - {"verifier", "drafters"}:
                raise ScenarioError(f"{where}: each value is a table {{verifier = ..., drafters = [...]}}, "
                                    f"got {v!r}")
            if not isinstance(v.get("drafters", []), list):
                raise ScenarioError(f"{where}: drafters: expected a list of models, got {v['drafters']!r}")
        if kind in ("host",) and not isinstance(v, str):
            raise ScenarioError(f"{where}: expected host names, got {v!r}")
        if kind in ("batch_size", "prompt_tokens", "generated_tokens", "device_budget", "acceptance") and (
                isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ScenarioError(f"{where}: expected numbers, got {v!r}")


def _axis(where: str, name: str, kind: str, values: Any) -> Axis:
    if not isinstance(values, list):
        raise ScenarioError(f"{where}: expected a list of values, got {values!r}")
    if not values:
        raise ScenarioError(f"{where}: no values")
    _check_values(where, kind, values)
    labels = tuple(safe_stem(_label(kind, v)) for v in values)
    seen: set[str] = set()
    for lab in labels:  # a set, not labels.count: linear in the values
        if lab in seen:
            raise ScenarioError(f"{where}: the value {lab} appears twice")
        seen.add(lab)
    return Axis(name, tuple(values), labels)


def check_cell_count(grid_path: Path, sizes: Sequence[tuple[str, int]]) -> None:
    """The grid's cell count, the product of its axes' lengths (`sizes`: axis name, number of values), is
    at most MAX_GRID_CELLS; computed before any cell (or even any axis) is built."""
    count = math.prod(n for _, n in sizes)
    if count > MAX_GRID_CELLS:
        product = " x ".join(f"{name} {n}" for name, n in sizes)
        raise ScenarioError(f"{grid_path}: axes: {product} = {count:,} cells, more than the limit of "
                            f"{MAX_GRID_CELLS:,} cells per grid (split it into several grids)")


def parse_axes(raw: Any, grid_path: Path) -> tuple[Axis, ...]:
    if not isinstance(raw, dict) or not raw:
        raise ScenarioError(f"{grid_path}: axes: expected an [axes] table with at least one axis "
                            f"({', '.join(AXES)})")
    specs: list[tuple[str, str, str, Any]] = []  # (where, axis name, kind, values)
    for key, values in raw.items():
        where = f"{grid_path}: axes.{key}"
        if key not in AXES:
            raise ScenarioError(f"{where}: unknown axis (known: {', '.join(AXES)})")
        if key == "acceptance" and isinstance(values, dict):
            if not values:
                raise ScenarioError(f"{where}: no drafters")
            specs += [(f"{where}.{d}", f"acceptance[{d}]", "acceptance", v) for d, v in values.items()]
        else:
            specs.append((where, key, key, values))
    for where, _, _, values in specs:
        if not isinstance(values, list):
            raise ScenarioError(f"{where}: expected a list of values, got {values!r}")
    check_cell_count(grid_path, [(name, len(values)) for _, name, _, values in specs])
    return tuple(_axis(where, name, kind, values) for where, name, kind, values in specs)


# ------------------------------------------------------------------------------------------------
# Cells
# ------------------------------------------------------------------------------------------------
def _entry(value: Any, like: dict | None) -> dict:
    """A model entry: a table as given, or a model name with the device fields of the base's entry."""
    if isinstance(value, dict):
        return dict(value)
    return {**{k: v for k, v in (like or {}).items() if k in ("devices", "max_devices")}, "model": value}


def _apply(data: dict, axis: Axis, value: Any) -> dict:
    data = dict(data)
    if axis.kind == "models":
        base_v = data.get("verifier") if isinstance(data.get("verifier"), dict) else None
        base_d = [d for d in data.get("drafters", []) if isinstance(d, dict)]
        data["verifier"] = _entry(value["verifier"], base_v)
        data["drafters"] = [_entry(d, base_d[min(i, len(base_d) - 1)] if base_d else None)
                            for i, d in enumerate(value.get("drafters", []))]
        return data
    if axis.kind == "acceptance":
        drafters = [dict(d) for d in data.get("drafters", [])]
        if not drafters:
            raise ScenarioError(f"{axis.name}: the cell has no drafters")
        key = axis.drafter
        if key is None:
            chosen = range(len(drafters))
        elif key.isdigit():
            if int(key) >= len(drafters):
                raise ScenarioError(f"{axis.name}: the cell has {len(drafters)} drafter(s), no index {key}")
            chosen = [int(key)]
        else:
            chosen = [i for i, d in enumerate(drafters) if d.get("model") == key]
            if not chosen:
                raise ScenarioError(f"{axis.name}: '{key}' is not a drafter of the cell "
                                    f"(drafters: {', '.join(str(d.get('model')) for d in drafters)})")
        for i in chosen:
            drafters[i]["acceptance"] = value
        data["drafters"] = drafters
        return data
    data[axis.kind] = value
    return data


def _parent(index: tuple[int, ...], sizes: Sequence[int]) -> tuple[int, ...] | None:
    """The warm-start parent: one step back along the warm-start axis from an odd position."""
    k = next((k for k, n in enumerate(sizes) if n > 1), None)
    if k is None or index[k] % 2 == 0:
        return None
    return (*index[:k], index[k] - 1, *index[k + 1:])


def expand(name: str, path: Path, base: dict, axes: Sequence[Axis], catalog: Catalog | None = None) -> Grid:
    """Every cell of the grid, validated (a ScenarioError names the first cell that is not valid) against
    `catalog`, else the cell's own catalog files. More than MAX_GRID_CELLS cells is an error before any cell."""
    check_cell_count(path, [(a.name, len(a.values)) for a in axes])
    base_name = str(base.get("name") or name)
    order = sorted(range(len(axes)), key=lambda k: (_APPLY_ORDER.index(axes[k].kind)
                                                    if axes[k].kind in _APPLY_ORDER else len(_APPLY_ORDER), k))
    names: dict[tuple[int, ...], str] = {}
    cells: list[Cell] = []
    for index in itertools.product(*(range(len(a.values)) for a in axes)):
        cell_name = "_".join([base_name, *(f"{a.short}={a.labels[i]}" for a, i in zip(axes, index, strict=True))])
        values = ", ".join(f"{a.name}={a.labels[i]}" for a, i in zip(axes, index, strict=True))
        data = {**base, "name": cell_name, "description": f"grid {name}: {values}"}
        try:
            for k in order:
                data = _apply(data, axes[k], axes[k].values[index[k]])
            sc = parse_scenario(data, catalog)
        except ScenarioError as exc:
            raise ScenarioError(f"{path}: cell {cell_name} ({values}): {exc}") from None
        names[index] = cell_name
        parent = _parent(index, [len(a.values) for a in axes])
        cells.append(Cell(cell_name, index, sc, None if parent is None else names[parent]))
    return Grid(name, path, base_name, tuple(axes), tuple(cells))


def load_grid(path: str | Path, catalog: Catalog | None = None, extra_catalogs: Sequence[str | Path] = ()) -> Grid:
    """Read, expand and validate a grid file (every error is a ScenarioError naming the field or cell)."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioError(f"{path}: no such grid file")
    raw = read_table(path, "a grid")
    unknown = set(raw) - {"name", "base", "axes"}
    if unknown:
        raise ScenarioError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (known: name, base, axes)")
    if "base" not in raw:
        raise ScenarioError(f"{path}: base: required (a SET/NAME, a scenario file or a [base] table)")
    name = raw.get("name", safe_name(path.stem, "grid"))  # the default: the file's stem, made safe
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{path}: name: expected a non-empty string")
    problem = name_problem(name)
    if problem is not None:
        raise ScenarioError(f"{path}: name: {problem}")
    axes = parse_axes(raw.get("axes"), path)
    return expand(name, path, load_base(raw["base"], path, extra_catalogs), axes, catalog)


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------
def grid_options(options: BatchOptions) -> BatchOptions:
    """A grid runs the exact optimizer and the baselines (for the speedup over GPU-SI) per cell; decision
    ranges are for `batch` and `ranges` (a grid has many cells)."""
    return replace(options, methods=GRID_METHODS, pareto=False, ranges_within=None)


def grid_instances(grid: Grid, options: BatchOptions, catalog: Catalog | None = None):
    """The grid's batch instances, each with its cell, exact solves waiting for their parent's (priced
    with `catalog`, else each cell's own catalog files)."""
    options = grid_options(options)
    instances, notes = plan([(grid.path, c.scenario) for c in grid.cells], options, catalog, grid.name)
    by_name = {c.name: c for c in grid.cells}
    exact_key = {i.scenario_name: i.key for i in instances if i.method == "exact"}
    out = []
    for inst in instances:
        cell = by_name[inst.scenario_name]
        hint_of = exact_key.get(cell.parent) if inst.method == "exact" and cell.parent else None
        out.append(replace(inst, cell=grid.cell_info(cell), hint_of=hint_of))
    return out, notes


def run_grid(grid: Grid, out: str | Path, options: BatchOptions | None = None,
             progress: BatchProgress | None = None, catalog: Catalog | None = None) -> BatchSummary:
    """Solve every cell not yet done in `out` (exact + baselines), resumable, on the options' executor."""
    options = grid_options(options or BatchOptions()).validate()
    instances, notes = grid_instances(grid, options, catalog)
    return run_instances(instances, out, options, progress, notes)
