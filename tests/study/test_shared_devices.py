"""Workers that share a device or a host: paused quietly, a trial out of memory beside others run again alone,
and workers on different devices given cores of their own.

What a GPU adds (a stopped process's queued kernels and cached memory) is what the quiet pause is
for; its mechanics, the worker's SIGTSTP handler and the gate's wait for its answer, run here on
the CPU with the GPU's rule turned on (`MeasurementGate(quiet=...)`).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import subprocess
import threading
import time
from pathlib import Path

import optuna
import pytest

from autotune.study.report import trial_rows, write_trials_csv
from autotune.study.search import SearchOptions, explore
from autotune.study.search._loop import crowded_out
from autotune.study.search._pool import TrialPool
from autotune.study.storage import record_of
from autotune.trial import gate as gate_module
from autotune.trial.gate import GateClosed, MeasurementGate
from autotune.trial.live import LiveWorker
from autotune.trial.request import RunProtocol, TrialRequest, TrialRun
from tests.processes import stopped

TINY = "tests.trial_targets.workloads:tiny_infer"


def _eager(**changes: object) -> TrialRequest:
    protocol = RunProtocol(window_seconds=0.1, fresh_batches=4, settle_windows=1).to_dict()
    return dataclasses.replace(TrialRequest(spec=TINY, source=None, protocol=protocol, timeout=120), **changes)


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "120"], start_new_session=True)


@pytest.mark.parallel  # no clock decides it: the gate waits for an answer, or 0.5 s, whatever the load
def test_a_pausable_worker_goes_quiet_and_answers_before_it_is_stopped() -> None:
    sleeper = _sleeper()
    gate = MeasurementGate(quiet=lambda device: True)  # the GPU's rule, on the CPU
    worker = LiveWorker(_eager(), gate=gate).start()
    try:
        assert worker.until_ready(), worker.end().stderr_tail
        assert worker.member is not None and worker.member.pausable, "the worker said it has its pause handler"
        holder = gate.join(sleeper.pid, "cpu")
        gate.acquire(holder)  # another worker measures: this one goes quiet, then stands still
        assert stopped(worker.pid)
        assert (worker.member.quiet_pauses, worker.member.late_pauses) == (1, 0)
        gate.release(holder)
        assert worker.window(0, 0, 2) is not None, "the worker measures again once continued"
        run = worker.end()
    finally:
        worker.kill()
        sleeper.kill()
        gate.close()
    assert run.state == "complete", (run.reason, run.message, run.stderr_tail)
    assert run.quiet_pauses == [1, 0] and run.record().quiet_pauses == [1, 0], "the study records it"


@pytest.mark.parallel  # no clock decides it: the gate waits for an answer, or 0.5 s, whatever the load
@pytest.mark.parametrize(("flags", "pausable", "counts"), [(",deaf", True, (0, 1)), ("", False, (0, 0))])
def test_a_worker_that_does_not_answer_or_never_said_it_could_is_stopped_all_the_same(
    tmp_path: Path, monkeypatch, flags: str, pausable: bool, counts: tuple[int, int]
) -> None:
    # A deaf worker says it can be paused but ignores the ask: the gate waits QUIET_SECONDS, then stops it.
    # One that never said so is stopped at once.
    monkeypatch.setattr(gate_module, "QUIET_SECONDS", 0.5)
    sleeper = _sleeper()
    gate = MeasurementGate(quiet=lambda device: True)
    spec = f"0.1,0.1,{tmp_path}{flags}"
    worker = LiveWorker(
        TrialRequest(spec=spec, source=None, program="tests.trial_targets.gated", timeout=60), gate=gate
    )
    worker.start()
    try:
        assert worker.until_ready()
        assert worker.member is not None and worker.member.pausable is pausable
        holder = gate.join(sleeper.pid, "cpu")
        asked = time.monotonic()
        gate.acquire(holder)
        waited = time.monotonic() - asked
        assert (waited >= 0.5) is pausable, f"waited {waited:.2f} s for an answer"
        assert stopped(worker.pid)
        assert (worker.member.quiet_pauses, worker.member.late_pauses) == counts
        gate.release(holder)
        run = worker.end(stream=True)
    finally:
        worker.kill()
        sleeper.kill()
        gate.close()
    assert run.state == "complete", (run.reason, run.message, run.stderr_tail)


@pytest.mark.parallel
def test_holding_a_device_alone_waits_for_its_workers_and_admits_no_new_one() -> None:
    sleeper = _sleeper()
    gate = MeasurementGate()
    there = gate.join(sleeper.pid, "cuda:0")
    alone, admitted = threading.Event(), threading.Event()
    done = threading.Event()

    def hold() -> None:
        with gate.alone("cuda:0"):
            alone.set()
            done.wait(10)

    def start_another() -> None:
        gate.admit("cuda:0")
        admitted.set()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert not alone.wait(0.5), "a worker was still on the device"
        newcomer = threading.Thread(target=start_another)
        newcomer.start()
        gate.admit("cuda:1")  # another device is not held
        gate.leave(there)
        assert alone.wait(5), "the device was held alone once its worker left"
        assert not admitted.wait(0.5), "no worker is admitted while the device is held alone"
        done.set()
        assert admitted.wait(5), "admitted once the device is free again"
        newcomer.join(5)
    finally:
        done.set()
        holder.join(5)
        sleeper.kill()
        gate.close()


@pytest.mark.parallel
def test_a_worker_given_cores_uses_those_only(monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # what it would inherit otherwise (one thread beside other tests)
    last = max(os.sched_getaffinity(0))
    worker = LiveWorker(_eager(cpus=(last,))).start()
    try:
        assert worker.until_ready(), worker.end().stderr_tail
        assert os.sched_getaffinity(worker.pid) == {last}
        assert worker.run.ready is not None and worker.run.ready.threads == 1, (
            "torch's threads follow the worker's share of the cores"
        )
        run = worker.end()
    finally:
        worker.kill()
    assert run.state == "complete", (run.reason, run.message, run.stderr_tail)


@pytest.mark.slow
def test_a_trial_out_of_memory_beside_other_workers_runs_again_alone(tmp_path: Path, monkeypatch) -> None:
    # What the pool gives workers that share a GPU, a share of its memory, given here on the CPU. The workload
    # runs out of memory in any worker given a share, so each trial's first run fails and its second, alone,
    # without a share, completes; alone, nothing else compiles beside it.
    shared = TrialPool.harness_for
    monkeypatch.setattr(
        TrialPool, "harness_for", lambda pool, device: dataclasses.replace(shared(pool, device), memory_share=0.5)
    )
    space = tmp_path / "two.yaml"
    space.write_text("description: two configurations\nmode: [default]\ndynamic: [false, true]\n")
    options = SearchOptions(
        model="tests.trial_targets.workloads:crowded_infer",
        space=str(space),
        trials=2,
        workers=2,
        sampler="bruteforce",
        device="cpu",
        out=str(tmp_path / "out"),
        doctor=False,
        pruner="none",
        slow_ratio=0.0,
    )
    trials = explore(options).get_trials(deepcopy=False)
    rows = list(csv.DictReader(write_trials_csv(tmp_path, trial_rows(trials)).open()))
    assert [row["ran_alone"] for row in rows] == ["out of memory beside other workers of its device"] * 2
    assert [float(row["compile_concurrent_seconds"]) for row in rows] == [0.0, 0.0]
    assert len(trials) == 2
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), [record_of(t).flat() for t in trials]
    assert all(record_of(t).ran_alone for t in trials), [record_of(t).flat() for t in trials]
    assert all((record_of(t).own.compile_concurrent_seconds or 0) == 0 for t in trials), [
        record_of(t).own.compile_concurrent_seconds for t in trials
    ]


@pytest.mark.parallel
@pytest.mark.parametrize("workers", [1, 2])
def test_only_an_out_of_memory_failure_beside_other_workers_is_run_again(workers: int) -> None:
    assert crowded_out(TrialRun(state="failed", reason="oom"), workers) is (workers > 1)
    assert not crowded_out(TrialRun(state="failed", reason="accuracy"), 2)
    assert not crowded_out(TrialRun(state="complete"), 2)


@pytest.mark.parallel
def test_a_worker_not_admitted_because_the_search_stops_starts_nothing_and_leaves_no_folder() -> None:
    gate = MeasurementGate()
    gate.close()
    worker = LiveWorker(_eager(), gate=gate)
    with pytest.raises(GateClosed):
        worker.start()
    assert not hasattr(worker, "process") and not worker.workdir.exists()
