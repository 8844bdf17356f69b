"""A run's record: versioned, strict about what it reads, readable from the records written before versions."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.errors import RecordError
from autotune.trial.run_record import RUN_RECORD_VERSION, RunRecord

pytestmark = pytest.mark.parallel


def _record() -> RunRecord:
    return RunRecord(state="complete", samples_per_second=812.5, windows=[800.0, 825.0], compile_seconds=3.25)


def test_a_record_comes_back_as_it_was_written_with_its_version() -> None:
    data = _record().to_dict()
    assert data["version"] == RUN_RECORD_VERSION
    assert RunRecord.from_dict(data) == _record()


def test_a_key_this_version_does_not_know_is_named() -> None:
    data = {**_record().to_dict(), "samples_per_sec": 1.0}
    with pytest.raises(RecordError, match="unknown key\\(s\\) samples_per_sec"):
        RunRecord.from_dict(data)


def test_a_record_of_another_version_is_refused_by_its_version() -> None:
    with pytest.raises(RecordError, match="of version 99"):
        RunRecord.from_dict({**_record().to_dict(), "version": 99})


def test_a_record_written_before_versions_is_read_without_the_keys_it_no_longer_has() -> None:
    old = {"state": "complete", "samples_per_second": 812.5, "stream_pass_seconds": 1.5}
    record = RunRecord.from_dict(old)
    assert record.samples_per_second == 812.5 and record.version == RUN_RECORD_VERSION


def test_a_record_is_not_changed_after_it_is_made() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _record().state = "failed"  # type: ignore[misc]


def test_a_record_of_version_2_is_read_with_no_warm_restart_check() -> None:
    # Version 3 added the warm restart's check seconds; a study written before keeps its records of version 2.
    old = {**_record().to_dict(), "version": 2, "check_seconds": 0.5}
    record = RunRecord.from_dict(old)
    assert record.restart_check_seconds is None and record.check_seconds == 0.5
    assert record.version == RUN_RECORD_VERSION
