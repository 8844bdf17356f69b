"""The benchmark's smoke run: the whole pipeline (study, recipes, winners, interleaved runs, report) end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples.benchmark import main, render

ROOT = Path(__file__).resolve().parents[2]
# Two linear blocks: each compile takes seconds, and regional compilation has blocks to compile.
SPEC = "tests.trial_targets.workloads:detour_infer"


# Beside other tests: it checks what the pipeline writes, never how fast anything ran.
@pytest.mark.parallel
def test_smoke_run_writes_the_table_and_the_raw_figures(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "examples/benchmark.py", "--smoke", "--workloads", SPEC, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "smoke-cpu.json").read_text())
    bench = figures["workloads"][SPEC]
    rows = bench["rows"]
    assert {"eager", "compile", "recipe regional"} <= set(rows)
    # The smoke study's one trial is its first seed, plain torch.compile: the compile baseline itself.
    assert bench["seeded"] == [
        {"number": 0, "recipe": "plain", "state": "COMPLETE", "value": bench["seeded"][0]["value"]}
    ]
    assert bench["winner_after"] == {"1": "compile"} and bench["best_seeded_recipe"] is None
    assert rows["eager"]["samples_per_second"] > 0 and rows["eager"]["vs_eager"]["median"] == 1.0
    assert rows["compile"]["vs_eager"]["rounds"] == bench["rounds"] == 1
    # What autotune would export after the trial, by the rule of `autotune search`.
    assert bench["exported_after"]["1"]["exported"] in (
        "no compilation",
        "plain torch.compile",
        bench["winner_after"]["1"],
    )
    assert figures["machine"]["torch"] and figures["date"]
    table = (tmp_path / "smoke-cpu.md").read_text()
    assert "| compile |" in table and "smoke run" in table and "What autotune exports" in table
    assert "pruning saved at least" in table
    # Each workload says when it was measured, since a rerun adds workloads to results started earlier.
    assert f"Measured {bench['measured']}." in table and f"Run started {figures['date']}" in table
    assert bench["measured"] >= figures["date"]
    # A spec's study lives in a folder named without the colon.
    assert (tmp_path / "runs" / "tiny-cpu" / SPEC.replace(":", ".") / "study.db").is_file()
    # A rerun keeps the workloads of earlier results, some recorded before pruning was measured.
    older = {k: v for k, v in bench.items() if k != "pruning"} | {"pruning_saved_seconds": 3.8}
    assert "pruning saved about 3.8 s (estimated" in render({**figures, "workloads": {SPEC: older}})
    unstamped = render({**figures, "workloads": {SPEC: {k: v for k, v in older.items() if k != "measured"}}})
    assert f"Run {figures['date']} on" in unstamped and "Measured " not in unstamped


def test_a_workload_that_is_neither_bundled_nor_a_spec_is_named_with_what_is_allowed(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--workloads", "convnett"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'convnett' is neither a bundled workload" in err and "convnet" in err and "module:attribute" in err
