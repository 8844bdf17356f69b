"""`autotune search --dry-run`: the plan and an estimate from one cold compile, with nothing stored or searched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.study.search import SearchOptions, estimate
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel  # times nothing it asserts on

ROOT = Path(__file__).resolve().parents[2]
FAST = str(ROOT / "tests" / "search_spaces" / "fast.yaml")
MODEL = "tests.trial_targets.dynamo_only:tiny_infer"
STUDY = "tests.trial_targets.dynamo_only-tiny_infer"  # derived from MODEL
RECORDED = json.loads((ROOT / "tests" / "recorded" / "toy-dry-run-2026-11-29.json").read_text())
"""`autotune search --dry-run --json` on the toy, then the search it priced, on the 2-core machine (see `about`)."""


def _dry_run(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "autotune", "search", "--dry-run", "--model", MODEL, "--space", FAST,
            "--trials", "4", "--confirm", "1", "--windows", "2", "--window-seconds", "0.1", "--device", "cpu",
            "--out", str(out), *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip


def test_a_dry_run_prints_the_plan_and_an_estimate_and_leaves_the_study_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    storage = f"sqlite:///{out / 'study.db'}"
    kept = optuna.create_study(study_name=STUDY, storage=storage)
    kept.add_trial(optuna.trial.create_trial(value=1.0, params={}, distributions={}))
    done = _dry_run(out, "--new")  # --new deletes a study only when a search starts
    assert done.returncode == cli.EXIT_OK, done.stderr[-3000:]
    printed = done.stdout
    assert f"dry run of `autotune search --model {MODEL}`: nothing was searched, stored or exported" in printed
    for line in (
        "  space       'fast': ",
        "  trials      4 on 1 worker(s): first the recipe(s) plain, then the sampler's choices",
        "  confirm     the best 1 trial(s)",
    ):
        assert line in printed, printed
    assert "  cold run    plain torch.compile compiled in " in printed
    assert "  estimate    about " in printed and "baselines " in printed and "trials " in printed, printed
    assert "deleted study" not in done.stderr
    assert [t.value for t in optuna.load_study(study_name=STUDY, storage=storage).trials] == [1.0]
    assert sorted(p.name for p in out.iterdir()) == ["study.db"], "nothing written beside the study"


def test_the_json_of_a_dry_run_prices_every_stage_and_adds_them_up(tmp_path: Path) -> None:
    done = _dry_run(tmp_path / "out", "--json", "--no-doctor", "--no-compile-cache", "--sampler", "bruteforce")
    assert done.returncode == cli.EXIT_OK, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["command"] == "search" and "exported" not in summary
    planned = summary["dry_run"]
    assert planned["trials"] == 4 and planned["space"] == "fast"
    assert planned["recipes"] == [], "a brute-force search seeds no recipe: it tries every configuration in turn"
    assert planned["compile_seconds"] > 0 and planned["cold_run_seconds"] >= planned["compile_seconds"]
    stages = planned["estimate"]["stages"]
    assert stages["doctor"] == 0 and stages["compile cache"] == 0, "--no-doctor and --no-compile-cache are priced"
    assert stages["trials"] > 0 and stages["baselines"] > 0 and stages["confirmation"] > 0
    assert planned["estimate"]["total_seconds"] == pytest.approx(sum(stages.values()), abs=0.5)
    assert planned["estimate"]["trials"] == 4, "no plain recipe to reuse the baseline's run"
    assert not (tmp_path / "out").exists()


# -- the estimate itself -----------------------------------------------------------------------


def _cold_run() -> RunRecord:
    return RunRecord.from_dict(RECORDED["dry_run"]["cold_run"])


def _options(**changes: object) -> SearchOptions:
    # The recording names the replicates by their earlier name, rounds.
    renamed = {"rounds": "replicates", "max_rounds": "max_replicates"}
    recorded = {renamed.get(k, k): v for k, v in RECORDED["options"].items()}
    values: dict[str, object] = {"model": "examples.toy:model", "device": "cpu", **recorded}
    values.update(changes)
    return SearchOptions(**values)  # type: ignore[arg-type]


def test_the_estimate_of_the_toy_search_was_within_40_percent_of_its_wall_time() -> None:
    priced = estimate(_cold_run(), _options(), compile_decides=False, plain_seeded=True)
    took = RECORDED["search_seconds"]
    assert priced.total == pytest.approx(took, rel=0.4), f"estimated {priced.total:.0f} s, the search took {took} s"
    # The estimate the dry run printed is this function's: the replay prices the same, but for the anchors, of which
    # the search ran two and a search now runs one unless it reads the reference at a level of its own, and for the
    # compile cache, two restarts after the confirmation then and one in its second replicate now.
    printed = RECORDED["dry_run"]["estimate"]
    assert printed["anchors"] == 2 and priced.anchors == 1
    assert printed["stages"]["compile cache"] > 0 and priced.stages["compile cache"] == 0
    restart = printed["stages"]["compile cache"] / 2
    assert priced.total - priced.stages["anchors"] + restart == pytest.approx(
        printed["total_seconds"] - printed["stages"]["anchors"], abs=0.5
    )


def test_each_stage_is_priced_by_what_the_options_ask_for() -> None:
    first = _cold_run()
    base = estimate(first, _options(), compile_decides=False, plain_seeded=True)
    twice = estimate(
        first, _options(trials=2 * RECORDED["options"]["trials"] - 1), compile_decides=False, plain_seeded=True
    )
    assert twice.stages["trials"] == pytest.approx(2 * base.stages["trials"]), "twice the trials that run a worker"
    # Two workers compile side by side, but their device measures one at a time: only the cold runs halve.
    side_by_side = estimate(first, _options(workers=2), compile_decides=False, plain_seeded=True)
    cold = first.wall_seconds - (first.shared_build_seconds or 0.0)
    assert side_by_side.stages["trials"] == pytest.approx(base.stages["trials"] - base.trials * cold / 2)
    unseeded = estimate(first, _options(), compile_decides=False, plain_seeded=False)
    assert unseeded.trials == base.trials + 1, "without the plain recipe every trial runs a worker"
    bare = estimate(first, _options(doctor=False, compile_cache=False), compile_decides=False, plain_seeded=True)
    assert bare.stages["doctor"] == bare.stages["compile cache"] == 0 < base.stages["doctor"]
    more = estimate(first, _options(confirm=3), compile_decides=False, plain_seeded=True)
    assert more.stages["confirmation"] > base.stages["confirmation"]
    cold = estimate(first, _options(), compile_decides=True, plain_seeded=True)
    assert cold.stages["confirmation"] > base.stages["confirmation"], "time-to compiles cold before each replicate"
    # A trial is at least its cold run: the compile is what it cannot skip.
    assert base.trial_seconds > first.wall_seconds - (first.shared_build_seconds or 0.0)
