"""What /proc says about processes, for tests that check what a trial, a worker or a search left running.

Linux only, as the suite is. A zombie counts as ended everywhere here: it holds no memory and no
device, and only its parent can reap it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from autotune.trial.live import WORKDIR_PREFIX

PROC = Path("/proc")


def _pids() -> list[int]:
    """Every process /proc lists now."""
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state, parent, process group, ...

    The command name is in parentheses and may itself hold spaces and parentheses, hence the split at the last ')'.
    Raises OSError once the process is reaped.
    """
    return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def state(pid: int) -> str:
    """The one-letter state of `pid` ('R' running, 'S' sleeping, 'T' stopped, 'Z' zombie, ...).

    Raises OSError once the process is reaped.
    """
    return _stat(pid)[0]


def alive(pid: int) -> bool:
    """Whether `pid` still runs (or stands stopped): neither reaped nor a zombie."""
    try:
        return state(pid) != "Z"
    except OSError:
        return False


def gone(pid: int, within: float = 0.0) -> bool:
    """Whether `pid` has ended (a zombie counts), waiting up to `within` seconds for it to."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def listed(pid: int) -> bool:
    """Whether /proc still lists `pid`, a zombie included: it is not reaped yet."""
    return (PROC / str(pid)).exists()


def stopped(pid: int, within: float = 2.0) -> bool:
    """Whether `pid` stands stopped (state 'T'), waiting up to `within` seconds for a SIGSTOP to land."""
    deadline = time.monotonic() + within
    while state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    return state(pid) == "T"


def living_members(group: int) -> list[int]:
    """The processes of the process group `group` that still run (not zombies)."""
    living = []
    for pid in _pids():
        try:
            fields = _stat(pid)
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            living.append(pid)
    return living


def children(pid: int) -> list[int]:
    """The processes `pid` started (its direct children), zombies included."""
    found = []
    for child in _pids():
        try:
            fields = _stat(child)
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(child)
    return found


def command_line(pid: int) -> list[str]:
    """The arguments `pid` was started with, its program first; empty once it has ended (a zombie has none)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [os.fsdecode(argument) for argument in raw.rstrip(b"\0").split(b"\0")] if raw else []


def with_command_line(fragment: str) -> list[int]:
    """The processes one of whose arguments contains `fragment`."""
    return [pid for pid in _pids() if any(fragment in argument for argument in command_line(pid))]


def workers_of(search: int) -> list[int]:
    """The worker processes of the search `search`: their command line names a run folder of that search.

    A worker forked from a server is its server's child, not the search's; its command line is its own.
    """
    return with_command_line(f"{WORKDIR_PREFIX}{search}-")
