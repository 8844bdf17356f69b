"""Integrations: applying a tuned configuration inside training libraries' own loops (transformers, accelerate).

This layer may import transformers and accelerate; nothing else in autotune imports it.
"""
