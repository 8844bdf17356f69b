"""Nightly retuning end to end, and the compile cache a search leaves.

One search tunes the Detour test workload on a space that only allows regional compilation,
the slow choice for it: every trial is slower than plain torch.compile, so the search exports
plain torch.compile. Copies of its folder then get the regional trial as their incumbent (as
if an earlier tuning had chosen it), and retunes keep it, replace it by the whole-model
compilation a wider space offers, and flag it when it starts failing. The search's own export
is retuned at once, several times, and must never cry wolf, until the model really slows
down.

Detour's speeds come from pauses (eager Python pauses 2 ms a step, the whole compiled model
0.1 ms), not from Inductor's code: the fast tier's search and retunes run in worker processes
whose compiles use dynamo's eager backend (`tests.trial_targets.dynamo_only`), and a neighbour on
the other core cannot hide a difference that large. The compile cache needs Inductor's
artifacts: its tests, and the retune that keeps the incumbent and its cache, search with
Inductor, in the full tier.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest

from autotune import AutotuneError, CompileConfig, cli, load
from autotune.measure.stats import METHOD
from autotune.runtime import compile_cache, tuned
from autotune.runtime.summary import WorkloadSummary
from autotune.study.retune import RetuneOptions
from autotune.study.retune import _publish as publish
from autotune.study.search import load_space, params_for
from autotune.study.storage import HISTORY_FILE, append_history, read_history, record_of
from tests.blocked_imports import blocker_source
from tests.short_runs import SHORT_FLAGS

SPEC = "tests.trial_targets.dynamo_only:detour_infer"
INDUCTOR_SPEC = "tests.trial_targets.workloads:detour_infer"
SPACES = Path(__file__).parent.parent / "retune_spaces"
NARROW = str(SPACES / "regional.yaml")
WIDE = str(SPACES / "whole_or_regional.yaml")
# The incumbent's figures are dominated by a fixed pause, but this runs on shared CPUs:
# a generous limit keeps a busy neighbour from passing for a regression.
RELAXED = ["--max-regression", "0.3"]
INCUMBENT_CACHE = b"the incumbent's compile cache\n"
"""What stands for the incumbent's compile cache where the search saved none (its workers compiled no artifacts)."""


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(args))
    return code, out.getvalue()


def copy_of(folder: Path, where: Path) -> Path:
    shutil.copytree(folder, where)
    return where / "best.yaml"


def search_detour(out: Path, spec: str, *flags: str) -> Path:
    """A one-trial search of Detour in the regional-only space: it exports plain torch.compile.

    Its sampler, which a retune's warm-started search in the study uses too, draws at random from a fixed seed: in
    the wider space, its first draw after the incumbent is whole-model compilation. Its trial is never stopped for
    slowness or compile time (--slow-ratio 0, --compile-budget 0): beside a busy neighbour, plain compile itself
    once read 0.50x eager, and a pruned trial leaves the winner's measured compile cache unsaved."""
    code, _ = run_cli(
        "search", "--no-doctor", "--model", spec, "--space", NARROW, "--trials", "1", "--confirm", "1", "--replicates", "2",
        "--max-replicates", "2", "--sampler", "random", "--seed", "2", "--windows", "2", "--slow-ratio", "0",
        "--compile-budget", "0", *SHORT_FLAGS, "--device", "cpu", "--out", str(out), *flags,
    )  # fmt: skip
    assert code == cli.EXIT_OK
    return out


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The search, in worker processes that compile with dynamo's eager backend: nothing to cache."""
    return search_detour(tmp_path_factory.mktemp("search") / "detour", SPEC, "--no-compile-cache")


@pytest.fixture(scope="module")
def inductor_searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same search with Inductor, which saves the winner's compile cache."""
    return search_detour(tmp_path_factory.mktemp("inductor-search") / "detour", INDUCTOR_SPEC)


def with_regional_incumbent(best: Path, storage: str | None = None) -> Path:
    """Make the search's regional trial the incumbent, as if an earlier tuning had chosen it."""
    recorded = tuned.read(best)
    storage = storage or f"sqlite:///{best.parent / 'study.db'}"
    study = optuna.load_study(study_name=recorded.study["name"], storage=storage)
    trial = study.trials[0]
    metrics = {**recorded.metrics, "trial": 0, "exported": "trial 0", "vs_compile": None, "vs_eager": None}
    metrics.update(speedup_vs_compile=None, speedup_vs_eager=None)
    incumbent = dataclasses.replace(
        recorded,
        config=CompileConfig.from_dict(record_of(trial).config),
        created=record_of(trial).created,
        metrics=metrics,
        compile_cache={},
    )
    incumbent.write(best)
    (best.parent / "apply_compilation.py").write_text(incumbent.source)
    (best.parent / "compile_cache.bin").unlink(missing_ok=True)
    return best


@pytest.fixture(scope="module")
def unchanged(inductor_searched: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    best = with_regional_incumbent(copy_of(inductor_searched, tmp_path_factory.mktemp("unchanged") / "detour"))
    code, out = run_cli(
        "retune", str(best), "--space", NARROW, "--trials", "0", "--replicates", "2", "--max-replicates", "2"
    )
    return code, out, best.parent


@pytest.fixture(scope="module")
def improved(searched: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    best = with_regional_incumbent(copy_of(searched, tmp_path_factory.mktemp("improved") / "detour"))
    (best.parent / "compile_cache.bin").write_bytes(INCUMBENT_CACHE)  # as a search with Inductor would leave one
    code, out = run_cli(
        "retune", str(best), "--space", WIDE, "--trials", "1", "--replicates", "2", "--max-replicates", "3",
        "--no-compile-cache",
    )  # fmt: skip
    return code, out, best.parent


@pytest.mark.parallel  # Detour's pauses decide, and no neighbour hides them
def test_a_search_whose_every_trial_trails_plain_compile_exports_plain_compile(searched: Path) -> None:
    best = load(searched / "best.yaml")
    assert best.config == CompileConfig(), "regional compilation of Detour keeps its eager pause: slower"
    assert best.metrics["exported"] == "plain torch.compile" and best.metrics["trial"] is None
    assert best.metrics["verdict"].startswith("Plain torch.compile is exported: ")
    assert "the best, trial 0, is slower, 0." in best.metrics["verdict"]
    report = (searched / "report.md").read_text()
    assert best.metrics["verdict"] in report


# -- the compile cache a search leaves -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parallel  # times nothing
def test_search_saves_the_winners_compile_cache_with_both_compile_times(inductor_searched: Path) -> None:
    best = load(inductor_searched / "best.yaml")
    section = best.compile_cache
    assert section["saved"] is True and section["file"] == "compile_cache.bin"
    # Saved by a run started from the winner's measured cache; then the file alone, in a fresh cache, and
    # the cold figure is the winner's first run's.
    assert section["saved_from"] == compile_cache.SAVED_FROM_MEASURED
    # Which of one cold and one cached compile is shorter depends on the machine and its load; that the cache is
    # used, and compiles nothing again, is what test_the_cache_round_trips_into_a_process_without_autotune shows.
    cold, cached = section["cold_compile_seconds"], section["cached_compile_seconds"]
    assert cold > 0 and cached > 0 and section["load_seconds"] >= 0
    assert section["saved_fraction"] == pytest.approx(1 - cached / cold, abs=2e-3), "from the unrounded seconds"
    header = compile_cache.read_header(inductor_searched / "compile_cache.bin")
    payload = (inductor_searched / "compile_cache.bin").read_bytes().split(b"\n", 1)[1]
    assert header["sha256"] == section["sha256"] == hashlib.sha256(payload).hexdigest()
    assert header["fingerprint"] == section["fingerprint"] == compile_cache.running_fingerprint("cpu")
    assert section["artifacts"].get("inductor", 0) >= 1
    assert best.environment["model"]["model_class"] == "Detour"
    assert "## Compile cache" in (inductor_searched / "report.md").read_text()


ROUND_TRIP = blocker_source("autotune", "tests", "yaml", "optuna") + textwrap.dedent("""
    import json
    sys.path.insert(0, sys.argv[1])
    import torch
    from torch import nn
    from torch._dynamo.utils import counters
    from apply_compilation import apply_compilation, load_compile_cache

    class DetourBlock(nn.Module):
        def __init__(self, broken):
            super().__init__()
            self.linear = nn.Linear(16, 16)
            self.broken = broken

        def forward(self, x):
            y = self.linear(x)
            return y + 1.0 if self.broken and torch.compiler.is_compiling() else y

    class Detour(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(DetourBlock(False) for _ in range(2))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    loaded = load_compile_cache(sys.argv[1] + "/compile_cache.bin")
    model, _ = apply_compilation(Detour())
    with torch.no_grad():
        model(torch.randn(6, 16))
    print(json.dumps({"loaded": loaded, **{k: dict(counters[k]) for k in ("inductor", "aot_autograd")}}))
""")


@pytest.mark.slow
@pytest.mark.parallel  # times nothing
def test_the_cache_round_trips_into_a_process_without_autotune(inductor_searched: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    done = subprocess.run(
        [sys.executable, "-c", ROUND_TRIP, str(inductor_searched)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["loaded"].get("inductor", 0) >= 1, report["loaded"]
    # Compiled from the artifacts alone: the caches were empty, yet Inductor and AOTAutograd hit.
    assert report["inductor"].get("fxgraph_cache_hit", 0) >= 1 and not report["inductor"].get("fxgraph_cache_miss")
    assert report["aot_autograd"].get("autograd_cache_hit", 0) >= 1


@pytest.mark.slow
@pytest.mark.parallel  # times nothing
def test_a_cache_from_another_environment_is_refused_with_a_warning(inductor_searched: Path, monkeypatch) -> None:
    def must_not_load(payload: bytes) -> None:
        raise AssertionError("artifacts of another environment were loaded")

    monkeypatch.setattr(compile_cache.torch.compiler, "load_cache_artifacts", must_not_load)
    best = tuned.read(inductor_searched / "best.yaml")
    elsewhere = dataclasses.replace(
        best,
        compile_cache={**best.compile_cache, "fingerprint": {**best.compile_cache["fingerprint"], "torch": "2.99.0"}},
    )
    with pytest.warns(UserWarning, match="torch '.*', expected '2.99.0'.*compiles as usual"):
        assert elsewhere.load_compile_cache(inductor_searched / "compile_cache.bin") == {}


# -- retuning ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_retune_in_an_unchanged_environment_keeps_the_incumbent(unchanged: tuple[int, str, Path]) -> None:
    code, out, folder = unchanged
    assert code == cli.EXIT_OK, out
    assert "environment: unchanged since it was tuned" in out and "model: unchanged since it was tuned" in out
    assert "decision: unchanged: the incumbent stays" in out
    best = load(folder / "best.yaml")
    assert best.config.scope == "regional"
    assert (folder / "apply_compilation.py").read_text() == best.source, "the pair belongs together"
    assert (folder / "best.prev.yaml").is_file() and (folder / "apply_compilation.prev.py").is_file()
    assert best.compile_cache["saved"] is True, "the winner's cache is saved after a retune too"
    assert compile_cache.read_header(folder / "compile_cache.bin")["sha256"] == best.compile_cache["sha256"]
    study = optuna.load_study(study_name=best.study["name"], storage=f"sqlite:///{folder / 'study.db'}")
    again = [t for t in study.trials if record_of(t).retune_role == "incumbent"]
    assert len(again) == 1 and again[0].state.name == "COMPLETE", "the incumbent was measured again, not reused"
    assert record_of(again[0]).duplicate_of is None
    assert best.metrics["trial"] == 0 and best.metrics["replicates"] == 2
    assert "## Retune history" in (folder / "report.md").read_text() and (folder / "retune_history.png").is_file()


@pytest.mark.parallel  # Detour's pauses decide, and no neighbour hides them
def test_a_truly_faster_challenger_replaces_the_incumbent(improved: tuple[int, str, Path]) -> None:
    code, out, folder = improved
    assert code == cli.EXIT_OK, out
    assert "decision: improved" in out
    best, previous = load(folder / "best.yaml"), tuned.read(folder / "best.prev.yaml")
    assert (best.config.scope, previous.config.scope) == ("whole", "regional")
    # Eager pauses 2 ms a step, the whole compiled model 0.1 ms; what else a step costs (Python, dynamo's guards)
    # differs from machine to machine, so how much faster is not asked here: that it is, in every replicate. (Not
    # by the interval against eager: the retune stops once the challenger is decided against the incumbent, after
    # as few as two replicates, where an interval simultaneous over its looks spans 0.8x to 60x eager.)
    (entry,) = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
    ratios = [c / e for c, e in zip(entry["challenger"]["runs"], entry["baselines"]["eager"]["runs"], strict=True)]
    assert len(ratios) >= 2 and min(ratios) > 1.5, f"whole-model compilation skips the eager pause: {ratios}"
    assert best.metrics["vs_eager"]["median"] > 1.5
    assert (folder / "apply_compilation.py").read_text() == best.source
    assert (folder / "apply_compilation.prev.py").read_text() == previous.source
    # --no-compile-cache: the old cache does not belong to the new configuration, so it moved aside.
    assert not (folder / "compile_cache.bin").exists()
    assert (folder / "compile_cache.prev.bin").read_bytes() == INCUMBENT_CACHE
    assert not best.compile_cache
    assert not list(folder.glob(".*")), "no temporary file is left behind"


@pytest.mark.parallel  # reads what a retune wrote
def test_history_gets_one_valid_line_per_run(improved: tuple[int, str, Path]) -> None:
    folder = improved[2]
    lines = (folder / "history.jsonl").read_text().splitlines()
    (entry,) = [json.loads(line) for line in lines]
    assert [entry] == read_history(folder)
    assert entry["decision"] == "improved"
    assert {"date", "environment", "incumbent", "challenger", "baselines", "decision"} <= set(entry)
    assert entry["environment"]["torch"] and entry["incumbent"]["median"] > 0
    assert entry["baselines"]["eager"]["median"] > 0 and entry["baselines"]["compile"]["median"] > 0
    assert entry["challenger"]["config"].startswith("scope=whole") and entry["replaced"] is True
    assert entry["gain"] > 0.03


@pytest.mark.parallel  # a failure decides, not a speed
def test_an_incumbent_that_now_fails_is_a_regression_and_the_change_is_reported(
    searched: Path, tmp_path: Path, monkeypatch
) -> None:
    best = copy_of(searched, tmp_path / "detour")
    recorded = tuned.read(best)
    older = {**recorded.environment, "torch": "2.0.0", "model": {**recorded.environment["model"], "parameters": 1}}
    dataclasses.replace(recorded, environment=older).write(best)
    before = {name: (best.parent / name).read_bytes() for name in ("best.yaml", "apply_compilation.py", "study.db")}
    del before["study.db"]  # the retune records its trials there
    monkeypatch.setenv("AUTOTUNE_TEST_BROKEN", "1")  # its blocks now compute something else when compiled
    code, out = run_cli("retune", str(best), "--space", NARROW, "--trials", "0", "--replicates", "1", *RELAXED)
    assert code == cli.EXIT_REGRESSION == 3, out
    assert "environment: CHANGED since it was tuned:\n  torch: 2.0.0 -> " in out
    assert "model: CHANGED since it was tuned:\n  parameters: 1 -> 544" in out
    assert "REGRESSION: the incumbent failed (accuracy)" in out
    assert {name: (best.parent / name).read_bytes() for name in before} == before, "a regression keeps the files"
    (entry,) = read_history(best.parent)
    assert entry["decision"] == "regression" and entry["written"] is False
    assert entry["environment_changes"]["torch"][0] == "2.0.0" and "parameters" in entry["model_changes"]


@pytest.mark.parallel  # measures nothing
def test_a_study_space_that_is_not_bundled_must_be_named(searched: Path, tmp_path: Path, capsys) -> None:
    best = copy_of(searched, tmp_path / "detour")
    assert cli.main(["retune", str(best)]) == cli.EXIT_ERROR
    assert "search space 'regional', which is not a bundled one; pass --space PATH" in capsys.readouterr().err


@pytest.mark.parallel  # measures nothing
def test_a_missing_study_is_an_error_naming_it(searched: Path, tmp_path: Path, capsys) -> None:
    best = copy_of(searched, tmp_path / "detour")
    (best.parent / "study.db").unlink()
    assert cli.main(["retune", str(best), "--space", NARROW]) == cli.EXIT_ERROR
    assert "study.db does not exist; keep the whole outputs folder, or pass --storage URL" in capsys.readouterr().err


@pytest.mark.parallel  # measures nothing
def test_load_and_show_recommend_a_retune_in_another_environment(searched: Path, tmp_path: Path, capsys) -> None:
    best = copy_of(searched, tmp_path / "detour")
    recorded = tuned.read(best)
    dataclasses.replace(recorded, environment={**recorded.environment, "device_name": "Another CPU"}).write(best)
    with pytest.warns(tuned.EnvironmentMismatchWarning, match=f"Run `autotune retune {best}`"):
        load(best)
    assert cli.main(["show", str(best)]) == cli.EXIT_OK
    assert f"run `autotune retune {best}`" in capsys.readouterr().out


@pytest.mark.slow  # a retune of 40 s or so
@pytest.mark.parallel  # Detour's pauses decide, and no neighbour hides them
def test_ctrl_c_while_a_retune_replaces_its_files_leaves_them_as_they_were(
    searched: Path, tmp_path: Path, monkeypatch
) -> None:
    best = with_regional_incumbent(copy_of(searched, tmp_path / "detour"))
    (best.parent / "compile_cache.bin").write_bytes(INCUMBENT_CACHE)
    before = {
        path.name: path.read_bytes() for path in best.parent.iterdir() if path.is_file() and path.name != "study.db"
    }
    real_replace = publish.os.replace
    replaced: list[str] = []

    def replace_then_interrupt(src, dst):
        if Path(dst).parent == best.parent and Path(dst).name in before and Path(src).name.endswith(".new"):
            if replaced:  # the second file of the set: the user presses Ctrl-C
                raise KeyboardInterrupt
            replaced.append(Path(dst).name)
        return real_replace(src, dst)

    monkeypatch.setattr(publish.os, "replace", replace_then_interrupt)
    code, said = run_cli(
        "retune", str(best), "--space", WIDE, "--trials", "1", "--replicates", "2", "--max-replicates", "3",
        "--no-compile-cache",
    )  # fmt: skip
    assert code == cli.EXIT_INTERRUPTED == 130, said
    assert replaced, "the replacement had begun"
    after = {
        path.name: path.read_bytes() for path in best.parent.iterdir() if path.is_file() and path.name != "study.db"
    }
    assert after == before, "every file as it was: no new one, no journal, nothing staged"


@pytest.mark.slow  # a search and a retune: about a minute
@pytest.mark.parallel  # Detour's pauses decide, and no neighbour hides them
def test_a_study_in_postgresql_is_retuned_where_it_lives(postgres_url: str, tmp_path: Path) -> None:
    name = f"detour-{tmp_path.name}"
    out = search_detour(
        tmp_path / "detour", SPEC, "--no-compile-cache", "--storage", postgres_url, "--study-name", name
    )
    assert not (out / "study.db").exists(), "the study is in the server, not beside best.yaml"
    best = with_regional_incumbent(out / "best.yaml", storage=postgres_url)
    code, said = run_cli(
        "retune", str(best), "--space", WIDE, "--trials", "1", "--replicates", "2", "--max-replicates", "3",
        "--no-compile-cache",
    )  # fmt: skip
    assert code == cli.EXIT_OK, said
    # A shared study's sampler mixes its seed with the host and the process (so that hosts do not propose twins):
    # its one new draw may be the incumbent again, so which decision it reaches is not asked here.
    assert "decision: improved" in said or "decision: unchanged" in said, said
    study = optuna.load_study(study_name=name, storage=postgres_url)
    roles = [record_of(t).retune_role for t in study.trials]
    assert "incumbent" in roles, "the retune's warm start ran in the study the search left in the server"
    (entry,) = read_history(out)
    assert entry["decision"] in ("improved", "unchanged") and entry["incumbent"]["median"] > 0


# -- no false alarms, and a real slowdown --------------------------------------------------------


@pytest.mark.quiet  # no false alarm, as long as nothing else takes the machine between two retunes
def test_retunes_right_after_a_search_in_the_same_environment_raise_no_false_alarm(
    searched: Path, tmp_path: Path, capsys
) -> None:
    best = copy_of(searched, tmp_path / "detour")
    assert load(best).config.scope == "whole", "the search exported plain compile, which skips the eager pause"
    for attempt in range(2):
        code, out = run_cli(
            "retune", str(best), "--space", WIDE, "--trials", "0", "--top", "0", "--replicates", "2", "--max-replicates", "3",
            "--no-compile-cache",
        )  # fmt: skip
        assert code == cli.EXIT_OK, f"retune {attempt + 1}: {out}"
        assert "REGRESSION" not in out
        # Plain compile is measured once a round, as the baseline, and stays labelled as what it is.
        progress = capsys.readouterr().err
        assert "the incumbent is plain torch.compile: the compile baseline's runs are its own" in progress
        assert "measuring eager, compile: each alone and cold first" in progress and ": incumbent: " not in progress
        assert load(best).metrics["exported"] == "plain torch.compile"


@pytest.mark.slow  # a retune of 17 s or so
@pytest.mark.parallel  # a compiled step that pauses ten times as long as eager's: no neighbour hides it
def test_a_model_that_really_got_slower_is_a_regression(searched: Path, tmp_path: Path, monkeypatch) -> None:
    best = copy_of(searched, tmp_path / "detour")
    monkeypatch.setenv("AUTOTUNE_TEST_SLOW", "1")  # every compiled step now pauses longer than eager's step
    code, out = run_cli(
        "retune", str(best), "--space", WIDE, "--trials", "0", "--top", "0", "--replicates", "2", "--max-replicates", "3",
        "--no-compile-cache",
    )  # fmt: skip
    assert code == cli.EXIT_REGRESSION, out
    assert "REGRESSION: the incumbent now runs" in out and "x eager" in out


@pytest.mark.slow  # a retune of 10 s or so
@pytest.mark.parallel  # decides nothing on a speed
def test_a_best_yaml_of_another_measurement_method_is_measured_again_not_called_a_regression(
    searched: Path, tmp_path: Path, capsys
) -> None:
    best = copy_of(searched, tmp_path / "detour")
    incumbent = tuned.read(best)
    figures = dict(incumbent.metrics)
    # Tuned under the method before the steady allocator, with ratios that this machine cannot reach now:
    # under one method they would be a regression; under two, they compare nothing.
    figures["method"] = {"version": 2}
    figures["vs_eager"] = {"median": 50.0, "low": 49.0, "high": 51.0, "rounds": 3}
    dataclasses.replace(incumbent, metrics=figures).write(best)
    code, out = run_cli(
        "retune", str(best), "--space", WIDE, "--trials", "0", "--top", "0", "--replicates", "2", "--max-replicates", "2",
        "--no-compile-cache",
    )  # fmt: skip
    progress = capsys.readouterr().err
    assert code != cli.EXIT_REGRESSION, out
    now = METHOD["version"]
    assert f"best.yaml was measured with method version 2; this autotune measures with method version {now}" in progress
    assert "no recorded ratio is compared" in progress
    assert "REGRESSION" not in out


# -- enqueueing earlier configurations in a space that changed --------------------------------------


@pytest.mark.parallel  # times nothing: a unit test
def test_params_for_finds_the_answers_that_give_a_configuration(toy_summary: WorkloadSummary) -> None:
    space = load_space("default").adapt(toy_summary, "cpu")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    for _ in range(25):
        trial = study.ask()
        config = space.suggest(trial)
        params = params_for(space, config)
        assert params is not None, config.describe()
        assert space.suggest(optuna.trial.FixedTrial(params)) == config
        study.tell(trial, 1.0)


@pytest.mark.parallel  # times nothing: a unit test
def test_params_for_a_configuration_the_space_cannot_express(toy_summary: WorkloadSummary) -> None:
    narrow = load_space(NARROW).adapt(toy_summary, "cpu")
    assert params_for(narrow, CompileConfig(scope="regional")) == {}
    assert params_for(narrow, CompileConfig(scope="whole")) is None
    wide = load_space(WIDE).adapt(toy_summary, "cpu")
    assert params_for(wide, CompileConfig(scope="regional")) == {"scope": "regional"}


# -- options and help --------------------------------------------------------------------------------


@pytest.mark.parallel  # times nothing: a unit test
@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"trials": -1}, "--trials -1"),
        ({"replicates": 0}, "--replicates 0"),
        ({"replicates": 1, "max_replicates": 1}, "--max-replicates 1: must be an integer >= --replicates (1) and >= 2"),
        ({"min_gain": 1.5}, "--min-gain 1.5"),
        ({"max_regression": 0.0}, "--max-regression 0.0"),
        ({"device": "tpu"}, "--device 'tpu'"),
    ],
)
def test_bad_options_are_named(change: dict, named: str) -> None:
    with pytest.raises(AutotuneError) as raised:
        RetuneOptions(path="best.yaml", **change)
    assert named in str(raised.value)


@pytest.mark.parallel  # times nothing: a unit test
def test_retune_help_documents_the_exit_codes(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["retune", "--help"])
    text = capsys.readouterr().out
    for flag in ("--model", "--trials", "--min-gain", "--max-regression", "--replicates", "--device", "--storage"):
        assert flag in text
    assert "  0  unchanged" in text and "  3  regression" in text and "  2  error" in text
    assert "history.jsonl" in text and "*.prev.*" in text


@pytest.mark.parallel  # times nothing: a unit test
def test_history_lines_are_plain_json_and_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    append_history(tmp_path, {"date": "d", "gain": float("nan"), "runs": (1.0, float("inf"))})
    append_history(tmp_path, {"date": "e"})
    with (tmp_path / HISTORY_FILE).open("a") as handle:
        handle.write('{"date": "cut sh')
    lines = (tmp_path / HISTORY_FILE).read_text().splitlines()
    assert json.loads(lines[0]) == {"date": "d", "gain": None, "runs": [1.0, None]}
    assert read_history(tmp_path) == [{"date": "d", "gain": None, "runs": [1.0, None]}, {"date": "e"}]
    assert read_history(tmp_path / "missing") == []
