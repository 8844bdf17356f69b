"""The processes of a process group or below a process, read from /proc (Linux; nothing where /proc is missing),
signalling them, and adopting the orphans of a process's descendants."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "adopt_orphans",
    "command_line",
    "descendants",
    "group_processes",
    "kill_descendants",
    "running",
    "signal_group",
]


def group_processes(group: int) -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process of `group`, zombies included.

    The fields start at the state: `fields[0]` is the state, `fields[1]` the parent, `fields[2]` the group,
    `fields[11:13]` the user and system ticks.
    """
    for pid, fields in _processes():
        if int(fields[2]) == group:
            yield pid, fields


def descendants(pid: int) -> list[tuple[int, list[str]]]:
    """(pid, stat fields as `group_processes` gives them) of every process below `pid`: its children, theirs and so
    on, zombies included, whatever their session or group."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for child, fields in _processes():
        children.setdefault(int(fields[1]), []).append((child, fields))
    found: list[tuple[int, list[str]]] = []
    below = [pid]
    while below:
        for process in children.get(below.pop(), []):
            found.append(process)
            below.append(process[0])
    return found


def _processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat fields) of every process /proc lists; nothing where there is no /proc."""
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
        if len(fields) > 12:
            yield int(entry.name), fields


PR_SET_CHILD_SUBREAPER = 36
"""Linux's prctl option that makes a process the subreaper of its descendants (<linux/prctl.h>)."""


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants; whether it now is one (Linux 3.4 and later).

    A process that detaches from the one that started it (a new session, a double fork: what a
    logging or data-loading helper's daemon does) is re-parented to init once its own parent ends,
    out of reach of its process group. A subreaper receives those orphans instead, so `descendants`
    still lists them. Elsewhere nothing changes: only processes whose parents are still alive, or
    that stayed in the process group, can then be found.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def kill_descendants(pid: int, *, outside_group: int | None = None) -> None:
    """SIGKILL every running process below `pid` (those of process group `outside_group` excepted, if given).

    Listed again until none is left: a process killed while it forked has passed its children to
    `pid` (its subreaper) or to init, where the next listing or nothing finds them.
    """
    for _ in range(20):
        left = [
            child
            for child, fields in descendants(pid)
            if running(fields) and (outside_group is None or int(fields[2]) != outside_group)
        ]
        if not left:
            return
        for child in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        time.sleep(0.05)


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
