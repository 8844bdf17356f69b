"""Workers forked from a pre-imported server: each a new process as `python -m` would start it, one server for
the runs whose start-up environment is the same, `python -m` wherever forking is refused or turned off."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune import CompileConfig
from autotune.trial import forkserver
from autotune.trial.live import LiveWorker
from autotune.trial.request import TrialRequest
from autotune.trial.runner import run_trial
from tests.processes import alive, command_line
from tests.short_runs import SHORT, source_for

pytestmark = pytest.mark.parallel

RECORDS = "tests.trial_targets.workloads:records_its_process"
ASKS_ISA = "tests.trial_targets.asks_isa:model"
ASKS_ISA_TWIN = "tests.trial_targets.workloads:tiny_infer"
"""The same model as ASKS_ISA: its source is generated from this one, since importing ASKS_ISA here would replace
Inductor's function in this process too."""


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The folder each worker writes what its process looks like into; the servers the test started end after it."""
    folder = tmp_path / "records"
    folder.mkdir()
    monkeypatch.setenv("AUTOTUNE_TEST_RECORDS", str(folder))
    monkeypatch.delenv(forkserver.DISABLE_VARIABLE, raising=False)
    yield folder
    forkserver.close_servers()


def _run(spec: str = RECORDS, **fields: Any) -> dict[str, Any]:
    """Run one worker to the end; what its process saw (the one record it wrote since the last call)."""
    folder = Path(os.environ["AUTOTUNE_TEST_RECORDS"])
    before = set(folder.iterdir())
    run = run_trial(TrialRequest(spec=spec, source=None, timeout=120, **fields))
    assert run.state == "complete", (run.reason, run.message, run.stderr_tail)
    (new,) = set(folder.iterdir()) - before
    return json.loads(new.read_text())


def test_a_forked_worker_is_a_new_process_in_a_session_of_its_own_with_its_own_run(records: Path) -> None:
    first = _run(cache_dir=str(records.parent / "cache-a"))
    second = _run(cache_dir=str(records.parent / "cache-b"))
    assert first["ppid"] == second["ppid"] != os.getpid(), "one server, not this process, started both"
    assert first["pid"] != second["pid"]
    for seen, cache in ((first, "cache-a"), (second, "cache-b")):
        assert seen["pgid"] == seen["sid"] == seen["pid"], "a session and process group of its own"
        assert seen["cache"] == str(records.parent / cache / "inductor"), "the run's own cache folder"
        assert seen["argv"][0].endswith(os.path.join("trial", "worker.py")) and seen["argv"][1].endswith("request.json")
        assert seen["cwd"] == os.getcwd()
        assert seen["event_fd"] and int(seen["event_fd"]) > 2
    assert first["draw"] != second["draw"], "each child seeds its random numbers anew, as a new interpreter does"
    assert first["numpy_draw"] != second["numpy_draw"], "numpy's too, which the server imported with torch"


def test_one_server_serves_one_start_up_environment(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOTUNE_TEST_STARTUP", "a")
    a = _run()
    monkeypatch.setenv("AUTOTUNE_TEST_STARTUP", "b")
    b = _run()
    monkeypatch.setenv("AUTOTUNE_TEST_STARTUP", "a")
    again = _run()
    assert a["ppid"] != b["ppid"], "a variable read at start differs: another server"
    assert again["ppid"] == a["ppid"], "the first server is still there for its own environment"


def test_a_worker_given_cores_runs_on_those_only(records: Path) -> None:
    seen = _run(cpus=(0,))
    assert seen["ppid"] != os.getpid()
    assert seen["affinity"] == [0]


def test_workers_start_anew_when_forking_is_turned_off(records: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(forkserver.DISABLE_VARIABLE, "0")
    seen = _run()
    assert seen["ppid"] == os.getpid()
    assert seen["argv"][0].endswith(os.path.join("trial", "worker.py"))


def _read(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _asks_isa(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[float]]:
    """Run a compiled configuration of ASKS_ISA (dynamo only): what its worker knew, who asked, its compile span."""
    source = source_for(ASKS_ISA_TWIN, CompileConfig(backend="eager"))
    run = run_trial(TrialRequest(spec=ASKS_ISA, source=source, protocol=SHORT, timeout=120))
    assert run.state == "complete", (run.reason, run.message, run.stderr_tail)
    assert run.compiled is not None
    assert "tests.trial_targets.asks_isa" not in sys.modules, "this process never imports what patches Inductor"
    (seen,) = [_read(path) for path in folder.glob("process-*.json")]
    asked = [_read(path) for path in folder.glob("asked-*.json")]
    return seen, asked, run.compiled.compile_span


def test_a_forked_worker_knows_the_host_s_vector_instructions_from_its_server(records: Path) -> None:
    seen, asked, _ = _asks_isa(records)
    assert seen["known"], "the child kept its server's answer: its first compile does not ask again"
    assert [a["pid"] for a in asked] == [seen["ppid"]], "only the server asked"


def test_a_worker_started_anew_asks_for_the_host_s_vector_instructions_before_its_compile_clock(
    records: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(forkserver.DISABLE_VARIABLE, "0")
    seen, asked, (compile_start, _) = _asks_isa(records)
    assert not seen["known"]
    (ask,) = asked
    assert ask["pid"] == seen["pid"]
    assert ask["at"] < compile_start, "the host's check is not charged to the configuration's compile"


def test_a_workload_module_that_starts_a_thread_is_not_forked(records: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=forkserver.__name__):
        seen = _run("tests.trial_targets.threaded:records_its_process")
    assert seen["ppid"] == os.getpid(), "started by python -m instead"
    assert "started threads (started-on-import)" in caplog.text


def test_a_workload_module_that_asks_whether_cuda_is_available_is_forked_with_cuda_usable(records: Path) -> None:
    seen = _run("tests.trial_targets.asks_cuda:records_its_process")
    assert seen["ppid"] != os.getpid(), "forked from the server"
    assert not seen["bad_fork"], "the server asked through NVML, so its children can still use CUDA"


def test_a_workload_module_that_initialises_cuda_s_driver_is_not_forked(
    records: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=forkserver.__name__):
        seen = _run("tests.trial_targets.inits_cuda:records_its_process")
    assert seen["ppid"] == os.getpid(), "started by python -m instead"
    assert "CUDA's driver was initialised while importing" in caplog.text


def test_a_server_that_cannot_start_says_why_and_workers_start_anew(
    records: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with monkeypatch.context() as patched, pytest.raises(forkserver.ForkServerUnavailable, match="did not start"):
        patched.setattr(sys, "executable", "/bin/false")  # exits at once: the server never says it is ready
        forkserver.ForkServer(dict(os.environ), os.getcwd())
    with caplog.at_level(logging.WARNING, logger=forkserver.__name__):
        monkeypatch.setattr(forkserver, "ForkServer", _refusing)
        seen = _run()
    assert seen["ppid"] == os.getpid(), "started by python -m instead"
    assert "workers start by python -m: no server here" in caplog.text


def _refusing(*args: Any, **kwargs: Any) -> forkserver.ForkServer:
    raise forkserver.ForkServerUnavailable("no server here")


def test_a_forked_worker_shows_its_own_command_line(records: Path) -> None:
    worker = LiveWorker(TrialRequest(spec=RECORDS, source=None, timeout=120)).start(hold=True)
    try:
        assert worker.until_held()
        assert isinstance(worker.process, forkserver.ForkedProcess)
        shown = command_line(worker.pid)
        assert shown[1:] == ["-m", "autotune.trial.worker", str(worker.workdir / "request.json")]
    finally:
        worker.kill()
    assert worker.process.wait(timeout=10) < 0, "killed by a signal, as the server reports it"


_PARENT = textwrap.dedent(
    """
    import sys, threading
    from autotune.trial.live import LiveWorker
    from autotune.trial.request import TrialRequest
    worker = LiveWorker(TrialRequest(spec=sys.argv[1], source=None, timeout=600)).start(hold=True)
    assert worker.until_held()
    print(worker.process.server.process.pid, worker.pid, flush=True)
    threading.Event().wait()
    """
)


def test_the_server_and_its_workers_end_with_the_process_that_started_them(records: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, RECORDS], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        server, worker = (int(pid) for pid in parent.stdout.readline().split())
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while (alive(server) or alive(worker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server), "the server outlived its parent"
    assert not alive(worker), "a forked worker outlived the search"
