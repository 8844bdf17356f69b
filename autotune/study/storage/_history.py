"""history.jsonl: one JSON line per retune of a study, appended, never rewritten.

Each line holds the date, the environment, what changed since the configuration was
tuned, the incumbent's and the best challenger's figures, both baselines and the decision,
so a nightly job leaves a record that a person (or a plot) can follow over months.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["HISTORY_FILE", "append_history", "read_history"]

HISTORY_FILE = "history.jsonl"


def append_history(folder: str | os.PathLike[str], entry: Mapping[str, Any]) -> Path:
    """Append `entry` as one line to folder/history.jsonl, in a single write, flushed to disk."""
    line = json.dumps(_finite(entry), sort_keys=False, allow_nan=False) + "\n"
    path = Path(folder) / HISTORY_FILE
    # One write of the whole line to a file opened for appending: a killed run leaves whole lines.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_history(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every readable line of folder/history.jsonl, oldest first (a damaged line is skipped)."""
    path = Path(folder) / HISTORY_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such numbers are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
