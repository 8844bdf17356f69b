"""`autotune doctor`: graph breaks and recompiles found in real dynamo runs, with their place, cause and fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import resolve
from autotune.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, main
from autotune.errors import WorkloadError
from autotune.study.doctor import Diagnosis, break_cause, diagnose, guard_hint, guard_text, size_change, value_guard
from autotune.trial.doctor import parse_break
from autotune.trial.request import RunProtocol

pytestmark = pytest.mark.parallel

TARGETS = Path(__file__).parent.parent / "targets" / "doctor.py"
FEW_FRESH = RunProtocol(fresh_batches=4)


def line_of(marker: str) -> int:
    """The line of tests/targets/doctor.py that carries `# doctor: <marker>`."""
    lines = TARGETS.read_text().splitlines()
    return next(number for number, text in enumerate(lines, 1) if text.endswith(f"# doctor: {marker}"))


@pytest.fixture(scope="module")
def breaks_json() -> tuple[int, dict]:
    """`autotune doctor --format json` on the workload with three deliberate graph breaks, as a tool would run it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "doctor",
            "--model",
            "tests.targets.doctor:breaks_graph",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def test_graph_breaks_are_found_where_the_model_breaks_with_their_fix(breaks_json: tuple[int, dict]) -> None:
    code, data = breaks_json
    assert code == EXIT_FINDINGS
    assert data["clean"] is False
    found = {b["kind"]: b for b in data["breaks"]}
    assert set(found) == {"tensor value read in Python", "print or logging in forward", "Python-side randomness"}
    assert found["tensor value read in Python"]["location"] == f"tests/targets/doctor.py:{line_of('item')}"
    assert "capture_scalar_outputs" in found["tensor value read in Python"]["hint"]
    assert "item()" in found["tensor value read in Python"]["summary"]
    assert found["print or logging in forward"]["location"] == f"tests/targets/doctor.py:{line_of('print')}"
    assert found["Python-side randomness"]["location"] == f"tests/targets/doctor.py:{line_of('random')}"
    assert "torch.rand" in found["Python-side randomness"]["hint"]
    assert all(b["function"] == "forward" and b["hits"] >= 1 for b in data["breaks"])
    assert data["verdict"].startswith("3 graph breaks, all fixable: ")


def test_the_json_report_loads_back_and_renders_the_same_text(breaks_json: tuple[int, dict]) -> None:
    _, data = breaks_json
    diagnosis = Diagnosis.from_dict(data)
    assert diagnosis.to_dict() == data
    text = diagnosis.render()
    assert text.splitlines()[0] == data["verdict"]
    assert f"tests/targets/doctor.py:{line_of('item')} in forward" in text
    assert "fix: `.item()`" in text


def test_recompiles_on_a_varying_length_name_the_input_axis_and_how_to_avoid_them() -> None:
    diagnosis = diagnose("tests.targets.doctor:varying_length", protocol=FEW_FRESH)
    assert not diagnosis.breaks
    assert [r.what for r in diagnosis.recompiles] == ["tokens:1"]
    recompile = diagnosis.recompiles[0]
    assert recompile.kind == "size" and recompile.count >= 1
    assert recompile.changes[0] == "5 → 9"  # the first two batches' lengths
    assert recompile.functions == (f"forward (doctor.py:{line_of('tagger')})",)  # where the recompiled code starts
    assert "mark_dynamic(batch['tokens'], 1)" in recompile.hint
    assert "dynamic_dims={'tokens': [1]}" in recompile.hint  # not declared: say how to declare it
    assert "tokens:1: mark it dynamic or pad to a multiple of 8" in diagnosis.verdict()

    declared = diagnose("tests.targets.doctor:varying_length_declared", protocol=FEW_FRESH)
    assert "the Workload declares it dynamic" in declared.recompiles[0].hint
    # A declared axis: the verdict says what the search will try, and what learned buckets would waste.
    verdict = declared.verdict()
    assert "tokens:1, which the workload declares dynamic: the search tries marking it and padding it" in verdict
    assert "mark it dynamic or pad to a multiple of 8" not in verdict
    rows = {row["strategy"]: row for row in declared.padding}
    workload = resolve("tests.targets.doctor:varying_length_declared")
    seen = [*workload.draw_batches(0), *workload.fresh_batches(0, FEW_FRESH.fresh_batches)]
    lengths = [int(batch["tokens"].shape[1]) for batch in seen]
    assert declared.padding[0]["inputs"] == "tokens:1" and declared.padding[0]["batches"] == len(lengths)
    assert rows["as given"]["shapes"] == len(set(lengths)) and rows["as given"]["waste"] == 0
    assert rows["max (longest seen)"]["shapes"] == 1
    assert rows["buckets (2)"]["shapes"] == min(2, len(set(lengths)))
    assert rows["buckets (8)"]["waste"] <= rows["buckets (4)"]["waste"] <= rows["buckets (2)"]["waste"]
    assert "Padding the varying lengths" in declared.render() and "buckets (4)" in declared.render()
    assert Diagnosis.from_dict(declared.to_dict()).padding == declared.padding


@pytest.mark.slow
def test_transformers_loss_selection_is_found_with_its_fix_and_gone_once_fixed() -> None:
    unfixed = diagnose("tests.targets.doctor:gpt2_default_loss", protocol=FEW_FRESH)
    assert [b.kind for b in unfixed.breaks] == ["transformers loss selection"]
    found = unfixed.breaks[0]
    assert found.location.startswith("transformers/modeling_utils.py:")
    assert found.function == "loss_function"
    assert any("modeling_gpt2.py" in frame and "in forward" in frame for frame in found.stack)
    assert "model.loss_type" in found.hint
    assert unfixed.verdict().startswith("1 graph break, fixable: transformers loss selection at transformers/")

    fixed = diagnose("examples.hf:gpt2", protocol=FEW_FRESH)
    assert not fixed.breaks


def test_a_clean_model_exits_zero_with_a_clean_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--model", "tests.targets.doctor:clean", "--fresh-batches", "2"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("Clean: no graph breaks and no recompiles over 4 fixed and 2 fresh batches")


def test_bad_input_exits_with_the_error_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--model", "tests.targets.doctor:clean", "--fresh-batches", "-1"]) == EXIT_ERROR
    assert "--fresh-batches -1: must be >= 0" in capsys.readouterr().err
    with pytest.raises(WorkloadError, match="no attribute 'missing'"):
        diagnose("tests.targets.doctor:missing")


def test_data_dependent_shapes_and_untraceable_calls_get_their_hints() -> None:
    diagnosis = diagnose("tests.targets.doctor:data_dependent", protocol=RunProtocol(fresh_batches=0))
    kinds = {b.kind: b for b in diagnosis.breaks}
    assert kinds["data-dependent shape"].location == f"tests/targets/doctor.py:{line_of('mask')}"
    assert "capture_dynamic_output_shape_ops" in kinds["data-dependent shape"].hint
    assert kinds["call dynamo cannot trace"].location == f"tests/targets/doctor.py:{line_of('extension')}"
    assert "torch.compiler.disable" in kinds["call dynamo cannot trace"].hint
    # The mask's size changes with the data: a recompile on a tensor the model computes, not on an input.
    assert any(r.kind == "inner" and r.what == "picked:0" for r in diagnosis.recompiles)


def test_log_records_in_both_of_torchs_formats_are_parsed() -> None:
    first = parse_break(
        "Graph break in user code at /m/model.py:12\n"
        "Graph Break Reason: Encountered graph break when attempting to trace CALL: a call\n\n"
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
        "  Explanation: Dynamo does not support tracing `Tensor.item()`.\n"
        "  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True`.\n\n"
        "  Developer debug context: call_method TensorVariable() item () {}\n\n"
        "User code traceback:\n"
        '  File "/m/train.py", line 3, in step\n    model(x)\n'
        '  File "/m/model.py", line 12, in forward\n    y.item()\n'
    )
    assert (first["file"], first["line"]) == ("/m/model.py", 12)
    assert first["summary"] == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert first["torch_hints"] == ["Set `torch._dynamo.config.capture_scalar_outputs = True`."]
    assert [(f["file"], f["line"], f["function"]) for f in first["stack"]] == [
        ("/m/train.py", 3, "step"),
        ("/m/model.py", 12, "forward"),
    ]
    again = parse_break(
        "Graph break (user stack suppressed due to duplicate graph break) in user code at /m/model.py:12\n"
        "Graph Break Reason: Encountered graph break that we cannot resume from. Graph break encountered:\n\n"
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
    )
    assert (again["file"], again["line"], again["summary"]) == ("/m/model.py", 12, first["summary"])
    assert again["stack"] == []


def test_guards_are_read_into_what_changed() -> None:
    reason = "1/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 128, actual 119"
    change = size_change(reason)
    assert change is not None and (change.name, change.axis, change.expected, change.actual) == (
        "input_ids",
        1,
        128,
        119,
    )
    assert (
        guard_text("3/0: scale == 1.75                 # return y / scale  # model.py:9 in forward") == "scale == 1.75"
    )
    assert value_guard("scale == 1.75") == ("scale", True)
    assert value_guard("name == 'abc'") == ("name", False)
    assert "problem_type" in guard_hint("0/0: self.config.problem_type is None")
    assert break_cause("Failed to trace builtin operator `print`", []) is not None
    assert break_cause("some new reason torch invents", ["forward"]) is None


def test_the_compile_time_split_adds_up_and_says_what_would_shorten_it() -> None:
    diagnosis = diagnose("tests.targets.doctor:repeated_blocks", protocol=FEW_FRESH, measure_compile=True)
    split, measured = diagnosis.compile_split, diagnosis.compile_seconds
    assert set(split) == {"tracing", "aot_autograd", "inductor", "autotuning", "cudagraphs"}
    assert measured is not None and measured > 0 and split["tracing"] > 0 and split["inductor"] > 0
    # torch's own metrics account for the compile the doctor timed (its first pass less a second one).
    assert abs(sum(split.values()) - measured) <= 0.1 * measured, (split, measured)
    text = diagnosis.render()
    assert "Where plain torch.compile's" in text and "Inductor code generation and kernel compilation" in text
    assert "regional compilation: blocks repeat" in text and "a warm compile cache" in text
    assert "fewer recompiles" not in text  # none here
    assert Diagnosis.from_dict(diagnosis.to_dict()).compile_split == split
    # Without it, nothing is compiled with Inductor and nothing is said of compile time.
    quick = diagnose("tests.targets.doctor:repeated_blocks", protocol=FEW_FRESH)
    assert quick.compile_split == {} and "Where plain torch.compile's" not in quick.render()


def test_the_doctors_request_is_built_by_the_harness_as_every_other_request_is(monkeypatch) -> None:
    # One builder of worker requests: the doctor asks the harness (which has no workload summary yet, since the
    # doctor is what finds it out) for a request to its own program, and no other module spells out a request.
    from autotune.measure import Harness
    from autotune.runtime.config import CompileConfig
    from autotune.study.doctor import _doctor
    from autotune.trial.request import DOCTOR_PROGRAM, TrialRun

    seen = []

    def stand_in(request):
        seen.append(request)
        return TrialRun(state="failed", reason="crashed", message="stand-in")

    monkeypatch.setattr(_doctor, "run_trial", stand_in)
    protocol = RunProtocol(windows=3)
    with pytest.raises(Exception, match="the doctor could not run 'pkg.mod:make': crashed: stand-in"):
        diagnose("pkg.mod:make", "cpu", seed=7, protocol=protocol, timeout=12.0, measure_compile=True)
    expected = Harness(spec="pkg.mod:make", summary=None, seed=7, protocol=protocol, timeout=12.0).request(
        None, program=DOCTOR_PROGRAM, measure_compile=True
    )
    assert seen == [expected] and expected.program == DOCTOR_PROGRAM and expected.source is None
    with pytest.raises(ValueError, match="without a workload summary generates no code"):
        Harness(spec="pkg.mod:make", summary=None).request(CompileConfig())
    package = Path(__file__).parents[2] / "autotune"
    builders = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "TrialRequest(" in path.read_text() and path.name not in ("request.py", "_harness.py")
    )
    assert builders == [], f"worker requests built outside the harness: {builders}"
