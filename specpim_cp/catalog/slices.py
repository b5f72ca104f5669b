"""Channel slices of one device's memory, for models that share a device (formulations/edge.md [EDGE-2]).

A slice is named `BASE[c/C]`: `c` of the `C` channel groups (`groups`) of memory type BASE. It is that
memory with `groups = c`, so its bandwidth, capacity and PIM units are the slice's share; `slice_of = C`
records the whole device (`entries.channel_slice` builds it, `Catalog.memory` resolves the name).
"""

from __future__ import annotations

import re

_SLICE = re.compile(r"^(?P<base>.+)\[(?P<c>\d+)/(?P<total>\d+)\]$")


def slice_name(base: str, channels: int, total: int) -> str:
    return f"{base}[{channels}/{total}]"


def parse_slice(name: str) -> tuple[str, int, int] | None:
    """(base memory, channels, the device's channels) of a slice name; None for a plain memory name."""
    m = _SLICE.match(name)
    return None if m is None else (m["base"], int(m["c"]), int(m["total"]))


def slice_channels(name: str) -> int:
    """Channels of a slice name; 0 for a plain memory name (a model on whole devices)."""
    parsed = parse_slice(name)
    return 0 if parsed is None else parsed[1]
