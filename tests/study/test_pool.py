"""`--workers`: a real search runs two trials at once on one CPU and the study records both; Ctrl-C leaves nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.errors import SearchError
from autotune.study.search import SearchOptions, explore, worker_devices
from tests.processes import listed, workers_of

SPEC = "tests.trial_targets.workloads:tiny_infer"


def _space(tmp_path: Path) -> Path:
    space = tmp_path / "two.yaml"
    space.write_text("description: two configurations\nmode: [default]\ndynamic: [false, true]\n")
    return space


@pytest.mark.slow
def test_two_workers_run_trials_side_by_side_and_measure_one_at_a_time(tmp_path: Path) -> None:
    options = SearchOptions(
        model=SPEC,
        space=str(_space(tmp_path)),
        trials=2,
        workers=2,
        sampler="bruteforce",  # two different configurations, one per worker
        device="cpu",
        out=str(tmp_path / "out"),
        doctor=False,
        pruner="none",
        slow_ratio=0.0,
    )
    study = explore(options)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 2
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), [t.user_attrs for t in trials]
    first, second = sorted(trials, key=lambda t: t.datetime_start)
    assert second.datetime_start < first.datetime_complete, "the two trials ran at the same time"
    windows = sorted(t.user_attrs["measured_between"] for t in trials)
    assert windows[0][1] <= windows[1][0], f"two measurements overlapped: {windows}"
    assert any(t.user_attrs.get("compile_concurrent_seconds", 0) > 0 for t in trials)
    assert {t.user_attrs["config"]["dynamic"] for t in trials} == {False, True}


@pytest.mark.parallel  # a unit test
def test_workers_go_round_robin_over_devices_and_bad_counts_are_named() -> None:
    assert worker_devices(["cuda:0", "cuda:1"], 3) == ["cuda:0", "cuda:1", "cuda:0"]
    assert worker_devices(["cpu"], 2) == ["cpu", "cpu"]
    with pytest.raises(SearchError, match="--workers 0"):
        SearchOptions(model=SPEC, device="cpu", workers=0)
    with pytest.raises(SearchError, match="distinct CUDA devices"):
        SearchOptions(model=SPEC, device="cpu,cpu")
    assert SearchOptions(model=SPEC, device="cpu").workers == 1


@pytest.mark.slow
def test_ctrl_c_stops_every_worker_and_records_their_trials_as_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [
        sys.executable, "-m", "autotune", "search", "--model", SPEC, "--space", str(_space(tmp_path)),
        "--trials", "2", "--workers", "2", "--sampler", "bruteforce", "--device", "cpu", "--out", str(out),
        "--no-doctor",
    ]  # fmt: skip
    # A process started from a background job inherits SIGINT ignored; a search run from a terminal gets Ctrl-C.
    restore = "import signal, sys, runpy; signal.signal(signal.SIGINT, signal.default_int_handler); "
    restore += "sys.argv = sys.argv[1:]; runpy.run_module('autotune', run_name='__main__')"
    search = subprocess.Popen(
        [sys.executable, "-c", restore, *argv[2:]], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    lines: list[str] = []
    assert search.stderr is not None
    deadline = time.monotonic() + 300
    while sum("starting" in line for line in lines) < 2:
        line = search.stderr.readline()
        assert line and time.monotonic() < deadline, "".join(lines)
        lines.append(line)
    time.sleep(1.0)
    workers = workers_of(search.pid)
    assert workers, "both trials run in worker processes"
    search.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    rest = search.communicate(timeout=60)[1]
    assert time.monotonic() - interrupted < 15, "Ctrl-C does not wait for the trials"
    assert search.returncode == cli.EXIT_INTERRUPTED == 130, rest
    assert rest.rstrip().endswith("autotune: interrupted"), rest
    time.sleep(1.0)
    assert not [pid for pid in workers if listed(pid)], "a worker outlived Ctrl-C"
    study = optuna.load_study(
        study_name="tests.trial_targets.workloads-tiny_infer", storage=f"sqlite:///{out}/study.db"
    )
    reasons = [t.user_attrs.get("reason") for t in study.trials]
    assert reasons.count("interrupted") == 2, reasons
