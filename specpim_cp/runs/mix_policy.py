"""The policy of a solved mix as files the single-scenario tools accept: per cell its scenario (TOML) and
its design on the shared hardware (JSON), so `specpim-cp evaluate cell-I.toml --design cell-I.json`
re-prices the cell to the metrics the mix solve reports; and an index, `policy.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.files import check_replaceable, path_in, toml_text, write_atomic
from specpim_cp.problem.mix import MIX_UNITS, Mix
from specpim_cp.solvers.mix import MixResult
from specpim_cp.views.mix import pim_ops

INDEX = "policy.json"
#: Mode of the policy folder (and any parent it creates): readable by all, like the files in it.
FOLDER_MODE = 0o755


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


def policy_names(mix: Mix) -> list[str]:
    """The names of the files `policy_files` writes for `mix` (known before the solve)."""
    return [*(f"{cell_stem(c.index)}.{ext}" for c in mix.cells for ext in ("toml", "json")), INDEX]


def check_policy_dir(folder: str | Path, names: Sequence[str]) -> None:
    """Before any work: `folder` can take the policy files `names` (it is no file, no file's path is a folder).
    Every error is a ScenarioError naming `folder` as the user gave it."""
    folder = Path(folder)
    for parent in [folder, *folder.parents]:
        if parent.exists():
            if not parent.is_dir():
                what = "is a file" if parent == folder else f"is below '{parent}', a file"
                raise ScenarioError(f"--policy-dir {folder}: {what}, not a folder")
            break
    if folder.is_dir():
        for name in names:
            target = folder / name
            if target.is_dir() and not target.is_symlink():
                raise ScenarioError(f"--policy-dir {folder}: '{target}' is a folder; the policy writes its file "
                                    f"{name} there (move or remove that folder)")


def write_policy_dir(res: MixResult, folder: str | Path) -> list[Path]:
    """Write `policy_files` into `folder`, whole or not at all: every file is first written into a hidden
    temporary folder, then a new folder (and any missing parents), built beside it, appears by one rename;
    in an existing folder (staged inside it: the same file system, whatever its parent or a symlink) the
    files replace their old versions, which come back if a replacement fails. On any failure the temporary
    folder is removed; an OSError names `folder`, never the temporary one."""
    folder = Path(folder)
    files = policy_files(res)
    for name in files:
        check_replaceable(path_in(folder, name))  # none leaves the folder, none replaces a read-only file
    check_policy_dir(folder, list(files))
    try:
        if folder.is_dir():
            _replace_in(folder, files)
        else:
            _create(folder, files)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write the policy folder ({exc.strerror or exc})", str(folder)) from None
    return [folder / name for name in files]


def _staging(beside: Path, name: str) -> Path:
    tmp = Path(tempfile.mkdtemp(dir=beside, prefix=f".{name}.", suffix=".tmp"))
    os.chmod(tmp, FOLDER_MODE)  # mkdtemp gives 0700; a folder of results is readable like its files
    return tmp


def _create(folder: Path, files: dict[str, str]) -> None:
    """A new folder: built under a temporary name beside its highest missing parent, then renamed."""
    full = Path(os.path.abspath(folder))  # `..` collapsed: the staged copy mirrors the path below `top`
    top = full
    while not top.parent.exists():
        top = top.parent
    tmp = _staging(top.parent, top.name)
    try:
        inner = tmp.joinpath(*full.relative_to(top).parts)
        for name, text in files.items():
            write_atomic(inner / name, text)
        for d in [inner, *inner.parents]:
            if d == tmp:
                break
            os.chmod(d, FOLDER_MODE)
        os.replace(tmp, top)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_in(folder: Path, files: dict[str, str]) -> None:
    """An existing folder: the new files are written into a hidden temporary folder in it first, then moved
    in one by one; the old versions wait there until every move succeeded (and are moved back otherwise)."""
    tmp = _staging(folder, "policy")
    new, old = tmp / "new", tmp / "old"
    moved: list[tuple[str, bool]] = []  # (name, an old version was moved aside)
    try:
        for name, text in files.items():
            write_atomic(new / name, text)
        old.mkdir()
        for name in files:
            target = folder / name
            had_old = target.exists() or target.is_symlink()
            if had_old:
                os.replace(target, old / name)
            moved.append((name, had_old))
            os.replace(new / name, target)
    except BaseException:
        for name, had_old in reversed(moved):
            (folder / name).unlink(missing_ok=True)
            if had_old:
                os.replace(old / name, folder / name)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
