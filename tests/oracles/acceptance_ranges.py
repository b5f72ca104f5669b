"""The catalog range of a drafter-verifier pair's default acceptance, looked up the way `sensitivity` does."""

from __future__ import annotations

from specpim_cp.catalog import Catalog


def acceptance_range(catalog: Catalog, drafter: str, verifier: str) -> tuple[float, float] | None:
    """(low, high) of the entry the pair's default acceptance comes from, None without a range."""
    return catalog.acceptance_ranges.get(catalog.acceptance_entry(drafter, verifier))
