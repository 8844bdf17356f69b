"""A campaign's rows and tables (autotune.measure.report): when compiling pays back, and the search-time
ratio beside the confirmed one. Campaigns of made-up figures: no worker runs here.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autotune import CompileConfig
from autotune.measure import Campaign, Subject, TimeTo, choose
from autotune.measure.engine import Replicate
from autotune.measure.report import confirmation_cells, confirmation_rows
from autotune.trial.run_record import RunRecord
from tests.measure.stands import REGIONAL, THROUGHPUT

pytestmark = pytest.mark.parallel


# -- when compiling pays back -----------------------------------------------------------------------


def _timed(**subjects: tuple[list[float], float]) -> Campaign:
    """Subjects by (samples/s per replicate, compile seconds); 8 samples a step."""
    made = Campaign(objective=THROUGHPUT)
    for name, (rates, compile_seconds) in subjects.items():
        config = None if name == "eager" else (CompileConfig() if name == "compile" else REGIONAL)
        made.subjects[name] = Subject(name=name, config=config, trial=3 if name.startswith("trial") else None)
        made.runs[name] = [
            RunRecord(state="complete", samples_per_second=r, batches_per_second=r / 8, compile_seconds=compile_seconds)
            for r in rates
        ]
    made.replicates = [Replicate(design="together", windows=12, batches_per_window=4) for _ in rates]
    return made


def test_the_break_even_is_the_compile_time_over_the_time_each_step_saves() -> None:
    # Eager: 800 samples/s at 8 a step, 10 ms a step. Twice as fast saves 5 ms a step: 30 s of compile pay back
    # after 6,000 steps. Plain compile 1.25x faster saves 2 ms a step: its 20 s pay back after 10,000 steps.
    timed = _timed(eager=([800.0] * 3, 0.0), compile=([1000.0] * 3, 20.0), trial=([1600.0] * 3, 30.0))
    rows = {row["subject"]: row for row in confirmation_rows(timed)}
    assert rows["eager"]["break_even_vs_eager"] is None
    assert rows["trial"]["break_even_vs_eager"]["steps"] == 6000
    assert rows["compile"]["break_even_vs_eager"]["steps"] == 10000
    # Against plain compile, only the 10 s more it compiles count: 8 ms a step becomes 5 ms, so 3,334 steps.
    assert rows["trial"]["break_even_vs_compile"]["steps"] == 3334
    assert rows["trial"]["break_even_vs_compile"]["compile_seconds"] == 10
    choice = choose(timed)
    assert choice.subject == "trial"
    assert choice.verdict.endswith(
        "Its 30 s of compiling pays back against eager after 6,000 steps (one cold compile each, no interval)."
    )
    cells = confirmation_cells(confirmation_rows(timed))
    assert cells[0][5] == "pays back after"
    assert cells[3][5] == (
        "6,000 steps (one cold compile each, no interval); its extra compile vs plain compile: "
        "3,334 steps (one cold compile each, no interval)"
    )


def test_a_subject_that_compiles_faster_owes_plain_compile_nothing_and_a_slower_one_never_pays_back() -> None:
    timed = _timed(eager=([800.0, 820.0], 0.0), compile=([700.0, 690.0], 20.0), trial=([1000.0, 1010.0], 5.0))
    rows = {row["subject"]: row for row in confirmation_rows(timed)}
    assert rows["trial"]["break_even_vs_compile"] is None
    assert rows["compile"]["break_even_vs_eager"]["steps"] is None
    assert confirmation_cells(confirmation_rows(timed))[2][5] == "never (not faster)"
    # A time-to objective names its horizon when the exported subject does not pay back within it.
    short = replace(timed, objective=TimeTo(100))
    rows_short = {row["subject"]: row for row in confirmation_rows(short)}
    assert rows_short["trial"]["break_even_vs_eager"]["steps"] > 100
    from autotune.measure.choice import pay_back_sentence

    assert "more than the 100 steps of the objective: over 100 steps, eager finishes first" in pay_back_sentence(
        short, "trial"
    )


def test_a_break_even_is_one_figure_without_an_interval_since_each_compile_time_is_one_cold_run() -> None:
    # Before, the steps carried an interval from the speedup alone, as if the compile seconds were known
    # exactly: two validations of one configuration gave 62 [43, 124] and 5,977 [5,149, 7,158] steps.
    timed = _timed(eager=([800.0, 800.0, 800.0], 0.0), compile=([1000.0, 1000.0, 1000.0], 20.0))
    timed.runs["trial"] = [
        RunRecord(state="complete", samples_per_second=r, batches_per_second=r / 8, compile_seconds=30.0)
        for r in (1190.0, 1200.0, 1210.0)
    ]
    timed.subjects["trial"] = Subject(name="trial", config=REGIONAL, trial=3)
    figures = confirmation_rows(timed)[2]["break_even_vs_eager"]
    assert figures["steps"] is not None and figures["compile_measurements"] == 1
    assert "low" not in figures and "high" not in figures
    cell = confirmation_cells(confirmation_rows(timed))[3][5]
    assert cell.startswith(f"{figures['steps']:,.0f} steps (one cold compile each, no interval)") and "[" not in cell


def test_a_break_even_from_cold_compiles_has_an_interval_that_joins_both() -> None:
    # 1,200 samples/s against eager's 800 at 8 a step: a step saves 10 ms * (1 - 1/1.5) = 3.33 ms; 30 s of
    # compiling, give or take, pays back after about 9,000 steps, with an interval from both.
    timed = _timed(eager=([800.0] * 4, 0.0), compile=([1000.0] * 4, 20.0))
    timed.runs["trial"] = [
        RunRecord(state="complete", samples_per_second=r, batches_per_second=r / 8, compile_seconds=30.0)
        for r in (1190.0, 1210.0, 1195.0, 1205.0)
    ]
    timed.subjects["trial"] = Subject(name="trial", config=REGIONAL, trial=3)
    timed.compiles = {"compile": [20.0, 21.0, 19.0, 20.0], "trial": [28.0, 32.0, 29.0, 31.0]}
    figures = confirmation_rows(timed)[2]["break_even_vs_eager"]
    assert figures["compile_measurements"] == 4 and figures["compile_seconds"] == 30.0
    low, high = figures["steps_interval"]
    assert low < figures["steps"] < high and 8000 < figures["steps"] < 10000
    assert high / low < 1.5, "both spreads are small"
    cell = confirmation_cells(confirmation_rows(timed))[3]
    assert cell[5].startswith(f"{figures['steps']:,.0f} steps [{low:,.0f}, {high:,.0f}] (4 cold compiles each)")
    assert cell[4] == "30 [27.1, 32.9] (4 cold)"
    versus = confirmation_rows(timed)[2]["break_even_vs_compile"]
    assert versus["compile_seconds"] == 10.0 and versus["compile_measurements"] == 4


def test_the_search_time_ratio_stands_beside_the_confirmed_one_where_it_is_known() -> None:
    # A trial that looked 0.99x plain compile in its first run and confirmed 1.6x: the table shows both.
    timed = _timed(eager=([800.0] * 3, 0.0), compile=([1000.0] * 3, 20.0), trial=([1600.0] * 3, 30.0))
    cells = confirmation_cells(confirmation_rows(timed), {"trial": 0.99, "compile": 1.0})
    assert cells[0][2:5] == ["vs plain compile", "at search time", "vs eager"]
    by_subject = {row[0]: row for row in cells[1:]}
    assert by_subject["trial"][3] == "0.99x" and by_subject["trial"][2].startswith("1.60x")
    assert by_subject["compile"][3] == "1.00x" and by_subject["eager"][3] == "–", "eager was not a trial"
    assert all(len(row) == len(cells[0]) for row in cells)
    assert "at search time" not in confirmation_cells(confirmation_rows(timed))[0], "validate and retune: no search"
