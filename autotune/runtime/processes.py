"""The processes of a process group, read from /proc (Linux; nothing where /proc is missing), and signalling it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["command_line", "group_processes", "running", "signal_group"]


def group_processes(group: int) -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process of `group`, zombies included.

    The fields start at the state: `fields[0]` is the state, `fields[2]` the group, `fields[11:13]` the
    user and system ticks.
    """
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 12 and int(fields[2]) == group:
            yield int(entry.name), fields


def running(fields: list[str]) -> bool:
    """Whether a process of `group_processes` still runs: neither a zombie nor dead."""
    return fields[0] not in ("Z", "X")


def signal_group(group: int, signum: int) -> None:
    """Send `signum` to every process of `group`; nothing when the group is gone or not ours."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def command_line(pid: int, limit: int = 120) -> str:
    """The command line of process `pid`, shortened to `limit` characters; '' once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    line = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return line if len(line) <= limit else line[: limit - 1] + "…"
