"""Full-ranking evaluation: metrics, ranking a batch against every item, scoring a split.

May import: `model`, `data` and `training.loop` (a fitted module's data); never
`training.workflows`.
"""
