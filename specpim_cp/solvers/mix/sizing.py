"""The work of a mix, sized before anything is built: every cell lists and prices its own speculation
choices (its price table, its copy in the mix model, its pass tables), about 50 KB each, so the cells'
choices together bound the memory a mix solve needs (docs/limits.md)."""

from __future__ import annotations

from specpim_cp.catalog import Catalog
from specpim_cp.errors import ScenarioError
from specpim_cp.problem.mix import Mix
from specpim_cp.problem.space import DesignSpace

#: Most speculation choices a mix's cells may list together: each costs about 50 KB in the cell's price
#: table, mix-model copy and pass tables (measured: 4 cells of 2,612 choices, 480 MB), so at most about
#: 2.5 GB. The built-in mixes list at most 2,688; 16 cells on a 128-node tree base list 41,792.
MAX_MIX_CHOICES = 50_000


def check_mix_size(mix: Mix, catalog: Catalog) -> int:
    """The cells' speculation choices counted together (each cell's own limits checked first), or one line
    naming MAX_MIX_CHOICES when they exceed it."""
    counts = [DesignSpace(c.scenario, catalog).check_choice_count() for c in mix.cells]
    total = sum(counts)
    if total > MAX_MIX_CHOICES:
        raise ScenarioError(
            f"mix.cells: {len(counts)} cells of up to {max(counts):,} speculation choices each list {total:,} in all, "
            f"more than the {MAX_MIX_CHOICES:,} a mix solve holds (MAX_MIX_CHOICES, about 50 KB each); use fewer "
            "cells, or a base with fewer choices (lower max_draft_length or tree.max_nodes)")
    return total
