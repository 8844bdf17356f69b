"""The benchmark's smoke run: the whole pipeline (study, recipes, winners, interleaved runs, report) end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_run_writes_the_table_and_the_raw_figures(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "examples/benchmark.py", "--smoke", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "smoke-cpu.json").read_text())
    rows = figures["workloads"]["convnet"]["rows"]
    assert {"eager", "plain torch.compile", "recipe regional"} <= set(rows)
    assert any(name.startswith("autotune trial") for name in rows)
    assert rows["eager"]["samples_per_second"] > 0 and rows["eager"]["vs_eager"] == 1.0
    assert figures["machine"]["torch"] and figures["date"]
    table = (tmp_path / "smoke-cpu.md").read_text()
    assert "| plain torch.compile |" in table and "smoke run" in table
