"""Integrations: applying a tuned configuration inside training libraries' own loops (transformers, accelerate, Lightning).

This layer may import transformers, accelerate and Lightning; nothing else in autotune imports it.
Each integration imports only its own library, so `autotune[hf]` or `autotune[lightning]` is enough.
"""
