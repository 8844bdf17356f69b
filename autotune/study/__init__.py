"""The study layer: everything driven by an Optuna study, in rooms by concept.

`search` (the space, seeds, one trial, the pool, the session), `storage` (Optuna storages,
a shared study's liveness, the retune history), `report` (best.yaml and its companions,
report.md, plots, the verdict, the live display), `retune` (nightly retuning) and `doctor`
(graph breaks and recompiles). Measuring and choosing is the layer below, `autotune.measure`.
"""
