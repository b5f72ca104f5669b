"""The package layout stays the architecture of docs/code-map.md: read with `ast` from the source tree.

- at most 6 modules directly in `specpim_cp/`;
- no import cycle between modules, counting imports inside functions (a package importing its own
  submodules is fine), and no import that points up the stage order of docs/code-map.md;
- no `_private` name imported from another module;
- no function over 120 lines;
- the commands (`cli/`) import from the package only the front door (`api`), `views` and `errors`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "specpim_cp"
MAX_TOP_MODULES = 6
MAX_FUNCTION_LINES = 120
#: Stages from the bottom up (docs/code-map.md): a module imports only from its own stage or below.
STAGES = ("errors", "files", "kernels", "catalog", "problem", "physics", "solvers", "views", "check", "runs",
          "report", "api", "cli")
#: What the commands may import from the package: the front door, the views that format, the error type.
CLI_MAY_IMPORT = ("specpim_cp.api", "specpim_cp.views", "specpim_cp.errors", "specpim_cp.cli")


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. specpim_cp.physics.evaluate
    path: Path
    is_package: bool  # an __init__.py

    @property
    def stage(self) -> str | None:
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 else None


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (the longest dotted prefix that is a module of the package)
    name: str | None  # the imported name, if `from target import name` names no submodule
    line: int
    in_function: bool


def modules(root: Path = PACKAGE) -> dict[str, Module]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = Module(".".join(parts), p, is_package)
    return out


def _absolute(mod: Module, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _enclosing_functions(tree: ast.AST) -> set[int]:
    """ids of the import nodes that sit inside a function body."""
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def _owner(target: str, mods: dict[str, Module]) -> str | None:
    while target not in mods and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in mods else None


def imports(mods: dict[str, Module]) -> list[Import]:
    out = []
    for mod in mods.values():
        tree = ast.parse(mod.path.read_text(encoding="utf-8"))
        inside = _enclosing_functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(mod, node)
                if base is None:
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    target, name = (full, None) if full in mods else (base, alias.name)
                    owner = _owner(target, mods)
                    if owner is not None:
                        out.append(Import(mod.name, owner, name, node.lineno, id(node) in inside))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    owner = _owner(alias.name, mods)
                    if owner is not None:
                        out.append(Import(mod.name, owner, None, node.lineno, id(node) in inside))
    return out


def _edges(mods: dict[str, Module], found: list[Import]) -> set[tuple[str, str]]:
    """Module -> module, without a package's imports of its own submodules."""
    return {(i.source, i.target) for i in found if i.target != i.source
            and not (mods[i.source].is_package and i.target.startswith(i.source + "."))}


def top_level_modules(mods: dict[str, Module]) -> list[str]:
    return sorted(m.name for m in mods.values() if m.name.count(".") == 1 and not m.is_package) + ["specpim_cp"]


def import_cycles(mods: dict[str, Module], found: list[Import]) -> list[list[str]]:
    g = nx.DiGraph(sorted(_edges(mods, found)))
    return [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]


def upward_imports(mods: dict[str, Module], found: list[Import]) -> list[str]:
    rank = {s: k for k, s in enumerate(STAGES)}
    out = []
    for a, b in sorted(_edges(mods, found)):
        sa, sb = mods[a].stage, mods[b].stage
        if sa is None or sb is None or sa == sb:
            continue
        if sa not in rank or sb not in rank:
            out.append(f"{a} -> {b}: stage {sa if sa not in rank else sb} is not in the code map")
        elif rank[sb] > rank[sa]:
            out.append(f"{a} -> {b}")
    return out


def private_imports(found: list[Import]) -> list[str]:
    return [f"{i.source}:{i.line} imports {i.target}.{i.name}" for i in found
            if i.name and i.name.startswith("_") and not i.name.startswith("__") and i.target != i.source]


def cli_imports_beyond_the_front_door(found: list[Import]) -> list[str]:
    """Imports of `cli/` modules that reach past the front door, the views and the error type."""
    def allowed(target: str) -> bool:
        return any(target == m or target.startswith(m + ".") for m in CLI_MAY_IMPORT)

    return [f"{i.source}:{i.line} imports {i.target}" for i in found
            if i.source.startswith("specpim_cp.cli") and not allowed(i.target)]


def long_functions(mods: dict[str, Module], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    out = []
    for mod in mods.values():
        for node in ast.walk(ast.parse(mod.path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{mod.name}.{node.name}: {n} lines")
    return out


MODS = modules()
FOUND = imports(MODS)


def test_at_most_six_modules_at_the_top():
    top = top_level_modules(MODS)
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_import_cycle_counting_imports_inside_functions():
    assert import_cycles(MODS, FOUND) == []


def test_imports_point_down_the_code_map():
    assert upward_imports(MODS, FOUND) == []
    assert {m.stage for m in MODS.values() if m.stage} <= set(STAGES)


def test_no_private_name_imported_from_another_module():
    assert private_imports(FOUND) == []


def test_no_function_over_120_lines():
    assert long_functions(MODS) == []


def test_the_commands_call_only_the_front_door():
    assert cli_imports_beyond_the_front_door(FOUND) == []


def test_the_front_door_check_finds_a_command_reaching_past_it(tmp_path):
    mods = _tree(tmp_path, {
        "__init__.py": "",
        "cli/__init__.py": "",
        "cli/solve.py": "def solve():\n    from specpim_cp.solvers.exact import solve\n"
                        "    from specpim_cp.api import solve as ok\n    from specpim_cp.views.tables import table\n",
        "api/__init__.py": "", "solvers/__init__.py": "", "solvers/exact.py": "", "views/__init__.py": "",
        "views/tables.py": "",
    })
    assert cli_imports_beyond_the_front_door(imports(mods)) == ["specpim_cp.cli.solve:2 imports specpim_cp.solvers.exact"]


# ------------------------------------------------------------------------------------------------
# The checks themselves catch what they are for (small trees written here)
# ------------------------------------------------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    root = tmp_path / "specpim_cp"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return modules(root)


def test_checks_find_a_cycle_through_a_function_level_import_and_a_private_name(tmp_path):
    mods = _tree(tmp_path, {
        "__init__.py": "",
        "runs/__init__.py": "from specpim_cp.runs import batch\n",
        "runs/batch.py": "def run():\n    from specpim_cp.runs.mixes import plan\n    return plan\n",
        "runs/mixes.py": "from specpim_cp.runs.batch import _base_record\n",
    })
    found = imports(mods)
    assert import_cycles(mods, found) == [["specpim_cp.runs.batch", "specpim_cp.runs.mixes"]]
    assert private_imports(found) == ["specpim_cp.runs.mixes:1 imports specpim_cp.runs.batch._base_record"]
    assert [i.in_function for i in found if i.source == "specpim_cp.runs.batch"] == [True]


def test_checks_find_an_upward_import_and_a_long_function(tmp_path):
    body = "\n".join(f"    x{k} = {k}" for k in range(MAX_FUNCTION_LINES))
    mods = _tree(tmp_path, {
        "__init__.py": "",
        "problem/__init__.py": "",
        "problem/space.py": "from specpim_cp.physics.costs import placement_options\n",
        "physics/__init__.py": "",
        "physics/costs.py": f"def placement_options():\n{body}\n",
        "a.py": "", "b.py": "", "c.py": "", "d.py": "", "e.py": "", "f.py": "",
    })
    found = imports(mods)
    assert upward_imports(mods, found) == ["specpim_cp.problem.space -> specpim_cp.physics.costs"]
    assert long_functions(mods) == [f"specpim_cp.physics.costs.placement_options: {MAX_FUNCTION_LINES + 1} lines"]
    assert len(top_level_modules(mods)) == 7


# ------------------------------------------------------------------------------------------------
# Module sizes: rooms a newcomer can read
# ------------------------------------------------------------------------------------------------
#: Most lines of any module of the package, and of the exact solver's pipeline (solvers/exact/solve.py).
MAX_MODULE_LINES = 800
MAX_SOLVE_PIPELINE_LINES = 300


def long_modules(root: Path = PACKAGE, limit: int = MAX_MODULE_LINES) -> list[str]:
    """The package's modules with more than `limit` lines, each with its count."""
    out = []
    for p in sorted(root.rglob("*.py")):
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{p.relative_to(root.parent)}: {n} lines")
    return out


def test_no_module_over_800_lines():
    assert long_modules() == []


def test_the_solve_pipeline_is_short():
    path = PACKAGE / "solvers" / "exact" / "solve.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_SOLVE_PIPELINE_LINES


def test_the_size_check_finds_a_long_module(tmp_path):
    root = tmp_path / "specpim_cp"
    root.mkdir()
    (root / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    (root / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert long_modules(root) == [f"specpim_cp/long.py: {MAX_MODULE_LINES + 1} lines"]
