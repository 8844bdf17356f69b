"""Trials in their own processes: timeouts, crashes, errors, pruning and failures found by the worker."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from autotune import CompileConfig, resolve
from autotune.measure import Harness
from autotune.runtime.device import device_name
from autotune.trial.accuracy import PRECISION_TOLERANCE
from autotune.trial.live import LiveWorker
from autotune.trial.recorded import RECORDED_FILE
from autotune.trial.records import SettleWindow
from autotune.trial.request import RunProtocol, TrialRun
from autotune.trial.run_record import RunRecord
from autotune.trial.runner import TrialRequest, live_worker, run_trial
from tests.processes import alive, command_line, gone, living_members, with_command_line
from tests.short_runs import SHORT, run_config, source_for
from tests.trial_targets import workloads


@pytest.mark.parallel  # waits on no clock
def test_eager_trial_completes_with_settle_windows_a_stream_pass_and_a_result() -> None:
    run = run_trial(
        TrialRequest(
            spec="tests.trial_targets.workloads:tiny_train", source=None, protocol={"settle_windows": 3}, timeout=120
        )
    )
    assert run.state == "complete", run.message + run.stderr_tail
    assert run.ready is not None and len(run.ready.settle_windows) == 3
    assert run.result is not None and run.result.samples_per_second > 0
    assert run.fresh is not None and run.fresh.fresh_batches == RunProtocol().fresh_batches
    assert run.compile_seconds == 0.0
    assert run.environment["device"] == "cpu"


@pytest.mark.parallel  # waits on no clock
def test_a_live_worker_measures_the_windows_it_is_asked_for_and_ends() -> None:
    request = TrialRequest(
        spec="tests.trial_targets.workloads:tiny_train",
        source=None,
        protocol=RunProtocol(**SHORT, fresh_batches=10).to_dict(),
        timeout=120,
    )
    worker = LiveWorker(request).start()
    try:
        assert worker.until_ready()
        assert worker.run.ready is not None and worker.run.ready.stream_batches == 10
        worker.pause()
        worker.resume()
        first = worker.window(0, 8, 4, passes=3)
        second = worker.window(1, 2, 1)
        assert first is not None and second is not None
        assert (first.index, first.batches, second.batches) == (0, 12, 1), "a slice of 4, three passes"
        assert first.samples == 12 * 6 and first.probe_seconds > 0
    finally:
        run = worker.end()
    assert run.state == "complete", run.message + run.stderr_tail
    assert [w.index for w in run.windows] == [0, 1]
    assert not worker.alive and not worker.workdir.exists()
    record = run.record()
    assert record.windows and record.samples_per_second and record.fresh_recompiles == 0


@pytest.mark.parallel  # waits on no clock
def test_settle_windows_follow_the_window_length() -> None:
    def settled(window_seconds: float) -> TrialRun:
        request = TrialRequest(
            spec="tests.trial_targets.workloads:tiny_train",
            source=None,
            protocol=RunProtocol(window_seconds=window_seconds, fresh_batches=0).to_dict(),
            timeout=120,
        )
        worker = LiveWorker(request).start()
        assert worker.until_ready(), worker.end().message
        return worker.end()

    # A window of an hour: on any machine, only the cap on passes ends it (or the worker's time limit, failing it).
    short, long = settled(1e-6), settled(3600.0)
    assert short.state == long.state == "complete", (long.reason, long.message)
    assert short.ready is not None and short.ready.settle_passes == 1
    assert long.ready is not None and long.ready.settle_passes == 64, "a window of a fast model stops at 64 passes"


def test_hanging_trial_is_killed_at_its_timeout_with_its_process_group(tmp_path, monkeypatch) -> None:
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("AUTOTUNE_TEST_PIDFILE", str(pidfile))
    started = time.monotonic()
    run = run_trial(TrialRequest(spec="tests.trial_targets.workloads:hangs", source=None, timeout=8))
    assert run.state == "failed" and run.reason == "timeout"
    assert time.monotonic() - started < 30
    worker, grandchild = map(int, pidfile.read_text().split())
    assert gone(worker) and gone(grandchild)
    assert living_members(worker) == []


def test_a_run_s_time_limit_holds_for_all_its_phases_together(monkeypatch: pytest.MonkeyPatch) -> None:
    # Getting ready takes about 5 s of an 8 s limit, then each window about 2 s: each phase alone fits the limit,
    # all of them together do not, and the run is stopped in its windows.
    monkeypatch.setenv("AUTOTUNE_TEST_BUILD_SECONDS", "3")
    monkeypatch.setenv("AUTOTUNE_TEST_STEP_SECONDS", "0.05")
    protocol = {"window_seconds": 0.25, "check_accuracy": False}
    request = TrialRequest(
        spec="tests.trial_targets.workloads:slow_to_build", source=None, timeout=8, protocol=protocol
    )
    with live_worker(request) as worker:
        assert worker.until_ready(), worker.run.message
        windows = [worker.window(index, 0, 10, passes=4) for index in range(3)]
        run = worker.end()
    assert None in windows, "three windows after getting ready ran past the limit, and none was stopped"
    assert (run.state, run.reason) == ("failed", "timeout"), run.message
    assert "limit (all its phases together)" in run.message, run.message


def test_a_worker_killed_at_its_timeout_takes_the_daemon_its_build_detached() -> None:
    # A daemon in a session of its own is out of the group the runner kills: it outlived every killed worker.
    seconds = workloads.DAEMON_SECONDS["killed_with_its_worker"]
    try:
        run = run_trial(
            TrialRequest(spec="tests.trial_targets.workloads:hangs_beside_a_daemon", source=None, timeout=8)
        )
        assert run.state == "failed" and run.reason == "timeout"
        assert not _sleeping(seconds), "the daemon was killed with the worker that adopted it"
    finally:
        for pid in _sleeping(seconds):
            os.kill(pid, signal.SIGKILL)


def _sleeping(seconds: str) -> list[int]:
    return [pid for pid in with_command_line(seconds) if command_line(pid) == ["sleep", seconds] and alive(pid)]


@pytest.mark.parallel  # waits on no clock
def test_segfaulting_worker_becomes_a_crash_with_its_signal() -> None:
    run = run_trial(TrialRequest(spec="tests.trial_targets.workloads:segfaults", source=None, timeout=120))
    assert run.state == "failed" and run.reason == "crash"
    assert signal.Signals.SIGSEGV.name in run.message


@pytest.mark.parallel  # waits on no clock
def test_a_workload_whose_eager_step_raises_fails_with_the_error_and_where_it_was_raised() -> None:
    run = run_trial(TrialRequest(spec="tests.trial_targets.workloads:raises", source=None, timeout=120))
    assert (run.state, run.reason) == ("failed", "workload_error"), run.message
    assert "RuntimeError: the model refuses this batch" in run.message, run.message
    assert "raised at tests/trial_targets/workloads.py:" in run.message, run.message
    assert "Traceback" not in run.stderr_tail, "one line says it: no traceback through autotune's frames"


@pytest.mark.parallel  # waits on no clock
def test_a_monitor_can_prune_a_trial_and_its_process_is_gone() -> None:
    def stop_at_first_settle_window(event):
        if event and isinstance(event.record, SettleWindow):
            return "pruned by the test"
        return None

    worker = LiveWorker(
        TrialRequest(
            spec="tests.trial_targets.workloads:tiny_train", source=None, protocol={"settle_windows": 50}, timeout=120
        ),
        stop_at_first_settle_window,
    ).start()
    assert not worker.until_ready()
    run = worker.end()
    assert run.state == "pruned" and run.message == "pruned by the test"
    assert gone(worker.pid) and living_members(worker.pid) == []


@pytest.mark.parallel  # waits on no clock
def test_wrong_outputs_under_compile_fail_the_accuracy_check() -> None:
    spec = "tests.trial_targets.workloads:wrong_when_compiled"
    run = run_trial(TrialRequest(spec=spec, source=source_for(spec, CompileConfig()), timeout=300))
    assert run.state == "failed" and run.reason == "accuracy", run.message + run.stderr_tail
    assert "differs from eager" in run.message


@pytest.mark.parallel  # waits on no clock
@pytest.mark.parametrize(
    ("target", "config", "said"),
    [
        (
            "ignores_its_learning_rate_when_compiled",
            CompileConfig(compile_optimizer=True),
            "after step 1 of 2: the update of body.0.weight differs from eager",
        ),
        (
            "skips_a_group_when_compiled",
            CompileConfig(compile_optimizer=True),
            "after step 1 of 2: the update of head.weight differs from eager",
        ),
        (
            "overwrites_accumulated_gradients",
            CompileConfig(),
            "step 1 of 2: the gradient of body.0.weight differs from eager",
        ),
    ],
)
def test_a_compiled_training_step_that_goes_its_own_way_fails_the_whole_step_check(
    target: str, config: CompileConfig, said: str
) -> None:
    # Each is right eagerly and wrong once compiled, in a way one forward and backward cannot show: the optimizer
    # step reads another learning rate or skips a parameter group, or the second micro-batch of an accumulation
    # cycle overwrites the first's gradients. Two whole steps on the same batches as eager show each, by name.
    spec = f"tests.trial_targets.dynamo_only:{target}"
    run = run_trial(TrialRequest(spec=spec, source=source_for(spec, config), timeout=300)).record()
    assert (run.state, run.reason) == ("failed", "accuracy"), run.message + run.stderr_tail
    assert said in run.message, run.message


@pytest.mark.parallel  # waits on no clock
def test_a_right_training_step_with_adamw_and_a_compiled_optimizer_passes_the_whole_step_check() -> None:
    # AdamW turns a gradient that is rounding noise into a full step of either sign: such elements are not compared.
    spec = "tests.trial_targets.dynamo_only:adamw_train"
    run = run_trial(
        TrialRequest(spec=spec, source=source_for(spec, CompileConfig(compile_optimizer=True)), timeout=300)
    )
    assert run.state == "complete", run.message + run.stderr_tail


@pytest.mark.parallel  # waits on no clock
def test_recompile_limit_fallback_to_eager_is_detected() -> None:
    spec = "tests.trial_targets.workloads:recompiles"
    run = run_trial(TrialRequest(spec=spec, source=source_for(spec, CompileConfig(dynamic=False)), timeout=300))
    assert run.state == "failed" and run.reason == "recompile_limit", run.message + run.stderr_tail


@pytest.mark.parallel  # waits on no clock
def test_a_configured_recompile_limit_runs_rare_shapes_eagerly_instead_of_failing() -> None:
    """The same workload as above; a configuration that sets the limit itself means the eager fallback."""
    spec = "tests.trial_targets.workloads:recompiles"
    workload = resolve(spec)
    harness = Harness(
        spec=spec, summary=workload.summary(spec, workload.draw_batches()), protocol=RunProtocol(windows=2)
    )
    request = harness.request(CompileConfig(dynamic=False, knobs={"recompile_limit": 2}))
    assert request.falls_back_to_eager and not request.changes_precision
    run = run_trial(replace(request, timeout=300))
    assert run.state == "complete", run.reason + run.message + run.stderr_tail


@pytest.mark.parallel  # waits on no clock
def test_a_precision_change_is_checked_at_the_looser_tolerance_it_says() -> None:
    spec = "tests.trial_targets.workloads:wrong_when_compiled"
    workload = resolve(spec)
    harness = Harness(
        spec=spec, summary=workload.summary(spec, workload.draw_batches()), protocol=RunProtocol(windows=2)
    )
    request = harness.request(CompileConfig(knobs={"float32_matmul_precision": "high"}))
    assert request.changes_precision
    run = run_trial(replace(request, timeout=300))
    assert run.state == "failed" and run.reason == "accuracy", run.message + run.stderr_tail
    assert f"a precision-changing configuration: tolerance {PRECISION_TOLERANCE:g}" in run.message


@pytest.mark.parallel  # waits on no clock
def test_the_device_figures_are_the_worker_s_as_its_configuration_left_them() -> None:
    # The configuration sets float32 matmuls to 'high' in the worker only: figures read by this parent would say
    # torch's default, so 'high' in the record shows they were read where the model ran.
    config = CompileConfig(backend="eager", knobs={"float32_matmul_precision": "high"})
    record = run_config("tests.trial_targets.workloads:tiny_train", config, timeout=120, protocol=SHORT)
    assert record.complete, record.message + record.stderr_tail
    assert torch.get_float32_matmul_precision() == "highest"
    figures = record.device_figures
    assert figures["float32_matmul_precision"] == "high"
    assert figures["name"] == device_name("cpu") and figures["threads"] == record.threads
    assert set(figures) == {"name", "float32_matmul_precision", "tf32_matmul", "tf32_cudnn", "threads"}
    assert RunRecord.from_dict(record.to_dict()).device_figures == figures, "kept with the run's record"


@pytest.mark.parallel  # waits on no clock
def test_a_worker_ends_without_teardown_yet_loses_none_of_its_output(tmp_path) -> None:
    # Piped stdout is block-buffered: without the flush, os._exit would drop what was printed.
    code = (
        "import atexit, sys\n"
        "from autotune.trial.worker import exit_now\n"
        f"atexit.register(lambda: open({str(tmp_path / 'teardown')!r}, 'w').close())\n"
        "print('result sent')\n"
        "sys.stderr.write('no newline')\n"
        "exit_now(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert done.stdout == "result sent\n" and done.stderr.endswith("no newline")
    assert not (tmp_path / "teardown").exists(), "the interpreter's teardown ran"


@pytest.mark.parallel  # waits on no clock
@pytest.mark.parametrize(
    ("workload", "said"),
    [
        # Half the size is at the element-wise tolerance's very edge under bfloat16 (a relative error of 0.5 against
        # 10 x 0.05): either comparison may be the one that names it.
        ("bfloat16_half_update_when_compiled", "the "),
        ("bfloat16_tenth_too_large_update_when_compiled", "the whole update is 1.1x the size of eager's"),
    ],
)
def test_an_update_of_the_wrong_size_fails_under_bfloat16_whose_element_tolerance_lets_it_through(
    workload: str, said: str
) -> None:
    spec = f"tests.trial_targets.dynamo_only:{workload}"
    run = run_config(spec, CompileConfig(compile_optimizer=True))
    assert (run.state, run.reason) == ("failed", "accuracy"), run.message + run.stderr_tail
    assert run.message.startswith("after step 1 of 2: " + said), run.message
    assert "the whole update is" in run.message or "the update of" in run.message, run.message


@pytest.mark.parallel  # waits on no clock
def test_a_right_bfloat16_step_with_a_compiled_optimizer_passes_the_update_size_check() -> None:
    spec = "tests.trial_targets.dynamo_only:bfloat16_train"
    run = run_config(spec, CompileConfig(compile_optimizer=True))
    assert run.state == "complete", run.message + run.stderr_tail


@pytest.mark.slow  # Inductor compiles the model and its optimizer step
@pytest.mark.parallel  # waits on no clock
def test_a_right_bfloat16_step_compiled_by_inductor_passes_the_update_size_check() -> None:
    # Inductor's bfloat16 kernels round otherwise than eager's: the updates differ element by element, not in size.
    spec = "tests.trial_targets.workloads:bfloat16_train"
    run = run_config(spec, CompileConfig(compile_optimizer=True), timeout=900)
    assert run.state == "complete", run.message + run.stderr_tail


@pytest.mark.parallel  # waits on no clock
def test_a_fault_that_appears_at_the_third_step_fails_the_check_naming_that_step() -> None:
    spec = "tests.trial_targets.dynamo_only:wrong_from_the_third_step"
    run = run_config(spec)
    assert (run.state, run.reason) == ("failed", "accuracy"), run.message + run.stderr_tail
    assert run.message.startswith("step 3 of 8: the loss differs from eager"), run.message


def _first_then_warm(spec: str, folder: str, **warm: Any) -> tuple[RunRecord, RunRecord]:
    """A configuration's first run (checked at length), then a later run from the same folder, as a replicate's."""
    request = TrialRequest(spec=spec, source=source_for(spec, CompileConfig()), timeout=300, cache_dir=folder)
    first = run_trial(request).record()
    later = replace(request, protocol={**request.protocol, "check_accuracy": False}, **warm)
    return first, run_trial(later).record()


@pytest.mark.parallel  # waits on no clock
@pytest.mark.parametrize(
    ("workload", "said"),
    [
        ("wrong_when_warm_train", "step 1 of 8: the loss differs from eager"),
        ("wrong_when_warm_infer", "output 0 differs from eager"),
    ],
)
def test_a_fault_that_appears_only_in_a_later_run_fails_it_against_what_eager_computed_first(
    tmp_path: Path, workload: str, said: str
) -> None:
    first, later = _first_then_warm(f"tests.trial_targets.dynamo_only:{workload}", str(tmp_path / "cache"))
    assert first.state == "complete", first.message + first.stderr_tail
    assert (tmp_path / "cache" / RECORDED_FILE).exists()
    assert (later.state, later.reason) == ("failed", "accuracy"), later.message + later.stderr_tail
    assert later.message.startswith(
        "a run started from the configuration's warm cache folder, checked against what eager computed: " + said
    ), later.message


@pytest.mark.parallel  # waits on no clock
@pytest.mark.parametrize("workload", ["tiny_train", "tiny_infer", "own_step_train"])
def test_a_later_run_of_a_right_configuration_passes_its_check_from_the_same_seeded_weights(
    tmp_path: Path, workload: str
) -> None:
    first, later = _first_then_warm(f"tests.trial_targets.dynamo_only:{workload}", str(tmp_path / "cache"))
    assert first.state == later.state == "complete", later.message + later.stderr_tail


@pytest.mark.parallel  # waits on no clock
def test_a_fault_that_appears_only_in_a_run_from_the_saved_compile_cache_fails_it_by_name(tmp_path: Path) -> None:
    # As a confirmation proves the cache: the first run saves its artifacts; a run from an empty folder loads them,
    # with what eager computed copied beside it (and, here, the workload's mark of a run made before).
    spec = "tests.trial_targets.dynamo_only:wrong_when_warm_train"
    saved = tmp_path / "artifacts.bin"
    first, _ = _first_then_warm(spec, str(tmp_path / "cache"), save_cache_path=str(saved))
    assert first.state == "complete", first.message + first.stderr_tail
    empty = tmp_path / "loaded"
    empty.mkdir()
    for name in (RECORDED_FILE, "built-before"):
        shutil.copy2(tmp_path / "cache" / name, empty / name)
    request = TrialRequest(spec=spec, source=source_for(spec, CompileConfig()), timeout=300, cache_dir=str(empty))
    loaded = run_trial(
        replace(request, protocol={**request.protocol, "check_accuracy": False}, load_cache_path=str(saved))
    ).record()
    assert (loaded.state, loaded.reason) == ("failed", "accuracy"), loaded.message + loaded.stderr_tail
    assert loaded.message.startswith("a run started from the saved compile cache, checked against what eager"), (
        loaded.message
    )
