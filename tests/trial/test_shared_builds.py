"""A build the environment shares (Inductor's precompiled C++ header) is not charged to the configuration that met it first."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import CompileConfig
from autotune.trial.gate import MeasurementGate, Member
from autotune.trial.live import _without_stops
from autotune.trial.runner import TrialRequest, run_trial
from tests import fake_records
from tests.short_runs import SHORT, source_for

SPEC = "tests.trial_targets.workloads:pointwise_infer"

pytestmark = pytest.mark.parallel


@pytest.mark.slow  # compiles with Inductor in a new environment: its shared header is built
def test_the_first_compile_in_a_new_environment_leaves_the_shared_header_build_out_of_its_compile_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inductor keeps its precompiled header under the system's temporary folder, whatever the cache folder:
    # a temporary folder of its own makes this environment a new one, in which no header was built yet.
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    monkeypatch.setenv("TMPDIR", str(fresh))
    request = TrialRequest(spec=SPEC, source=source_for(SPEC, CompileConfig()), protocol=SHORT, timeout=600)
    first, second = run_trial(request), run_trial(request)
    for run in (first, second):
        assert run.state == "complete", run.message + run.stderr_tail
    assert list(fresh.rglob("*.gch")), "the worker built Inductor's precompiled header under its temporary folder"

    assert first.compiled is not None and first.compiled.shared_build_spans, first.compiled
    building = first.compiled.shared_build_seconds
    start, end = first.compiled.compile_span
    assert all(start <= b <= e <= end for b, e in first.compiled.shared_build_spans)
    # The worker's compile clock ran through the build; the compile time it reports leaves it out (and the accuracy
    # check's eager reference, as before).
    check = first.compiled.check_span
    checking = check[1] - check[0] if check is not None else 0.0
    assert first.compiled.compile_seconds == pytest.approx(end - start - checking - building, abs=0.05)
    assert first.record().shared_build_seconds == pytest.approx(building, abs=0.01)

    # The next process of the environment finds the header built: nothing of its compile is left out.
    assert second.compiled is not None and second.compiled.shared_build_spans == []
    assert second.record().shared_build_seconds is None


def test_time_stopped_inside_a_shared_build_is_not_taken_out_of_the_compile_time_again() -> None:
    # The worker compiled from 0 to 20 s and built the shared header from 1 to 6 s: it reported 15 s. Its parent
    # stopped it from 2 to 4 s (inside the build, already left out) and from 10 to 11 s (compile time).
    member = Member(pgid=1, device="cpu", joined=0.0, left=30.0, paused=[(2.0, 4.0), (10.0, 11.0)])
    compiled = fake_records.compiled(compile_seconds=15.0, compile_span=[0.0, 20.0], shared_build_spans=[[1.0, 6.0]])
    stops = _without_stops(MeasurementGate(), member, compiled)
    assert stops.compile_seconds == pytest.approx(14.0)
    assert stops.compile_paused_seconds == pytest.approx(1.0)
