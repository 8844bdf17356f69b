"""The runtime layer: what a training or serving process imports, using only torch, PyYAML and the standard library.

`config` (CompileConfig), `summary` (WorkloadSummary), `codegen` (apply_compilation.py),
`batching` (padding and marking), `compile_cache` (compile artifacts), `environment`
(where a configuration was tuned), `tuned` (best.yaml: load and apply) and `device` (every
rule that differs between a CPU and a GPU).
"""
