"""`--json` on search, validate, retune and show: one JSON object on standard output, and nothing else there.

show reads a real best.yaml; the other commands' results stand in for a run (made-up campaigns,
`tests/measure/stands.py`), so that what is tested is the summary and where it goes.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from autotune import cli, measure
from autotune.cli._json import SCHEMA
from autotune.measure.tasks import ValidationReport
from autotune.study import retune as retune_package
from autotune.study import search as search_package
from tests.cli.test_cli_show import write
from tests.measure.stands import REGIONAL, campaign

pytestmark = pytest.mark.parallel  # times nothing

METRICS = {
    "exported": "trial 3",
    "trial": 3,
    "decision": "gain",
    "verdict": "trial 3 is exported: a gain, 1.12x [1.05, 1.19] plain torch.compile.",
    "confirmed": True,
    "objective": "throughput",
    "unit": "samples/s",
    "value": 1234.5,
    "vs_compile": {"median": 1.12, "low": 1.05, "high": 1.19, "rounds": 4},
    "vs_eager": {"median": 1.5, "low": 1.4, "high": 1.6, "rounds": 4},
}


def _only_json(out: str) -> dict:
    summary = json.loads(out)  # the whole of standard output is the one object
    assert summary["schema"] == SCHEMA
    return summary


def test_show_json_is_the_export_its_figures_and_its_files(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, metrics=METRICS)
    assert cli.main(["show", str(path), "--json"]) == cli.EXIT_OK
    summary = _only_json(capsys.readouterr().out)
    assert summary["command"] == "show" and summary["exported"] == "trial 3" and summary["decision"] == "gain"
    assert summary["vs_compile"] == {"median": 1.12, "low": 1.05, "high": 1.19, "replicates": 4}, (
        "rounds: files of earlier versions"
    )
    assert summary["config"]["scope"] == "regional" and summary["config"]["padding_alignment"] == 8
    assert summary["workload"] == {"spec": "examples.toy:model", "task": "train"}
    assert summary["files"]["apply_compilation"] == str(tmp_path / "apply_compilation.py")
    assert summary["environment_differences"] == {}
    assert cli.main(["show", str(path), "--json", "--code"]) == cli.EXIT_ERROR
    assert "--json prints the summary alone" in capsys.readouterr().err


def test_search_json_is_the_summary_of_the_file_it_exported(tmp_path: Path, monkeypatch, capsys) -> None:
    path = write(tmp_path, metrics=METRICS)
    exported = types.SimpleNamespace(tuned_path=path, out_dir=tmp_path, summary={"metrics": METRICS})
    monkeypatch.setattr(search_package, "search", lambda options, progress: exported)
    assert cli.main(["search", "--model", "examples.toy:model", "--out", str(tmp_path), "--json"]) == cli.EXIT_OK
    captured = capsys.readouterr()
    summary = _only_json(captured.out)
    assert summary["command"] == "search" and summary["exported"] == "trial 3" and summary["trial"] == 3
    assert "autotune: searching examples.toy:model" in captured.err, "progress stays on standard error"
    monkeypatch.setattr(search_package, "search", lambda options, progress: None)
    assert cli.main(["search", "--model", "examples.toy:model", "--out", str(tmp_path), "--json"]) == cli.EXIT_OK
    assert _only_json(capsys.readouterr().out)["exported"] is None


@pytest.mark.parametrize(("config", "code"), [([120, 121, 119], 0), ([80, 81, 80], 3), ([None, None, None], 1)])
def test_validate_json_says_what_the_exit_code_says(monkeypatch, capsys, config: list, code: int) -> None:
    measured = campaign(eager=[50, 51, 50], compile=[100, 101, 99], config=config)
    report = ValidationReport(
        path="r.yaml", model="examples.toy:model", description="r", config=REGIONAL, campaign=measured
    )
    monkeypatch.setattr(measure, "validate", lambda *args, **kwargs: report)
    assert cli.main(["validate", "r.yaml", "--json"]) == code
    summary = _only_json(capsys.readouterr().out)
    assert summary["command"] == "validate" and summary["exit_code"] == code
    assert summary["ok"] is (code != 1) and summary["slower"] is (code == 3)
    if code == 1:
        assert summary["failure"]["reason"] == "accuracy" and summary["decision"] is None
    else:
        assert summary["decision"] == ("gain" if code == 0 else "loss")
        assert summary["vs_compile"]["median"] == pytest.approx(1.2 if code == 0 else 0.8, rel=0.02)


def test_retune_json_is_its_history_line_with_the_exit_code(tmp_path: Path, monkeypatch, capsys) -> None:
    line = {"date": "2026-11-28", "decision": "regression", "regressions": ["the incumbent failed"], "replaced": False}
    result = types.SimpleNamespace(path=tmp_path / "best.yaml", regressed=True, to_history=lambda: line)
    monkeypatch.setattr(retune_package, "retune", lambda options, progress: result)
    assert cli.main(["retune", str(tmp_path / "best.yaml"), "--json"]) == cli.EXIT_REGRESSION
    summary = _only_json(capsys.readouterr().out)
    assert summary["command"] == "retune" and summary["decision"] == "regression" and summary["exit_code"] == 3
    assert summary["files"]["history"] == str(tmp_path / "history.jsonl")
