"""The study layer: everything driven by an Optuna study, and every comparison of measured runs.

`space` (choices), `objective`, `search` (ask, run, tell), `campaign` (the one measurement
path: rotated rounds and intervals), `choice` (what is exported: never worse than the
baselines), `export` and `report`, `validate`, `retune` with its `decision` rule, `history`,
`publish`, `recipes`, `cache` (the winner's compile artifacts) and `format`.
"""
