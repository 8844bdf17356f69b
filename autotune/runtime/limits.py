"""Bounds on what autotune reads from files and quotes back to a terminal.

Search-space files and best.yaml may come from anyone. A few hundred bytes of YAML aliases
can describe billions of values (a "billion laughs" file); a value quoted in an error
message can be megabytes long or carry terminal escape sequences. So files are size-checked,
their YAML is counted node by node (aliases expanded) before `yaml.safe_load` builds
anything, and every value shown to a user goes through `quote` or `printable`.
"""

from __future__ import annotations

import os
import reprlib
from pathlib import Path

import yaml

from autotune.errors import ConfigError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "QUOTE_CHARS",
    "printable",
    "quote",
    "read_yaml_file",
    "yaml_nodes",
]

MAX_FILE_BYTES = 1 << 20
"""A search space or best.yaml larger than 1 MiB is refused (the bundled ones are a few KiB)."""
MAX_YAML_NODES = 100_000
"""Values a YAML file may hold once every alias is expanded."""
MAX_YAML_DEPTH = 64
"""Levels of nested lists and mappings a YAML file may have (best.yaml has about six): a file nested thousands
deep would reach the YAML loader's recursion limit only after seconds of work."""
QUOTE_CHARS = 120
"""Characters of a value quoted in a message, at most."""

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 6
_REPR.maxstring = _REPR.maxother = QUOTE_CHARS


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """A bounded, printable repr of `value` for a message: nested and long values are cut with '...'."""
    text = printable(_REPR.repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def printable(text: str) -> str:
    """`text` with control characters (escape sequences included) shown as \\xNN; newlines and tabs kept."""
    return "".join(
        ch if ch in "\n\t" or not (ord(ch) < 32 or 127 <= ord(ch) < 160) else f"\\x{ord(ch):02x}" for ch in text
    )


def yaml_nodes(text: str, limit: int = MAX_YAML_NODES) -> int:
    """The number of values in YAML `text` with every alias expanded, counted from parser events.

    Nothing is constructed, so an alias bomb costs only its own size; raises ValueError as
    soon as the count passes `limit`, or the nesting MAX_YAML_DEPTH.
    """
    anchors: dict[str, int] = {}
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, values so far) of each open sequence or mapping
    total = 0

    def add(size: int) -> None:
        nonlocal total
        if open_nodes:
            anchor, count = open_nodes[-1]
            open_nodes[-1] = (anchor, count + size)
            counted = count + size
        else:
            total += size
            counted = total
        if counted > limit:
            raise ValueError(f"more than {limit} values once its aliases are expanded")

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            add(anchors.get(str(event.anchor), 1))
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                anchors[event.anchor] = 1
            add(1)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            open_nodes.append((event.anchor, 1))
            if len(open_nodes) > MAX_YAML_DEPTH:
                raise ValueError(f"lists and mappings nested more than {MAX_YAML_DEPTH} levels deep")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, size = open_nodes.pop()
            if anchor:
                anchors[anchor] = size
            add(size)
    return total


def read_yaml_file(
    path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_FILE_BYTES, max_nodes: int = MAX_YAML_NODES
) -> object:
    """Read a YAML file through `yaml.safe_load` after checking its size and its expanded number of values.

    Raises ConfigError naming the file and the limit it broke.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"{path}: {size} bytes is too large for {what} (at most {max_bytes}).")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the file: {exc}") from None
    try:
        yaml_nodes(text, max_nodes)
    except ValueError as exc:
        raise ConfigError(f"{path}: refused as {what}: {exc}.") from None
    except yaml.YAMLError:
        pass  # not YAML at all: safe_load below says where
    if not text.strip():
        raise ConfigError(f"{path}: the file is empty; expected {what}.")
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise ConfigError(f"{path}: not a valid plain YAML file: {where}{printable(problem)[:300]}.") from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise ConfigError(f"{path}: not a valid plain YAML file: {quote(str(exc), 400)}") from None
