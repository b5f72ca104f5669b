"""formulations/ documents every constraint family of the CP-SAT model, each ID in the one `add_*` method.

`formulations/README.md` holds one table (header `| family | IDs | method | file |`) mapping each
family to the `solvers/exact/model.py` (and `solvers/mix/cpsat_model.py`) method(s) that add it and to the
formulations file that writes it out.
The model's methods carry the family as a docstring tag: a docstring starting with `[FAM]`, naming
the family's IDs (`FAM-1`, or a range `FAM-1..3`). The tests check, by parsing the sources (nothing is
imported or built):

1. every tagged method of a class in solvers/exact/model.py or solvers/mix/cpsat_model.py is listed in the
   table under its tag;
2. every table row names existing methods whose docstrings carry the row's tag, lists exactly the IDs
   of that family those docstrings name, and points to a formulations file that mentions every one;
3. every family ID named in a docstring or comment of solvers/exact/model.py appears in some formulations
   file other than README.md (the table alone does not document a family).

So a family added to the code without documentation fails (`test_an_undocumented_family_fails`).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "specpim_cp" / "solvers" / "exact" / "model.py"
#: Every source whose classes add constraint families: the single-scenario model and the mix model.
MODELS = (MODEL, ROOT / "specpim_cp" / "solvers" / "mix" / "cpsat_model.py")
FORMULATIONS = ROOT / "formulations"
README = FORMULATIONS / "README.md"
HEADER = ("family", "IDs", "method", "file")

TAG = re.compile(r"\s*\[([A-Z][A-Z0-9]*)\]")  # a family tag opening a docstring: [CAP]
ID = re.compile(r"\b([A-Z]{2,}[A-Z0-9]*)-(\d+)(?:\.\.(\d+))?\b")  # CAP-1, SCH-1..4


def family_ids(text: str) -> set[str]:
    """Every family ID in `text`, ranges expanded (SCH-1..4 -> SCH-1, SCH-2, SCH-3, SCH-4)."""
    out = set()
    for fam, lo, hi in ID.findall(text):
        out |= {f"{fam}-{k}" for k in range(int(lo), int(hi or lo) + 1)}
    return out


@dataclass(frozen=True)
class Method:
    cls: str
    name: str
    doc: str

    @property
    def qualname(self) -> str:
        return f"{self.cls}.{self.name}"

    @property
    def tag(self) -> str | None:
        m = TAG.match(self.doc)
        return m.group(1) if m else None


@dataclass(frozen=True)
class Row:
    family: str
    ids: frozenset[str]
    methods: tuple[str, ...]
    file: str


def _sources(source: str | tuple[str, ...]) -> tuple[str, ...]:
    return (source,) if isinstance(source, str) else source


def model_methods(source: str | tuple[str, ...]) -> dict[str, Method]:
    """Every method of every class in the source(s), by `Class.method`."""
    out = {}
    for node in (n for src in _sources(source) for n in ast.parse(src).body):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    m = Method(node.name, item.name, ast.get_docstring(item) or "")
                    out[m.qualname] = m
    return out


def source_ids(source: str | tuple[str, ...]) -> dict[str, set[str]]:
    """Family IDs named in the sources' docstrings and comments, with where each is named."""
    where: dict[str, set[str]] = {}
    for node in (n for src in _sources(source) for n in ast.walk(ast.parse(src))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            name = "module docstring" if isinstance(node, ast.Module) else f"docstring of {node.name}"
            for i in family_ids(ast.get_docstring(node) or ""):
                where.setdefault(i, set()).add(name)
    for tok in (t for src in _sources(source) for t in tokenize.generate_tokens(io.StringIO(src).readline)):
        if tok.type == tokenize.COMMENT:
            for i in family_ids(tok.string):
                where.setdefault(i, set()).add(f"comment on line {tok.start[0]}")
    return where


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def family_table(readme: str) -> list[Row]:
    """The rows of the README's family table (AssertionError if it is missing or malformed)."""
    lines = readme.splitlines()
    starts = [k for k, line in enumerate(lines) if line.lstrip().startswith("|") and tuple(_cells(line)) == HEADER]
    assert len(starts) == 1, f"formulations/README.md needs exactly one table with header {' | '.join(HEADER)}"
    rows = []
    for line in lines[starts[0] + 2:]:
        if not line.lstrip().startswith("|"):
            break
        cells = _cells(line)
        assert len(cells) == len(HEADER), f"family table row with {len(cells)} cells: {line!r}"
        family, ids, methods, file = cells
        files = re.findall(r"[\w.-]+\.md", file)
        assert len(files) == 1, f"family table row {family}: the file cell must name one .md file, got {file!r}"
        rows.append(Row(family.strip("`"), frozenset(family_ids(ids)),
                        tuple(m.strip().strip("`") for m in methods.split(",") if m.strip()), files[0]))
    assert rows, "the family table of formulations/README.md has no rows"
    return rows


def formulation_texts() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(FORMULATIONS.glob("*.md"))}


# -- the checks (pure functions of the texts, so the mutation test can feed them a modified model) --------
def tagged_methods_missing_from_table(source: str, rows: list[Row]) -> list[str]:
    listed = {(r.family, m) for r in rows for m in r.methods}
    return [f"{m.qualname} carries [{m.tag}] but the README family table does not list it under {m.tag}"
            for m in model_methods(source).values() if m.tag and (m.tag, m.qualname) not in listed]


def rows_without_their_methods(source: str, rows: list[Row], texts: dict[str, str]) -> list[str]:
    methods = model_methods(source)
    out = []
    families = [r.family for r in rows]
    out += [f"family {f} has {families.count(f)} rows" for f in sorted(set(families)) if families.count(f) > 1]
    for r in rows:
        if not r.methods:
            out.append(f"{r.family}: the row names no method")
        named: set[str] = set()
        for q in r.methods:
            m = methods.get(q)
            if m is None:
                out.append(f"{r.family}: {q} is not a method of a class in specpim_cp/solvers/exact/model.py "
                           "or specpim_cp/solvers/mix/cpsat_model.py")
            elif m.tag != r.family:
                out.append(f"{r.family}: the docstring of {q} does not start with [{r.family}]")
            else:
                named |= {i for i in family_ids(m.doc) if i.split("-")[0] == r.family}
        if named and named != r.ids:
            out.append(f"{r.family}: the table lists {sorted(r.ids)}, the docstrings of {', '.join(r.methods)} "
                       f"name {sorted(named)}")
        if r.file == README.name or r.file not in texts:
            out.append(f"{r.family}: {r.file} is not a formulations file (other than README.md)")
        else:
            missing = r.ids - family_ids(texts[r.file])
            if missing:
                out.append(f"{r.family}: {r.file} does not mention {sorted(missing)}")
    return out


def undocumented_ids(source: str, texts: dict[str, str]) -> list[str]:
    documented = set().union(*(family_ids(t) for name, t in texts.items() if name != README.name))
    return [f"{i} (named in the {', '.join(sorted(where))} of specpim_cp/solvers/exact/model.py or "
            f"specpim_cp/solvers/mix/cpsat_model.py) appears in no formulations/*.md file"
            for i, where in sorted(source_ids(source).items()) if i not in documented]


def all_problems(source: str, readme: str, texts: dict[str, str]) -> list[str]:
    rows = family_table(readme)
    return (tagged_methods_missing_from_table(source, rows) + rows_without_their_methods(source, rows, texts)
            + undocumented_ids(source, texts))


# -- tests ----------------------------------------------------------------------------------------------
def _inputs() -> tuple[tuple[str, ...], str, dict[str, str]]:
    return (tuple(p.read_text(encoding="utf-8") for p in MODELS), README.read_text(encoding="utf-8"),
            formulation_texts())


def test_the_model_has_tagged_families():
    source, _, _ = _inputs()
    tags = {m.tag for m in model_methods(source).values() if m.tag}
    assert {"ARCH", "MAP", "SPEC", "DUR", "SCH", "CAP", "PASS", "CUT", "CYC", "RND", "EN", "MIX"} <= tags


def test_every_tagged_method_is_in_the_table():
    source, readme, _ = _inputs()
    assert tagged_methods_missing_from_table(source, family_table(readme)) == []


def test_every_table_row_names_its_tagged_methods_and_documented_ids():
    source, readme, texts = _inputs()
    assert rows_without_their_methods(source, family_table(readme), texts) == []


def test_every_family_id_of_the_model_is_documented():
    source, _, texts = _inputs()
    assert undocumented_ids(source, texts) == []


def test_ranges_expand():
    assert family_ids("SCH-0 and SCH-1..3; [CUT-1], GPU-SI, int64") == {"SCH-0", "SCH-1", "SCH-2", "SCH-3", "CUT-1"}


def _with_method(sources: tuple[str, ...], cls: str, code: str) -> tuple[str, ...]:
    """`sources` with `code` (a method, indented for a class body) appended to class `cls`."""
    out = []
    for source in sources:
        node = next((n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if node is not None:
            lines = source.splitlines(keepends=True)
            source = "".join(lines[:node.end_lineno]) + code + "".join(lines[node.end_lineno:])
        out.append(source)
    return tuple(out)


def test_an_undocumented_family_fails():
    """A family added to the model without documentation is caught by every check that should catch it."""
    source, readme, texts = _inputs()
    assert all_problems(source, readme, texts) == []
    mutated = _with_method(source, "SpecModel",
                           '\n    def add_foo(self) -> None:\n        """[FOO] FOO-1 a new family."""\n')
    rows = family_table(readme)
    assert any("SpecModel.add_foo carries [FOO]" in p for p in tagged_methods_missing_from_table(mutated, rows))
    assert any(p.startswith("FOO-1 ") for p in undocumented_ids(mutated, texts))
    # a table row alone (no formulations file writing FOO-1 out) is not enough
    row = "| FOO | FOO-1 | `SpecModel.add_foo` | costs.md |"
    lines = readme.splitlines()
    at = next(k for k, line in enumerate(lines) if "`SpecModel.add_energy`" in line and line.startswith("|"))
    readme_with_row = "\n".join(lines[:at + 1] + [row] + lines[at + 1:])
    problems = all_problems(mutated, readme_with_row, texts)
    assert any("costs.md does not mention ['FOO-1']" in p for p in problems)
    assert any(p.startswith("FOO-1 ") for p in problems)
    # and a row whose method lost its tag, or does not exist, is caught too
    untagged = tuple(m.replace('"""[FOO] FOO-1 a new family."""', '"""A new family FOO-1."""') for m in mutated)
    assert any("does not start with [FOO]" in p for p in rows_without_their_methods(untagged, family_table(
        readme_with_row), texts))
    assert any("is not a method" in p for p in rows_without_their_methods(source, family_table(readme_with_row),
                                                                           texts))
