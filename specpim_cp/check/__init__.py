"""Checks of the model: Monte Carlo (`simulate`, `simulate_design`), `validate` (the model next to
measurements), `sensitivity` (re-solve at each uncertain constant's ends) and `sweep` (re-solve as the
acceptance rate varies). Imports `mix` and everything below it, never `runs` or `report`.
"""
