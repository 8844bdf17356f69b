"""The benchmark's smoke run: the whole pipeline (study, recipes, winners, interleaved runs, report) end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.measure import Campaign, Subject, Throughput
from autotune.measure.engine import Replicate
from autotune.runtime.config import CompileConfig
from autotune.trial.run_record import RunRecord
from examples.benchmark import _agreement_text, main, rank_swaps, render, search_agreement, unordered_pairs

ROOT = Path(__file__).resolve().parents[2]
# Two linear blocks: each compile takes seconds, and regional compilation has blocks to compile.
SPEC = "tests.trial_targets.workloads:detour_infer"


# Beside other tests: it checks what the pipeline writes, never how fast anything ran.
@pytest.mark.parallel
@pytest.mark.slow
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
    assert rows["compile"]["vs_eager"]["replicates"] == bench["rounds"] == 1
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


@pytest.mark.parallel  # times nothing: a unit test
def test_a_workload_that_is_neither_bundled_nor_a_spec_is_named_with_what_is_allowed(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--workloads", "convnett"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'convnett' is neither a bundled workload" in err and "convnet" in err and "module:attribute" in err


def _confirmed(median: float, low: float, high: float, rounds: int = 3) -> dict[str, float]:
    return {"median": median, "low": low, "high": high, "rounds": rounds}


@pytest.mark.parallel  # times nothing: a unit test
def test_a_search_time_ratio_agrees_inside_the_interval_or_within_5_percent_and_swapped_ranks_are_named() -> None:
    bench = {
        "rows": {
            "trial 2": {"vs_compile": _confirmed(1.18, 0.81, 1.72)},  # 1.38 outside 5%, inside the interval
            "trial 11": {"vs_compile": _confirmed(1.23, 1.20, 1.26)},  # 1.25: outside a tight interval, within 5%
            "trial 4": {"vs_compile": _confirmed(1.00, 0.98, 1.02)},  # 1.10: neither
            "trial 7": {"vs_compile": _confirmed(1.30, 1.30, 1.30, rounds=1)},  # one replicate: nothing to compare
            "trial 9": {"vs_compile": _confirmed(1.10, 1.05, 1.15)},
        },
        "search_time": {"trial 2": 1.38, "trial 11": 1.25, "trial 4": 1.10, "trial 7": 1.0, "trial 9": None},
    }
    agreement = {a["subject"]: a["agrees"] for a in search_agreement(bench)}
    assert agreement == {"trial 2": True, "trial 11": True, "trial 4": False}
    # The search put trial 2 ahead of trial 11 and the confirmation trial 11 ahead of trial 2, each beyond
    # the band: a swap. Trial 4 trails both in both orders.
    assert rank_swaps(search_agreement(bench)) == [("trial 2", "trial 11")]
    # Within the band, an order is a tie, not a swap.
    assert rank_swaps(search_agreement(bench), band=0.05) == []


def _campaign_of(rates: dict[str, list[float]]) -> Campaign:
    made = Campaign(objective=Throughput())
    for name, values in rates.items():
        made.subjects[name] = Subject(name=name, config=CompileConfig(), trial=2 if name != "compile" else None)
        made.runs[name] = [
            RunRecord(state="complete", samples_per_second=v, batches_per_second=v, compile_seconds=1.0) for v in values
        ]
    made.replicates = [Replicate(design="together", windows=8, batches_per_window=4) for _ in range(3)]
    return made


@pytest.mark.parallel  # times nothing: a unit test
def test_a_swap_counts_only_where_the_confirmation_decides_the_order() -> None:
    bench = {
        "rows": {
            "trial 2": {"vs_compile": _confirmed(1.18, 1.00, 1.40)},
            "trial 3": {"vs_compile": _confirmed(1.22, 1.02, 1.45)},
        },
        "search_time": {"trial 2": 1.31, "trial 3": 1.25},
    }
    agreement = search_agreement(bench)
    # Replicate by replicate, trial 3 ran 3% ahead of trial 2 twice and 2% behind once: no order decided.
    close = _campaign_of({"compile": [100, 100, 100], "trial 2": [118, 116, 121], "trial 3": [122, 120, 119]})
    assert rank_swaps(agreement) == [("trial 2", "trial 3")], "by the medians alone, a swap"
    assert rank_swaps(agreement, campaign=close) == []
    assert unordered_pairs(agreement, close) == [("trial 2", "trial 3")]
    assert "does not decide between trial 2 and trial 3" in _agreement_text({**bench, "campaign": close.to_dict()})
    # Trial 3 ahead by 10% in every replicate: the confirmation decides it, and the search's order is a swap.
    apart = _campaign_of({"compile": [100, 100, 100], "trial 2": [110, 111, 109], "trial 3": [121, 122, 120]})
    assert rank_swaps(agreement, campaign=apart) == [("trial 2", "trial 3")]
    assert unordered_pairs(agreement, apart) == []
    assert "the rank order differs" in _agreement_text({**bench, "campaign": apart.to_dict()})
