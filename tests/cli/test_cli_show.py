"""`autotune --help` and `autotune show PATH`: what a person sees, and exit codes."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from autotune import CompileConfig
from autotune.cli import EXIT_ERROR, EXIT_OK, main
from autotune.runtime import environment
from autotune.runtime.summary import WorkloadSummary
from tests.best_yaml import write_best

pytestmark = pytest.mark.parallel

SUMMARY = WorkloadSummary(
    spec="examples.toy:model",
    task="train",
    model_class="ToyLM",
    modules=("embed", "encoder", "head"),
    blocks=("encoder.blocks",),
    dynamic_dims={"input_ids": (1,)},
)


def write(tmp_path: Path, **fields: object) -> Path:
    sections = {
        "created": "2026-01-02T03:04:05Z",
        "metrics": {"throughput": 1234.5},
        "baselines": {"eager": {"throughput": 800.0}},
        "study": {"name": "toy"},
        **fields,
    }
    config = CompileConfig(scope="regional", padding_alignment=8)
    return write_best(tmp_path / "best.yaml", SUMMARY, config, **sections)  # type: ignore[arg-type]


def test_console_script_is_registered() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "autotune"]
    assert script.value == "autotune.cli:main"


def test_help_lists_show() -> None:
    done = subprocess.run([sys.executable, "-m", "autotune", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: autotune" in done.stdout and "show" in done.stdout


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_ERROR
    assert "usage: autotune" in capsys.readouterr().out


def test_show_prints_settings_metrics_and_a_matching_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path)
    assert main(["show", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"{path}  (schema 1, created 2026-01-02T03:04:05Z, autotune ")
    assert "workload: examples.toy:model (train, ToyLM)" in out
    assert "configuration: scope=regional mode=default dynamic=None pad=8" in out
    assert "metrics:" not in out, "the raw sections only with --raw"
    assert "environment: matches this machine." in out
    assert "def apply_compilation" not in out
    assert main(["show", "--raw", str(path)]) == EXIT_OK
    raw = capsys.readouterr().out
    assert "  scope: regional" in raw and "  padding_alignment: 8" in raw
    assert "metrics:\n  throughput: 1234.5" in raw
    assert "baselines:\n  eager:\n    throughput: 800.0" in raw, "nested sections as YAML"
    assert not re.search(r"[{\[]'", raw), "no Python repr of a dict or list"


def test_show_says_when_the_environment_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, environment={**environment.fingerprint("cpu"), "torch": "1.0.0"})
    assert main(["show", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "environment: DIFFERS from this machine" in out
    assert "  torch: tuned with 1.0.0, here " in out


def test_show_without_a_recorded_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(write(tmp_path, environment={}))]) == EXIT_OK
    assert "environment: not recorded" in capsys.readouterr().out


def test_show_code_prints_the_generated_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path)
    assert main(["show", "--code", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "def apply_compilation(model, optimizer=None):" in out
    assert "BLOCKS = ('encoder.blocks',)" in out


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read the file"),
        ("!!python/object/apply:os.system ['true']\n", "not a valid plain YAML file"),
        ("schema_version: 7\n", "schema_version 7 is not supported"),
        ("a: [1, 2\nb: 3\n", "not a valid plain YAML file: line 2, column 2: while parsing a flow sequence; expected"),
        ("", "the file is empty; expected a best.yaml file"),
    ],
)
def test_show_errors_are_one_line_and_exit_2(
    content: str | None, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "best.yaml"
    if content is not None:
        path.write_text(content)
    assert main(["show", str(path)]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("autotune: error: ") and said in captured.err
    assert "Traceback" not in captured.err and "<unicode string>" not in captured.err


def test_every_command_s_help_prints_percent_signs_once(capsys: pytest.CaptureFixture[str]) -> None:
    from autotune.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if a.choices and a.dest == "==SUPPRESS=="]
    assert {"search", "validate", "retune"} <= set(commands.choices)
    for name in commands.choices:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        printed = capsys.readouterr().out
        assert "%%" not in printed, f"`autotune {name} --help` shows an escaped percent sign"
