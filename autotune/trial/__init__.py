"""The trial layer: one run of one configuration in a fresh process.

`request` (what goes in and the figures that come out), `runner` (spawn, isolate, time out,
kill), `worker` (the process's entry), `measuring` (building, compiling, settling and the
windows), `references` and `accuracy` (the eager references and how they are compared),
`failure` (why a run failed), `clocks` (synchronised time and the machine's load),
`compile_counts` (dynamo's counters) and `events` (the worker's JSON-lines channel); what
differs between devices is asked of `autotune.runtime.device`. It never imports Optuna.
"""
