"""Views of one design or table: `tables` (plain-text and Markdown tables, design summaries),
`schedule_picture` (the schedule figure `show` draws) and `mix` (a solved workload mix as text).
Imports `solvers`, `physics` and `problem` below it.
"""
