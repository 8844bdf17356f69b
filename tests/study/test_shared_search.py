"""Two `autotune search` processes on one study, as two hosts would run it: in a real PostgreSQL server, and in a
journal file (what hosts share without a server: a file of the cluster's shared file system).

Every trial is run by exactly one search and none is lost; `--trials` is the study's total;
one search confirms and exports, and `autotune export` gives any other host the same files;
a search killed in the middle of a trial has it failed within the grace period by the other
search, which runs it again.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy
import yaml

from autotune import cli
from autotune.study.storage import StudyRecord, failure_of, open_storage, read_study_record, record_of
from tests.short_runs import SHORT_FLAGS

TARGET = "tests.trial_targets.workloads:tiny_infer"
INTERVAL, GRACE = 1, 5
# Default mode only: the cheapest compiles, four configurations for the four trials. The workload is static and has
# no repeated blocks, so padding and scopes would be dropped: an Inductor option makes the four, and two searches that
# start together both find configurations left to run, instead of one of them taking the only two there would be.
SPACE = """\
description: Cheap configurations for the shared-study tests.
dynamic: [null, true]
options:
  epilogue_fusion: [true, false]
"""

pytestmark = pytest.mark.slow


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres), "journal"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The storage the searches share: a PostgreSQL server's database, or a journal file no server keeps."""
    if request.param == "journal":
        return f"journal://{tmp_path / 'study.journal'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def _argv(url: str, study: str, out: Path, trials: int, *extra: str) -> list[str]:
    space = out.parent / "space.yaml"
    space.write_text(SPACE)
    return [
        sys.executable, "-m", "autotune", "search", "--model", TARGET, "--space", str(space),
        "--trials", str(trials), "--storage", url, "--study-name", study, "--out", str(out),
        "--heartbeat-interval", str(INTERVAL), "--grace-period", str(GRACE),
        "--no-doctor", "--no-recipes", "--no-compile-cache", "--device", "cpu", "--sampler", "random",
        "--windows", "2", "--fresh-batches", "2", "--pruner", "none", "--slow-ratio", "0", *extra,
    ]  # fmt: skip


@functools.cache
def _storage(url: str) -> optuna.storages.BaseStorage:
    """One storage, so one connection pool, for all of this module's reads: the tests poll every 0.3 s,
    and a storage per read leaves its connections open until garbage collection, past the server's limit."""
    return open_storage(url)


def _study_record(url: str, study: str) -> StudyRecord:
    return read_study_record(optuna.load_study(study_name=study, storage=_storage(url)))


def _trials(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=_storage(url)).trials


def _started(stderr: str) -> set[int]:
    """The trials a search ran: started in a worker, or plain torch.compile taken from its own baseline's run."""
    reused = r"trial (\d+): [^\n]*\(the run of the plain torch\.compile baseline, reused\)"
    return {int(n) for n in re.findall(r"trial (\d+): starting", stderr) + re.findall(reused, stderr)}


def _succeeded(search: subprocess.Popen, stderr: str) -> None:
    assert search.returncode == cli.EXIT_OK, stderr[-3000:]
    assert "Traceback" not in stderr and not re.search(r"(?<![bc])lock", stderr, re.IGNORECASE), stderr[-3000:]


def test_two_searches_share_one_study_and_one_of_them_confirms(shared_url: str, tmp_path: Path) -> None:
    study, trials = "two-hosts", 4
    outs = [tmp_path / "host-a", tmp_path / "host-b"]
    argv = [
        _argv(
            shared_url,
            study,
            out,
            trials,
            "--confirm",
            "1",
            "--replicates",
            "1",
            "--max-replicates",
            "1",
            *SHORT_FLAGS,
        )
        for out in outs
    ]
    # Two hosts' searches on one machine: each its share of the cores. With two OpenMP threads each, waiting
    # threads spin against the other search's and every step takes several times as long; nothing here is timed.
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, len(os.sched_getaffinity(0)) // 2))}
    searches = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for a in argv]
    printed = [search.communicate(timeout=1200) for search in searches]
    for search, (_, stderr) in zip(searches, printed, strict=True):
        _succeeded(search, stderr)

    done = _trials(shared_url, study)
    assert [t.number for t in done] == list(range(len(done)))
    assert all(t.state.is_finished() for t in done), "no trial is left running or waiting"
    assert trials <= len(done) <= trials + 1, "the study's total, overshot at most by the other search's running trial"
    runs = [_started(stderr) for _, stderr in printed]
    assert not runs[0] & runs[1], "no trial is run by both searches"
    measured = {t.number for t in done if record_of(t).duplicate_of is None}
    assert measured <= runs[0] | runs[1]
    pids = {search.pid for search in searches}
    assert {record_of(t).pid for t in done} <= pids

    exported = [(out / "best.yaml").exists() for out in outs]
    assert sorted(exported) == [False, True], "exactly one search confirms and exports"
    confirmer, other = (0, 1) if exported[0] else (1, 0)
    assert "autotune export" in printed[other][1]
    assert cli.main(["export", "--storage", shared_url, "--study-name", study, "--out", str(outs[other])]) == 0
    ours, theirs = (yaml.safe_load((out / "best.yaml").read_text()) for out in (outs[other], outs[confirmer]))
    assert ours["config"] == theirs["config"] and ours["metrics"] == theirs["metrics"]


def test_a_search_killed_mid_trial_has_it_failed_within_the_grace_period_and_run_again(
    shared_url: str, tmp_path: Path
) -> None:
    study, trials = "one-host-dies", 4
    # The doomed search starts alone and is frozen in its first trial (its host hangs, and its beats stop); only then
    # does the survivor start, so that it cannot take every trial of the budget before the doomed one runs any.
    said = (tmp_path / "doomed.txt").open("w")
    doomed = subprocess.Popen(
        _argv(shared_url, study, tmp_path / "doomed", trials, "--confirm", "0"), stdout=said, stderr=said
    )
    while True:
        running = _wait_for(
            lambda now: [
                t for t in now if t.state == optuna.trial.TrialState.RUNNING and record_of(t).pid == doomed.pid
            ],
            shared_url,
            study,
            lambda: (
                doomed.poll() is None
                or pytest.fail("the search to kill ended: " + (tmp_path / "doomed.txt").read_text()[-3000:])
            ),
        )
        doomed.send_signal(signal.SIGSTOP)
        # A trial that copies a twin's outcome, or plain compile's, ends milliseconds after it starts: it may have
        # ended between the read and the stop. A search frozen inside a transaction holds the trial's row locked,
        # and the survivor would wait on it, as on a host that hangs mid-write, until its connection drops. Only a
        # search frozen between writes, with its trial still running, is the one to kill.
        time.sleep(0.5)
        if not _open_transactions(shared_url) and (
            _trials(shared_url, study)[running[0].number].state == optuna.trial.TrialState.RUNNING
        ):
            break
        doomed.send_signal(signal.SIGCONT)
    survivor = subprocess.Popen(
        _argv(shared_url, study, tmp_path / "survivor", trials, "--confirm", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(
        lambda now: [t for t in now if record_of(t).pid == survivor.pid],
        shared_url,
        study,
        lambda: survivor.poll() is None or pytest.fail("the survivor ended before it searched"),
    )
    doomed.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    doomed.wait()
    number = running[0].number

    while (trial := _trials(shared_url, study)[number]).state == optuna.trial.TrialState.RUNNING:
        assert survivor.poll() is None, "the other search ended and left the killed trial running"
        time.sleep(0.3)
    failed_after = time.monotonic() - killed
    reason, message = failure_of(trial, _study_record(shared_url, study))
    assert trial.state == optuna.trial.TrialState.FAIL and reason == "abandoned" and f"pid {doomed.pid}" in message
    # The grace period runs from the last beat, at most one interval before the kill; the
    # survivor, in its trials by now, checks at each of its own beats and between trials.
    assert failed_after < GRACE + INTERVAL + 10, f"failed {failed_after:.0f} s after the kill"

    _, stderr = survivor.communicate(timeout=1200)
    _succeeded(survivor, stderr)
    done = _trials(shared_url, study)
    assert all(t.state.is_finished() for t in done), "no trial is left running or waiting"
    (retry,) = [t for t in done if record_of(t).retry_of == number]
    assert retry.params == trial.params and retry.state == optuna.trial.TrialState.COMPLETE
    counted = [t for t in done if t.number != number]
    assert trials <= len(counted) <= trials + 1, "the abandoned trial's retry took its place in the budget"
    assert (tmp_path / "survivor" / "best.yaml").exists(), "the survivor finished the last trial, so it exports"


def _open_transactions(url: str) -> int:
    """How many other sessions of the server are inside a transaction (the tests' own reads are not); for a journal,
    1 while a search holds its lock (it is writing)."""
    if url.startswith("journal:"):
        return int(os.path.lexists(url.removeprefix("journal://") + ".lock"))  # the lock is a symbolic link
    query = (
        "select count(*) from pg_stat_activity where backend_type = 'client backend'"
        " and pid <> pg_backend_pid() and xact_start is not null"
    )
    storage = _storage(url)
    assert isinstance(storage, optuna.storages.RDBStorage)
    with storage.engine.connect() as connection:
        return int(connection.execute(sqlalchemy.text(query)).scalar_one())


def _wait_for(found: Any, url: str, study: str, alive: Any, seconds: float = 600) -> list[optuna.trial.FrozenTrial]:
    """Poll the study's trials until `found(trials)` is non-empty (what it returns), while `alive()` holds."""
    deadline = time.monotonic() + seconds
    while True:
        assert time.monotonic() < deadline, "timed out waiting on the study"
        alive()
        time.sleep(0.3)
        try:
            hits = found(_trials(url, study))
        except KeyError:  # the study is not created yet
            continue
        if hits:
            return hits
