"""A study's record: one versioned study attribute, read back as its type; older studies' loose attributes converted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune.errors import RecordError
from autotune.measure import Campaign, Subject, Throughput
from autotune.runtime.config import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.study.storage import (
    STUDY_KEY,
    CompileCacheRecord,
    ReferenceLevels,
    SearchSession,
    SearchSettings,
    SessionBaselines,
    StudyRecord,
    ValueScale,
    failure_of,
    read_study_record,
    update_study_record,
    write_study_record,
)
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel

OLD_STUDY = Path(__file__).parents[1] / "recorded" / "detour-study-2026-12-07"
"""A real search's study.db and best.yaml as autotune wrote them before the study record (see test_old_study.py)."""
OLD_NAME = "tests.trial_targets.dynamo_only-detour_infer"


def _memory_study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize", storage=optuna.storages.InMemoryStorage())


def _run(rate: float) -> RunRecord:
    return RunRecord(state="complete", samples_per_second=rate, batches_per_second=rate / 8, compile_seconds=3.0)


def _campaign() -> Campaign:
    campaign = Campaign(objective=Throughput(), orders=[["eager", "compile", "trial 1"]])
    for subject in (*Subject.baselines(), Subject(name="trial 1", config=CompileConfig(scope="regional"), trial=1)):
        campaign.subjects[subject.name] = subject
        campaign.runs[subject.name] = [_run(100.0)]
    return campaign


def _full() -> StudyRecord:
    """A record with every field holding something."""
    baselines = SessionBaselines(
        eager=_run(100.0), compile=_run(200.0), compile_over_eager=2.0, host="here", environment={"torch": "2.9"}
    )
    scale = ValueScale(reference="compile", samples_per_second=200.0, batches_per_second=25.0, host="here", measured="")
    return StudyRecord(
        objective="throughput",
        pick="fastest",
        model="tests.trial_targets.workloads:tiny_infer",
        device="cpu",
        space="default",
        settings=SearchSettings(sampler="tpe", pruner="median", seed=3, protocol={"windows": 5}, storage="study.db"),
        method={"version": 6},
        workload=WorkloadSummary(spec="tests.trial_targets.workloads:tiny_infer", task="infer"),
        model_fingerprint={"model_class": "Tiny"},
        environment={"torch": "2.9"},
        baselines=baselines,
        host_baselines={"here-1234": baselines},
        scales={"compile": scale},
        reference_levels={"cpu": ReferenceLevels(levels=[1.02], errors=[None])},
        doctor={"clean": True, "breaks": []},
        stacked=[],
        abandoned={7: "abandoned: the search that ran it (pid 41) was killed before the trial finished"},
        stopped="stopped searching: 4 of 5 trials failed",
        confirmation=_campaign(),
        compile_cache=CompileCacheRecord(subject="trial 1", section={"saved": True}),
        search_stages={"baselines": 4.0, "trials": 20.0},
        search_wall_seconds=30.5,
        search_session=SearchSession(host="here", pid=41, workers=2),
    )


def test_a_record_round_trips_through_its_stored_form_and_json() -> None:
    record = _full()
    stored = json.loads(json.dumps(record.to_dict(), allow_nan=False))
    assert stored["version"] == 1 and stored["stacked"] == [], "stacking ran and stacked nothing: kept, not left out"
    again = StudyRecord.from_dict(stored)
    assert again.to_dict() == stored
    assert replace(again, confirmation=None) == replace(record, confirmation=None)
    assert again.abandoned == {7: record.abandoned[7]}, "a trial's number comes back as a number"


def test_a_record_of_another_version_or_with_a_field_it_lacks_is_refused_by_name() -> None:
    stored = _full().to_dict()
    with pytest.raises(RecordError, match=r"version 2: this autotune reads version 1"):
        StudyRecord.from_dict({**stored, "version": 2})
    with pytest.raises(RecordError, match=r"version None"):
        StudyRecord.from_dict({k: v for k, v in stored.items() if k != "version"})
    with pytest.raises(RecordError, match=r"a study record has unknown field\(s\) colour; its fields are .*abandoned"):
        StudyRecord.from_dict({**stored, "colour": "blue"})
    with pytest.raises(RecordError, match=r"a study record's settings has unknown field\(s\) colour"):
        StudyRecord.from_dict({**stored, "settings": {**stored["settings"], "colour": "blue"}})
    levels = {"cpu": {"levels": [1.0], "errors": [], "colour": "blue"}}
    with pytest.raises(RecordError, match=r"reference_levels.cpu has unknown field\(s\) colour"):
        StudyRecord.from_dict({**stored, "reference_levels": levels})
    with pytest.raises(RecordError, match=r"a study record's scales must be a mapping by key, got list"):
        StudyRecord.from_dict({**stored, "scales": [200.0]})
    with pytest.raises(RecordError, match=r"a study record's workload cannot be read: .*task"):
        StudyRecord.from_dict({**stored, "workload": {"spec": "m:w"}})
    with pytest.raises(RecordError, match=r"a study record must be a mapping, got list"):
        StudyRecord.from_dict([1, 2])


def test_a_study_written_today_holds_its_state_in_one_attribute_and_reads_it_back() -> None:
    study = _memory_study()
    assert read_study_record(study) == StudyRecord(), "a study no search has opened reads as the defaults"
    update_study_record(study, model="m:w", device="cpu", stacked=["regional+max-autotune"])
    update_study_record(study, stopped="why")
    assert set(study.user_attrs) == {STUDY_KEY}
    record = read_study_record(study)
    assert (record.model, record.device, record.stacked, record.stopped) == (
        "m:w",
        "cpu",
        ["regional+max-autotune"],
        "why",
    )
    with pytest.raises(TypeError, match="StudyRecord has no field.* colour; its fields are"):
        update_study_record(study, colour="blue")


def test_entries_by_device_host_reference_or_trial_are_added_beside_those_stored() -> None:
    # A host writes what it read a while ago: what another host wrote meanwhile stays.
    study = _memory_study()
    update_study_record(study, reference_levels={"cuda:0": ReferenceLevels(levels=[1.1])}, abandoned={3: "gone"})
    update_study_record(study, reference_levels={"cuda:1": ReferenceLevels(levels=[0.9])}, abandoned={5: "gone too"})
    record = read_study_record(study)
    assert set(record.reference_levels) == {"cuda:0", "cuda:1"} and set(record.abandoned) == {3, 5}
    # The other fields are replaced whole: the latest session's stages are its own.
    update_study_record(study, search_stages={"trials": 1.0})
    update_study_record(study, search_stages={})
    assert read_study_record(study).search_stages == {}
    # Writing a whole record is the one way to drop entries.
    write_study_record(study, replace(record, abandoned={}))
    assert read_study_record(study).abandoned == {}


def test_a_trial_failed_where_it_could_no_longer_be_written_reads_its_reason_from_the_study() -> None:
    study = _memory_study()
    trial = study.ask()
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    update_study_record(study, abandoned={trial.number: "abandoned: no heartbeat for 60 s"})
    (frozen,) = study.trials
    assert failure_of(frozen, read_study_record(study)) == ("abandoned", "abandoned: no heartbeat for 60 s")
    assert failure_of(frozen, StudyRecord()) == ("", ""), "no reason recorded anywhere"


def _old_attrs() -> dict:
    study = optuna.load_study(study_name=OLD_NAME, storage=f"sqlite:///{OLD_STUDY / 'study.db'}")
    return study.user_attrs


def test_a_study_written_before_the_record_reads_through_the_converter_with_nothing_lost() -> None:
    attrs = _old_attrs()
    assert STUDY_KEY not in attrs
    record = StudyRecord.from_loose(attrs)
    for name in ("objective", "pick", "model", "device", "space", "method", "model_fingerprint", "environment"):
        assert getattr(record, name) == attrs[name], name
    assert record.settings.to_dict() == attrs["settings"] and record.doctor == attrs["doctor"]
    assert record.workload is not None and record.workload.to_dict() == attrs["workload"]
    for name in ("eager", "compile"):
        assert record.baselines.figures(name) == attrs[f"baseline.{name}"], name
    (host,) = [key.removeprefix("baselines.") for key in attrs if key.startswith("baselines.")]
    mine = record.host_baselines[host]
    assert (mine.host, mine.environment, mine.measured) == tuple(
        attrs[f"baselines.{host}"][k] for k in ("host", "environment", "measured")
    )
    assert mine.figures("compile") == attrs[f"baselines.{host}"]["compile"]
    assert {k: s.to_dict() for k, s in record.scales.items()} == attrs["value_scale"]
    assert record.reference_levels == {
        "cpu": ReferenceLevels(levels=attrs["reference_levels:cpu"], errors=attrs["reference_level_errors:cpu"])
    }
    assert record.confirmation is not None
    # Its runs now say their version, and the count of its replicates is no longer called rounds.
    written = {("rounds" if k == "replicate_count" else k): v for k, v in record.confirmation.to_dict().items()}
    assert _unversioned(written) == attrs["confirmation"]
    assert record.stacked == attrs["stacked"] and record.search_stages == attrs["search_stages"]
    assert record.search_wall_seconds == attrs["search_wall_seconds"]
    assert record.search_session is not None and record.search_session.to_dict() == attrs["search_session"]
    # Every loose attribute the study holds is one of those read above.
    read = {"objective", "pick", "model", "device", "space", "method", "model_fingerprint", "environment", "settings"}
    read |= {"doctor", "workload", "baseline.eager", "baseline.compile", f"baselines.{host}", "value_scale"}
    read |= {"reference_levels:cpu", "reference_level_errors:cpu", "confirmation", "stacked", "search_stages"}
    read |= {"search_wall_seconds", "search_session"}
    assert set(attrs) == read


def test_the_converter_reads_what_that_study_did_not_hold_with_its_readers_defaults() -> None:
    record = StudyRecord.from_loose(
        {
            "abandoned:4": "abandoned: the search that ran it (pid 9) was killed",
            "abandoned:x": "not a trial's",
            "stopped": "stopped searching",
            "compile_cache": {"saved": True, "bytes": 10, "subject": "trial 2"},
            "reference_levels:cuda:0": [1.1, 1.2],
            "value_scale": {"compile": {"samples_per_second": 0.0, "batches_per_second": 1.0}},
            "my_own_note": "a user's attribute is left alone",
        }
    )
    assert record.abandoned == {4: "abandoned: the search that ran it (pid 9) was killed"}
    assert record.stopped == "stopped searching"
    assert record.compile_cache == CompileCacheRecord(subject="trial 2", section={"saved": True, "bytes": 10})
    assert record.reference_levels == {"cuda:0": ReferenceLevels(levels=[1.1, 1.2], errors=[])}
    assert record.scales == {}, "a scale of no rate scales nothing, as its reader had it"
    # What none of those attributes says takes the default its readers used.
    assert (record.objective, record.pick, record.model, record.stacked) == ("throughput", "fastest:2x", "", None)
    assert record.settings == SearchSettings() and record.baselines.of("compile") == RunRecord(state="failed")
    with pytest.raises(RecordError, match=r"the study attribute 'workload' cannot be read: .*task"):
        StudyRecord.from_loose({"workload": {"spec": "m:w"}})


def test_the_first_write_to_an_old_study_stores_its_loose_attributes_in_the_record(tmp_path: Path) -> None:
    (tmp_path / "study.db").write_bytes((OLD_STUDY / "study.db").read_bytes())
    study = optuna.load_study(study_name=OLD_NAME, storage=f"sqlite:///{tmp_path / 'study.db'}")
    before = read_study_record(study)
    update_study_record(study, stopped="resumed and stopped")
    after = optuna.load_study(study_name=OLD_NAME, storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert STUDY_KEY in after.user_attrs
    assert read_study_record(after).to_dict() == replace(before, stopped="resumed and stopped").to_dict()


def _unversioned(value: Any) -> Any:
    """`value` without the runs' `version` keys, which records written before versions lack (a run's record is the
    mapping with a `state`)."""
    if isinstance(value, dict):
        run = "state" in value
        return {k: _unversioned(v) for k, v in value.items() if not (run and k == "version")}
    if isinstance(value, list):
        return [_unversioned(v) for v in value]
    return value
