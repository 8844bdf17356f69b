"""`--workers`: a real search runs two trials at once on one CPU and the study records both; Ctrl-C leaves nothing."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.errors import SearchError
from autotune.measure import Harness
from autotune.runtime.device import CUDADevice
from autotune.study.search import SearchOptions, explore, worker_devices
from autotune.study.search._pool import TrialPool
from autotune.study.storage import record_of
from autotune.trial.devices import default_workers
from autotune.trial.request import RunProtocol
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
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), [record_of(t).flat() for t in trials]
    first, second = sorted(trials, key=lambda t: t.datetime_start)
    assert second.datetime_start < first.datetime_complete, "the two trials ran at the same time"
    windows = sorted(record_of(t).measured_between for t in trials)
    assert windows[0][1] <= windows[1][0], f"two measurements overlapped: {windows}"
    assert any((record_of(t).own.compile_concurrent_seconds or 0) > 0 for t in trials)
    assert {record_of(t).config["dynamic"] for t in trials} == {False, True}


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
    reasons = [record_of(t).reason for t in study.trials]
    assert reasons.count("interrupted") == 2, reasons


class _SlowToStop:
    """A loop whose trials run until the pool stops, then take a moment to be told as interrupted."""

    def __init__(self) -> None:
        self.harness = Harness(spec=SPEC, summary=None)
        self.stopping = threading.Event()
        self.lock = threading.RLock()
        self.workers_per_device = 1
        self.numbers = itertools.count()
        self.told: list[int] = []

    def ask(self) -> int:
        return next(self.numbers)

    def one_trial(self, trial: int, **_: object) -> None:
        self.stopping.wait()
        time.sleep(1.0 if trial == 0 else 0.1)  # the worker the search waited on first is the slower to stop
        self.told.append(trial)
        raise KeyboardInterrupt


@pytest.mark.parallel  # a unit test: no worker process
def test_ctrl_c_returns_only_after_every_worker_told_its_trial() -> None:
    loop = _SlowToStop()
    pool = TrialPool(loop, ["cpu", "cpu"], more=lambda: True, finished_one=lambda: None)  # type: ignore[arg-type]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            pool.run()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert sorted(loop.told) == [0, 1], "the search ended before a worker told its trial"


# -- how many workers a search runs when --workers is not given ------------------------------------


@pytest.mark.parallel  # a unit test
def test_a_gpu_host_compiles_one_trial_per_four_cores_of_each_gpu_and_a_cpu_one_at_a_time() -> None:
    def mode(device: str, visible: str | None) -> str:
        return "Default"

    workers, why = default_workers(["cuda:0"], 16, None, mode)
    assert workers == 4, "16 cores beside one GPU: four compiles at once"
    assert why.startswith("4 workers, chosen for 16 cores and 1 GPU(s): 4 per GPU compile side by side"), why
    assert default_workers(["cuda:0"], 64, None, mode)[0] == 4, "at most four per GPU: each holds a quarter"
    assert default_workers(["cuda:0"], 8, None, mode)[0] == 2
    assert default_workers(["cuda:0", "cuda:1"], 16, None, mode)[0] == 4, "two per GPU, each with 8 cores"
    assert default_workers(["cuda:0"], 4, None, mode) == (1, "")
    assert default_workers(["cpu"], 16, None, mode) == (1, ""), "the CPU compiles and measures on the same cores"
    exclusive = default_workers(["cuda:0"], 16, None, lambda device, visible: "Exclusive_Process")
    assert exclusive == (1, ""), "a GPU one process at a time may use"


@pytest.mark.parallel  # a unit test
def test_without_workers_a_search_on_a_16_core_gpu_host_runs_four_unless_compile_time_decides(monkeypatch) -> None:
    monkeypatch.setattr(CUDADevice, "check_usable", lambda self: None)  # this host has no GPU: its rules apply alike
    monkeypatch.setattr(CUDADevice, "compute_mode", lambda self, visible: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    chosen = SearchOptions(model=SPEC, device="cuda:0")
    assert chosen.workers == 4 and "chosen for 16 cores" in chosen.workers_chosen
    assert SearchOptions(model=SPEC, device="cuda:0", workers=1).workers == 1, "--workers wins"
    timed = SearchOptions(model=SPEC, device="cuda:0", objective="time-to:100")
    assert timed.workers == 1 and timed.workers_chosen == "", "compile time decides: one compile at a time"
    assert SearchOptions(model=SPEC, device="cpu").workers == 1


@pytest.mark.slow  # four workers' processes on two cores: half a minute, the full tier's
@pytest.mark.parallel  # asserts an order of events, not a time
def test_the_workers_chosen_for_a_16_core_gpu_host_run_four_trials_at_once_and_measure_one_at_a_time(
    tmp_path: Path,
) -> None:
    # Stand-in workers on this CPU, in the number a 16-core host with one GPU gets, compiling on dynamo's eager backend.
    workers, _ = default_workers(["cuda:0"], 16, None, lambda device, visible: "Default")
    space = tmp_path / "four.yaml"
    space.write_text(
        "description: four configurations\nmode: [default]\ndynamic: [false, true]\nfullgraph: [false, true]\n"
    )
    options = SearchOptions(
        model="tests.trial_targets.dynamo_only:tiny_infer",
        space=str(space),
        trials=4,
        workers=workers,
        sampler="bruteforce",  # the space's four configurations, one per worker
        device="cpu",
        out=str(tmp_path / "out"),
        doctor=False,
        recipes=False,
        pruner="none",
        slow_ratio=0.0,
        protocol=RunProtocol(windows=2, window_seconds=0.1, fresh_batches=4),
    )
    study = explore(options)
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4, [record_of(t).flat() for t in trials]
    ran = [t for t in trials if not record_of(t).reused_run]
    assert len(ran) == 4, "none of the four is plain compile, whose trial would reuse the baseline's run"
    first_done = min(t.datetime_complete for t in ran)
    assert all(t.datetime_start < first_done for t in ran), "every worker started before any finished"
    windows = sorted(record_of(t).measured_between for t in ran)
    for earlier, later in itertools.pairwise(windows):
        assert earlier[1] <= later[0], f"two measurements overlapped: {windows}"
