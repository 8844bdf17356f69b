"""A target module that fails while it runs at import time."""

raise RuntimeError("CHECKPOINT_DIR is not set")
