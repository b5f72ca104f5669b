"""Figures without pyplot's global state (matplotlib's Agg canvas), written atomically."""

from __future__ import annotations

import io
from pathlib import Path

from specpim_cp.files import write_atomic

DPI = 110  # every figure of the package: plots, tornado, sweep, heatmaps


def new_figure(width: float, height: float):
    """A figure `width` x `height` inches with constrained layout."""
    from matplotlib.figure import Figure  # matplotlib loads only when a figure is drawn

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def save_figure(fig, path: str | Path) -> Path:
    """A matplotlib figure written atomically with mode 0644 (format from the suffix, PNG without one),
    cropped to what it draws (bbox_inches="tight"), so text past the layout's edge is kept, not cut off."""
    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix[1:].lower() or "png", bbox_inches="tight")  # no label cut off
    write_atomic(path, buf.getvalue())
    return path
