"""The docs stay true: docs/commands.md equals what scripts/gen_commands.py writes from the click commands,
every relative link in README.md and docs/*.md reaches a file (and a heading, when it names one), and no
page cites a design notes file or a tracker instead of stating the rule."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.MULTILINE | re.DOTALL)


def _generator():
    spec = importlib.util.spec_from_file_location("gen_commands", ROOT / "scripts" / "gen_commands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_commands_page_is_current():
    expected = _generator().render()
    actual = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/commands.md is stale: run python scripts/gen_commands.py"


def test_commands_page_lists_every_command_and_option():
    from specpim_cp.cli import main

    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    for name, cmd in main.commands.items():
        assert f"`specpim-cp {name}`" in text, name
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-") and opt not in ("-h", "--help"):
                    assert opt in text, f"{name} {opt}"


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    heads = re.findall(r"^#+\s+(.*)$", FENCE.sub("", markdown), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def _broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or root not in dest.parents:
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text(encoding="utf-8")):
            broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return broken


def test_relative_links_resolve():
    broken = [b for page in PAGES if page.exists() for b in _broken_links(page)]
    assert not broken, "\n".join(broken)


def test_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[here](missing.md), [there](#nowhere), [up](../x.md), [ok](#only-heading)\n"
                    "# Only heading\n", encoding="utf-8")
    assert len(_broken_links(page, tmp_path)) == 3


def test_docs_state_rules_instead_of_citing_notes_or_trackers():
    cited = re.compile(r"DESIGN\.md|\b[Ii]ssue [0-9]+")
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in PAGES if p.exists()
            for m in cited.finditer(p.read_text(encoding="utf-8"))]
    assert not hits, "\n".join(hits)


def test_code_map_lists_the_stages_in_test_structures_order():
    tree = ast.parse((ROOT / "tests" / "test_structure.py").read_text(encoding="utf-8"))
    order = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", None) == "STAGES" for t in node.targets))
    text = (ROOT / "docs" / "code-map.md").read_text(encoding="utf-8")
    firsts = re.findall(r"^\| (`[^|]*`) \|", text, flags=re.MULTILINE)
    stages = [name for cell in firsts for name in re.findall(r"`(\w+)(?:\.py|/)`", cell)]
    assert tuple(stages) == tuple(order), "docs/code-map.md's table and test_structure.STAGES differ"
