"""The guard of a search's workers: the groups still registered when the search is gone are killed, and no others."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import types

import pytest

from autotune.trial import guard as guard_module
from autotune.trial.guard import Guard, main, process_guard

pytestmark = pytest.mark.parallel


def killed_by_main(lines: bytes, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (group, signal) pairs `main` kills once it has read `lines` and its input ended."""
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(lines)))
    monkeypatch.setattr(guard_module.os, "killpg", lambda pgid, sig: killed.append((pgid, sig)))
    assert main(["1"]) == 0
    return killed


def test_the_groups_registered_and_not_forgotten_are_killed_when_the_input_ends(monkeypatch) -> None:
    killed = killed_by_main(b"+101\n+202\n+303\n-202\n-999\n", monkeypatch)
    assert sorted(killed) == [(101, signal.SIGKILL), (303, signal.SIGKILL)]


def test_lines_that_are_not_a_sign_and_a_group_are_ignored(monkeypatch) -> None:
    killed = killed_by_main(b"+\n-\n+abc\n*12\n12\n+-5\n+ 7\n\n+42\n", monkeypatch)
    assert killed == [(42, signal.SIGKILL)]


def test_a_group_that_ended_already_does_not_stop_the_others_being_killed(monkeypatch) -> None:
    killed: list[int] = []

    def killpg(pgid: int, sig: int) -> None:
        if pgid == 1:
            raise ProcessLookupError(pgid)
        if pgid == 2:
            raise PermissionError(pgid)
        killed.append(pgid)

    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(b"+1\n+2\n+3\n")))
    monkeypatch.setattr(guard_module.os, "killpg", killpg)
    assert main([]) == 0
    assert killed == [3]


def test_closing_the_guard_kills_the_registered_group_and_spares_the_forgotten_one() -> None:
    # Each sleeper leads its own session, so its process group is its pid.
    kept, spared = (subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2))
    try:
        guard = Guard()
        guard.register(kept.pid)
        guard.register(spared.pid)
        guard.forget(spared.pid)
        guard.close()
        assert kept.wait(timeout=10) == -signal.SIGKILL
        assert spared.poll() is None, "a forgotten group is left alone"
        guard.register(spared.pid)  # after close: told to nobody, and no error
        guard.close()
        assert spared.poll() is None
    finally:
        for process in (kept, spared):
            process.kill()
            process.wait()


def test_a_process_has_one_guard_and_gets_a_new_one_when_it_died() -> None:
    first = process_guard()
    assert process_guard() is first
    assert first._process is not None
    first._process.kill()
    first._process.wait()
    second = process_guard()
    assert second is not first
    assert second._process is not None and second._process.poll() is None
