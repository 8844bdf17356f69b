"""One replicate (autotune.measure.engine's _replicate): the order of turns, who lives together, how the
subjects start up and wait held; and the figures a run is read with from its windows
(autotune.trial.request's window_figures, which every replicate's runs go through).

Stand-ins for the workers, except in the one test of real held workers.
"""

from __future__ import annotations

import random
import select

import pytest

from autotune.measure.engine import _replicate, co_residence, turn_orders
from autotune.measure.engine._next_replicate import _peak
from autotune.trial.live import LiveWorker
from autotune.trial.request import RunProtocol, TrialRequest, TrialRun, noisy_reason, window_figures
from autotune.trial.run_record import RunRecord
from tests import fake_records

pytestmark = pytest.mark.parallel


# -- turns and who lives together -----------------------------------------------------------------


def test_each_turn_is_a_permutation_and_the_next_runs_it_backwards() -> None:
    names = ["eager", "compile", "trial 3", "trial 5"]
    orders = turn_orders(names, 7, random.Random(3))
    assert len(orders) == 7 and all(sorted(o) == sorted(names) for o in orders)
    for first, second in zip(orders[::2], orders[1::2], strict=False):
        assert second == first[::-1], "ABBA: drift within a pair of turns hits every subject alike"
    assert len({tuple(o) for o in orders[::2]}) > 1, "random, never a fixed order"


def test_subjects_live_together_only_when_their_memory_fits() -> None:
    names = ["eager", "compile", "trial 1", "trial 2"]
    memory = {"eager": 1000.0, "compile": 1200.0, "trial 1": 1300.0, "trial 2": 1400.0}
    assert co_residence(names, memory, 10_000.0, "compile") == ("together", [names])
    design, groups = co_residence(names, memory, 4000.0, "compile")
    assert design == "pairs" and groups == [["compile", "eager"], ["compile", "trial 1"], ["compile", "trial 2"]]
    assert co_residence(names, memory, 2000.0, "compile")[0] == "one at a time"
    assert co_residence(names, {**memory, "trial 2": None}, 100.0, "compile")[0] == "together", "unknown fits"


class StartLog:
    """Stand-ins for live workers that log when each starts, gets ready and is stopped."""

    def __init__(self, failing: str = "", not_held: str = "") -> None:
        self.events: list[tuple[str, str]] = []
        self.failing = failing
        self.not_held = not_held

    def worker(self, request):  # called as LiveWorker(request)
        log, name = self, request.spec

        class Worker:
            run = TrialRun(state="complete", ready=fake_records.ready(batches_per_second=10.0))

            def start(self, *, hold: bool = False):
                log.events.append(("start held" if hold else "start", name))
                return self

            def until_held(self) -> bool:
                log.events.append(("held", name))
                return name != log.not_held

            def release(self) -> bool:
                log.events.append(("go", name))
                return True

            def until_ready(self) -> bool:
                log.events.append(("ready", name))
                return name != log.failing

            def pause(self) -> None:
                log.events.append(("pause", name))

            def end(self) -> TrialRun:
                log.events.append(("end", name))
                return TrialRun(state="failed", reason="compile_error")

        return Worker()


def test_a_subject_s_memory_is_the_most_its_first_run_held_reserved_too_where_a_gpu_says() -> None:
    # A subject stopped for another's window keeps what its allocator cached: its reserved peak is what it holds.
    gpu = RunRecord(
        state="complete",
        peak_memory_mb=99.0,
        compile_peak_memory_mb=120.0,
        peak_reserved_mb=234.0,
        compile_peak_reserved_mb=250.0,
    )
    assert _peak(gpu) == 250.0
    cpu = RunRecord(state="complete", peak_memory_mb=99.0, compile_peak_memory_mb=120.0)
    assert _peak(cpu) == 120.0, "a CPU reserves nothing apart"
    assert _peak(RunRecord(state="failed")) is None and _peak(None) is None


@pytest.mark.parametrize(
    ("device", "cores", "at_once"), [("cpu", 2, 1), ("cpu", 64, 1), ("cuda:0", 16, 4), ("cuda:0", 2, 1)]
)
def test_a_replicate_starts_its_subjects_as_the_host_has_cores_for_them(device, cores, at_once) -> None:
    assert _replicate.starts_at_once(device, cores) == at_once


def test_on_a_cpu_subjects_import_together_then_each_is_ready_and_stopped_before_the_next_goes_on(
    monkeypatch,
) -> None:
    # Start-ups that overlap on a 2-core host took twice as long as the same start-ups in a row; imports take a core each.
    log = StartLog(failing="b", not_held="d")
    monkeypatch.setattr(_replicate, "LiveWorker", log.worker)
    names = ["a", "b", "c", "d"]
    requests = {n: TrialRequest(spec=n, source=None, device="cpu") for n in names}
    workers: dict = {}
    runs: dict = {}
    ready = _replicate._make_ready(requests, names, workers, runs)
    assert log.events == [
        ("start held", "a"), ("start held", "b"), ("start held", "c"), ("start held", "d"),
        ("held", "a"), ("held", "b"), ("held", "c"), ("held", "d"), ("end", "d"),
        ("go", "a"), ("ready", "a"), ("pause", "a"),
        ("go", "b"), ("ready", "b"), ("end", "b"),
        ("go", "c"), ("ready", "c"), ("pause", "c"),
    ]  # fmt: skip
    assert sorted(ready) == sorted(workers) == ["a", "c"] and runs["b"].reason == "compile_error"
    assert runs["d"].reason == "compile_error", "a worker that failed while it imported is ended, never let go"


def test_a_subject_alone_is_not_held(monkeypatch) -> None:
    log = StartLog()
    monkeypatch.setattr(_replicate, "LiveWorker", log.worker)
    requests = {"a": TrialRequest(spec="a", source=None, device="cpu")}
    _replicate._make_ready(requests, ["a"], {}, {})
    assert log.events == [("start", "a"), ("ready", "a"), ("pause", "a")]


def test_beside_a_gpu_subjects_start_side_by_side_and_each_is_stopped_when_ready(monkeypatch) -> None:
    log = StartLog()
    monkeypatch.setattr(_replicate, "LiveWorker", log.worker)
    monkeypatch.setattr(_replicate.os, "cpu_count", lambda: 8)
    names = ["a", "b", "c"]
    requests = {n: TrialRequest(spec=n, source=None, device="cuda:0") for n in names}
    _replicate._make_ready(requests, names, {}, {})
    assert log.events == [
        ("start held", "a"), ("start held", "b"), ("start held", "c"), ("held", "a"), ("held", "b"), ("held", "c"),
        ("go", "a"), ("go", "b"), ("ready", "a"), ("pause", "a"), ("ready", "b"), ("pause", "b"),
        ("go", "c"), ("ready", "c"), ("pause", "c"),
    ]  # fmt: skip


# -- a run's figures from its windows --------------------------------------------------------------


window = fake_records.window


def test_recompiles_in_windows_are_paid_once_per_pass_over_the_stream() -> None:
    ready = fake_records.ready(stream_samples=1000, stream_batches=100)
    steady = window_figures([window(1.0), window(1.0)], ready)
    assert steady["samples_per_second"] == pytest.approx(100.0) and steady["fresh_recompiles"] == 0
    compiled = window_figures(
        [window(3.0, recompiles=1, compile_seconds=2.0, compile_samples=10, compile_batches=1), window(1.0)], ready
    )
    # 190 samples in 2 s of steps that compiled nothing: 95 samples/s; one pass of the stream pays the 2 s once.
    assert compiled["steady_samples_per_second"] == pytest.approx(95.0)
    assert compiled["samples_per_second"] == pytest.approx(1000 / (1000 / 95.0 + 2.0))
    assert compiled["fresh_recompiles"] == 1 and compiled["fresh_compile_seconds"] == 2.0
    assert compiled["samples_per_second"] < steady["samples_per_second"], "a recompile costs"


@pytest.mark.parametrize(("others", "busy"), [(0.24, False), (0.26, True)])
def test_a_run_saw_the_machine_busy_when_other_processes_took_a_quarter_of_it(others: float, busy: bool) -> None:
    figures = window_figures([window(1.0, others=0.0), window(1.0, others=others)], None)
    assert bool(figures.get("noisy")) is busy


def test_quiet_windows_clear_what_the_start_up_said_about_the_machine() -> None:
    # A replicate's subjects start together, so their settle windows spread; the measured windows,
    # with nothing else on the CPU, are what says whether the machine was busy.
    started = fake_records.result(samples_per_second=100.0, noisy="its windows ranged from 5.2 to 49 samples/s")
    quiet = TrialRun(state="complete", result=started, windows=[window(1.0, others=0.0), window(1.0, others=0.1)])
    assert quiet.record().noisy == ""
    busy = TrialRun(state="complete", result=started, windows=[window(1.0, others=0.0), window(1.0, others=0.4)])
    assert busy.record().noisy.startswith("other processes used up to 40%")


@pytest.mark.parametrize(("fastest", "noisy"), [(149.0, False), (151.0, True)])
def test_a_run_whose_windows_spread_by_half_is_marked_noisy(fastest: float, noisy: bool) -> None:
    assert bool(noisy_reason([0.004, 0.004], [100.0, 120.0, fastest])) is noisy


@pytest.mark.parametrize(("after", "noisy"), [(0.0059, False), (0.0061, True)])
def test_a_run_whose_probe_slowed_by_half_is_marked_noisy(after: float, noisy: bool) -> None:
    assert bool(noisy_reason([0.004, after], [100.0, 100.0])) is noisy


@pytest.mark.parallel  # nothing is timed: it checks what each worker did, and in which order
def test_held_workers_import_side_by_side_and_build_nothing_until_let_go() -> None:
    protocol = RunProtocol(window_seconds=0.1, fresh_batches=4, settle_windows=1).to_dict()
    request = TrialRequest(spec="tests.trial_targets.workloads:tiny_infer", source=None, protocol=protocol, timeout=120)
    first, second, dropped = (LiveWorker(request).start(hold=True) for _ in range(3))
    try:
        assert first.until_held() and second.until_held() and dropped.until_held()
        assert first.phase == second.phase == "held"
        assert first.release() and first.until_ready()
        first.pause()
        assert not select.select([second.pipe], [], [], 0.5)[0], "the held worker said nothing more: it built nothing"
        assert second.release() and second.until_ready()
        runs = [first.end(), second.end(), dropped.end()]
    finally:
        for worker in (first, second, dropped):
            worker.kill()
    for run in runs[:2]:
        assert run.state == "complete", (run.reason, run.message, run.stderr_tail)
        assert run.phase_seconds["held"] > 0 and run.phase_seconds["build"] > 0
    # The second stood held through the first's build, compile and settle.
    assert runs[1].phase_seconds["held"] > sum(runs[0].phase_seconds[p] for p in ("build", "compile", "settle")), (
        runs[0].phase_seconds,
        runs[1].phase_seconds,
    )
    # Ended while held, a worker exits instead of taking the end for its go.
    assert runs[2].state == "failed" and "phase 'held'" in runs[2].message, runs[2].message
