"""The trial layer: one run of one configuration in a fresh process.

`request` (what goes in and the figures that come out), `runner` (spawn, isolate, time out,
kill), `worker` (the process itself), `measure` (clocks, memory, load, accuracy) and
`events` (the worker's JSON-lines channel). It never imports Optuna.
"""
