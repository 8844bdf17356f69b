"""The live display: what a person watching a search sees, on a terminal and in a log."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import pytest

from autotune.measure import Campaign, CampaignRules, Subject, Throughput
from autotune.measure.engine import Replicate, expected_replicate_seconds
from autotune.study.report import Plan, Progress, SearchDisplay, duration
from autotune.study.report import _display as display_module
from autotune.study.report._display import QUIET, VERBOSE
from autotune.study.search import _session as _search_session
from autotune.trial.request import RunProtocol
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel


def test_the_eta_covers_trials_confirmation_and_the_compile_cache() -> None:
    plan = Plan(baselines=0, trials=3, confirmation=12, cache=2, typical_run=10.0)
    assert plan.eta(now=100.0) == 170.0
    plan.run_started = 96.0
    assert plan.eta(now=100.0) == 166.0, "the current run's elapsed time counts down"
    plan.run_started = 0.0
    assert plan.eta(now=100.0) == 160.0, "an overlong run never counts below the runs that follow it"
    assert Plan(trials=5).eta(now=0.0) is None, "nothing timed yet: no guess"


def test_the_confirmation_eta_counts_down_from_a_guess_made_before_its_first_replicate() -> None:
    # Three subjects with known first runs; the guess is their warm starts and windows, three replicates of it.
    firsts = {
        "eager": RunRecord(state="complete", samples_per_second=100.0, phase_seconds={"start": 2.0}),
        "compile": RunRecord(state="complete", samples_per_second=100.0, phase_seconds={"start": 2.0}, compile_split={"tracing": 1.0, "aot_autograd": 3.0, "inductor": 20.0}),
        "trial 5": RunRecord(state="complete", samples_per_second=100.0, phase_seconds={"start": 2.0, "build": 1.0}, compile_seconds=30.0),
    }  # fmt: skip
    assert expected_replicate_seconds(firsts, windows=10, window_seconds=0.5) == (2 + 6) + (2 + 4 + 6) + (3 + 10 + 6)
    # The processes import side by side: the display's guess counts the longest start once.
    together = expected_replicate_seconds(firsts, windows=10, window_seconds=0.5, starts_together=True)
    assert together == 2 + 6 + (4 + 6) + (1 + 10 + 6)
    campaign = Campaign(
        subjects={n: Subject(name=n, config=None) for n in firsts}, objective=Throughput(), cold=dict(firsts)
    )
    notes: list[str] = []
    search = SimpleNamespace(
        plan=Plan(cache=1, typical_run=40.0),
        options=SimpleNamespace(protocol=RunProtocol(window_seconds=0.5)),
        _report=lambda trial, phase: notes.append(phase),
    )
    planned = _search_session._planned(search)
    rules = CampaignRules(min_replicates=3, max_replicates=6, windows=10)
    planned(campaign, rules)
    first = search.plan.eta(now=search.plan.run_started)
    assert first == 3 * 35 + 40, "three replicates of the guess, then the compile cache"
    campaign.replicates.append(Replicate(design="together", windows=10, batches_per_window=5, seconds=45.0))
    planned(campaign, rules)
    assert search.plan.eta(now=search.plan.run_started) == 2 * 45 + 40 < first, "then the pace of those done"
    assert notes == ["confirmation: replicate 1 of 3 to 6", "confirmation: replicate 2 of 3 to 6"]


def test_a_subject_left_out_of_later_replicates_is_said_once_with_why() -> None:
    firsts = {n: RunRecord(state="complete", samples_per_second=100.0) for n in ("eager", "compile", "trial 3")}
    campaign = Campaign(
        subjects={n: Subject(name=n, config=None) for n in firsts}, objective=Throughput(), cold=dict(firsts)
    )
    said: list[str] = []
    search = SimpleNamespace(
        plan=Plan(),
        options=SimpleNamespace(protocol=RunProtocol(window_seconds=0.5)),
        _report=lambda trial, phase: None,
        _note=said.append,
    )
    planned = _search_session._planned(search)
    rules = CampaignRules(min_replicates=3, max_replicates=6, windows=10)
    planned(campaign, rules)
    campaign.retired["trial 3"] = "after replicate 2: slower than trial 5, 0.91x [0.85, 0.97]"
    planned(campaign, rules)
    planned(campaign, rules)
    assert said == [
        "confirm: trial 3 left out of later replicates, after replicate 2: slower than trial 5, 0.91x [0.85, 0.97]"
    ]


def test_durations_read_like_a_person_would_say_them() -> None:
    assert [duration(s) for s in (4.4, 65, 3725)] == ["4 s", "1 min 05 s", "1 h 02 min"]


def _progress(phase: str, eta: float | None = 300.0, done: int = 1, message: str = "") -> Progress:
    return Progress(done, 4, 1, phase, eta, message)


def test_a_log_gets_one_plain_line_per_phase_and_every_note() -> None:
    out = io.StringIO()
    shown = SearchDisplay(out)
    for update in (
        _progress("trial 1: starting"),
        _progress("trial 1: starting"),
        _progress("trial 1: compile"),
        _progress("", message="trial 1: 812 samples/s"),
    ):
        shown(update)
    shown.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "[1/4 trials]  trial 1: starting  ETA 5 min 00 s",
        "[1/4 trials]  trial 1: compile  ETA 5 min 00 s",
        "  trial 1: 812 samples/s",
    ]
    assert "\x1b" not in out.getvalue()


UPDATES = (
    _progress("trial 1: starting"),
    _progress("trial 1: compile"),
    _progress("", message="trial 1: 812 samples/s"),
)


def test_quiet_keeps_the_notes_and_drops_every_phase_line_and_the_live_status() -> None:
    out = io.StringIO()
    shown = SearchDisplay(out, live=True, verbosity=QUIET)
    for update in UPDATES:
        shown(update)
    shown.close()
    assert out.getvalue().splitlines() == ["  trial 1: 812 samples/s"]
    assert "\x1b" not in out.getvalue(), "no live line redrawn"


@pytest.mark.parametrize("live", [False, True])
def test_verbose_prints_every_phase_with_the_time_of_day_even_on_a_terminal(live: bool) -> None:
    out = io.StringIO()
    shown = SearchDisplay(out, live=live, verbosity=VERBOSE)
    for update in UPDATES:
        shown(update)
    shown.close()
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in out.getvalue().splitlines()]
    stamped = [line for line in lines if re.match(r"^\d\d:\d\d:\d\d ", line)]
    assert [line[9:] for line in stamped] == [
        "[1/4 trials]  trial 1: starting  ETA 5 min 00 s",
        "[1/4 trials]  trial 1: compile  ETA 5 min 00 s",
        "  trial 1: 812 samples/s",
    ]


def test_on_a_terminal_the_clocks_move_between_events(monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(display_module.time, "monotonic", lambda: clock[0])
    shown = SearchDisplay(io.StringIO(), live=True)
    try:
        shown(_progress("trial 2: compile", eta=120.0))
        first = shown.status().plain
        clock[0] += 75
        later = shown.status().plain
    finally:
        shown.close()
    assert first == "[1/4 trials]  trial 2: compile (0 s)  ETA 2 min 00 s"
    assert later == "[1/4 trials]  trial 2: compile (1 min 15 s)  ETA 45 s"


def test_before_anything_was_timed_the_eta_says_so() -> None:
    shown = SearchDisplay(io.StringIO())
    shown(_progress("baseline: eager (no compilation)", eta=None, done=0))
    assert shown.status().plain.endswith("ETA after the first compile")


def test_a_resumed_study_with_more_trials_than_asked_never_reads_8_of_1() -> None:
    shown = SearchDisplay(io.StringIO())
    shown(Progress(8, 1, None, "confirming", 60.0))
    assert shown.status().plain.startswith("[8/8 trials]")
