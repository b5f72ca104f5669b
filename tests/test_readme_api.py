"""The README's Python API example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_python_api_example_runs(capsys):
    text = README.read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md (Python API)", "exec"), {})  # noqa: S102 -- our own README
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "us/token" in out and "speedup over GPU-SI" in out
