"""The event channel from a worker to its parent: JSON lines on an inherited file descriptor.

The worker writes one JSON object per line, flushed at once, so the parent sees each
phase, window and result as it happens and can stop the trial between any two of them.
Each line is a typed record of `autotune.trial.records` in its versioned wire form.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from autotune.runtime.processes import adopt_orphans, kill_descendants
from autotune.trial.records import GoCommand, WireRecord, WorkerOrder, event_line, parse_command, parse_event

__all__ = [
    "COMMAND_FD_VARIABLE",
    "EVENT_FD_VARIABLE",
    "HOLD_VARIABLE",
    "MAX_PASSES",
    "PARENT_PID_VARIABLE",
    "PAUSE_FD_VARIABLE",
    "Events",
    "die_with_parent",
    "end_detached",
    "open_request",
    "parse_event",
    "command_channel",
    "wait_for_go",
]

MAX_PASSES = 64
"""Passes over its slice one window makes at most (a subject far faster than the slowest), the same limit
for the window the parent asks for, the window the worker times and the calibration window."""
EVENT_FD_VARIABLE = "AUTOTUNE_EVENT_FD"
"""The environment variable that names the worker's event file descriptor."""
COMMAND_FD_VARIABLE = "AUTOTUNE_COMMAND_FD"
"""Names the descriptor a ready worker reads its parent's commands from: measure a window, or end."""
PAUSE_FD_VARIABLE = "AUTOTUNE_PAUSE_FD"
"""Names the descriptor on which the worker answers SIGTSTP once it has gone quiet (see `autotune.trial.gate`)."""
HOLD_VARIABLE = "AUTOTUNE_HOLD"
"""Set (to 1) for a worker started beside others: once imported, it says "held" and waits for a line on its commands."""
PARENT_PID_VARIABLE = "AUTOTUNE_PARENT_PID"
"""The worker exits when the process that started it is gone (it runs in a session of its own)."""


class Events:
    """JSON-lines events to the parent; one flush per line so the parent sees them as they happen."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def emit(self, record: WireRecord) -> None:
        """Write one record as an event line, with the wire version and a timestamp."""
        self.stream.write(event_line(record, time.time()) + "\n")
        self.stream.flush()


def die_with_parent() -> None:
    """Kill this worker's process group once the parent that started it is gone.

    A trial process runs in a session of its own (so that killing its group reaches Inductor's
    compile workers), which also means nothing ends it when the parent is killed.
    """
    parent = int(os.environ.get(PARENT_PID_VARIABLE) or 0)
    if not parent:
        return

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="autotune-parent-watch", daemon=True).start()


def end_detached() -> None:
    """Kill what this trial process started that left its process group: a daemon in a session of its own, which
    the parent's kill of the group does not reach. `open_request` made this process the subreaper of such
    processes, so they are still found below it once the process that detached them has ended."""
    kill_descendants(os.getpid(), outside_group=os.getpgrp())


def open_request(argv: list[str] | None) -> tuple[WorkerOrder, Events]:
    """A trial process's start: its order (the JSON file named first in `argv`), and the channel to its parent.

    From here on the process also ends when its parent is gone (`die_with_parent`), and adopts what
    its descendants leave behind (`end_detached` ends them).
    """
    args = sys.argv[1:] if argv is None else argv
    request = WorkerOrder.from_json(json.loads(Path(args[0]).read_text()))
    die_with_parent()
    adopt_orphans()
    fd = os.environ.get(EVENT_FD_VARIABLE)
    return request, Events(os.fdopen(int(fd), "w", buffering=1) if fd else sys.stdout)


def wait_for_go() -> bool:
    """Block until the parent's first command; True when it is `GoCommand`, False for any other or a closed channel.

    Read a byte at a time, straight from the descriptor, so that nothing after the line is taken
    from `command_channel`, which reads the same descriptor later.
    """
    fd = int(os.environ[COMMAND_FD_VARIABLE])
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            return False
        line += byte
    return isinstance(parse_command(line), GoCommand)


def command_channel() -> Iterator[WireRecord] | None:
    """The parent's commands to a ready worker, one JSON object per line, until the parent closes the channel.

    None for a worker started without a command channel (AUTOTUNE_COMMAND_FD unset): a one-shot run.
    """
    fd = os.environ.get(COMMAND_FD_VARIABLE)
    return _commands(int(fd)) if fd else None


def _commands(fd: int) -> Iterator[WireRecord]:
    with os.fdopen(fd, "r", buffering=1) as channel:
        for line in channel:
            command = parse_command(line)
            if command is not None:
                yield command
