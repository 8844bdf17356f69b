"""The GPU check (`bash .ci/gpu`): its stages, limits, logs and summary, proven on the CPU.

The fault test runs the real driver with a stage made to fail and one made to hang, in
seconds; `test_the_dry_run_passes_every_stage` runs the whole dry run (a few minutes) and is
what makes CI fail when a stage of it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples.gpu_check import (
    FAULT_VARIABLE,
    STAGE_NAMES,
    CheckError,
    parse_faults,
    parse_limits,
    plan,
    run_check,
)
from examples.gpu_check._bench import BENCH_STAGES, BENCH_SUBJECTS, SUBJECT_MARGIN
from examples.gpu_check._cost import COSTS, MARGIN, RUN_COSTS
from examples.gpu_check._figures import interval_text, run_figures, search_figures, unmeasured
from examples.gpu_check._stages import (
    GPU_LIMITS,
    GPU_SECONDS,
    REQUIRED,
    SEARCH_PROCESSES,
    SEARCH_TIMEOUT,
    SLOW_GPU_TESTS,
    Stage,
)
from examples.gpu_check._subject import LEAST_RUN_SECONDS, headline, no_room
from tests.processes import gone, with_command_line

ROOT = Path(__file__).resolve().parents[2]


def check(tmp_path: Path, *args: str, fault: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), FAULT_VARIABLE: fault}
    env.pop("OUT", None)
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "gpu"), "--dry-run", "--out", str(tmp_path / "gpu"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def summary_of(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "gpu" / "summary.json").read_text())


@pytest.mark.parallel
def test_a_failed_and_a_hung_stage_are_recorded_and_the_next_stages_still_run(tmp_path: Path) -> None:
    # The environment stage runs for real (seconds); the tests hang past a 3 s limit; the search fails.
    done = check(tmp_path, "--stages", "environment,tests,search", "--limit", "tests=3", fault="tests:hang,search:fail")
    assert done.returncode == 1, done.stdout + done.stderr
    stages = {s["name"]: s for s in summary_of(tmp_path)["stages"]}
    assert list(stages) == list(STAGE_NAMES)
    assert stages["environment"]["status"] == "passed", (tmp_path / "gpu" / "environment.txt").read_text()
    assert stages["environment"]["figures"]["imports"]["autotune"] == "ok"
    assert stages["tests"]["status"] == "timed out" and stages["tests"]["exit_code"] == 124
    assert stages["tests"]["seconds"] >= 3 and stages["tests"]["fault"] == "hang"
    assert stages["search"]["status"] == "failed" and stages["search"]["exit_code"] == 3
    for later in STAGE_NAMES[3:]:
        assert stages[later]["status"] == "not run" and stages[later]["seconds"] is None
    # Each stage's log was written as it went, the hung one's included.
    tests_log = (tmp_path / "gpu" / "tests.txt").read_text()
    assert "hang injected" in tests_log and "stopped: the stage ran past its limit" in tests_log
    assert "failure injected" in (tmp_path / "gpu" / "search.txt").read_text()
    names = sorted(p.name for p in (tmp_path / "gpu").iterdir())
    assert names == ["environment.txt", "search.txt", "summary.json", "tests.txt"]
    assert "timed out" in done.stdout and "FAILED" in done.stdout


@pytest.mark.parallel
def test_a_hung_stage_is_stopped_with_everything_it_started(tmp_path: Path) -> None:
    stages = plan(dry_run=True, python=sys.executable, site=None, limits={"environment": 2})
    summary = run_check(
        stages, out=tmp_path / "out", work=tmp_path / "work", only=["environment"], faults={"environment": "hang"}
    )
    environment = summary["stages"][0]
    assert environment["status"] == "timed out" and environment["exit_code"] == 124
    # Every process's command line, read from /proc (no pgrep, which slim images lack).
    # A child killed with its stage may still be exiting as the stage's timeout returns: it must end within seconds.
    leftover = [pid for pid in with_command_line("import time; time.sleep(3600)") if not gone(pid, within=5.0)]
    assert leftover == [], "the hung stage's child outlived it"
    assert summary["passed"] is False and [s["status"] for s in summary["stages"][1:]] == ["not run"] * 7


@pytest.mark.parallel
def test_summary_json_is_written_before_the_first_stage_ends(tmp_path: Path) -> None:
    stages = plan(dry_run=True, python=sys.executable, site=None, limits={"environment": 30})
    seen: list[str] = []

    class Watch:
        def write(self, text: str) -> None:
            if text.startswith("gpu check: environment (") and (tmp_path / "summary.json").exists():
                running = json.loads((tmp_path / "summary.json").read_text())["stages"][0]["status"]
                seen.append(running)

        def flush(self) -> None: ...

    run_check(
        stages, out=tmp_path, work=tmp_path / "work", only=["environment"], faults={"environment": "fail"}, echo=Watch()
    )  # type: ignore[arg-type]
    assert seen == ["running"]


@pytest.mark.parallel
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("tests:crash", "'tests:crash' is not STAGE:FAULT"),
        (
            "gpu:fail",
            "'gpu:fail' is not STAGE:FAULT with STAGE one of environment, tests, search, validate, captioning",
        ),
    ],
)
def test_a_bad_fault_names_the_value_and_what_is_allowed(value: str, message: str) -> None:
    with pytest.raises(CheckError, match=message):
        parse_faults(value)


@pytest.mark.parallel
def test_faults_and_limits_parse() -> None:
    assert parse_faults("tests:hang, search:fail") == {"tests": "hang", "search": "fail"}
    assert parse_faults(None) == {}
    assert parse_limits(["tests=2.5"]) == {"tests": 2.5}
    for bad in ("tests", "tests=0", "tests=x", "lint=3"):
        with pytest.raises(CheckError, match="expected STAGE=SECONDS"):
            parse_limits([bad])


@pytest.mark.parallel
def test_a_bad_option_is_an_error_before_anything_runs(tmp_path: Path) -> None:
    done = check(tmp_path, "--stages", "lint")
    assert done.returncode == 2 and "--stages 'lint': expected a comma-separated list" in done.stderr
    assert not (tmp_path / "gpu" / "summary.json").exists()


@pytest.mark.parallel
def test_the_gpu_plan_fits_one_device_call_and_installs_the_wheels_offline(tmp_path: Path, monkeypatch) -> None:
    stages = plan(dry_run=False, python="python3", site=tmp_path / "site")
    assert [s.name for s in stages] == list(STAGE_NAMES)
    # A device call may run 10 minutes, its start included: the stages it always starts fit 9.
    assert sum(s.gpu_limit for s in stages if s.required) <= GPU_SECONDS == 9 * 60
    assert all(s.limit == s.gpu_limit for s in stages)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "optuna-4.0.0-py3-none-any.whl").write_bytes(b"")
    install, probe = stages[0].commands(tmp_path)
    assert install[:3] == ["python3", "-m", "pip"] and "--no-index" in install and "--no-deps" in install
    assert install[-1] == ".whl/optuna-4.0.0-py3-none-any.whl" and probe[-1] == "environment"
    (search,) = stages[2].commands(tmp_path)
    assert search[search.index("--space") + 1] == "examples/spaces/cuda_graphs.yaml"
    assert search[search.index("--confirm") + 1] == "1" and search[search.index("--device") + 1] == "cuda"


@pytest.mark.parallel
def test_the_search_stage_is_sized_from_the_processes_it_starts_and_its_trial_starts_before_its_timeout() -> None:
    (search,) = plan(dry_run=False, python="python3", site=None)[2].commands(Path("work"))
    assert search[search.index("--timeout") + 1] == str(SEARCH_TIMEOUT)
    assert search[search.index("--trials") + 1] == "2", "plain compile (reused) and the CUDA-graph recipe"
    seconds = [seconds for _, seconds in SEARCH_PROCESSES.values()]
    assert sum(seconds) == COSTS["search"] <= (1 - MARGIN) * GPU_LIMITS["search"], "a fifth of the limit to spare"
    first_trial = next(i for i, step in enumerate(SEARCH_PROCESSES) if step.startswith("trial 1"))
    assert sum(seconds[:first_trial]) < SEARCH_TIMEOUT, "the trial starts before the search stops starting trials"


@pytest.mark.parallel
def test_every_stage_s_gpu_limit_leaves_a_fifth_of_itself_over_its_modelled_cost() -> None:
    assert set(COSTS) == set(GPU_LIMITS) == set(STAGE_NAMES)
    for name in STAGE_NAMES:
        assert 0 < COSTS[name] <= (1 - MARGIN) * GPU_LIMITS[name], name
    assert MARGIN >= 0.2
    # The required stages fit a device call; the check's environment and quick tests come first, then the case study.
    assert REQUIRED == ("environment", "tests", "captioning")
    assert sum(GPU_LIMITS[name] for name in REQUIRED) <= GPU_SECONDS
    # A subject's stage holds its runs' modelled costs and its own start.
    for entry in BENCH_SUBJECTS:
        assert [label for label, _ in entry.configs] == list(RUN_COSTS[entry.name])
        assert sum(RUN_COSTS[entry.name].values()) <= GPU_LIMITS[entry.name] - SUBJECT_MARGIN


@pytest.mark.parallel
def test_the_real_models_run_after_the_check_each_run_within_what_its_stage_has_left(tmp_path: Path) -> None:
    stages = plan(dry_run=False, python="python3", site=tmp_path / "site")
    assert [s.name for s in stages][-len(BENCH_STAGES) :] == list(BENCH_STAGES)
    for stage in stages[-len(BENCH_STAGES) :]:
        (command,) = stage.commands(tmp_path)
        assert command[2:5] == ["examples.gpu_check", "subject", stage.name] and "--dry-run" not in command
        assert float(command[command.index("--seconds") + 1]) == stage.limit - SUBJECT_MARGIN
    (captioning,) = (b for b in BENCH_SUBJECTS if b.name == "captioning")
    assert captioning.model == "examples.captioning:captioning_static_bf16"
    assert captioning.model_for(dry_run=False) == captioning.model
    assert captioning.model_for(dry_run=True) == "examples.captioning:captioning_static"
    labels = [label for label, _ in captioning.configs]
    assert labels == ["eager", "plain compile", "hand recipe"]
    # Its captions are all 256 long: padding to a multiple of 8, the recipe's third part, has nothing to do.
    assert dict(captioning.configs)["hand recipe"] == {"mode": "max-autotune", "compile_optimizer": True}
    (tests,) = stages[1].commands(tmp_path)
    assert all(f"not {name}" in tests[tests.index("-k") + 1] for name in SLOW_GPU_TESTS)


@pytest.mark.parallel
def test_the_case_study_s_captioning_trains_under_bfloat16_autocast_on_captions_padded_to_the_maximum() -> None:
    import torch

    from examples import captioning

    workload = captioning.workload("tiny", dynamic=False, autocast=torch.bfloat16)
    assert workload.autocast is torch.bfloat16 and workload.task == "train" and not workload.dynamic_dims
    assert {b["labels"].shape[1] for b in workload.draw_batches()} == {captioning.SIZES["tiny"].max_length}
    assert captioning.SIZES["full"].max_length == 256
    assert captioning.workload("tiny", dynamic=True, autocast=torch.bfloat16).dynamic_dims


def _stage(name: str, limit: float, *, required: bool = True) -> Stage:
    command = [sys.executable, "-c", f"print('{name} ran')"]
    return Stage(name=name, what=name, commands=lambda work: [command], limit=limit, gpu_limit=limit, required=required)


@pytest.mark.parallel
def test_a_stage_that_would_not_fit_the_time_left_is_skipped_and_not_started(tmp_path: Path) -> None:
    stages = [
        _stage("first", 5),
        _stage("optional", 20, required=False),  # 40 s left less the required 30 after it: no room
        _stage("small optional", 5, required=False),
        _stage("required", 30),
        _stage("too long", 100, required=False),
    ]
    summary = run_check(stages, out=tmp_path / "out", work=tmp_path / "work", budget=45)
    got = {s["name"]: s for s in summary["stages"]}
    assert {n: s["status"] for n, s in got.items()} == {
        "first": "passed",
        "optional": "skipped",
        "small optional": "passed",
        "required": "passed",
        "too long": "skipped",
    }
    assert "less the 30 s of the required stages after it" in got["optional"]["reason"]
    assert got["too long"]["reason"].startswith("its limit of 100 s exceeds the ")
    assert got["too long"]["seconds"] is None and not (tmp_path / "out" / "too long.txt").exists()
    assert got["required"]["gpu_limit_seconds"] == 30 and got["required"]["limit_seconds"] == 30
    assert summary["passed"] is True, "only optional stages were skipped"
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [s["status"] for s in written["stages"]] == [s["status"] for s in summary["stages"]]
    # A required stage that would not fit is skipped too, and the run has not passed.
    summary = run_check([_stage("first", 5), _stage("long", 50)], out=tmp_path / "o2", work=tmp_path / "w2", budget=45)
    assert [s["status"] for s in summary["stages"]] == ["passed", "skipped"] and summary["passed"] is False


@pytest.mark.parallel
def test_on_a_gpu_the_case_study_comes_before_the_toy_s_search_and_the_models_after_it_take_what_it_left() -> None:
    from examples.gpu_check._stages import _no_room

    stages = {s.name: s for s in plan(dry_run=False, python="python3", site=None)}
    after_tests = GPU_SECONDS - COSTS["environment"] - COSTS["tests"]
    later = [stages[name] for name in STAGE_NAMES[3:]]
    assert "less the 395 s of the required stages after it" in _no_room(stages["search"], after_tests, later)
    assert _no_room(stages["captioning"], after_tests, later[2:]) is None
    # The case study as modelled leaves room for GPT-2's training, and no more.
    left = after_tests - COSTS["captioning"]
    assert _no_room(stages["gpt2-train"], left, []) is None
    assert _no_room(stages["gpt2-infer"], left - COSTS["gpt2-train"], []) is not None
    # The check of the toy alone fits a call.
    assert sum(stages[name].gpu_limit for name in STAGE_NAMES[:4]) <= GPU_SECONDS


@pytest.mark.parallel
def test_a_dry_run_with_a_small_budget_skips_what_would_not_fit(tmp_path: Path) -> None:
    done = check(tmp_path, "--stages", "environment,tests", "--limit", "tests=100", "--budget", "90")
    stages = {s["name"]: s for s in summary_of(tmp_path)["stages"]}
    assert stages["environment"]["status"] == "passed", done.stdout + done.stderr
    assert stages["tests"]["status"] == "skipped" and "its limit of 100 s exceeds the" in stages["tests"]["reason"]
    assert stages["tests"]["gpu_limit_seconds"] == GPU_LIMITS["tests"] and stages["tests"]["limit_seconds"] == 100
    assert done.returncode == 1 and "skipped" in done.stdout


@pytest.mark.parallel
def test_a_benchmark_stage_s_headline_gives_each_run_s_rate_and_compile_or_why_it_did_not_complete() -> None:
    runs = {
        "eager": {"state": "complete", "samples_per_second": 812.4},
        "plain compile": {"state": "complete", "samples_per_second": 1204.0, "compile_seconds": 41.2},
        "hand recipe": {"state": "failed", "reason": "timeout"},
        "later": {"state": "skipped", "reason": "modelled at 191 s, 40 s left of the stage's 380 s"},
    }
    assert headline(runs) == (
        "eager 812/s; plain compile 1,204/s (compile 41 s); hand recipe failed (timeout); "
        "later skipped (modelled at 191 s, 40 s left of the stage's 380 s)"
    )


@pytest.mark.parallel
def test_a_run_that_would_not_fit_what_its_stage_has_left_is_skipped() -> None:
    hand = RUN_COSTS["captioning"]["hand recipe"]
    assert no_room("captioning", "hand recipe", left=hand, seconds=380, dry_run=False) is None
    assert no_room("captioning", "hand recipe", left=hand - 1, seconds=380, dry_run=False) == (
        f"modelled at {hand:.0f} s, {hand - 1:.0f} s left of the stage's 380 s"
    )
    # On the CPU a run needs only the time to start.
    assert no_room("captioning", "hand recipe", left=LEAST_RUN_SECONDS, seconds=380, dry_run=True) is None
    assert no_room("gpt2-infer", "eager", left=-3, seconds=100, dry_run=True) == (
        f"modelled at {LEAST_RUN_SECONDS:.0f} s, 0 s left of the stage's 100 s"
    )


@pytest.mark.parallel
def test_a_search_stage_that_measured_no_trial_of_its_own_fails_and_says_why() -> None:
    reused = {"number": 0, "state": "complete", "measured": False}
    assert unmeasured({"trials": [reused]}) == "no trial was measured beside the baselines (trials trial 0: complete)"
    assert unmeasured({"trials": []}) == "no trial was measured beside the baselines (trials none)"
    failed = {"number": 1, "state": "fail", "measured": True}
    assert unmeasured({"trials": [reused, failed]}).endswith("(trials trial 0: complete, trial 1: fail)")
    assert unmeasured({"trials": [reused, {"number": 1, "state": "complete", "measured": True}]}) is None
    assert unmeasured({"trials": [reused, {"number": 1, "state": "pruned", "measured": True}]}) is None
    assert unmeasured({"trials": "no study at x"}) == "its trials could not be read (no study at x)"


@pytest.mark.parallel
def test_the_gpu_tests_get_a_per_test_timeout_only_where_pytest_timeout_is_installed(tmp_path, monkeypatch) -> None:
    from examples.gpu_check import _stages

    stages = plan(dry_run=False, python=sys.executable, site=None)
    for installed in (True, False):
        monkeypatch.setattr(_stages, "_importable", lambda python, module, installed=installed: installed)
        (tests,) = stages[1].commands(tmp_path)
        assert ("--timeout=80" in tests) == installed and ("-p" in tests and "timeout" in tests) == installed
        assert "tests/gpu" in tests and "not paired_and_decided" in tests[tests.index("-k") + 1]


@pytest.mark.parallel
def test_headline_figures_come_from_best_yaml_and_the_study(tmp_path: Path) -> None:
    (tmp_path / "best.yaml").write_text(
        "metrics:\n  exported: trial 2\n  trial: 2\n  decision: gain\n  rounds: 2\n  compile_seconds: 12.3456\n"
        "  vs_compile: {median: 1.2345, low: 1.1, high: 1.3, rounds: 2}\n  peak_memory_mb: 100.0\n"
        "study:\n  name: s\n  storage: study.db\n  best_trials: [{configuration: mode=reduce-overhead}]\n"
        "compile_cache: {saved: true, bytes: 10, cold_compile_seconds: 3.0, cached_compile_seconds: 1.0}\n"
    )
    figures = search_figures(tmp_path)
    assert figures["vs_compile"] == "1.23x [1.10, 1.30]" and figures["compile_seconds"] == 12.346
    assert figures["configuration"] == "mode=reduce-overhead" and figures["compile_cache"]["saved"] is True
    assert figures["trials"] == f"no study at {tmp_path / 'study.db'}"
    assert figures["headline"] == "exported trial 2: 1.23x [1.10, 1.30] vs plain compile (gain)"
    assert interval_text(None) is None
    assert run_figures({"cuda_graph_recordings": 4, "cuda_graph_skips": 0, "peak_reserved_mb": 1.23456, "x": 1}) == {
        "cuda_graph_recordings": 4,
        "cuda_graph_skips": 0,
        "peak_reserved_mb": 1.235,
    }


@pytest.mark.slow
@pytest.mark.parallel  # it proves the plumbing, not the numbers: its stages' limits are twice what they take alone
def test_the_dry_run_passes_every_stage(tmp_path: Path) -> None:
    done = check(tmp_path, timeout=2100)  # its limits add up to 1,980 s
    summary = summary_of(tmp_path)
    statuses = {s["name"]: s["status"] for s in summary["stages"]}
    assert statuses == dict.fromkeys(STAGE_NAMES, "passed"), done.stdout + done.stderr
    assert done.returncode == 0 and summary["passed"] is True
    for stage in summary["stages"]:
        assert stage["seconds"] > 0 and stage["limit_seconds"] > 0, stage["name"]
        assert stage["gpu_limit_seconds"] == GPU_LIMITS[stage["name"]]
    assert sum(s["gpu_limit_seconds"] for s in summary["stages"] if s["required"]) <= GPU_SECONDS
    figures = {s["name"]: s["figures"] for s in summary["stages"]}
    assert figures["environment"]["imports"]["optuna"] != "missing"
    assert figures["search"]["exported"] and isinstance(figures["search"]["trials"], list)
    assert figures["validate"]["ok"] is True and "compile" in figures["validate"]["compile_seconds"]
    for name in BENCH_STAGES:
        assert figures[name]["size"] == "tiny" and "no interval" in figures[name]["note"]
        assert figures[name]["device"]["float32_matmul_precision"] in ("highest", "high", "medium")
        for label, run in figures[name]["runs"].items():
            assert run["state"] == "complete", (name, label, run)
            assert run["samples_per_second"] > 0 and run["steady_samples_per_second"] > 0
            assert (run.get("compile_seconds", 0) > 0) == (label != "eager") and run["peak_memory_mb"] > 0
    assert list(figures["captioning"]["runs"]) == ["eager", "plain compile", "hand recipe"]
    assert figures["captioning"]["model"] == "examples.captioning:captioning_static"  # float32: see `_bench`
    assert len(list((tmp_path / "gpu").iterdir())) <= 12


@pytest.mark.parallel
def test_the_tests_figures_count_each_outcome_and_name_the_slowest(tmp_path: Path) -> None:
    from examples.gpu_check._figures import junit_figures

    (tmp_path / "tests.xml").write_text(
        '<testsuites><testsuite><testcase name="a" time="1.5"/><testcase name="b" time="40.2"><failure/></testcase>'
        '<testcase name="c" time="0"><skipped/></testcase></testsuite></testsuites>'
    )
    figures = junit_figures(tmp_path / "tests.xml")
    assert figures["counts"] == {"passed": 1, "failed": 1, "skipped": 1}
    assert figures["tests"]["b"] == {"outcome": "failed", "seconds": 40.2}
    assert figures["headline"] == "1 failed, 1 passed, 1 skipped (slowest 40 s: b)"
