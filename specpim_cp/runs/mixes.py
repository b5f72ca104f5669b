"""Workload mixes in a batch: each mix file is one instance of method `mix` (`solve-mix` with its
comparisons), keyed by the content hash of the mix (its base scenario, its [mix] table) and the options.

The instance carries the whole mix as data (`mix_data`: the base scenario with absolute catalog paths
and the validated [mix] table), so a worker, local or remote, rebuilds it without the mix file. Its one
record (part `mix`) holds the solve report and a typed `MixOutcome`: the shared hardware, every cell's
design and metrics, and the comparisons, which the report turns into the regret table and the heatmaps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.files import read_table
from specpim_cp.physics.mix import cell_metric
from specpim_cp.problem.mix import MIX_UNITS, Mix, MixTable, build_mix, load_mix
from specpim_cp.problem.scenario import Scenario, scenario_catalog
from specpim_cp.runs.instances import BatchOptions, Instance, instance_key
from specpim_cp.runs.records import (
    MixCellRecord,
    MixComparisonRecord,
    MixOutcome,
    PimAllocation,
    Record,
    RecordMetrics,
    objective_fields,
    package_version,
)
from specpim_cp.solvers.mix import MixOptions, MixResult, solve_mix
from specpim_cp.views.mix import in_mix_space

METHOD = "mix"


def is_mix_file(path: str | Path) -> bool:
    """A TOML file with a top-level `mix` table (a mix file, or a scenario with a [mix] table); a file that
    cannot be read is not (the scenario loader names its problem)."""
    path = Path(path)
    if path.suffix != ".toml":
        return False
    try:
        data = read_table(path, "a mix")
    except ScenarioError:
        return False
    return isinstance(data.get("mix"), dict)


def mix_data(path: Path, mix: Mix) -> dict:
    """The mix as instance data: name, description, the base scenario (JSON) and the validated [mix] table."""
    data = read_table(path, "a mix")
    table = MixTable.model_validate(data["mix"]).model_dump(mode="json")
    return {"name": mix.name, "description": mix.description, "base": mix.base.model_dump(mode="json"),
            "mix": table}


def plan_mixes(files: Sequence[Path], options: BatchOptions, name: str | None,
               extra_catalogs: Sequence[str | Path] = ()) -> list[Instance]:
    """One `mix` instance per mix file, every file validated first (an error names the file, cell and field)."""
    opts = options.method_options(METHOD)
    out: list[Instance] = []
    seen: dict[str, Path] = {}
    for f in files:
        f = Path(f)
        try:
            mix = load_mix(f, extra_catalogs=[str(Path(p).absolute()) for p in extra_catalogs])
        except ScenarioError as exc:
            msg = str(exc)
            raise ScenarioError(msg if msg.startswith(str(f)) else f"{f}: {msg}") from None
        if mix.name in seen:
            raise ScenarioError(f"{f}: mix name '{mix.name}' is also used by {seen[mix.name]}")
        seen[mix.name] = f
        data = mix_data(f, mix)
        family = scenario_catalog(mix.base).models[mix.base.verifier.model].family
        out.append(Instance(instance_key(data, METHOD, opts), METHOD, scenario_name=mix.name, scenario_file=str(f),
                            scenario_hash=mix.content_hash(), family=family,
                            scenario_data=mix.base.model_dump(mode="json"), options=opts, batch=name, mix_data=data))
    return out


def rebuild_mix(inst: Instance, base: Scenario, catalog: Catalog) -> Mix:
    d = inst.mix_data
    if d is None:
        raise ScenarioError(f"{inst.label}: a mix instance without its mix")
    return build_mix(d["name"], d["description"], base, MixTable.model_validate(d["mix"]), catalog)


def run_mix(inst: Instance, base: Scenario, catalog: Catalog) -> list[Record]:
    """Solve one mix (worker side) and make its record."""
    o = inst.options
    mix = rebuild_mix(inst, base, catalog)
    t0 = time.perf_counter()
    options = MixOptions(inst.solver_options(), cell_time_limit_s=o["cell_time_limit_s"])
    res = solve_mix(mix, o["objective"], options, catalog=catalog)
    return [mix_record(inst, res, catalog, time.perf_counter() - t0)]


def outcome(res: MixResult, catalog: Catalog) -> MixOutcome:
    """The typed summary a record keeps of a MixResult."""
    objective = res.report.objective_name
    cells = []
    for cell, e, own in zip(res.mix.cells, res.evaluations, res.optima, strict=True):
        own_value = own.report.objective
        cells.append(MixCellRecord(
            index=cell.index, label=cell.label, batch_size=cell.batch_size, task=cell.task,
            weight=float(cell.weight), acceptance=dict(cell.acceptance), metrics=RecordMetrics.of(e.metrics),
            design=json.loads(e.design.to_json()), pim=PimAllocation.of_design(e.design, catalog),
            own_objective=float(own_value), own_status=own.report.status,
            regret=float(cell_metric(e.metrics, objective) / own_value)))
    comparisons = tuple(MixComparisonRecord(
        name=c.name, objective=None if c.value is None else float(c.value),
        regret=None if c.regret is None else float(c.regret),
        archs=tuple(c.extra["archs"]) if c.evaluations is not None and "archs" in c.extra else None, error=c.error,
        in_space=None if c.evaluations is None else in_mix_space(res.mix, [e.design for e in c.evaluations], catalog))
        for c in res.comparisons)
    return MixOutcome(res.mix.name, MIX_UNITS[objective], tuple(a.label() for a in res.archs), tuple(cells),
                      comparisons)


def mix_record(inst: Instance, res: MixResult, catalog: Catalog, wall_s: float) -> Record:
    r = res.report
    return inst.record(METHOD, 1).with_(
        **objective_fields(r.objective), objective_name=r.objective_name, scenario_objective=r.objective_name,
        status=r.status, bound=None if r.bound is None else float(r.bound), gap=r.gap, wall_s=wall_s, seed=r.seed,
        solver_version=r.solver_version, inputs_hash=r.inputs_hash, mix=outcome(res, catalog),
        description=f"{len(res.mix.cells)} cells on one hardware ({package_version()})")
