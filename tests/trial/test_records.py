"""The worker's typed records: their JSON round trips, the wire version, strict reading, and a real worker's events."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import fields

import pytest

from autotune.errors import RecordError
from autotune.trial import records
from autotune.trial.live import LiveWorker
from autotune.trial.records import (
    EVENT_VERSION,
    CacheLoaded,
    CacheSaved,
    Compiled,
    DoctorFindings,
    EnvironmentReport,
    Event,
    Failure,
    FreshPass,
    Held,
    Pausable,
    Paused,
    PhaseChange,
    ReadyReport,
    ResultReport,
    SettleWindow,
    Window,
    WireRecord,
    event_line,
    parse_event,
)
from autotune.trial.request import TrialRequest
from tests import fake_records

EXAMPLES: list[WireRecord] = [
    Pausable(),
    Held(),
    PhaseChange(phase="compile"),
    EnvironmentReport(environment={"torch": "2.13.0", "device_name": "cpu"}),
    CacheLoaded(loaded={"inductor": 2}, load_seconds=0.25),
    CacheSaved(saved=True, bytes=10, sha256="ab", fingerprint={"torch": "2.13.0"}, artifacts={"inductor": 2}),
    CacheSaved(saved=False, message="torch recorded no compile artifacts in this process"),
    fake_records.compiled(check_span=[0.5, 1.0], compile_split={"dynamo": 0.5}, compile_peak_reserved_mb=3.0),
    fake_records.compiled(),
    SettleWindow(index=0, seconds=0.5, passes=4, samples_per_second=80.0, batches_per_second=8.0),
    fake_records.ready(),
    fake_records.ready(device_free_mb=1024.0),
    fake_records.window(0.5, others=0.1, load=1.5),
    fake_records.window(0.5),
    FreshPass(
        samples_per_second=90.0, batches_per_second=9.0, fresh_batches=24, fresh_recompiles=2, fresh_compile_seconds=1.5
    ),
    fake_records.result(steal=0.01, peak_reserved_mb=5.0, probe_seconds=[0.004, 0.005], load=[1.0, 1.2]),
    Failure(reason="accuracy", message="loss differs from eager", phase="compile"),
    DoctorFindings(
        blocks=["layers"],
        breaks=[{"file": "m.py", "line": 3, "summary": "print"}],
        recompiles=[],
        graphs=2,
        frames=3,
        fixed_batches=4,
        fresh_batches=24,
        recompile_limit=8,
        task="train",
        dynamic_dims={"input_ids": [1]},
        lengths={"input_ids:1": [8, 12]},
        inputs=["input_ids"],
        torch="2.13.0",
        compile_seconds=None,
        compile_split={},
    ),
]


pytestmark = pytest.mark.parallel


@pytest.mark.parametrize("record", EXAMPLES, ids=lambda r: r.KIND)
def test_every_record_survives_its_wire_form(record: WireRecord) -> None:
    assert type(record).from_json(json.loads(json.dumps(record.to_json()))) == record
    line = event_line(record, 12.5)
    assert parse_event(line.encode()) == Event(record=record, time=12.5)
    assert json.loads(line)["v"] == EVENT_VERSION


def test_every_record_a_worker_sends_has_an_example_here() -> None:
    assert {r.KIND for r in EXAMPLES} == set(records._WORKER_RECORDS)


def test_every_field_of_every_record_says_what_it_is() -> None:
    for kind in records._WORKER_RECORDS.values():
        source = inspect.getsource(kind)
        for f in fields(kind):  # type: ignore[arg-type]
            after = source.split(f"\n    {f.name}: ", 1)[1].splitlines()[1]
            assert after.strip().startswith('"""'), (kind.__name__, f.name)


def test_a_line_of_another_version_is_refused_naming_both_versions() -> None:
    wire = json.loads(event_line(PhaseChange(phase="build"), 1.0))
    for other in (EVENT_VERSION + 1, None):
        wire["v"] = other
        if other is None:
            del wire["v"]
        with pytest.raises(RecordError, match=rf"event version {other!r}, this autotune reads version {EVENT_VERSION}"):
            parse_event(json.dumps(wire))


def test_a_missing_or_unknown_field_is_refused_by_name() -> None:
    data = fake_records.window(1.0).to_json()
    del data["compile_samples"]
    with pytest.raises(RecordError, match="'window' record from the worker has missing field.s. compile_samples"):
        Window.from_json(data)
    data = {**fake_records.window(1.0).to_json(), "samples_per_sec": 3.0}
    with pytest.raises(RecordError, match="unknown field.s. samples_per_sec"):
        Window.from_json(data)
    nested = fake_records.ready().to_json()
    del nested["counts"]["frames"]
    with pytest.raises(RecordError, match="ready.counts: .*missing field.s. frames"):
        ReadyReport.from_json(nested)
    line = json.dumps({"v": EVENT_VERSION, "event": "window", "time": 1.0, "record": data})
    with pytest.raises(RecordError, match="samples_per_sec"):
        parse_event(line)


def test_an_unknown_event_is_refused_and_anything_else_is_not_an_event() -> None:
    with pytest.raises(RecordError, match="unknown event 'windows'; known: cache_loaded"):
        parse_event(json.dumps({"v": EVENT_VERSION, "event": "windows", "time": 1.0, "record": {}}))
    assert parse_event(b"a stray print") is None
    assert parse_event(b'{"partial": ') is None
    assert parse_event(b'{"no": "event"}') is None


def test_a_real_worker_sends_only_records_the_parent_reads() -> None:
    seen: list[Event] = []

    def keep(event: Event | None) -> None:
        if event is not None:
            seen.append(event)

    request = TrialRequest(
        spec="tests.trial_targets.workloads:tiny_train", source=None, protocol={"fresh_batches": 4}, timeout=120
    )
    worker = LiveWorker(request, keep).start()
    try:
        assert worker.until_ready(), worker.run.message
        window = worker.window(0, 0, 2)
        run = worker.end(stream=True)
    finally:
        worker.kill()
    assert run.state == "complete", (run.reason, run.message, run.stderr_tail)
    kinds = {type(event.record) for event in seen}
    assert {
        PhaseChange,
        EnvironmentReport,
        Compiled,
        SettleWindow,
        ReadyReport,
        Window,
        FreshPass,
        ResultReport,
    } <= kinds
    for event in seen:
        assert parse_event(event_line(event.record, event.time)) == event
    assert isinstance(window, Window) and run.windows == [window] and window.batches == 2
    assert run.ready is not None and run.ready.stream_batches == 4
    record = run.record()
    assert record.samples_per_second and record.windows and record.fresh_batches == 4


def test_an_event_line_is_read_from_text_as_from_bytes_with_its_time_as_a_float() -> None:
    line = json.dumps({"v": EVENT_VERSION, "event": "phase", "time": 3, "record": {"phase": "measure"}})
    event = parse_event(line)
    assert event == Event(record=PhaseChange(phase="measure"), time=3.0)
    assert event is not None and isinstance(event.time, float)
    assert parse_event(line.encode()) == event


@pytest.mark.parametrize("line", [b"[1, 2]", b"42", b'"event"', b"null", b"", b"\xff\xfe"])
def test_json_that_is_not_an_object_with_an_event_is_not_an_event(line: bytes) -> None:
    assert parse_event(line) is None


@pytest.mark.parametrize("time", [None, "12.5", True, [1.0]])
def test_an_event_without_a_numeric_time_is_refused_naming_what_came(time: object) -> None:
    wire = {"v": EVENT_VERSION, "event": "phase", "record": {"phase": "build"}}
    if time is not None:
        wire["time"] = time
    with pytest.raises(RecordError, match=rf"'phase' event has no time \(got {re.escape(repr(time))}\)"):
        parse_event(json.dumps(wire))


@pytest.mark.parametrize("record", [None, [], "phase", 7])
def test_an_event_whose_record_is_not_an_object_is_refused_naming_what_came(record: object) -> None:
    wire = {"v": EVENT_VERSION, "event": "phase", "time": 1.0, "record": record}
    with pytest.raises(RecordError, match=rf"'phase' event carries no record object \(got {re.escape(repr(record))}\)"):
        parse_event(json.dumps(wire))


def test_a_record_only_the_parent_makes_is_refused_from_a_worker() -> None:
    # The parent writes `Paused` for its own monitor; a worker claiming to have been paused is not believed.
    line = event_line(Paused(seconds=2.0), 1.0)
    with pytest.raises(RecordError, match="unknown event 'paused'"):
        parse_event(line)


@pytest.mark.parametrize(
    "command",
    [
        records.GoCommand(),
        records.WindowCommand(index=2, start=10, count=4, passes=3),
        records.StreamCommand(),
        records.EndCommand(stream=True),
    ],
)
def test_every_command_of_the_parent_survives_its_line_and_the_worker_reads_it_as_its_type(
    command: WireRecord,
) -> None:
    line = records.command_line(command)
    assert json.loads(line)["do"] == command.KIND
    assert records.parse_command(line) == command and records.parse_command(line.encode()) == command


def test_a_command_of_an_unknown_kind_or_with_a_wrong_field_is_refused_and_anything_else_is_no_command() -> None:
    with pytest.raises(RecordError, match="unknown command .*known: end, go, stream, window"):
        records.parse_command('{"do": "pause"}')
    with pytest.raises(RecordError, match="missing field.s. count"):
        records.parse_command('{"do": "window", "index": 1, "start": 0}')
    assert records.parse_command("not json") is None and records.parse_command("[1, 2]") is None


def test_what_the_search_asks_the_fork_server_is_a_record_read_back_strictly_naming_its_sender() -> None:
    from autotune.trial.forkserver import ForkRequest

    request = ForkRequest(
        program="autotune.trial.worker", args=["r.json"], env={"A": "1"}, cwd="/", fds=["X"], cpus=[0]
    )
    assert ForkRequest.from_json(json.loads(json.dumps(request.to_json()))) == request
    with pytest.raises(RecordError, match="'fork' record from the search has unknown field.s. cores"):
        ForkRequest.from_json({**request.to_json(), "cores": [0]})
    with pytest.raises(RecordError, match="'go' record from the parent has unknown field.s. now"):
        records.GoCommand.from_json({"now": True})
