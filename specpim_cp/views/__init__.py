"""Views of one design or table: `tables` (plain-text and Markdown tables, design summaries) and
`schedule_picture` (the schedule figure `show` draws). Imports `physics` and `problem` only.
"""
