"""Narrowing a failed trial to the settings that cause it: delta debugging in fresh worker processes."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
import torch

from autotune import CompileConfig
from autotune.cli import main
from autotune.measure import Harness
from autotune.study.explain import (
    ProbeOutcome,
    config_with,
    failing_stage,
    narrow,
    settings_of,
    short_probe,
    stage_of,
)
from autotune.study.storage import (
    TRIAL_KEY,
    StudyRecord,
    TrialRecord,
    create_study,
    read_study_record,
    write_study_record,
)
from autotune.trial.run_record import RunRecord
from autotune.workload import resolve
from tests.processes import with_command_line

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]

SKIPS = "tests.trial_targets.dynamo_only:skips_its_update_when_compiled"
TWO = "tests.trial_targets.dynamo_only:wrong_under_two_settings"


def gone_within(found: Callable[[], list[int]], seconds: float) -> bool:
    """Whether `found()` lists no process within `seconds`."""
    deadline = time.monotonic() + seconds
    while found():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def harness_for(spec: str) -> Harness:
    workload = resolve(spec)
    return Harness(spec=spec, summary=workload.summary(spec, workload.draw_batches()), timeout=120)


def test_a_setting_that_applies_only_with_another_goes_with_it() -> None:
    config = CompileConfig(compile_optimizer=True, dynamic=False, knobs={"optimizer_mode": "max-autotune"})
    names = [s.name for s in settings_of(config)]
    assert names == ["dynamic", "compile_optimizer", "optimizer_mode"]
    assert config_with(config, ["optimizer_mode", "dynamic"]) == CompileConfig(dynamic=False)
    assert config_with(config, names) == config
    assert config_with(config, []) == CompileConfig()


def test_options_beyond_a_mode_are_settings_of_their_own() -> None:
    from autotune.runtime.config import mode_options

    config = CompileConfig(mode=None, options={**mode_options("max-autotune-no-cudagraphs"), "shape_padding": True})
    assert [s.name for s in settings_of(config)] == ["mode", "options.shape_padding"]
    assert config_with(config, ["options.shape_padding"]) == CompileConfig(mode=None, options={"shape_padding": True})
    assert config_with(config, ["mode"]) == CompileConfig(mode="max-autotune-no-cudagraphs")


def test_ddmin_finds_the_pair_among_many_without_a_process() -> None:
    config = CompileConfig(
        compile_optimizer=True,
        dynamic=False,
        knobs={"fullgraph": True, "float32_matmul_precision": "high", "activation_memory_budget": 0.5},
    )
    runs: list[CompileConfig] = []

    def probe(candidate: CompileConfig, seconds: float) -> ProbeOutcome:
        runs.append(candidate)
        both = {"fullgraph", "activation_memory_budget"} <= set(candidate.knobs)
        return ProbeOutcome(both, "accuracy" if both else "", seconds=0.1)

    found = narrow(config, probe, budget=60)
    assert [s.name for s in found.culprit] == ["activation_memory_budget", "fullgraph"]
    assert found.complete and found.against == "plain compile"
    assert len({c.to_dict().__repr__() for c in runs}) == len(runs), "a configuration was probed twice"


@pytest.mark.slow  # several short runs in fresh processes: about 20 s; the narrowing's rules run above
def test_a_compiled_optimizer_step_that_skips_its_update_is_narrowed_to_it() -> None:
    config = CompileConfig(
        compile_optimizer=True, dynamic=False, knobs={"optimizer_mode": "max-autotune-no-cudagraphs", "fullgraph": True}
    )
    found = narrow(config, short_probe(harness_for(SKIPS), "accuracy"), budget=240)
    assert [s.name for s in found.culprit] == ["compile_optimizer"]
    assert found.config == CompileConfig(compile_optimizer=True)
    assert found.complete and found.probes >= 2
    assert "update of" in found.messages[-1]


@pytest.mark.slow  # several short runs in fresh processes: about 20 s
def test_a_failure_that_needs_two_settings_names_both_and_only_them() -> None:
    config = CompileConfig(
        compile_optimizer=True,
        dynamic=False,
        knobs={"float32_matmul_precision": "high", "activation_memory_budget": 0.5},
    )
    found = narrow(config, short_probe(harness_for(TWO), "accuracy"), budget=240)
    assert sorted(s.name for s in found.culprit) == ["activation_memory_budget", "float32_matmul_precision"]
    assert found.complete
    assert found.config == CompileConfig(knobs={"float32_matmul_precision": "high", "activation_memory_budget": 0.5})


def failed_study(out: Path, spec: str, config: CompileConfig, reason: str = "accuracy") -> optuna.Study:
    """A study.db in `out` as a search leaves it, with one trial of `config` failed for `reason`."""
    out.mkdir(parents=True, exist_ok=True)
    workload = resolve(spec)
    study = create_study("failing", f"sqlite:///{out / 'study.db'}", direction="maximize")
    summary = workload.summary(spec, workload.draw_batches())
    write_study_record(study, StudyRecord(model=spec, device="cpu", workload=summary))
    run = RunRecord(state="failed", reason=reason, message="the trial's own message", wall_seconds=2.0)
    record = TrialRecord(config=config.to_dict(), description=config.describe(), run=run)
    study.add_trial(
        optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs={TRIAL_KEY: record.to_dict()})
    )
    return study


def run_repro(script: Path, backend: str | None = "eager") -> subprocess.CompletedProcess[str]:
    """repro.py run as a user runs it: `python repro.py` from the project's root, where the model's module imports.

    With `backend`, torch.compile runs that backend instead of Inductor, as PyTorch's bisector has it do
    (`TORCH_BISECT_BACKEND`); None: as it is, with Inductor."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    if backend is not None:
        environment["TORCH_BISECT_BACKEND"] = backend
    return subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )


def imported(script: Path) -> set[str]:
    """The top-level packages `script` imports anywhere in its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.partition(".")[0])
    return names


@pytest.mark.slow  # a search, then its narrowing and a reproduction run: half a minute
def test_explain_narrows_a_failed_trial_of_a_study_and_writes_a_reproduction_without_autotune(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    config = CompileConfig(
        compile_optimizer=True, dynamic=False, knobs={"optimizer_mode": "max-autotune-no-cudagraphs"}
    )
    study = failed_study(out, SKIPS, config)
    assert main(["explain", str(out), "0", "--budget", "240"]) == 0
    printed = capsys.readouterr().out
    assert "caused by: compile_optimizer=True (against plain compile)" in printed
    assert "failing stage: dynamo (the eager backend: tracing alone)" in printed
    explanation = read_study_record(study).explanations[0]
    assert explanation.settings == ["compile_optimizer"] and explanation.complete
    assert explanation.stage.startswith("dynamo")
    script = out / explanation.repro
    assert script == out / "failures" / "trial-0" / "repro.py"
    assert "autotune" not in imported(script)
    assert imported(script) <= {
        "torch",
        "functools",
        "importlib",
        "itertools",
        "contextlib",
        "copy",
        "traceback",
        "hashlib",
        "json",
        "os",
        "warnings",
        "platform",
        "ctypes",
        "triton",
    }
    assert SKIPS in script.read_text()
    readme = (script.parent / "README.md").read_text()
    assert f"torch {torch.__version__}" in readme and "compile_optimizer=True" in readme
    assert "First failing compiler stage: dynamo" in readme
    done = run_repro(script)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the update of parameter" in done.stdout


def test_explain_refuses_a_failure_no_setting_causes(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    failed_study(out, SKIPS, CompileConfig(compile_optimizer=True), reason="workload_error")
    assert main(["explain", str(out), "0"]) == 2
    assert "which no compile setting causes" in capsys.readouterr().err


def test_the_narrowing_stops_at_its_budget_and_reports_the_smallest_failing_set_so_far() -> None:
    config = CompileConfig(
        compile_optimizer=True,
        dynamic=False,
        knobs={"fullgraph": True, "float32_matmul_precision": "high", "activation_memory_budget": 0.5},
    )
    now = [0.0]
    runs: list[CompileConfig] = []

    def probe(candidate: CompileConfig, seconds: float) -> ProbeOutcome:
        assert seconds > 0, "a probe was started with no budget left"
        now[0] += 10.0  # each short run takes 10 s
        runs.append(candidate)
        both = {"fullgraph", "activation_memory_budget"} <= set(candidate.knobs)
        return ProbeOutcome(both, "accuracy" if both else "", seconds=10.0)

    found = narrow(config, probe, budget=85, clock=lambda: now[0])
    assert not found.complete
    assert found.probes == len(runs) == 8, "a probe that would not fit in what was left was started"
    assert found.seconds <= 85
    kept = {s.name for s in found.culprit}
    assert {"fullgraph", "activation_memory_budget"} <= kept < {s.name for s in settings_of(config)}
    assert found.config.knobs["fullgraph"] and found.config.knobs["activation_memory_budget"] == 0.5


def test_a_budget_cut_short_is_said_in_the_explanation() -> None:
    from autotune.study.storage import Explanation

    explanation = Explanation(trial=3, reason="accuracy", described=["a=1", "b=2"], complete=False)
    assert explanation.culprit_text == "a=1, b=2 (narrowing cut short by its budget)"
    assert Explanation.from_dict(explanation.to_dict()) == explanation


def test_the_bisectors_answer_is_read_as_a_stage_and_its_pass() -> None:
    lowering = "Bisection complete: BisectionResult(backend='inductor', subsystem='lowerings', bisect_number=42, "
    lowering += "debug_info='aten.add.Tensor')\n"
    assert stage_of("The issue is in the inductor system.\n" + lowering).text == (
        "Inductor: lowerings, application 42 (aten.add.Tensor)"
    )
    eager = "Bisection complete: BisectionResult(backend='eager', subsystem=None, bisect_number=None, debug_info=None)"
    assert stage_of(eager).text == "dynamo (the eager backend: tracing alone)"
    assert stage_of("\nBisection complete: no issue found\n").note.startswith("not found: the reproduction passed")
    assert failing_stage(Path("repro.py"), 0.5).note.startswith("not bisected: the budget was spent")


def test_a_failure_plain_compile_shares_is_told_against_eager_and_one_that_does_not_come_back_is_said() -> None:
    config = CompileConfig(compile_optimizer=True, dynamic=False)

    def always(candidate: CompileConfig, seconds: float) -> ProbeOutcome:
        return ProbeOutcome(True, "compile_error", "boom", 0.1)

    found = narrow(config, always, budget=60)
    assert found.culprit == () and found.against == "eager" and found.config == CompileConfig()

    def never(candidate: CompileConfig, seconds: float) -> ProbeOutcome:
        return ProbeOutcome(False, "", "", 0.1)

    found = narrow(config, never, budget=60)
    assert found.culprit == () and found.against == "not reproduced" and found.probes == 4


@pytest.mark.slow  # an Inductor compile of a training step and its optimizer step: 10 to 20 s
def test_the_reproduction_fails_under_inductor_as_it_is_run_by_hand(tmp_path) -> None:
    from autotune.study.explain import ReproFacts, write_repro

    config = CompileConfig(compile_optimizer=True)
    facts = ReproFacts(
        spec=SKIPS, trial=0, reason="accuracy", message="", culprit=("compile_optimizer=True",), against="plain compile"
    )
    script = write_repro(tmp_path / "trial-0", harness_for(SKIPS).source(config), facts)
    done = run_repro(script, backend=None)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL: the update of parameter 0 differs from eager" in done.stdout
    fixed = write_repro(tmp_path / "plain", harness_for(SKIPS).source(CompileConfig()), facts)
    assert run_repro(fixed, backend=None).returncode == 0, "plain compile agrees with eager: the script must say so"


def test_a_bisector_past_its_budget_is_ended_with_every_run_it_started(tmp_path) -> None:
    script = tmp_path / "hangs-repro.py"
    script.write_text("import time\ntime.sleep(120)\n")
    stage = failing_stage(script, 8.0)
    assert stage.text == "" and stage.note == "not found: the bisector ran past the 8 s left of the budget"
    assert gone_within(lambda: with_command_line(str(script)), 5.0), "a run of the reproduction was left running"
