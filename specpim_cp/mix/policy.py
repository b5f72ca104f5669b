"""The policy of a solved mix as files the single-scenario tools accept: per cell its scenario (TOML) and
its design on the shared hardware (JSON), so `specpim-cp evaluate cell-I.toml --design cell-I.json`
re-prices the cell to the metrics the mix solve reports; and an index, `policy.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from specpim_cp.files import toml_text, write_atomic
from specpim_cp.mix.result import MixResult
from specpim_cp.mix.spec import MIX_UNITS
from specpim_cp.mix.text import pim_ops

INDEX = "policy.json"


def cell_stem(index: int) -> str:
    return f"cell-{index}"


def policy_files(res: MixResult) -> dict[str, str]:
    """File name -> text: `cell-I.toml` and `cell-I.json` per cell, and the index `policy.json`."""
    files: dict[str, str] = {}
    cells = []
    for cell, e in zip(res.mix.cells, res.evaluations, strict=True):
        stem = cell_stem(cell.index)
        header = (f"# Cell {cell.index} of mix '{res.mix.name}' ({cell.label}, weight {float(cell.weight):g}): the base "
                  f"scenario '{res.mix.base.name}' with this cell's batch, context and acceptance.\n"
                  f"# Re-price its policy: specpim-cp evaluate {stem}.toml --design {stem}.json\n")
        files[f"{stem}.toml"] = header + toml_text(cell.scenario.model_dump(mode="json"))
        files[f"{stem}.json"] = e.design.to_json() + "\n"
        m = e.metrics
        cells.append({"index": cell.index, "label": cell.label, "weight": float(cell.weight), "task": cell.task,
                      "batch_size": cell.batch_size, "acceptance": dict(cell.acceptance),
                      "scenario_file": f"{stem}.toml", "design_file": f"{stem}.json",
                      "pim_ops": {label: list(pim_ops(md)) for label, md in e.design.models()},
                      "latency_ns_per_token": m.latency_ns_per_token, "energy_pj_per_token": m.energy_pj_per_token,
                      "round_time_ns": m.round_time_ns, "tokens_per_round_micro": m.tokens_per_round_micro,
                      "energy_nj_per_round": m.energy_nj_per_round})
    r = res.report
    index = {"mix": res.mix.name, "base_scenario": res.mix.base.name, "objective_name": r.objective_name,
             "objective": float(r.objective), "objective_unit": MIX_UNITS[r.objective_name], "status": r.status,
             "seed": r.seed, "solver_version": r.solver_version, "inputs_hash": r.inputs_hash,
             "hardware": [{"role": label, "model": md.model, "memory_type": md.memory_type,
                           "pim_units": md.pim_units, "devices": md.devices}
                          for label, md in res.evaluations[0].design.models()],
             "cells": cells}
    files[INDEX] = json.dumps(index, indent=2) + "\n"
    return files


def write_policy_dir(res: MixResult, folder: str | Path) -> list[Path]:
    """Write `policy_files` into `folder`. A new folder appears whole (built beside it, then renamed); in an
    existing folder each file is replaced atomically."""
    folder = Path(folder)
    files = policy_files(res)
    if folder.exists():
        for name, text in files.items():
            write_atomic(folder / name, text)
        return [folder / name for name in files]
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        for name, text in files.items():
            write_atomic(tmp / name, text)
        os.chmod(tmp, 0o755)  # mkdtemp gives 0700; a folder of results is readable like its files
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [folder / name for name in files]
