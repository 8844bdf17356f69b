"""The measurement engine's statistics, stopping rules, export rule and retune decision, on synthetic runs.

No worker runs here: campaigns are built from made-up figures, or measured with stand-ins for
the first runs and the replicates whose figures are known, so that each rule can be put at
its boundary.
"""

from __future__ import annotations

import math
import random
import select
from dataclasses import replace
from pathlib import Path

import pytest

from autotune import CompileConfig
from autotune.measure import Budget, Campaign, Harness, Objective, Subject, choose, metrics, outcome
from autotune.measure.choice import decide
from autotune.measure.engine import Replicate, _replicate, block_orders, co_residence
from autotune.measure.engine import _engine as engine
from autotune.measure.report import confirmation_cells, confirmation_rows
from autotune.measure.stats import (
    BAND,
    REPLICATE_SD_FLOOR,
    Components,
    Interval,
    Looks,
    components,
    gain_margin,
    replicate_interval,
    windows_per_replicate,
)
from autotune.measure.tasks import design_text
from autotune.runtime.summary import WorkloadSummary
from autotune.trial.live import LiveWorker
from autotune.trial.request import RunProtocol, RunRecord, TrialRequest, TrialRun, noisy_reason, window_figures
from examples import decision_error
from tests import fake_records

pytestmark = pytest.mark.parallel

THROUGHPUT = Objective()
REGIONAL = CompileConfig(scope="regional")


def run(samples_per_second: float | None, *, failed: str = "", windows: list[float] | None = None) -> RunRecord:
    if failed or samples_per_second is None:
        return RunRecord(state="failed", reason=failed or "accuracy", message="it broke")
    return RunRecord(
        state="complete",
        samples_per_second=samples_per_second,
        batches_per_second=samples_per_second,
        compile_seconds=1.0,
        windows=windows or [],
    )


def campaign(**runs: list[float | None]) -> Campaign:
    """A campaign whose subject `name` ran at the given samples/s, one value per replicate (None: failed)."""
    result = Campaign(objective=THROUGHPUT)
    for name, values in runs.items():
        config = None if name == "eager" else (CompileConfig() if name == "compile" else REGIONAL)
        result.subjects[name] = Subject(name=name, config=config, trial=7 if name.startswith("trial") else None)
        result.runs[name] = [run(v) for v in values]
    count = max(len(v) for v in runs.values())
    result.replicates = [Replicate(design="together", blocks=12, batches_per_window=4) for _ in range(count)]
    return result


# -- intervals over replicates --------------------------------------------------------------------


def test_the_interval_is_the_t_interval_of_the_replicates_log_ratios() -> None:
    logs = [math.log(r) for r in (1.10, 1.12, 1.08, 1.11)]
    interval = replicate_interval(logs, windows=48)
    centre = sum(logs) / 4
    sd = math.sqrt(sum((v - centre) ** 2 for v in logs) / 3)
    assert interval.median == pytest.approx(math.exp(centre))
    assert interval.low == pytest.approx(math.exp(centre - 3.182 * sd / 2), rel=1e-3), "t with 3 degrees of freedom"
    assert (interval.rounds, interval.windows) == (4, 48)
    assert replicate_interval([math.log(1.2)]) == Interval(
        pytest.approx(1.2), pytest.approx(1.2), pytest.approx(1.2), 1
    )


@pytest.mark.parametrize("replicates", [3, 4, 6])
def test_the_interval_covers_the_true_ratio_95_times_in_100(replicates: int) -> None:
    rng = random.Random(replicates)
    covered = 0
    for _ in range(2000):
        interval = replicate_interval([math.log(1.15) + rng.gauss(0, 0.03) for _ in range(replicates)])
        covered += interval.low <= 1.15 <= interval.high
    assert 0.93 <= covered / 2000 <= 0.975


def test_ratios_pair_the_runs_of_one_replicate() -> None:
    # The machine got twice as fast after replicate 1; paired ratios do not notice, a ratio of medians would.
    drifting = campaign(compile=[100, 200, 200], **{"trial 7": [110, 220, 220]})
    versus = drifting.ratio("trial 7", "compile")
    assert versus is not None and versus.median == pytest.approx(1.1) and versus.rounds == 3
    assert versus.low == pytest.approx(1.1) and versus.gain


def test_a_configuration_that_failed_leads_nothing() -> None:
    # trial 1 led on its two completed replicates, then failed: it cannot be exported, yet it stayed the leader,
    # so the stop rule judged it and racing retired trial 2 for being slower than it.
    measured = campaign(eager=[50.0, 50.0, 50.0], compile=[100.0, 100.0, 100.0], **{"trial 1": [150.0, 151.0, None]})
    measured.subjects["trial 2"] = Subject(name="trial 2", config=REGIONAL, trial=8)
    measured.runs["trial 2"] = [run(v) for v in (120.0, 121.0, 122.0)]
    assert measured.leader() == "trial 2"
    assert "trial 2" not in engine.retire(measured, "compile")


def test_replicates_where_either_side_failed_are_left_out_of_a_ratio() -> None:
    versus = campaign(compile=[100, None, 100], **{"trial 7": [120, 120, 130]}).ratio("trial 7", "compile")
    assert versus is not None and versus.rounds == 2


def test_time_to_objectives_count_the_first_runs_compile_time() -> None:
    seconds = Campaign(objective=Objective.parse("time-to:10"))
    for name, rate, cold in (("compile", 10.0, 1.0), ("trial 7", 20.0, 4.0)):
        seconds.subjects[name] = Subject(name=name, config=REGIONAL)
        # A replicate starts warm (0.1 s); what time-to:N counts is the first, cold compile.
        seconds.runs[name] = [replace(run(rate), compile_seconds=0.1), replace(run(rate), compile_seconds=0.1)]
        seconds.cold[name] = replace(run(rate), compile_seconds=cold)
    versus = seconds.ratio("trial 7", "compile")
    assert versus is not None and versus.median == pytest.approx((1 + 10 / 10) / (4 + 10 / 20))
    assert seconds.compile_seconds("trial 7") == 4.0


def test_a_campaign_round_trips_through_plain_data_and_old_files_still_load() -> None:
    original = campaign(eager=[50, 55], compile=[100, 98], **{"trial 7": [120, None]})
    original.cold["compile"] = run(100.0)
    again = Campaign.from_dict(original.to_dict())
    assert again.to_dict() == original.to_dict()
    assert again.ratio("trial 7", "compile") == original.ratio("trial 7", "compile")
    old = {
        "objective": "throughput",
        "rounds": 2,
        "orders": [["eager", "compile"], ["compile", "eager"]],
        "subjects": {
            "eager": {"config": None, "runs": [run(50.0).to_dict(), run(52.0).to_dict()]},
            "compile": {"config": {}, "runs": [run(100.0).to_dict(), run(101.0).to_dict()]},
        },
        "remeasured": [],
    }
    loaded = Campaign.from_dict(old)
    assert loaded.rounds == 2 and loaded.ratio("compile", "eager").rounds == 2


# -- what an interval decides, at each boundary --------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [
        (1.016, 1.07, "gain"),
        # Above 1, but not by the margin of 1.5% (GAIN_MARGIN): a slower one can scatter there.
        (1.014, 1.07, "undecided"),
        (0.999, 1.05, "undecided"),
        (0.93, 0.985, "loss"),
        (0.93, 0.986, "undecided"),  # 1 / 1.015 = 0.98522
        (0.95, 1.001, "undecided"),
        (1 / 1.02, 1.02, "equivalent"),
        (0.985, 1.0201, "undecided"),
        (0.9805, 1.019, "equivalent"),  # the band's low edge is 1 / 1.02 = 0.98039
        (0.9803, 1.019, "undecided"),
        # Inside the band, an interval that excludes 1 is still equivalence: no gain or loss worth the name.
        (1.001, 1.0199, "equivalent"),
        (0.9805, 0.999, "equivalent"),
        # Out of the band, but with the estimate inside it: a difference smaller than the band, no claim. Before,
        # [1.001, 1.021] was a gain and [1.001, 1.019] not: the rule grew stricter as the measurement grew precise.
        (1.001, 1.021, "undecided"),
        (1.001, 1.0201, "undecided"),
        (0.9803, 0.999, "undecided"),
        (1.016, 1.045, "gain"),  # its estimate, 1.030, lies above the band
        (0.955, 0.984, "loss"),
    ],
)
def test_an_interval_decides_gain_loss_equivalence_or_nothing(low: float, high: float, said: str) -> None:
    # The estimate is the interval's geometric middle, as for a t-interval of log-ratios.
    assert outcome(Interval(math.sqrt(low * high), low, high, 3), within=0.02) == said


def test_one_replicate_decides_nothing() -> None:
    assert outcome(Interval(1.5, 1.4, 1.6, 1), within=0.02) == "undecided"


# -- variance components and how many windows a replicate holds ---------------------------------


def test_the_variance_components_separate_windows_from_replicates() -> None:
    rng = random.Random(1)
    per_replicate = []
    for _ in range(40):
        level = rng.gauss(0, 0.02)  # a process pair's own offset
        per_replicate.append([level + rng.gauss(0, 0.06) for _ in range(30)])
    parts = components(per_replicate)
    assert parts is not None and parts.replicates == 40
    assert math.sqrt(parts.window) == pytest.approx(0.06, rel=0.1)
    assert math.sqrt(parts.replicate) == pytest.approx(0.02, rel=0.35)


def test_more_windows_pay_when_windows_vary_more_and_replicates_cost_more() -> None:
    parts = Components(window=0.05**2, replicate=0.02**2, windows=12, replicates=3)
    best = windows_per_replicate(parts, window_seconds=1.0, replicate_seconds=10.0, least=4, most=100)
    assert best == math.ceil(math.sqrt(10.0 / 1.0 * 0.05**2 / 0.02**2))  # sqrt(c_p / c_w * window / replicate)
    cheaper = windows_per_replicate(parts, window_seconds=1.0, replicate_seconds=1.0, least=4, most=100)
    assert cheaper < best
    # Few replicates often show no variance between them; the plan assumes the least this machine
    # showed instead of putting every window into one long replicate.
    floor = math.ceil(math.sqrt(10.0 / 1.0 * 0.05**2 / REPLICATE_SD_FLOOR**2))
    for shown in (0.0, 0.01**2):
        quiet = Components(window=0.05**2, replicate=shown, windows=12, replicates=3)
        assert windows_per_replicate(quiet, window_seconds=1.0, replicate_seconds=10.0, least=4, most=40) == floor < 40
    assert windows_per_replicate(parts, window_seconds=100.0, replicate_seconds=1.0, least=4, most=40) == 4


# -- turns and who lives together -----------------------------------------------------------------


def test_each_block_is_a_permutation_and_the_next_runs_it_backwards() -> None:
    names = ["eager", "compile", "trial 3", "trial 5"]
    orders = block_orders(names, 7, random.Random(3))
    assert len(orders) == 7 and all(sorted(o) == sorted(names) for o in orders)
    for first, second in zip(orders[::2], orders[1::2], strict=False):
        assert second == first[::-1], "ABBA: drift within a block pair hits every subject alike"
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


# -- the engine: first runs, replicates, when it stops ---------------------------------------------


class Stand:
    """Stands in for first runs and replicates: each replicate's rate per subject from a table, in order."""

    def __init__(self, rates: dict[str, list[float]], failing: tuple[str, ...] = ()) -> None:
        self.rates = rates
        self.failing = failing
        self.first: list[str] = []
        self.replicates: list[list[str]] = []
        self.seconds = 1.0
        """What each replicate says it took (it takes no wall time)."""

    def first_run(self, request, monitor=None, gate=None) -> TrialRun:
        name = self.name_of(request)
        self.first.append(name)
        if name in self.failing:
            return TrialRun(state="failed", reason="accuracy", message="it broke")
        return TrialRun(
            state="complete",
            compiled=fake_records.compiled(compile_seconds=2.0),
            result=fake_records.result(samples_per_second=1.0),
        )

    def replicate(self, requests, groups, *, design, blocks, batches_per_window, window_seconds, rng, on_window=None):
        index = len(self.replicates)
        self.replicates.append(sorted(requests))
        runs = {}
        for name in requests:
            rates = self.rates[name]
            rate = rates[index % len(rates)]
            runs[name] = TrialRun(
                state="complete",
                ready=fake_records.ready(stream_samples=100, stream_batches=10),
                result=fake_records.result(samples_per_second=rate),
                windows=[window(100 / rate) for _ in range(blocks)],
            )
        replicate = Replicate(
            design=design, blocks=blocks, batches_per_window=4, seconds=self.seconds, ready_seconds=1.0
        )
        return replicate, runs, {}

    def name_of(self, request) -> str:
        if request.source is None:
            return "eager"
        if "max_autotune" in request.source:
            return "trial 8"
        return "compile" if "scope=whole" in request.source else "trial 7"


@pytest.fixture
def harness(toy_summary: WorkloadSummary) -> Harness:
    return Harness(spec="examples.toy:model", summary=toy_summary)


@pytest.fixture
def stand(monkeypatch) -> callable:
    def install(rates: dict[str, list[float]], failing: tuple[str, ...] = ()) -> Stand:
        fake = Stand(rates, failing)
        monkeypatch.setattr(engine, "run_trial", fake.first_run)
        monkeypatch.setattr(engine, "run_replicate", fake.replicate)
        return fake

    return install


def subjects() -> list[Subject]:
    return [*Subject.baselines(), Subject(name="trial 7", config=REGIONAL, trial=7)]


def test_first_runs_then_replicates_until_the_leader_is_decided(harness, stand) -> None:
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0, 131.0, 129.0]})
    result = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=6))
    assert fake.first == ["eager", "compile", "trial 7"], "each subject alone and cold first"
    assert result.rounds == 3 and result.stopped.startswith("decided after 3 replicates: trial 7 against compile: gain")
    assert result.compile_seconds("trial 7") == 2.0, "the compile time is the first run's"


def test_a_subject_with_a_first_run_and_its_cache_is_not_run_cold_again(harness, stand, tmp_path) -> None:
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0]})
    folder = tmp_path / "trial-7"
    (folder / "inductor").mkdir(parents=True)
    (folder / "inductor" / "entry").write_text("x")
    known = Subject(name="trial 7", config=REGIONAL, trial=7, cache_dir=str(folder), cold=run(130.0))
    engine.measure(harness, [*Subject.baselines(), known], objective=THROUGHPUT, budget=Budget(max_rounds=3))
    assert fake.first == ["eager", "compile"]
    gone = replace(known, cache_dir=str(tmp_path / "removed"))
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0]})
    engine.measure(harness, [*Subject.baselines(), gone], objective=THROUGHPUT, budget=Budget(max_rounds=3))
    assert fake.first == ["eager", "compile", "trial 7"], "its cache is gone: it runs cold again to fill one"


def _cold_seconds(fake: Stand, monkeypatch, seconds: dict[str, list[float]]) -> list[tuple[str, TrialRequest]]:
    """First runs whose compile seconds come from `seconds`, in turn per subject; the runs asked for, in order."""
    asked: list[tuple[str, TrialRequest]] = []
    turns = {name: iter(values) for name, values in seconds.items()}

    def first_run(request, monitor=None, gate=None) -> TrialRun:
        name = fake.name_of(request)
        asked.append((name, request))
        run = Stand.first_run(fake, request)
        if name in turns:
            run.compiled = fake_records.compiled(compile_seconds=next(turns[name]))
        return run

    monkeypatch.setattr(engine, "run_trial", first_run)
    return asked


def test_with_cold_compiles_every_configuration_compiles_again_before_each_replicate(
    harness, stand, monkeypatch, tmp_path
) -> None:
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0, 131.0, 129.0]})
    asked = _cold_seconds(fake, monkeypatch, {"compile": [20.0, 19.0, 21.0, 20.5], "trial 7": [30.0, 33.0, 27.0, 31]})
    budget = Budget(min_rounds=3, max_rounds=3, cold_compiles=True)
    result = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=budget, cache_root=tmp_path)
    firsts, again = asked[:3], asked[3:]
    assert [name for name, _ in firsts] == ["eager", "compile", "trial 7"]
    assert len(again) == 6 and {name for name, _ in again} == {"compile", "trial 7"}, "eager compiles nothing"
    for name, request in again:
        assert request.protocol["check_accuracy"] is False and request.protocol["fresh_batches"] == 0
        assert request.protocol["windows"] == 1
        assert request.cache_dir != result.subjects[name].cache_dir, "an empty folder of its own, not the warm one"
        assert not Path(request.cache_dir).exists(), "removed once compiled"
    assert result.compiles == {"compile": [19.0, 21.0, 20.5], "trial 7": [33.0, 27.0, 31.0]}
    assert result.compile_samples("eager") == [0.0, 0.0, 0.0]
    assert result.compile_seconds("trial 7") == 31.0, "the median of the cold compiles, not the first run's 30"
    extra = result.extra_compile("trial 7", "compile")
    assert extra.rounds == 3 and math.isclose(extra.median, 10.1666, rel_tol=1e-3) and extra.low < 10 < extra.high
    sooner = result.compile_ratio("compile", "trial 7")
    assert sooner.rounds == 3 and 1.3 < sooner.median < 1.7
    assert result.compile_ratio("eager", "compile") is None, "eager compiles nothing: no ratio"
    back = Campaign.from_dict(result.to_dict())
    assert back.compiles == result.compiles and back.extra_compile("trial 7", "compile") == extra


def test_time_to_reads_each_replicates_own_cold_compile(harness, stand, monkeypatch, tmp_path) -> None:
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0, 131.0, 129.0]})
    _cold_seconds(fake, monkeypatch, {"compile": [20.0, 19.0, 21.0, 20.5], "trial 7": [30.0, 33.0, 27.0, 31]})
    objective = Objective("time-to", 100)
    budget = Budget(min_rounds=3, max_rounds=3, cold_compiles=True)
    result = engine.measure(harness, subjects(), objective=objective, budget=budget, cache_root=tmp_path)
    for index, record in enumerate(result.runs["trial 7"]):
        own = result.compiles["trial 7"][index]
        assert result.value_of("trial 7", record, index=index) == objective.of(replace(record, compile_seconds=own))
    # A time-to decision rests on compile times that vary: the ratio's spread comes from them too.
    logs = result.log_ratios("trial 7", "compile")
    assert len(set(round(v, 9) for v in logs)) == 3


def test_without_cold_compiles_compile_time_is_the_first_runs_one_measurement(harness, stand, tmp_path) -> None:
    stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0, 131.0, 129.0]})
    result = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=3), cache_root=tmp_path
    )
    assert result.compiles == {} and result.compile_samples("eager") == []
    assert result.extra_compile("trial 7", "compile") is None and result.compile_ratio("trial 7", "compile") is None


def test_a_break_even_from_cold_compiles_has_an_interval_that_joins_both() -> None:
    # 1,200 samples/s against eager's 800 at 8 a step: a step saves 10 ms * (1 - 1/1.5) = 3.33 ms; 30 s of
    # compiling, give or take, pays back after about 9,000 steps, with an interval from both.
    timed = _timed(eager=([800.0] * 4, 0.0), compile=([1000.0] * 4, 20.0))
    timed.runs["trial"] = [
        RunRecord(state="complete", samples_per_second=r, batches_per_second=r / 8, compile_seconds=30.0)
        for r in (1190.0, 1210.0, 1195.0, 1205.0)
    ]
    timed.subjects["trial"] = Subject(name="trial", config=REGIONAL, trial=3)
    timed.compiles = {"compile": [20.0, 21.0, 19.0, 20.0], "trial": [28.0, 32.0, 29.0, 31.0]}
    figures = confirmation_rows(timed)[2]["break_even_vs_eager"]
    assert figures["compile_measurements"] == 4 and figures["compile_seconds"] == 30.0
    low, high = figures["steps_interval"]
    assert low < figures["steps"] < high and 8000 < figures["steps"] < 10000
    assert high / low < 1.5, "both spreads are small"
    cell = confirmation_cells(confirmation_rows(timed))[3]
    assert cell[5].startswith(f"{figures['steps']:,.0f} steps [{low:,.0f}, {high:,.0f}] (4 cold compiles each)")
    assert cell[4] == "30 [27.1, 32.9] (4 cold)"
    versus = confirmation_rows(timed)[2]["break_even_vs_compile"]
    assert versus["compile_seconds"] == 10.0 and versus["compile_measurements"] == 4


def test_replicates_are_added_while_undecided_up_to_the_budget(harness, stand) -> None:
    stand({"eager": [50.0], "compile": [100.0], "trial 7": [90.0, 112.0, 95.0, 110.0]})
    result = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=5))
    assert result.rounds == 5 and result.stopped.startswith("budget spent: 5 replicates")
    assert result.stopped.endswith("undecided")


def test_a_replicate_that_would_pass_the_seconds_budget_is_not_started(harness, stand) -> None:
    # The stand's replicates take no wall time but say they took 1 s to start: the next one would
    # take about that, which a budget of 0.5 s cannot hold, once the least replicates ran.
    stand({"eager": [50.0], "compile": [100.0], "trial 7": [90.0, 112.0, 95.0, 110.0]})
    tight = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=2, max_rounds=8, seconds=0.5)
    )
    assert tight.rounds == 2, tight.stopped
    assert tight.stopped.startswith("budget spent: ") and "another replicate (about 1 s) would pass" in tight.stopped
    roomy = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=2, max_rounds=8, seconds=600)
    )
    assert roomy.rounds == 8, "the undecided ratio is measured up to the most replicates"


def test_a_seconds_budget_plans_its_looks_up_to_the_replicates_it_can_hold(harness, stand) -> None:
    # The first runs say a replicate will take about 29 s (each subject's start, a third of its 2 s
    # cold compile for the warm one, 14 windows of 0.5 s): 100 s would hold three. The first replicate
    # then took 30 s: the looks stay after replicates 2 and 3 only, not the 19 looks `max_rounds`
    # would allow, and the campaign says why it stopped at the third.
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [90.0, 112.0, 95.0, 110.0]})
    fake.seconds = 30.0
    budget = Budget(min_rounds=2, max_rounds=20, seconds=100)
    result = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=budget)
    assert result.looks == Looks(candidates=1, first=2, last=3)
    assert result.rounds == 3
    assert "the most that 100 s of replicates hold" in result.stopped
    # A first replicate of 12 s, where the first runs guessed 29: the looks are planned again from what it took,
    # before any look was taken, and the budget's 100 s hold eight.
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [90.0, 112.0, 95.0, 110.0]})
    fake.seconds = 12.0
    replanned = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=budget)
    assert replanned.looks == Looks(candidates=1, first=2, last=8)
    assert replanned.rounds == 8 and "the most that 100 s of replicates hold" in replanned.stopped
    unbounded = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=2, max_rounds=5))
    assert unbounded.looks == Looks(candidates=1, first=2, last=5), "no seconds budget: every allowed look"
    roomy = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=2, max_rounds=3, seconds=1000)
    )
    assert roomy.rounds == 3 and "(the most allowed)" in roomy.stopped, "--max-rounds, not the seconds, set the last"


@pytest.mark.parametrize(("spread", "stops"), [(0.005, True), (0.02, False)])
def test_equivalence_stops_the_measurement_only_inside_the_band(harness, stand, spread: float, stops: bool) -> None:
    # The configuration runs as fast as plain compile; its three replicates scatter by +/- spread. The
    # campaign looks after 3 and 4 replicates and spends 1.25% a side at the first look: 6.21 standard
    # errors at 2 degrees of freedom. For 0.005 the spread is taken as the floor, 0.015, and the interval
    # is 0.054 wide each way, inside +/-6%; for 0.02 it is 0.072, outside it: only the first stops as
    # soon as it may.
    trial = [100.0 * (1 + spread), 100.0, 100.0 * (1 - spread)]
    stand({"eager": [50.0], "compile": [100.0], "trial 7": trial})
    result = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=4, decide_within=0.06)
    )
    assert (result.rounds == 3) is stops
    assert result.stopped.startswith("decided after 3 replicates: trial 7 against compile: equivalent") is stops


def test_three_replicates_that_happen_to_agree_do_not_prove_equivalence_within_the_band(harness, stand) -> None:
    # Identical to a thousandth, three replicates would have stopped at the first look with a +/-0.4%
    # interval; the floor of the spread between processes keeps the interval as wide as this machine's
    # least spread allows, so the campaign goes on to its last look.
    stand({"eager": [50.0], "compile": [100.0], "trial 7": [100.1, 100.0, 99.9]})
    result = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=4, decide_within=0.02)
    )
    assert result.rounds == 4, result.stopped
    assert "undecided" in result.stopped


def test_precision_keeps_measuring_a_decided_ratio_until_it_is_narrow(harness, stand) -> None:
    rates = [125.0, 126.0, 124.0, 125.5, 124.5, 125.0]
    stand({"eager": [50.0], "compile": [100.0], "trial 7": rates})
    loose = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=8))
    stand({"eager": [50.0], "compile": [100.0], "trial 7": rates})
    tight = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=8, precision=0.03)
    )
    assert loose.rounds == 3, "a gain is decided at once"
    assert tight.rounds > 3 and tight.ratio("trial 7", "compile").half_width <= 0.03
    assert tight.stopped.startswith("precise after")


def test_a_subject_that_fails_its_first_run_is_not_measured_again(harness, stand) -> None:
    fake = stand({"eager": [50.0], "compile": [100.0], "trial 7": [130.0]}, failing=("trial 7",))
    result = engine.measure(harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=2, max_rounds=2))
    assert all(names == ["compile", "eager"] for names in fake.replicates)
    assert result.failure("trial 7").reason == "accuracy"
    assert choose(result).subject == "compile"


def test_a_subject_that_is_a_baseline_is_not_run_again_and_shares_its_runs(harness, stand) -> None:
    fake = stand({"eager": [50.0, 52.0, 51.0], "compile": [100.0, 90.0, 95.0]})
    incumbent = Subject(name="incumbent", config=CompileConfig(), same_as="compile")
    budget = Budget(min_rounds=2, max_rounds=2)
    result = engine.measure(harness, [*Subject.baselines(), incumbent], objective=THROUGHPUT, budget=budget)
    assert fake.first == ["eager", "compile"] and fake.replicates == [["compile", "eager"], ["compile", "eager"]]
    assert result.complete_runs("incumbent") == result.complete_runs("compile")
    assert result.ratio("incumbent", "eager") == result.ratio("compile", "eager")
    assert result.ratio("incumbent", "compile") == Interval(1.0, 1.0, 1.0, 2, 24), "the same runs: exactly 1"
    (row,) = [r for r in confirmation_rows(result) if r["subject"] == "incumbent"]
    assert row["configuration"].endswith("(the compile runs: the same code)") and row["runs"] == 2
    again = Campaign.from_dict(result.to_dict())
    assert again.subjects["incumbent"].same_as == "compile" and again.to_dict() == result.to_dict()
    # More replicates (a retune making sure of a regression) run the baselines only, and the incumbent has them too.
    more = engine.measure(harness, [], objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=3), campaign=again)
    assert len(fake.replicates) == 3 and len(more.complete_runs("incumbent")) == 3


def test_a_subject_cannot_be_the_same_as_a_subject_that_is_not_measured(harness) -> None:
    stray = Subject(name="incumbent", config=CompileConfig(), same_as="trial 7")
    with pytest.raises(ValueError, match="'incumbent' is the same as 'trial 7'"):
        engine.measure(harness, [*Subject.baselines(), stray], objective=THROUGHPUT)


# -- what is exported -----------------------------------------------------------------------------


def test_a_trial_is_exported_only_when_its_gain_over_plain_compile_survives_the_noise() -> None:
    clear = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [120, 121, 119]}))
    assert (clear.subject, clear.trial, clear.config, clear.decision) == ("trial 7", 7, REGIONAL, "gain")
    assert clear.verdict.startswith("trial 7 is exported: a gain, 1.20x")
    straddling = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [104, 96, 106]}))
    assert (straddling.subject, straddling.config, straddling.decision) == ("compile", CompileConfig(), "undecided")
    assert "undecided within the measurement's budget" in straddling.verdict


def test_a_configuration_equivalent_to_plain_compile_is_said_to_be() -> None:
    twin = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [100.2, 101.1, 99.3]}))
    assert twin.subject == "compile" and twin.decision == "equivalent"
    assert "is equivalent to it" in twin.verdict and "inside +/-2%" in twin.verdict


def test_a_gain_inside_the_band_of_equivalence_exports_plain_compile() -> None:
    # About 1% faster in every replicate: an interval above 1, wholly inside +/-2%.
    small = {"compile": [100, 101, 99], "trial 7": [101.0, 102.1, 99.9]}
    inside = choose(campaign(eager=[50, 52, 51], **small))
    assert (inside.subject, inside.decision) == ("compile", "equivalent"), inside.verdict
    assert "is equivalent to it" in inside.verdict
    # The same gain judged in a narrower band is a gain, and exported.
    narrow = choose(campaign(eager=[50, 52, 51], **small), within=0.005)
    assert (narrow.subject, narrow.decision) == ("trial 7", "gain"), narrow.verdict


def test_a_gain_the_measurement_is_not_sure_of_by_the_margin_exports_plain_compile() -> None:
    # 4% faster by its estimate, with its replicates scattered by 2%: the interval clears 1 and not 1.015
    # (GAIN_MARGIN). A candidate 1% slower than plain compile whose replicates scatter high looks like this, so it
    # is not exported; before the margin it was, as a gain.
    compile = [100.0, 101.0, 99.0, 100.0]
    trial = [c * 1.04 * f for c, f in zip(compile, (1.02, 0.985, 1.015, 0.98), strict=True)]
    said = choose(campaign(eager=[50, 52, 51, 50], compile=compile, **{"trial 7": trial}))
    assert (said.subject, said.decision) == ("compile", "undecided"), said.verdict
    assert "not sure of 1.5%" in said.verdict and "above 1.015" in said.verdict, said.verdict


def test_when_every_configuration_trails_plain_compile_plain_compile_is_exported() -> None:
    chosen = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [80, 82, 79]}))
    assert chosen.exported == "plain torch.compile" and chosen.config == CompileConfig() and chosen.trial is None
    assert chosen.decision == "loss"
    assert chosen.verdict.startswith(
        "Plain torch.compile is exported: no configuration beat it: the best, trial 7, is slower, 0.80x"
    )


def test_when_eager_beats_plain_compile_nothing_is_compiled() -> None:
    chosen = choose(campaign(eager=[150, 152, 151], compile=[100, 101, 99], **{"trial 7": [90, 92, 91]}))
    assert chosen.exported == "no compilation" and chosen.config.scope == "none"
    assert chosen.verdict.startswith("No compilation is exported: eager ran 1.5")


def test_the_metrics_record_ratios_the_decision_the_design_and_the_noise() -> None:
    measured = campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [120, 121, 119]})
    figures = metrics(measured, choose(measured))
    assert figures["exported"] == "trial 7" and figures["rounds"] == 3 and figures["decision"] == "gain"
    assert figures["vs_compile"]["low"] > 1 and figures["speedup_vs_compile"] == figures["vs_compile"]["median"]
    assert figures["design"]["replicates"] == 3 and figures["design"]["co_residence"] == "together"
    assert figures["verdict"].startswith("trial 7 is exported") and figures["noise"]["runs"] == 9


def test_a_configuration_confirmed_faster_than_plain_compile_but_slower_than_eager_is_not_exported() -> None:
    measured = campaign(
        eager=[170_000.0, 205_000.0], compile=[1389.0, 1376.0], **{"trial 7": [1392.0 * 1.0001, 1379.0 * 1.0002]}
    )
    assert measured.ratio("trial 7", "compile").low > 1.0
    choice = choose(measured)
    assert choice.subject == "eager" and choice.config.scope == "none"
    assert "no configuration beat eager (the best, trial 7, ran 0.0" in choice.verdict


# -- the retune decision --------------------------------------------------------------------------


def retune_campaign(
    incumbent: list[float | None], challenger: list[float | None] | None = None, **baselines
) -> Campaign:
    runs: dict[str, list[float | None]] = {"eager": baselines.get("eager", [50.0] * len(incumbent))}
    runs["compile"] = baselines.get("compile", [100.0] * len(incumbent))
    runs["incumbent"] = incumbent
    if challenger is not None:
        runs["challenger"] = challenger
    return campaign(**runs)


def verdict(measured: Campaign, **recorded: Interval | None):
    return decide(measured, recorded=recorded, min_gain=0.03, max_regression=0.10)


def test_within_noise_the_incumbent_stays() -> None:
    result = verdict(retune_campaign([120, 121, 119], [122, 119, 123]))
    assert (result.decision, result.replaced, result.regressions) == ("unchanged", False, [])


def test_a_challenger_faster_in_every_replicate_replaces_the_incumbent() -> None:
    result = verdict(retune_campaign([120, 121, 119], [140, 139, 141]))
    assert (result.decision, result.replaced) == ("improved", True)
    assert result.gain == pytest.approx(140 / 120 - 1, rel=0.02)


def test_a_faster_estimate_with_one_losing_replicate_is_not_enough() -> None:
    result = verdict(retune_campaign([120, 121, 119], [140, 139, 110]))
    assert result.gain and result.gain > 0.03
    assert (result.decision, result.replaced) == ("unchanged", False)


def test_one_replicate_is_not_a_measurement() -> None:
    assert verdict(retune_campaign([100.0], [150.0])).replaced is False


@pytest.mark.parametrize(("challenger", "replaced"), [([101, 104, 107, 104], False), ([102.5, 104, 105.5, 104], True)])
def test_a_challenger_replaces_the_incumbent_only_where_its_interval_clears_the_gain_margin(
    challenger: list[float], replaced: bool
) -> None:
    # Both estimates are 4% above the incumbent (over --min-gain's 3%); the first interval's lower end is above 1
    # but not above 1.015, the margin any gain must clear.
    measured = retune_campaign([100.0] * 4, challenger)
    versus = measured.ratio("challenger", "incumbent")
    assert versus.median > 1.03 and versus.low > 1.0
    assert (versus.low > 1 + gain_margin(BAND)) is replaced
    result = verdict(measured)
    assert (result.decision, result.replaced) == ("improved" if replaced else "unchanged", replaced)


def test_one_replicate_calls_no_regression() -> None:
    # One replicate has an interval of one point: 1.00x plain compile "lies wholly below" 1.30x [1.25, 1.35] and
    # called a regression (exit code 3, acted on by a scheduler) from a single pair of runs.
    tuned_at = Interval(1.30, 1.25, 1.35, 3)
    assert verdict(retune_campaign([100.0]), compile=tuned_at).decision == "unchanged"
    assert verdict(retune_campaign([100.0, 101.0]), compile=tuned_at).decision == "regression"


def test_a_challenger_decided_slower_than_plain_compile_replaces_nothing() -> None:
    # A challenger at 0.90x plain compile, 1.12x the incumbent at 0.80x, replaced it as "improved": every export
    # promises to be no worse than plain compile, and a retune's replacement is an export.
    result = verdict(retune_campaign([80.0, 80.5, 79.5], [90.0, 90.5, 89.5]))
    assert result.replaced is False and result.decision == "unchanged"
    failing = verdict(retune_campaign([None, None, None], [90.0, 90.5, 89.5]))
    assert failing.decision == "regression" and failing.replaced is False
    level = verdict(retune_campaign([80.0, 80.5, 79.5], [100.0, 101.0, 99.5]))
    assert level.decision == "improved" and level.replaced is True, "a challenger as fast as plain compile may"


def test_an_incumbent_decided_slower_than_plain_compile_is_warned_of_without_a_regression() -> None:
    # 0.80x plain compile today, with nothing recorded to compare (an older file, another method): no regression
    # (exit code 3 is for worse than when tuned), but the user is told that plain compile is faster.
    slower = verdict(retune_campaign([80.0, 80.5, 79.5]))
    assert slower.decision == "unchanged" and not slower.regressions
    assert len(slower.warnings) == 1 and "now runs 0.80x plain torch.compile" in slower.warnings[0]
    assert "ship plain torch.compile" in slower.warnings[0]
    assert verdict(retune_campaign([100.0, 101.0, 99.5])).warnings == (), "level with plain compile: nothing to say"
    replaced = verdict(retune_campaign([80.0, 80.5, 79.5], [100.0, 101.0, 99.5]))
    assert replaced.replaced and replaced.warnings == (), "a replacement answers it"
    regressed = verdict(retune_campaign([80.0, 80.5, 79.5]), compile=Interval(1.10, 1.05, 1.15, 3))
    assert regressed.decision == "regression" and regressed.warnings == (), "the regression says it already"


def test_an_incumbent_that_is_plain_compile_pairs_the_challenger_with_plain_compile_partners() -> None:
    # The incumbent is plain compile: it runs as the compile subject, and in the 'pairs' design the challenger's
    # partner is plain compile's run in the challenger's own group. The ratio to the incumbent must read it.
    measured = retune_campaign([100.0, 100.0], [110.0, 111.0])
    measured.subjects["incumbent"] = replace(measured.subjects["incumbent"], config=CompileConfig(), same_as="compile")
    measured.runs["incumbent"] = measured.runs["compile"]
    measured.partners["compile"] = {"challenger": [run(120.0), run(121.0)]}
    assert measured.ratio("challenger", "compile").median == pytest.approx(110.5 / 120.5, rel=0.01)
    assert measured.ratio("challenger", "incumbent").median == pytest.approx(110.5 / 120.5, rel=0.01)


def test_a_failing_incumbent_is_a_regression_and_a_working_challenger_replaces_it() -> None:
    result = verdict(retune_campaign([None, None], [100.0, 101.0]))
    assert result.decision == "regression" and result.replaced is True
    assert result.regressions == ["the incumbent failed (accuracy): it broke"]


def test_a_ratio_to_plain_compile_that_fell_beyond_the_recorded_interval_is_a_regression() -> None:
    tuned_at = Interval(1.30, 1.25, 1.35, 3)
    fell = verdict(retune_campaign([100, 101, 99]), compile=tuned_at)
    assert fell.decision == "regression"
    assert "now runs 1.00x plain torch.compile" in fell.regressions[0]
    assert "against 1.30x [1.25, 1.35]" in fell.regressions[0]
    held = verdict(retune_campaign([128, 131, 126]), compile=tuned_at)
    assert held.decision == "unchanged"


@pytest.mark.parametrize(("now", "regressed"), [(119.5, False), (115.0, True)])
def test_a_drop_smaller_than_max_regression_is_none_even_below_the_recorded_interval(
    now: float, regressed: bool
) -> None:
    # Recorded 1.30x [1.28, 1.32]. Today's interval lies wholly below it either way; only a drop of
    # more than --max-regression (10%: below 1.17x) is a regression.
    tuned_at = Interval(1.30, 1.28, 1.32, 3)
    measured = retune_campaign([now, now * 1.002, now * 0.998])
    today = measured.ratio("incumbent", "compile")
    assert today.high < tuned_at.low
    assert (verdict(measured, compile=tuned_at).decision == "regression") is regressed


def test_a_machine_that_got_slower_as_a_whole_is_no_regression() -> None:
    slower_machine = retune_campaign([60, 61, 59], eager=[25, 25, 26], compile=[50, 50, 49])
    assert (
        verdict(slower_machine, compile=Interval(1.2, 1.15, 1.25, 3), eager=Interval(2.4, 2.3, 2.5, 3)).decision
        == "unchanged"
    )


def test_a_drop_whose_interval_overlaps_the_recorded_one_is_not_called_a_regression() -> None:
    noisy = retune_campaign([100, 150, 100])
    assert verdict(noisy, compile=Interval(1.3, 1.0, 1.6, 3)).decision == "unchanged"


# -- when compiling pays back -----------------------------------------------------------------------


def _timed(**subjects: tuple[list[float], float]) -> Campaign:
    """Subjects by (samples/s per replicate, compile seconds); 8 samples a step."""
    made = Campaign(objective=THROUGHPUT)
    for name, (rates, compile_seconds) in subjects.items():
        config = None if name == "eager" else (CompileConfig() if name == "compile" else REGIONAL)
        made.subjects[name] = Subject(name=name, config=config, trial=3 if name.startswith("trial") else None)
        made.runs[name] = [
            RunRecord(state="complete", samples_per_second=r, batches_per_second=r / 8, compile_seconds=compile_seconds)
            for r in rates
        ]
    made.replicates = [Replicate(design="together", blocks=12, batches_per_window=4) for _ in rates]
    return made


def test_the_break_even_is_the_compile_time_over_the_time_each_step_saves() -> None:
    # Eager: 800 samples/s at 8 a step, 10 ms a step. Twice as fast saves 5 ms a step: 30 s of compile pay back
    # after 6,000 steps. Plain compile 1.25x faster saves 2 ms a step: its 20 s pay back after 10,000 steps.
    timed = _timed(eager=([800.0] * 3, 0.0), compile=([1000.0] * 3, 20.0), trial=([1600.0] * 3, 30.0))
    rows = {row["subject"]: row for row in confirmation_rows(timed)}
    assert rows["eager"]["break_even_vs_eager"] is None
    assert rows["trial"]["break_even_vs_eager"]["steps"] == 6000
    assert rows["compile"]["break_even_vs_eager"]["steps"] == 10000
    # Against plain compile, only the 10 s more it compiles count: 8 ms a step becomes 5 ms, so 3,334 steps.
    assert rows["trial"]["break_even_vs_compile"]["steps"] == 3334
    assert rows["trial"]["break_even_vs_compile"]["compile_seconds"] == 10
    choice = choose(timed)
    assert choice.subject == "trial"
    assert choice.verdict.endswith(
        "Its 30 s of compiling pays back against eager after 6,000 steps (one cold compile each, no interval)."
    )
    cells = confirmation_cells(confirmation_rows(timed))
    assert cells[0][5] == "pays back after"
    assert cells[3][5] == (
        "6,000 steps (one cold compile each, no interval); its extra compile vs plain compile: "
        "3,334 steps (one cold compile each, no interval)"
    )


def test_a_subject_that_compiles_faster_owes_plain_compile_nothing_and_a_slower_one_never_pays_back() -> None:
    timed = _timed(eager=([800.0, 820.0], 0.0), compile=([700.0, 690.0], 20.0), trial=([1000.0, 1010.0], 5.0))
    rows = {row["subject"]: row for row in confirmation_rows(timed)}
    assert rows["trial"]["break_even_vs_compile"] is None
    assert rows["compile"]["break_even_vs_eager"]["steps"] is None
    assert confirmation_cells(confirmation_rows(timed))[2][5] == "never (not faster)"
    # A time-to objective names its horizon when the exported subject does not pay back within it.
    short = replace(timed, objective=Objective("time-to", 100))
    rows_short = {row["subject"]: row for row in confirmation_rows(short)}
    assert rows_short["trial"]["break_even_vs_eager"]["steps"] > 100
    from autotune.measure.choice import pay_back_sentence

    assert "more than the 100 steps of the objective: over 100 steps, eager finishes first" in pay_back_sentence(
        short, "trial"
    )


def test_a_break_even_is_one_figure_without_an_interval_since_each_compile_time_is_one_cold_run() -> None:
    # Before, the steps carried an interval from the speedup alone, as if the compile seconds were known
    # exactly: two validations of one configuration gave 62 [43, 124] and 5,977 [5,149, 7,158] steps.
    timed = _timed(eager=([800.0, 800.0, 800.0], 0.0), compile=([1000.0, 1000.0, 1000.0], 20.0))
    timed.runs["trial"] = [
        RunRecord(state="complete", samples_per_second=r, batches_per_second=r / 8, compile_seconds=30.0)
        for r in (1190.0, 1200.0, 1210.0)
    ]
    timed.subjects["trial"] = Subject(name="trial", config=REGIONAL, trial=3)
    figures = confirmation_rows(timed)[2]["break_even_vs_eager"]
    assert figures["steps"] is not None and figures["compile_measurements"] == 1
    assert "low" not in figures and "high" not in figures
    cell = confirmation_cells(confirmation_rows(timed))[3][5]
    assert cell.startswith(f"{figures['steps']:,.0f} steps (one cold compile each, no interval)") and "[" not in cell


# -- racing: subjects that no longer bear on the question leave later replicates -------------------

MAX_AUTOTUNE = CompileConfig(scope="regional", mode=None, options={"max_autotune": True})


def racers() -> list[Subject]:
    return [*subjects(), Subject(name="trial 8", config=MAX_AUTOTUNE, trial=8)]


@pytest.mark.parametrize(("spread", "retired"), [(0.014, True), (0.017, False)])
def test_a_configuration_decided_slower_than_the_leader_leaves_later_replicates(
    harness, stand, spread: float, retired: bool
) -> None:
    # Trial 8 runs 0.9x the leader, then 0.9 * (1 + spread): over two replicates the t-interval's top
    # (12.71 standard errors) is exp(log 0.9 + spread/2 + 6.35 * spread), below 1 only for spreads under 0.0154.
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [100.0], "trial 8": [90.0, 90.0 * (1 + spread)]}
    fake = stand(rates)
    budget = Budget(min_rounds=4, max_rounds=4, race=True)
    result = engine.measure(harness, racers(), objective=THROUGHPUT, budget=budget)
    assert ("trial 8" in fake.replicates[2]) is not retired, fake.replicates
    assert result.retired.get("trial 8", "").startswith("after replicate 2: slower than trial 7, 0.9") is retired
    if retired:
        assert result.ratio("trial 8", "compile").rounds == 2, "its figures rest on the replicates it ran in"
        assert result.runs["trial 8"][2:] == [None, None]
    assert all("compile" in names and "trial 7" in names for names in fake.replicates), "reference and leader stay"


@pytest.mark.parametrize(("eager", "retired"), [([50.0, 50.5], True), ([99.0, 99.13], False)])
def test_eager_leaves_later_replicates_only_once_its_simultaneous_interval_puts_it_below_plain_compile(
    harness, stand, eager: list[float], retired: bool
) -> None:
    # Eager matters to the export while it might beat plain compile: then a configuration must beat eager too, so
    # leaving it out is a claim, made on the campaign's own interval. At 0.99x, then 0.99x times 1.0013, the plain 95%
    # interval of the second look lies just below 1 (and left eager out before); the simultaneous one does not.
    fake = stand({"eager": eager, "compile": [100.0], "trial 7": [100.0, 101.0, 99.0]})
    result = engine.measure(
        harness, subjects(), objective=THROUGHPUT, budget=Budget(min_rounds=5, max_rounds=5, race=True)
    )
    plain = replicate_interval([math.log(e / 100.0) for e in eager])
    assert plain.high < 1.0, "the look's plain interval would leave it out"
    assert ("eager" in fake.replicates[4]) is not retired, fake.replicates
    assert "(simultaneous)" in result.retired.get("eager", "(simultaneous)")
    assert bool(result.retired.get("eager")) is retired


def test_without_racing_every_subject_runs_every_replicate(harness, stand) -> None:
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [100.0], "trial 8": [80.0]}
    fake = stand(rates)
    result = engine.measure(harness, racers(), objective=THROUGHPUT, budget=Budget(min_rounds=4, max_rounds=4))
    assert all(len(names) == 4 for names in fake.replicates) and not result.retired


def test_a_retired_subject_is_not_the_leader_and_its_retirement_is_kept(harness, stand) -> None:
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [100.0, 100.0, 60.0, 60.0], "trial 8": [90.0]}
    stand(rates)
    result = engine.measure(
        harness, racers(), objective=THROUGHPUT, budget=Budget(min_rounds=4, max_rounds=4, race=True)
    )
    # Trial 7 fell behind after trial 8 had left: trial 8, decided slower than it, is not made the leader again.
    assert "trial 8" in result.retired and result.leader() == "trial 7"
    again = Campaign.from_dict(result.to_dict())
    assert again.retired == result.retired and again.design()["retired"] == result.retired


def test_a_configuration_decided_slower_than_plain_compile_leaves_even_when_close_to_the_leader(harness, stand) -> None:
    # Both configurations lose to plain compile; trial 8 cannot be told from the leader, but it cannot be exported.
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [80.0, 81.0], "trial 8": [79.0, 81.5]}
    fake = stand(rates)
    result = engine.measure(harness, racers(), objective=THROUGHPUT, budget=Budget(min_rounds=3, race=True))
    assert result.ratio("trial 8", "trial 7").high > 1.0
    assert result.retired["trial 8"].startswith("after replicate 2: slower than compile")
    assert "trial 8" not in fake.replicates[2] and {"compile", "trial 7"} <= set(fake.replicates[2])


def test_a_configuration_that_left_the_race_is_not_exported(harness, stand) -> None:
    # Trial 8 left after two replicates, decided slower than trial 7, which then fell behind: trial 7 is
    # the one measured to the end, and undecided; trial 8's two replicates alone cannot make it the export.
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [120.0, 120.0, 95.0, 95.0], "trial 8": [110.0]}
    stand(rates)
    result = engine.measure(
        harness, racers(), objective=THROUGHPUT, budget=Budget(min_rounds=4, max_rounds=4, race=True)
    )
    assert (
        "trial 8" in result.retired
        and result.ratio("trial 8", "compile").median > result.ratio("trial 7", "compile").median
    )
    assert choose(result).subject == "compile"


def test_the_design_text_names_who_left_the_race_and_why(harness, stand) -> None:
    rates = {"eager": [50.0], "compile": [100.0], "trial 7": [100.0], "trial 8": [90.0]}
    stand(rates)
    result = engine.measure(
        harness, racers(), objective=THROUGHPUT, budget=Budget(min_rounds=3, max_rounds=3, race=True)
    )
    text = design_text(result)
    eager = result.retired["eager"]  # on the campaign's simultaneous interval, with its floor: not a point
    assert eager.startswith("after replicate 2: slower than compile, 0.50x [") and eager.endswith("(simultaneous)")
    assert "0.50x [0.50, 0.50]" not in eager
    assert f"Left out of later replicates: eager ({eager}); " in text
    assert "trial 8 (after replicate 2: slower than trial 7, 0.90x [0.90, 0.90] (95% at this look))" in text


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


@pytest.mark.parallel
def test_the_engine_keeps_false_gains_far_under_five_percent_over_looks_and_candidates() -> None:
    # The real engine on stand-ins, `--effort default`: three candidates as fast as plain compile, looks after
    # 3 to 6 replicates, a replicate spread of 0.02. With a plain 95% interval at every look, the leader was
    # called a gain in about 11% of such campaigns; the campaign's spent error keeps it near 0.5%.
    row = decision_error.run_case(decision_error.Case("default", 0.02, 1.0), campaigns=600, seed=3)
    assert row["claimed_gain"] <= 0.025 and row["exported"] <= 0.025, row
    assert row["covered"] >= 0.95, row


def test_the_search_time_ratio_stands_beside_the_confirmed_one_where_it_is_known() -> None:
    # A trial that looked 0.99x plain compile in its first run and confirmed 1.6x: the table shows both.
    timed = _timed(eager=([800.0] * 3, 0.0), compile=([1000.0] * 3, 20.0), trial=([1600.0] * 3, 30.0))
    cells = confirmation_cells(confirmation_rows(timed), {"trial": 0.99, "compile": 1.0})
    assert cells[0][2:5] == ["vs plain compile", "at search time", "vs eager"]
    by_subject = {row[0]: row for row in cells[1:]}
    assert by_subject["trial"][3] == "0.99x" and by_subject["trial"][2].startswith("1.60x")
    assert by_subject["compile"][3] == "1.00x" and by_subject["eager"][3] == "–", "eager was not a trial"
    assert all(len(row) == len(cells[0]) for row in cells)
    assert "at search time" not in confirmation_cells(confirmation_rows(timed))[0], "validate and retune: no search"
