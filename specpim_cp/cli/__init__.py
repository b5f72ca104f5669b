"""`specpim-cp`: a thin click layer over the Python API. Nothing below the CLI prints.

One module per command group (`info`, `pricing`, `optimize`, `batch`), all on `common` (user errors
as one line and exit code 2, scenario loading, atomic output); none imports another.
"""

from __future__ import annotations

import click

from specpim_cp.cli import batch, info, optimize, pricing


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specpim-cp")
def main() -> None:
    """Exact (CP-SAT) design-space exploration for speculative LLM inference on PIM systems."""


for _module in (info, pricing, optimize, batch):
    for _cmd in _module.COMMANDS:
        main.add_command(_cmd)

__all__ = ["main"]
