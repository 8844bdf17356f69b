"""Nightly retuning: re-measure the incumbent, a warm-started short search, the decision, and replacing the files as one set."""

from __future__ import annotations

from autotune.study.retune._publish import JOURNAL, PublishError, previous_name, recover, replace_together
from autotune.study.retune._retune import DECISIONS, RetuneOptions, RetuneResult, retune
from autotune.study.retune._warmstart import WarmStart

__all__ = [
    "DECISIONS",
    "JOURNAL",
    "PublishError",
    "RetuneOptions",
    "RetuneResult",
    "WarmStart",
    "previous_name",
    "recover",
    "replace_together",
    "retune",
]
