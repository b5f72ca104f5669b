"""The front door's inputs and files: scenarios, mixes, catalogs, designs, and the output checks every
command makes before a long run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specpim_cp.errors import ScenarioError
from specpim_cp.files import check_writable as check_file_writable
from specpim_cp.files import path_in, safe_stem, write_atomic
from specpim_cp.problem.builtin_sets import builtin_sets, resolve_scenario_path
from specpim_cp.problem.design import Design, load_design

__all__ = ["Design", "builtin_sets", "check_file_writable", "check_output", "default_catalog", "load_design",
           "load_mix", "load_scenario", "path_in", "safe_stem", "scenario_catalog", "user_catalog",
           "write_atomic"]


def load_scenario(name: str | Path, catalogs: Sequence[str | Path] = ()):
    """A scenario from a TOML/JSON file or a built-in `SET/NAME` (e.g. "paper/opt-13b-b1"), with the user
    catalog files `catalogs` merged over its own."""
    from specpim_cp.problem.scenario import load_scenario as load

    return load(resolve_scenario_path(str(name)), extra_catalogs=tuple(catalogs))


def scenario_catalog(scenario):
    """The one Catalog every step prices `scenario` with: built-in plus its catalog files."""
    from specpim_cp.problem.scenario import scenario_catalog as catalog

    return catalog(scenario)


def user_catalog(files: Sequence[str | Path] = ()):
    """The catalog of a command without a scenario: built-in plus user catalog `files`, in order."""
    from specpim_cp.catalog import load_catalog

    return load_catalog([str(Path(p).absolute()) for p in files])


def default_catalog():
    """The built-in catalog alone."""
    from specpim_cp.catalog import default_catalog as catalog

    return catalog()


def load_mix(name: str | Path, catalogs: Sequence[str | Path] = ()):
    """A workload mix: a mix TOML, a scenario with a [mix] table, or a built-in `mix/NAME`, with user catalog
    files `catalogs` merged over its base scenario's own."""
    from specpim_cp.problem.mix import load_mix as load

    try:
        resolve_scenario_path(str(name))
    except ScenarioError:
        folder = builtin_sets().get("mix")
        known = ", ".join(f"mix/{p.stem}" for p in sorted(folder.glob("*.toml"))) if folder else "none"
        raise ScenarioError(f"{name}: no such mix file (or built-in mix/NAME: {known})") from None
    return load(str(name), extra_catalogs=[str(Path(p).absolute()) for p in catalogs])


def check_output(path: str | None, option: str) -> None:
    """Before a long run: ScenarioError when `path` cannot be written (empty, a parent that is a file), and
    the files check (a name too long, a protected existing file) as an OSError naming it."""
    if path is None:
        return
    if not path.strip():
        raise ScenarioError(f"{option}: an empty file name")
    for parent in Path(path).absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ScenarioError(f"{option} {path}: '{parent}' is a file, not a folder")
            break
    check_file_writable(path)
