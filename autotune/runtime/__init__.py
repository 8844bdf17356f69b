"""The runtime layer: what a training or serving process imports, using only torch, PyYAML and the standard library.

`config` (CompileConfig), `summary` (WorkloadSummary), `codegen` (apply_compilation.py),
`batching` (padding and marking), `compile_cache` (compile artifacts), `environment`
(where a configuration was tuned) and `tuned` (best.yaml: load and apply).
"""
