"""specpim-cp: provably optimal hardware/dataflow co-design for speculative LLM inference on PIM.

The Python front door is `specpim_cp.api`, whose names are re-exported here on first use
(`specpim_cp.solve`, `specpim_cp.SolveOptions`, ...), so that importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.10.0"


def __getattr__(name: str) -> Any:
    api = importlib.import_module("specpim_cp.api")  # not `from specpim_cp import api`: that asks __getattr__

    if name in api.EXPORTS:
        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'specpim_cp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(importlib.import_module("specpim_cp.api").EXPORTS))
