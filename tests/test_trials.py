"""The trial loop: which earlier outcome a trial may reuse, and when a compiling trial is stopped."""

from __future__ import annotations

import time

import optuna
import pytest

from autotune import CompileConfig
from autotune.errors import SearchError
from autotune.measure import Harness, Objective
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search import Monitor, SearchOptions, TrialLoop, compile_limit

pytestmark = pytest.mark.parallel

CONFIG = CompileConfig(scope="regional").to_dict()


def loop_with(state: optuna.trial.TrialState, reason: str = "") -> TrialLoop:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    attrs = {"config": CONFIG, **({"reason": reason} if reason else {})}
    value = 1.0 if state == optuna.trial.TrialState.COMPLETE else None
    study.add_trial(optuna.trial.create_trial(state=state, value=value, user_attrs=attrs))
    harness = Harness(spec="m:w", summary=WorkloadSummary(spec="m:w", task="infer"))
    options = SearchOptions(model="m:w", device="cpu")
    return TrialLoop(study, harness, options, Objective(), lambda *args: None)


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (optuna.trial.TrialState.COMPLETE, ""),
        (optuna.trial.TrialState.FAIL, "accuracy"),
        (optuna.trial.TrialState.FAIL, "graph_break"),
    ],
)
def test_outcomes_that_measuring_again_would_repeat_are_reused(state, reason) -> None:
    assert loop_with(state, reason)._reusable_twin(CONFIG, number=1) is not None


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (optuna.trial.TrialState.PRUNED, ""),
        (optuna.trial.TrialState.FAIL, "timeout"),
        (optuna.trial.TrialState.FAIL, "crash"),
        (optuna.trial.TrialState.FAIL, "oom"),
    ],
)
def test_outcomes_that_noise_may_have_caused_are_measured_again(state, reason) -> None:
    assert loop_with(state, reason)._reusable_twin(CONFIG, number=1) is None


def test_a_reused_outcome_keeps_who_ran_it_and_what_it_retried_apart() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    attrs = {"config": CONFIG, "retry_of": 7, "host": "elsewhere"}
    loop.study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=1.0, user_attrs=attrs))
    twin = loop.study.trials[1]
    trial = loop.study.ask()
    trial.set_user_attr("retry_of", 3)
    loop._copy_outcome(trial, twin)
    copied = loop.study.trials[trial.number]
    assert copied.user_attrs["duplicate_of"] == twin.number and copied.user_attrs["retry_of"] == 3
    assert "host" not in copied.user_attrs


def test_a_trial_compiling_past_its_budget_is_stopped_and_an_explicit_limit_replaces_the_budget() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.baselines = {"compile": {"compile_seconds": 20.0}}
    assert compile_limit(loop) == (80.0, "4x plain torch.compile's 20.0 s (--compile-budget)")
    monitor = Monitor(loop, loop.study.ask(), "trial 1")
    monitor({"event": "phase", "phase": "compile"})
    monitor.phase_started = time.monotonic() - 79
    assert monitor(None) is None
    monitor.phase_started = time.monotonic() - 81
    assert monitor(None) == "compile ran past 80 s: 4x plain torch.compile's 20.0 s (--compile-budget)"
    assert monitor({"event": "compiled", "compile_seconds": 85.0}).startswith("compile took 85 s, more than 80 s")
    loop.baselines = {"compile": {"compile_seconds": 5.0}}  # 4x would be 20 s: a busy moment could reach that
    assert compile_limit(loop) == (60.0, "4x plain torch.compile's 5.0 s (--compile-budget), but never less than 60 s")

    loop.options.max_compile_seconds = 25.0
    assert compile_limit(loop) == (25.0, "--max-compile-seconds 25")
    loop.options.max_compile_seconds = None
    loop.options.compile_budget = 0.0
    assert compile_limit(loop) == (None, "")
    with pytest.raises(SearchError, match="--compile-budget 0.5: must be 0"):
        SearchOptions(model="m:w", compile_budget=0.5)


def test_under_time_to_a_trial_still_compiling_past_the_best_whole_time_cannot_win() -> None:
    study = optuna.create_study(direction="minimize")
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=30.0))
    harness = Harness(spec="m:w", summary=WorkloadSummary(spec="m:w", task="infer"))
    options = SearchOptions(model="m:w", device="cpu", objective="time-to:100")
    loop = TrialLoop(study, harness, options, Objective.parse("time-to:100"), lambda *args: None)
    loop.baselines = {"compile": {"compile_seconds": 20.0}}
    limit, why = compile_limit(loop)
    assert limit == 30.0
    assert why == "the best complete trial's whole time-to:100 took 30.0 s, so it cannot win"
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=500.0))
    assert compile_limit(loop)[0] == 30.0, "the best trial's time bounds, not the latest"
    loop.options.compile_budget = 1.0  # a budget of 1 x 20 s, floored at 60 s, is looser than 30 s
    assert compile_limit(loop)[0] == 30.0


def test_time_a_worker_stood_stopped_is_not_compile_time_and_shared_devices_widen_the_budget() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.baselines = {"compile": {"compile_seconds": 20.0}}
    loop.workers_per_device = 2
    limit, why = compile_limit(loop)
    assert limit == 160.0 and "times the 2 workers that compile side by side" in why
    monitor = Monitor(loop, loop.study.ask(), "trial 1")
    monitor({"event": "phase", "phase": "compile"})
    monitor.phase_started = time.monotonic() - 170
    assert monitor(None) is not None, "past the budget"
    assert monitor({"event": "paused", "seconds": 30.0}) is None
    assert monitor(None) is None, "30 s of it stood stopped while another worker measured"


def _windows(monitor: Monitor, rates: list[float]) -> list[str | None]:
    return [
        monitor({"event": "window", "index": i, "samples_per_second": r, "batches_per_second": r})
        for i, r in enumerate(rates)
    ]


def test_a_trial_measured_on_a_busy_machine_is_not_judged_by_its_windows() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.baselines = {
        "eager": {"steady_samples_per_second": 100.0, "probe_seconds": [0.010, 0.011]},
        "compile": {"probe_seconds": [0.012, 0.010]},
    }
    calm = Monitor(loop, loop.study.ask(), "trial 1")
    calm({"event": "probe", "seconds": 0.012})
    assert _windows(calm, [20.0, 20.0])[-1] == "20 samples/s is below 50% of eager's 100"
    busy_trial = loop.study.ask()
    busy = Monitor(loop, busy_trial, "trial 2")
    busy({"event": "probe", "seconds": 0.030})
    assert _windows(busy, [20.0, 20.0, 20.0]) == [None, None, None]
    assert "30.0 ms, over 1.5x the baselines' 10.0 ms" in busy_trial.user_attrs["not_pruned_because"]


def test_pruning_savings_come_from_each_trial_s_own_measurements() -> None:
    from autotune.study.report import pruning_savings, savings_text

    def trial(state: optuna.trial.TrialState, **attrs: object) -> optuna.trial.FrozenTrial:
        value = 1.0 if state == optuna.trial.TrialState.COMPLETE else None
        return optuna.trial.create_trial(state=state, value=value, user_attrs=attrs)

    complete, pruned = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
    trials = [
        trial(complete, phase_seconds={"compile": 30.0, "measure": 12.0}, windows=[1, 1, 1, 1, 1]),
        trial(complete, phase_seconds={"compile": 30.0, "measure": 10.0}, windows=[1, 1, 1, 1, 1]),
        # pruned at its third window: 2 windows of 6 s / 3 left, and the fresh stream of at least 1 s
        trial(pruned, phase_seconds={"compile": 30.0, "measure": 6.0}, windows=[1, 1, 1]),
        # stopped while compiling after 80 s: the study's shortest measurement (10 s) not run
        trial(pruned, phase_seconds={"compile": 80.0}),
        trial(pruned, phase_seconds={"compile": 80.0}, duplicate_of=3),  # reused, not run: saves nothing more
    ]
    saved = pruning_savings(trials, {"windows": 5, "fresh_seconds": 1.0, "fresh_batches": 24})
    assert saved == {
        "saved_seconds": 15.0,
        "pruned_while_measuring": 1,
        "measuring_seconds_saved": 5.0,
        "stopped_while_compiling": 1,
        "compile_seconds_spent": 80.0,
        "measurement_seconds_skipped": 10.0,
    }
    text = savings_text({"pruning": saved})
    assert text.startswith("pruning saved at least 15.0 s") and "stopped while compiling after 80.0 s" in text
    assert savings_text({"pruning_saved_seconds": 12}) == "pruning saved about 12 s (estimated from median trial times)"


def test_speedups_name_the_host_whose_baselines_they_compare_with(monkeypatch) -> None:
    from autotune.runtime import environment
    from autotune.study.search import _loop as trials_module
    from autotune.study.search import load_space
    from autotune.trial.request import TrialRun

    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.space = load_space("quick")
    loop.baselines = {"eager": {"samples_per_second": 100.0}, "compile": {"samples_per_second": 200.0}}
    loop.host = environment.host_key({"torch": "2.13.0", "device_name": "cpu"})
    assert loop.host != environment.host_key({"torch": "2.12.0", "device_name": "cpu"})
    monkeypatch.setattr(Harness, "source", lambda self, config, created: "# generated")
    done = TrialRun(state="complete", result={"samples_per_second": 300.0, "batches_per_second": 3.0})
    monkeypatch.setattr(trials_module, "run_trial", lambda request, monitor, gate: done)
    monkeypatch.setattr(Harness, "request", lambda self, config, source: None)
    loop.one_trial()
    trial = loop.study.trials[-1]
    assert trial.user_attrs["speedup_vs_eager"] == 3.0 and trial.user_attrs["speedup_vs_compile"] == 1.5
    assert trial.user_attrs["baselines_of"] == loop.host
