"""Processes below a process: found through /proc whatever their session, detached ones adopted, and killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from autotune.runtime.processes import descendants, running
from tests.processes import alive

# A process that adopts orphans, starts one `sleep` in its own process group and one as a daemon does (a child that
# starts a session of its own, forks the `sleep` and ends at once), then says what it finds below itself, before and
# after `kill_descendants`.
_STARTS_TWO = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from autotune.runtime.processes import adopt_orphans, descendants, kill_descendants, running

    def below():
        return sorted(pid for pid, fields in descendants(os.getpid()) if running(fields))

    adopted = adopt_orphans()
    in_group = subprocess.Popen(["sleep", "3141"]).pid
    child = os.fork()
    if child == 0:
        os.setsid()
        subprocess.Popen(["sleep", "3142"])
        os._exit(0)
    os.waitpid(child, 0)
    found = below()
    kill_descendants(os.getpid(), outside_group=os.getpgrp() if sys.argv[1:] == ["outside"] else None)
    left = below()
    for pid in left:
        os.kill(pid, 9)  # what the test leaves to a group kill, ended here
    print(json.dumps({"adopted": adopted, "in_group": in_group, "found": found, "left": left}))
    """
)


def _starts_two(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _STARTS_TWO, *argv], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout)


def test_a_detached_grandchild_is_adopted_found_and_killed() -> None:
    seen = _starts_two()
    found = seen["found"]
    assert seen["adopted"] is True, "Linux offers a subreaper"
    assert isinstance(found, list) and len(found) == 2, "the daemon's `sleep`, its parent gone, was re-parented here"
    assert seen["left"] == [] and not any(alive(pid) for pid in found)


def test_outside_its_group_only_what_left_the_group_is_killed() -> None:
    seen = _starts_two("outside")
    assert seen["left"] == [seen["in_group"]], "the daemon's `sleep` is killed; the group's kill ends the other"


def test_descendants_lists_children_and_theirs() -> None:
    nested = subprocess.Popen([sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '3143'])"])
    try:
        deadline = time.monotonic() + 30
        while not descendants(nested.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        below = [pid for pid, _ in descendants(nested.pid)]
        assert len(below) == 1 and below[0] in {pid for pid, _ in descendants(os.getpid())}
        assert running(dict(descendants(os.getpid()))[nested.pid])
    finally:
        for pid, _ in descendants(nested.pid):
            os.kill(pid, signal.SIGKILL)
        nested.kill()
        nested.wait()
