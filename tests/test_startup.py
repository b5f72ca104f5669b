"""Start-up: `--help` of the tool and of every command imports no solver, no numerical library and no
pydantic model (click's option declarations stay cheap), and a `solve` imports what it uses only: no
Monte Carlo, no mixes, no reports or figures, no Ray, and no heuristic with `--no-warm-start`.

Each check runs in a fresh interpreter (`python -c`), which is the only place `sys.modules` tells what a
command imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Third-party packages `--help` must not import.
HEAVY = ("ortools", "numpy", "networkx", "matplotlib", "ray", "pandas", "pydantic")
#: Package modules `--help` may import: the commands, the front door's options and limits, the error type.
HELP_MAY_IMPORT = ("specpim_cp.cli", "specpim_cp.api", "specpim_cp.api.limits", "specpim_cp.api.options",
                   "specpim_cp.errors", "specpim_cp.problem", "specpim_cp.problem.percent", "specpim_cp.runs",
                   "specpim_cp.runs.limits")
#: Package modules a `solve --no-warm-start` has no use for.
SOLVE_NEEDS_NOT = ("specpim_cp.solvers.heuristic", "specpim_cp.solvers.mix", "specpim_cp.solvers.brute",
                   "specpim_cp.check", "specpim_cp.report", "specpim_cp.runs.instances", "specpim_cp.runs.batch",
                   "specpim_cp.runs.executors", "specpim_cp.views.schedule_picture", "specpim_cp.views.figures")

_RUN = """
import json, sys
from specpim_cp.cli import main
for args in json.loads(sys.argv[1]):
    try:
        main(args, standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, (args, exc.code)
print("MODULES " + json.dumps(sorted(sys.modules)))
"""


def _imported(*commands: list[str]) -> list[str]:
    """The modules a fresh interpreter holds after running `commands` (each a command line) in order."""
    res = subprocess.run([sys.executable, "-c", _RUN, json.dumps(list(commands))], capture_output=True, text=True,
                         timeout=300, check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    line = next(x for x in res.stdout.splitlines() if x.startswith("MODULES "))
    return json.loads(line.removeprefix("MODULES "))


def _under(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def _commands() -> list[list[str]]:
    """Every command and subcommand of the tool, as the words that name it."""
    from specpim_cp.cli import main

    out = []

    def walk(group, path: list[str]) -> None:
        for name, cmd in group.commands.items():
            if hasattr(cmd, "commands"):
                out.append([*path, name])
                walk(cmd, [*path, name])
            else:
                out.append([*path, name])

    walk(main, [])
    return out


def test_help_and_solve_help_import_no_solver_nor_numerical_library():
    modules = _imported(["--help"], ["solve", "--help"])
    assert _under(modules, HEAVY) == []
    assert [m for m in modules if m.startswith("specpim_cp.") and not m.startswith("specpim_cp.cli.")
            and m not in HELP_MAY_IMPORT] == []


def test_every_commands_help_imports_no_solver_nor_numerical_library():
    commands = _commands()
    assert ["solve"] in commands and ["catalog", "models"] in commands and len(commands) > 20
    modules = _imported(*([*c, "--help"] for c in commands))
    assert _under(modules, HEAVY) == []
    assert [m for m in modules if m.startswith("specpim_cp.") and not m.startswith("specpim_cp.cli.")
            and m not in HELP_MAY_IMPORT] == []


def test_a_solve_imports_what_it_uses_only(tmp_path):
    out = tmp_path / "solve.json"
    modules = _imported(["solve", "paper/opt-13b-b1", "--no-warm-start", "--deterministic", "--json",
                         "-o", str(out)])
    assert json.loads(out.read_text())["solve"]["status"] == "OPTIMAL"
    assert "ortools" in modules and "specpim_cp.solvers.exact" in modules  # the check can see a solver
    assert _under(modules, ("matplotlib", "ray")) == []
    assert _under(modules, SOLVE_NEEDS_NOT) == []

