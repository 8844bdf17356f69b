"""A search whose PostgreSQL server stops mid-trial: it ends within a minute with exit 2, and resumes once it is back.

The server is the test's own (`tests.postgres.Server`), stopped with PostgreSQL's immediate
shutdown, as a crash or an operator's `pg_ctl stop -m immediate` would, then started again on the
same data. The search runs in worker processes whose compiles use dynamo's eager backend.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.study.storage import failure_of, read_study_record
from tests.postgres import PostgresMissing, Server
from tests.processes import workers_of

pytestmark = pytest.mark.postgres  # a server of its own, which it stops and starts

ROOT = Path(__file__).resolve().parents[2]
FAST = str(ROOT / "tests" / "search_spaces" / "fast.yaml")


@pytest.fixture
def server() -> Iterator[Server]:
    try:
        started = Server()
    except PostgresMissing as exc:
        pytest.fail(f"this test needs a PostgreSQL server: {exc}")
    try:
        started.start()
        yield started
    finally:
        started.remove()


def test_a_server_stopped_mid_trial_ends_the_search_with_exit_2_and_the_same_command_resumes(
    server: Server, tmp_path: Path
) -> None:
    argv = [
        sys.executable, "-m", "autotune", "search", "--model", "tests.trial_targets.dynamo_only:tiny_infer",
        "--space", FAST, "--trials", "2", "--confirm", "0", "--no-doctor", "--sampler", "bruteforce",
        "--windows", "2", "--window-seconds", "0.1", "--device", "cpu", "--no-compile-cache",
        "--storage", server.url, "--study-name", "lost", "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    search = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert search.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 300
    # A study on a server draws its seed from the host and process, so the brute-force order differs from run
    # to run: whichever trial is plain compile reuses the baseline's run, and the other one compiles.
    compiling = None
    while compiling is None:
        line = search.stderr.readline()
        assert line and time.monotonic() < deadline, "".join(lines[-20:])
        lines.append(line)
        compiling = re.search(r"trial (\d+): compile", line)
    number = int(compiling.group(1))
    server.stop(signal.SIGQUIT)  # the immediate shutdown: every connection dropped, nothing cleaned up
    stopped = time.monotonic()
    _, rest = search.communicate(timeout=120)
    assert time.monotonic() - stopped < 60, "the search noticed within a minute"
    assert search.returncode == cli.EXIT_ERROR, rest
    assert f"autotune: error: the study storage postgresql://autotune@127.0.0.1:{server.port}/postgres failed: " in rest
    assert "run the same command again once it is back" in rest and "Traceback" not in rest, rest
    assert not workers_of(search.pid), "a worker outlived the search"
    # Once the server is back, the same command resumes: the trial that was running is failed, not left running.
    server.start()
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == cli.EXIT_OK, again.stderr[-3000:]
    study = optuna.load_study(study_name="lost", storage=server.url)
    states = [(t.state.name, failure_of(t, read_study_record(study))[0] or None) for t in study.trials]
    assert states[number] == ("FAIL", "abandoned"), states
    assert all(state != "RUNNING" for state, _ in states) and (tmp_path / "out" / "best.yaml").is_file(), states
