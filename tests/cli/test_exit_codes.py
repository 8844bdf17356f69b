"""The exit codes a scheduler reads, each from the command as a user runs it: interrupted, a reader gone, a
failing configuration, a storage that fails while a search runs.

The searches here run in worker processes whose compiles use dynamo's eager backend
(`tests.trial_targets.dynamo_only`): what is tested is how the command ends, not what Inductor makes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.study.search import bundled_spaces, load_space
from autotune.study.storage import record_of
from tests.processes import workers_of

ROOT = Path(__file__).resolve().parents[2]
FAST = str(ROOT / "tests" / "search_spaces" / "fast.yaml")
RESTORE_CTRL_C = (
    "import signal, sys, runpy; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = sys.argv[1:]; runpy.run_module('autotune', run_name='__main__')"
)
"""Runs `python -m autotune ARGS` with Ctrl-C as a terminal gives it: a process started from a background job, as
pytest's may be, inherits SIGINT ignored."""


def _search_args(out: Path, spec: str = "tests.trial_targets.dynamo_only:tiny_infer") -> list[str]:
    return [
        "search", "--model", spec, "--space", FAST, "--trials", "2", "--confirm", "0", "--no-doctor",
        "--sampler", "bruteforce", "--windows", "2", "--window-seconds", "0.1", "--device", "cpu",
        "--no-compile-cache", "--out", str(out),
    ]  # fmt: skip


def _start_search(out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RESTORE_CTRL_C, "autotune", *_search_args(out)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _read_until(process: subprocess.Popen[str], said: str, within: float = 300.0) -> list[str]:
    """The progress lines up to the first that contains `said`."""
    assert process.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + within
    while not lines or said not in lines[-1]:
        line = process.stderr.readline()
        assert line and time.monotonic() < deadline, f"never said {said!r}: " + "".join(lines[-20:])
        lines.append(line)
    return lines


def test_ctrl_c_during_a_search_exits_130_and_records_the_trial_as_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    search = _start_search(out)
    _read_until(search, "trial 0: compile")
    search.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    _, rest = search.communicate(timeout=60)
    assert time.monotonic() - interrupted < 15, "Ctrl-C does not wait for the trial to end"
    assert search.returncode == cli.EXIT_INTERRUPTED == 130, rest
    assert rest.rstrip().endswith("autotune: interrupted") and "Traceback" not in rest, rest
    assert not workers_of(search.pid), "a worker outlived Ctrl-C"
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    states = {t.number: (t.state.name, record_of(t).reason) for t in study.trials}
    assert states[0] == ("FAIL", "interrupted"), states
    assert not any(state == "RUNNING" for state, _ in states.values()), states


@pytest.mark.parallel  # waits on no clock
def test_a_reader_that_goes_away_ends_the_output_with_exit_0_and_no_traceback() -> None:
    # `autotune spaces | head -0`: the reader is gone before anything is written.
    listing = subprocess.Popen(
        [sys.executable, "-m", "autotune", "spaces"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert listing.stdout is not None and listing.stderr is not None
    listing.stdout.close()
    err = listing.stderr.read().decode()
    assert listing.wait(timeout=120) == cli.EXIT_OK, err
    assert err == "", "nothing is said about a reader that left"


@pytest.mark.parallel  # a failure decides, not a speed
def test_validate_exits_1_when_the_configuration_fails(tmp_path: Path, capsys) -> None:
    recipe = tmp_path / "whole.yaml"
    recipe.write_text("description: the whole model\nconfig:\n  scope: whole\n")
    spec = "tests.trial_targets.dynamo_only:wrong_when_compiled"
    code = cli.main(
        ["validate", str(recipe), "--model", spec, "--device", "cpu", "--replicates", "2", "--max-replicates", "2"]
    )
    out = capsys.readouterr().out
    assert code == cli.EXIT_FINDINGS == 1, out
    assert "The configuration failed (accuracy): output 0 differs from eager" in out


@pytest.mark.parallel  # reads files only
def test_spaces_lists_every_bundled_space_with_what_it_is_for(capsys) -> None:
    assert cli.main(["spaces"]) == cli.EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    bundled = bundled_spaces()
    assert set(bundled) >= {"quick", "default", "thorough", "inference"}
    assert len(lines) == 2 * len(bundled)
    for (name, path), (first, second) in zip(bundled.items(), zip(lines[::2], lines[1::2], strict=True), strict=True):
        assert first.split() == [name, str(path)]
        assert second.strip() == load_space(str(path)).description and second.strip()


@pytest.mark.parallel  # waits on no clock
def test_a_storage_that_goes_away_mid_search_ends_it_with_exit_2_naming_the_storage(tmp_path: Path) -> None:
    out = tmp_path / "out"
    search = _start_search(out)
    _read_until(search, "trial 0: compile")
    (out / "study.db").unlink()  # the file goes away under the search, as a cleaned-up disk or a lost mount would
    _, rest = search.communicate(timeout=120)
    assert search.returncode == cli.EXIT_ERROR == 2, rest
    assert f"autotune: error: the study storage sqlite:///{out / 'study.db'} failed: " in rest, rest
    assert "run the same command again once it is back" in rest and "Traceback" not in rest, rest
    assert not workers_of(search.pid), "a worker outlived the search"


def test_sigterm_mid_trial_ends_the_search_within_20_s_and_the_same_command_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    search = _start_search(out)
    _read_until(search, "trial 0: compile")
    search.send_signal(signal.SIGTERM)
    terminated = time.monotonic()
    search.send_signal(signal.SIGTERM)  # a second one, as an impatient scheduler sends: the shutdown still finishes
    _, rest = search.communicate(timeout=60)
    assert time.monotonic() - terminated < 20, "SIGTERM does not wait for the trial to end"
    assert search.returncode == cli.EXIT_TERMINATED == 143, rest
    assert "autotune: terminated (SIGTERM)" in rest and "Traceback" not in rest, rest
    assert not workers_of(search.pid), "a worker outlived SIGTERM"
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    states = {t.number: (t.state.name, record_of(t).reason) for t in study.trials}
    assert states[0] == ("FAIL", "interrupted") and "RUNNING" not in {s for s, _ in states.values()}, states
    # The same command again resumes the study: the interrupted trial stays as it was, and the search goes on.
    again = subprocess.run(
        [sys.executable, "-m", "autotune", *_search_args(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == cli.EXIT_OK, again.stderr[-3000:]
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    assert record_of(study.trials[0]).reason == "interrupted"
    assert [t.state.name for t in study.trials[1:]] and all(t.state.name != "RUNNING" for t in study.trials)
    assert (out / "best.yaml").is_file()


def _terminated(command: list[str], cwd: Path, said: str) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m autotune COMMAND`, send SIGTERM once it has said `said`, and wait for it to end."""
    process = subprocess.Popen(
        [sys.executable, "-c", RESTORE_CTRL_C, "autotune", *command],
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    before = _read_until(process, said)
    process.send_signal(signal.SIGTERM)
    terminated = time.monotonic()
    _, rest = process.communicate(timeout=60)
    assert time.monotonic() - terminated < 20, "SIGTERM does not wait for the run to end"
    return process, "".join(before) + rest


@pytest.mark.slow  # the full tier: the fast one stops a search the same way (the test above)
def test_sigterm_ends_validate_with_143_and_no_worker_left(tmp_path: Path) -> None:
    recipe = tmp_path / "whole.yaml"
    recipe.write_text("description: the whole model\nconfig:\n  scope: whole\n")
    command = [
        "validate", str(recipe), "--model", "tests.trial_targets.dynamo_only:tiny_infer", "--device", "cpu",
        "--replicates", "30", "--max-replicates", "30",
    ]  # fmt: skip
    validate, said = _terminated(command, ROOT, "replicate 1")
    assert validate.returncode == cli.EXIT_TERMINATED == 143, said
    assert "autotune: terminated (SIGTERM)" in said and "Traceback" not in said, said
    assert not workers_of(validate.pid), "a worker outlived SIGTERM"


@pytest.mark.slow  # a search, then a retune stopped: over a minute
def test_sigterm_ends_retune_with_143_its_files_as_they_were_and_no_worker_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    searched = subprocess.run(
        [sys.executable, "-m", "autotune", *_search_args(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert searched.returncode == cli.EXIT_OK, searched.stderr[-3000:]
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != "study.db"}
    command = [
        "retune",
        str(out / "best.yaml"),
        "--space",
        FAST,
        "--trials",
        "0",
        "--replicates",
        "30",
        "--max-replicates",
        "30",
    ]
    retune, said = _terminated(command, ROOT, "replicate 1")
    assert retune.returncode == cli.EXIT_TERMINATED == 143, said
    assert "autotune: terminated (SIGTERM)" in said and "Traceback" not in said, said
    assert not workers_of(retune.pid), "a worker outlived SIGTERM"
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != "study.db"}
    assert after == before, "every file as it was"
