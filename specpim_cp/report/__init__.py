"""Reports of a results folder: `common` (grouping, ratios, formatting, consistency checks, the
`Report` value), `comparisons` (the exact design vs GPU-SI and fixed-recipe PIM per scenario, both PIM
comparisons, `comparisons.csv`), `batch` (summary.md tables and plots of a batch), `grid` (heatmaps of a
grid) and `mix` (regret, rule tables and heatmaps of workload mixes). Imports `runs` and everything below it.
"""
