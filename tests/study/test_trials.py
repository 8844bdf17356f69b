"""The trial loop: which earlier outcome a trial may reuse, and when a compiling trial is stopped."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace
from types import SimpleNamespace

import optuna
import pytest

from autotune import CompileConfig
from autotune.errors import SearchError
from autotune.measure import Harness, Objective, Paired, Throughput
from autotune.measure.tasks import LiveReference
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search import Monitor, SearchOptions, SearchSpace, TrialLoop, compile_limit
from autotune.study.storage import TRIAL_KEY, ReferenceLevels, TrialRecord, read_study_record, record_of
from autotune.trial.records import Event, Paused, PhaseChange
from tests import fake_records

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
    return TrialLoop(study, harness, options, Throughput(), lambda *args: None)


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


def test_a_trial_of_an_older_study_that_spells_a_neutral_setting_is_still_the_twin_of_todays_configuration() -> None:
    # Before recompile_limit was a knob, every stored configuration held `recompile_limit: None`.
    loop = loop_with(optuna.trial.TrialState.COMPLETE)  # trial 0: the regional scope
    today = CompileConfig(scope="whole").to_dict()
    assert "recompile_limit" not in today
    older = {**today, "recompile_limit": None}
    loop.study.add_trial(
        optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=2.0, user_attrs={"config": older})
    )
    twin = loop._reusable_twin(today, number=5)
    assert twin is not None and twin.number == 1, "the older trial of the same configuration"
    assert loop._reusable_twin({**today, "fullgraph": True}, number=5) is None, "another configuration is no twin"


def test_a_reused_outcome_keeps_who_ran_it_and_what_it_retried_apart() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    attrs = {"config": CONFIG, "retry_of": 7, "host": "elsewhere"}
    loop.study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=1.0, user_attrs=attrs))
    twin = loop.study.trials[1]
    trial = loop.study.ask()
    trial.set_user_attr("retry_of", 3)
    loop._copy_outcome(trial, twin)
    copied = loop.study.trials[trial.number]
    assert record_of(copied).duplicate_of == twin.number and record_of(copied).retry_of == 3
    assert record_of(copied).host is None


def test_a_trial_compiling_past_its_budget_is_stopped_and_an_explicit_limit_replaces_the_budget() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.baselines = {"compile": {"compile_seconds": 20.0}}
    assert compile_limit(loop) == (80.0, "4x plain torch.compile's 20.0 s (--compile-budget)")
    monitor = Monitor(loop, loop.study.ask(), "trial 1")
    monitor(Event(PhaseChange(phase="compile")))
    monitor.phase_started = time.monotonic() - 79
    assert monitor(None) is None
    monitor.phase_started = time.monotonic() - 81
    assert monitor(None) == "compile ran past 80 s: 4x plain torch.compile's 20.0 s (--compile-budget)"
    assert monitor(Event(fake_records.compiled(compile_seconds=85.0))).startswith("compile took 85 s, more than 80 s")
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
    monitor(Event(PhaseChange(phase="compile")))
    monitor.phase_started = time.monotonic() - 170
    assert monitor(None) is not None, "past the budget"
    assert monitor(Event(Paused(seconds=30.0))) is None
    assert monitor(None) is None, "30 s of it stood stopped while another worker measured"


def paired(trial_seconds: list[float], reference_seconds: list[float], over_eager: float = 2.0) -> Paired:
    """A trial's windows beside the reference's: each window 100 samples in the given seconds."""
    reference = LiveReference(
        worker=SimpleNamespace(alive=True),  # type: ignore[arg-type]  # a live worker that measures nothing here
        samples_per_second=200.0,
        batches_per_second=20.0,
        batches_per_window=10,
        over_eager=over_eager,
    )
    result = Paired(reference=reference, ready=fake_records.ready(stream_samples=100, stream_batches=10))
    for mine, theirs in zip(trial_seconds, reference_seconds, strict=True):
        result.trial_windows.append(fake_records.window(mine))
        result.reference_windows.append(fake_records.window(theirs))
    return result


def quick_space() -> SearchSpace:
    """The quick space as a model without dropout sees it: plain compile's configuration is one of its answers."""
    from autotune.study.search import load_space

    quick = load_space("quick")
    return replace(quick, knobs={k: v for k, v in quick.knobs.items() if k != "random_as_eager"})


def measuring_loop(monkeypatch: pytest.MonkeyPatch) -> tuple[TrialLoop, Paired]:
    """A loop whose every trial measures 1.5x the live reference (rated 200 samples/s, 2x eager), run for nothing."""
    from autotune.study.search import _loop as trials_module
    from autotune.trial.request import TrialRun

    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.space = quick_space()
    loop.baselines = {"eager": {"samples_per_second": 100.0}, "compile": {"samples_per_second": 200.0}}
    monkeypatch.setattr(Harness, "source", lambda self, config, created: "# generated")
    monkeypatch.setattr(Harness, "request", lambda self, config, source, cache_dir: None)
    done = TrialRun(state="complete", result=fake_records.result(samples_per_second=30.0, batches_per_second=3.0))
    beside = paired([1 / 1.5] * 3, [1.0] * 3)
    loop.references = {loop.harness.device: beside.reference}
    monkeypatch.setattr(trials_module, "measure_trial", lambda request, **kwargs: (done, beside))
    return loop, beside


def test_the_slow_ratio_rule_judges_a_trial_beside_the_reference_not_alone() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.options.pruner = "none"
    monitor = Monitor(loop, loop.study.ask(), "trial 1")
    # The trial runs a fifth of plain compile's speed, which runs twice eager's: 0.4x eager.
    slow = paired([5.0, 5.0], [1.0, 1.0])
    assert monitor.window(paired([5.0], [1.0])) is None, "one paired window is not enough to judge"
    assert monitor.window(slow) == (
        "it ran 0.40x eager beside the reference, at most 0.40x at 97.5% confidence: below --slow-ratio 0.5"
    )
    # A machine that got busy four times slower slows both sides of every pair alike: 1.1x the reference.
    hogged = paired([4 / 1.1, 4 / 1.1, 4 / 1.1], [4.0, 4.0, 4.0])
    assert hogged.trial_windows[0].samples / hogged.trial_windows[0].seconds < 0.5 * 100, "alone it looks slow"
    assert Monitor(loop, loop.study.ask(), "trial 2").window(hogged) is None
    assert hogged.ratio == pytest.approx(1.1) and hogged.samples_per_second == pytest.approx(220.0)


def test_the_slow_ratio_rule_waits_for_windows_that_agree_not_for_a_mean_below_the_bar() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.options.pruner, loop.options.slow_ratio = "none", 0.9
    monitor = Monitor(loop, loop.study.ask(), "trial 1")
    # Beside processes that take the machine, two paired windows read 0.3x and 0.5x plain compile (2x eager):
    # a mean of 0.77x eager's rate, below --slow-ratio 0.9 but far from known to be.
    noisy = paired([1 / 0.3, 1 / 0.5], [1.0, 1.0])
    assert noisy.over_eager is not None and noisy.over_eager < 0.9
    assert monitor.window(noisy) is None, "two windows that disagree by a factor of 1.7 bound nothing"
    # Six paired windows that agree at about 0.4x plain compile (0.8x eager) bound it below the bar.
    agreeing = paired([1 / 0.4, 1 / 0.41, 1 / 0.39, 1 / 0.4, 1 / 0.41, 1 / 0.39], [1.0] * 6)
    assert (why := monitor.window(agreeing)) is not None and why.startswith("it ran 0.80x eager"), why


def test_the_pruner_sees_the_paired_figure_at_each_paired_window() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    trial = loop.study.ask()
    monitor = Monitor(loop, trial, "trial 1")
    assert monitor.window(paired([0.5, 0.5], [1.0, 1.0])) is None
    assert loop.study.trials[trial.number].intermediate_values == {1: pytest.approx(400.0)}, "2x the reference's 200"


def test_the_pruner_hears_only_the_windows_every_trial_measures_not_a_contender_s_extra_ones() -> None:
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    trial = loop.study.ask()
    monitor = Monitor(loop, trial, "trial 1")
    for windows in range(1, 5):
        figures = paired([0.5] * windows, [1.0] * windows)
        figures.common_pairs = 2  # past them only contenders run: a median of contenders would prune half of them
        assert monitor.window(figures) is None
    assert sorted(loop.study.trials[trial.number].intermediate_values) == [0, 1]


def test_pruning_savings_come_from_each_trial_s_own_measurements() -> None:
    from autotune.study.report import pruning_savings, savings_text

    def trial(state: optuna.trial.TrialState, **attrs: object) -> optuna.trial.FrozenTrial:
        value = 1.0 if state == optuna.trial.TrialState.COMPLETE else None
        return optuna.trial.create_trial(state=state, value=value, user_attrs=attrs)

    complete, pruned = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
    trials = [
        trial(complete, phase_seconds={"compile": 30.0, "measure": 12.0}, windows=[1, 1, 1, 1, 1]),
        trial(complete, phase_seconds={"compile": 30.0, "measure": 10.0}, windows=[1, 1, 1, 1, 1]),
        # pruned at its third paired window of its warm restart: 2 windows of 6 s / 3 left
        trial(pruned, phase_seconds={"compile": 30.0, "measure": 6.0}, windows=[1, 1, 1]),
        # stopped while compiling after 80 s: the study's shortest measurement (10 s) not run
        trial(pruned, phase_seconds={"compile": 80.0}),
        trial(pruned, phase_seconds={"compile": 80.0}, duplicate_of=3),  # reused, not run: saves nothing more
    ]
    saved = pruning_savings(trials, {"windows": 5, "fresh_batches": 24})
    assert saved == {
        "saved_seconds": 14.0,
        "pruned_while_measuring": 1,
        "measuring_seconds_saved": 4.0,
        "stopped_while_compiling": 1,
        "compile_seconds_spent": 80.0,
        "measurement_seconds_skipped": 10.0,
    }
    text = savings_text({"pruning": saved})
    assert text.startswith("pruning saved at least 14.0 s") and "stopped while compiling after 80.0 s" in text
    assert savings_text({"pruning_saved_seconds": 12}) == "pruning saved about 12 s (estimated from median trial times)"


def test_speedups_name_the_host_whose_baselines_they_compare_with(monkeypatch) -> None:
    from autotune.runtime import environment
    from autotune.study.search import _loop as trials_module
    from autotune.trial.request import TrialRun

    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.space = quick_space()
    loop.baselines = {"eager": {"samples_per_second": 100.0}, "compile": {"samples_per_second": 200.0}}
    loop.host = environment.host_key({"torch": "2.13.0", "device_name": "cpu"})
    assert loop.host != environment.host_key({"torch": "2.12.0", "device_name": "cpu"})
    monkeypatch.setattr(Harness, "source", lambda self, config, created: "# generated")
    done = TrialRun(state="complete", result=fake_records.result(samples_per_second=30.0, batches_per_second=3.0))
    beside = paired([1 / 1.5] * 3, [1.0] * 3)  # 1.5x the reference, which ran 2x eager
    monkeypatch.setattr(trials_module, "measure_trial", lambda request, **kwargs: (done, beside))
    monkeypatch.setattr(Harness, "request", lambda self, config, source, cache_dir: None)
    # Whole-model scope: never the study's regional trial, whose outcome the loop would copy instead of measuring.
    loop.study.enqueue_trial({"scope": "whole"})
    loop.one_trial()
    trial = loop.study.trials[-1]
    assert trial.params["scope"] == "whole" and record_of(trial).duplicate_of is None
    assert record_of(trial).speedup_vs_eager == 3.0 and record_of(trial).speedup_vs_compile == 1.5
    assert record_of(trial).baselines_of == loop.host
    # What the sampler is told, and every table shows: the paired figure; the trial's own run stays beside it.
    assert trial.value == pytest.approx(300.0) and record_of(trial).samples_per_second == pytest.approx(300.0)
    assert record_of(trial).own.samples_per_second == 30.0
    # Everything the loop recorded of the trial is its one record, read back as that type.
    assert set(trial.user_attrs) == {TRIAL_KEY}
    assert TrialRecord.from_dict(trial.user_attrs[TRIAL_KEY]) == record_of(trial)
    assert record_of(trial).host is not None and (record_of(trial).config or {})["scope"] == "whole"


def test_a_trial_is_told_its_ratio_on_the_study_scale_and_the_reused_plain_run_stands_at_it(monkeypatch) -> None:
    from autotune.study.search import _loop as trials_module
    from autotune.study.search import params_for
    from autotune.study.storage import ValueScale, update_study_record
    from autotune.trial.request import TrialRun

    loop, _ = measuring_loop(monkeypatch)  # 1.5x the live reference, which this session measured at 200
    monkeypatch.setattr(trials_module, "anchor_reference", lambda reference, **kwargs: None)
    # The study's scale is 500 samples/s: recorded by the session that began it, or by a host that began a shared
    # study at the same moment after this session adopted its own. The next trial reads it again.
    scale = ValueScale(reference="compile", samples_per_second=500.0, batches_per_second=50.0, host="h", measured="")
    update_study_record(loop.study, scales={"compile": scale})
    # Every answer given: one left to the sampler might make this plain compile, and the next trial its duplicate.
    loop.study.enqueue_trial(params_for(loop.space, CompileConfig(mode="max-autotune-no-cudagraphs")))
    loop.one_trial()
    trial = loop.study.trials[-1]
    assert record_of(trial).duplicate_of is None and not record_of(trial).reused_run
    assert trial.value == pytest.approx(750.0) and record_of(trial).reference_samples_per_second == 500.0
    # Plain compile's run, reused as the seeded plain trial, stands where a trial level with the reference would.
    plain = TrialRun(state="complete", result=fake_records.result(samples_per_second=350.0, batches_per_second=35.0))
    loop.plain_run = (plain, "2026-11-28T00:00:00+00:00")
    loop.study.enqueue_trial(params_for(loop.space, CompileConfig()))
    loop.one_trial()
    reused = loop.study.trials[-1]
    assert record_of(reused).reused_run and record_of(reused).speedup_vs_compile == 1.0
    assert reused.value == 500.0 and record_of(reused).own.samples_per_second == 350.0


def test_the_reference_level_is_the_geometric_mean_of_its_anchors_due_before_the_first_trial_then_every_few() -> None:
    from autotune.study.search._loop import ANCHOR_EVERY

    reference = paired([1.0], [1.0]).reference
    assert reference.level == 1.0, "no anchor yet: the reference is read as it is"
    reference.levels, reference.level_errors = [0.8, 1.25], [0.02, 0.02]
    assert reference.measured_level == pytest.approx(1.0) and reference.level == pytest.approx(1.0)
    reference.levels, reference.level_errors = [0.8], [0.02]
    assert reference.level == pytest.approx(0.8)
    due = []
    for trials in range(2 * ANCHOR_EVERY + 1):
        reference.paired_trials = trials
        due.append(reference.anchor_due(ANCHOR_EVERY))
    assert [n for n, yes in enumerate(due) if yes] == [0, ANCHOR_EVERY, 2 * ANCHOR_EVERY]


def test_after_an_anchor_within_its_own_noise_no_other_is_due() -> None:
    from autotune.study.search._loop import ANCHOR_EVERY

    # A quiet reference: its first anchor read 1.007x, +/-5% by its windows. Another could not change a figure.
    reference = paired([1.0], [1.0]).reference
    assert reference.anchor_due(ANCHOR_EVERY), "one before the first trial"
    reference.levels, reference.level_errors = [1.007], [0.05]
    assert reference.anchors_ahead(3 * ANCHOR_EVERY, ANCHOR_EVERY) == 0
    due = []
    for trials in range(1, 3 * ANCHOR_EVERY + 1):
        reference.paired_trials = trials
        due.append(reference.anchor_due(ANCHOR_EVERY))
    assert not any(due) and reference.anchors_started == 1
    # One 5% slow by an anchor of +/-3% error: not decided by itself, but another anchor could decide it, so one is due.
    reference = paired([1.0], [1.0]).reference
    reference.anchors_started, reference.levels, reference.level_errors = 1, [0.95], [0.03]
    assert not reference.level_decided and reference.anchoring_worth
    reference.paired_trials = ANCHOR_EVERY
    assert reference.anchors_ahead(ANCHOR_EVERY, ANCHOR_EVERY) == 1 and reference.anchor_due(ANCHOR_EVERY)


def test_a_reference_level_within_the_anchors_own_noise_is_not_taken_out() -> None:
    reference = paired([1.0], [1.0]).reference
    # Two anchors 2% and 4% slow, each +/-4% by its own windows: their mean, 0.97, is within their band.
    reference.levels, reference.level_errors = [0.98, 0.96], [0.04, 0.04]
    assert reference.measured_level == pytest.approx(0.97, abs=1e-3)
    assert reference.level_band == pytest.approx(1.96 * math.sqrt(2 * 0.04**2) / 2, rel=1e-3)
    assert not reference.level_decided and reference.level == 1.0, "the trials are read as paired"
    # The same anchors, each +/-1%: 3% is then outside the band, and taken out.
    reference.level_errors = [0.01, 0.01]
    assert reference.level_decided and reference.level == pytest.approx(0.97, abs=1e-3)
    # Two anchors far apart say little, whatever their own windows claim: their spread stands in.
    reference.levels, reference.level_errors = [0.90, 1.02], [0.005, 0.005]
    assert reference.level_error == pytest.approx(statistics.stdev([math.log(0.90), math.log(1.02)]) / math.sqrt(2))
    assert reference.level == 1.0
    # An anchor without an error of its own (one paired window) leaves nothing to judge by: read as paired.
    reference.levels, reference.level_errors = [0.8], [None]
    assert reference.level_error is None and reference.level == 1.0


def test_the_search_notes_say_whether_the_reference_level_was_taken_out() -> None:
    from autotune.study.search._loop import _level_text

    reference = paired([1.0], [1.0]).reference
    reference.levels, reference.level_errors = [0.98, 0.96], [0.04, 0.04]
    said = _level_text(reference)
    assert "read as paired (2 restart(s) at 0.970, within the anchors' own noise, +/-6%)" in said, said
    reference.level_errors = [0.01, 0.01]
    said = _level_text(reference)
    assert "read against 0.970 (2 restart(s); off 1 by more than the anchors' own noise, +/-2%)" in said, said
    reference.levels, reference.level_errors = [0.9], [None]
    assert "no error to judge their 0.900 by" in _level_text(reference)


def test_a_trial_is_told_its_raw_pairing_and_shown_its_ratio_against_the_anchored_reference(monkeypatch) -> None:
    from autotune.study.search import _loop as trials_module

    loop, beside = measuring_loop(monkeypatch)  # 1.5x the live reference
    anchors: list[int] = []

    def anchor(reference: LiveReference, **kwargs) -> float:
        anchors.append(reference.paired_trials)
        reference.levels.append(1.25)  # a fresh plain compile ran 1.25x the live one: the reference sits low
        reference.level_errors.append(0.02)  # and its windows tell that from 1
        return 1.25

    monkeypatch.setattr(trials_module, "anchor_reference", anchor)
    for mode in ("default", "max-autotune-no-cudagraphs"):  # whole model: never the study's regional trial
        loop.study.enqueue_trial({"scope": "whole", "mode": mode})
        loop.one_trial()
    first, second = loop.study.trials[-2:]
    assert anchors == [0], "one anchor before the first trial; the next is due after a few more"
    assert record_of(first).paired_ratio == 1.5 and record_of(first).reference_level == 1.25
    assert record_of(first).speedup_vs_compile == pytest.approx(1.2), "against plain compile as a fresh process"
    # The sampler is told the raw pairing, which every trial shares: the order holds whatever the anchors say.
    assert first.value == pytest.approx(300.0) and second.value == pytest.approx(300.0)
    levels = read_study_record(loop.study).reference_levels[loop.harness.device]
    assert levels == ReferenceLevels(levels=[1.25], errors=[0.02])
    assert beside.reference.paired_trials == 2


def test_a_reference_that_ended_is_started_again_or_the_search_stops_saying_why(monkeypatch) -> None:
    # A reference killed for memory (or crashed) left every later trial "pruned: the reference stopped", and the
    # search went on compiling trials that could never be measured.
    from autotune.errors import SearchError
    from autotune.study.search import _loop

    notes: list[str] = []
    loop = loop_with(optuna.trial.TrialState.COMPLETE)
    loop.report = lambda number, phase, note="": notes.append(note)
    dead = SimpleNamespace(
        worker=SimpleNamespace(alive=False, run=SimpleNamespace(reason="oom"), process=SimpleNamespace(poll=lambda: -9))
    )
    alive = SimpleNamespace(worker=SimpleNamespace(alive=True))
    loop.references["cpu"] = dead
    restarted: list[object] = []
    monkeypatch.setattr(_loop, "restart_reference", lambda old: restarted.append(old) or alive)
    assert loop.reference_for(loop.harness) is alive and restarted == [dead]
    assert loop.references["cpu"] is alive and loop.reference_for(loop.harness) is alive, "started once"
    assert any("reference on cpu ended (oom); starting it again" in note for note in notes)
    loop.references["cpu"] = dead
    monkeypatch.setattr(_loop, "restart_reference", lambda old: None)
    with pytest.raises(SearchError, match="ended and could not start again"):
        loop.reference_for(loop.harness)
