"""End to end: a real search on a tiny workload, its exported files, resuming and re-exporting."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest
import torch
import yaml

from autotune import CompileConfig, cli, load
from autotune.errors import SearchError
from autotune.measure import outcome
from autotune.measure.stats import Interval
from autotune.study.report import export_from_storage, render_summary
from autotune.study.search import SearchOptions, search
from autotune.study.storage import study_scale
from tests.short_runs import SHORT_FLAGS

# Real searches of tiny workloads, whose assertions rest on what they write, never on how fast
# anything ran (no pruning, no slow-ratio, any export accepted): they may run beside other tests.
pytestmark = pytest.mark.parallel

SPEC = "tests.trial_targets.workloads:tiny_train"
FAST = str(Path(__file__).parent.parent / "search_spaces" / "fast.yaml")
STUDY = "tests.trial_targets.workloads-tiny_train"  # derived from SPEC


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    out = tmp_path_factory.mktemp("search") / "tiny"
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        code = _search(out)
    (out.parent / "stdout.txt").write_text(printed.getvalue())
    (out.parent / "stderr.txt").write_text(progress.getvalue())
    return code, out


def _search(out):
    return cli.main(
        [
            "search",
            "--model",
            SPEC,
            "--space",
            FAST,
            "--trials",
            "2",
            "--confirm",
            "1",
            "--rounds",
            "2",
            "--max-rounds",
            "2",
            "--sampler",
            "random",
            "--windows",
            "3",
            *SHORT_FLAGS,
            "--device",
            "cpu",
            "--out",
            str(out),
            "--no-compile-cache",  # test_retune.py covers the cache; it costs two more compiles
            # On a busy machine a compiled tiny model can trail eager; nothing here is about pruning.
            "--pruner",
            "none",
            "--slow-ratio",
            "0",
        ]
    )


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_search_exports_every_file_with_baselines(searched, capsys) -> None:
    code, out = searched
    assert code == 0
    for name in ("best.yaml", "apply_compilation.py", "trials.csv", "report.md", "study.db"):
        assert (out / name).is_file(), name
    tuned = load(out / "best.yaml")
    assert tuned.workload.spec == SPEC
    # The doctor ran first: the tiny model has no graph breaks and, at one length, no recompiles.
    assert tuned.study["doctor"]["clean"] is True
    assert tuned.study["doctor"]["verdict"].startswith("Clean: no graph breaks and no recompiles")
    assert "## Graph breaks and recompiles\n\n```\nClean: no graph breaks" in (out / "report.md").read_text()
    for name in ("eager", "compile"):
        assert tuned.baselines[name]["samples_per_second"] > 0
        assert len(tuned.baselines[name]["runs"]) == tuned.metrics["rounds"] >= 2
    metrics = tuned.metrics
    assert metrics["samples_per_second"] > 0 and metrics["confirmed"] is True
    # Whatever is exported is never measured slower than plain compile: a trial only with a gain that survives.
    exported = metrics["exported"]
    assert exported in ("no compilation", "plain torch.compile") or exported == f"trial {metrics['trial']}"
    # The rule itself, on the figures best.yaml records: a trial ships only with a decided gain; plain compile or
    # eager ship otherwise (which of them this tiny search ends with varies; the rule holds either way).
    versus = Interval.from_dict(metrics["vs_compile"]) if metrics["vs_compile"] else None
    assert (metrics["trial"] is not None) == (outcome(versus) == "gain" and exported.startswith("trial"))
    for name in ("eager", "compile"):
        interval = metrics[f"vs_{name}"]
        if interval is not None:
            assert interval["low"] <= interval["median"] == metrics[f"speedup_vs_{name}"] <= interval["high"]
    assert exported in metrics["verdict"] or exported.capitalize() in metrics["verdict"]
    assert tuned.study["trials"]["total"] == 2
    rows = list(csv.DictReader((out / "trials.csv").open()))
    assert [r["number"] for r in rows] == ["0", "1"]
    # Where each trial's compile time went, from torch's metrics: the parts are there and inside its compile time.
    for row in rows:
        if row["state"] == "COMPLETE":
            parts = [float(row[f"compile_{p}_s"]) for p in ("tracing", "aot_autograd", "inductor")]
            assert all(p >= 0 for p in parts) and 0 < sum(parts) <= float(row["compile_seconds"]) * 1.1, row
    assert "## Where compile time goes" in (out / "report.md").read_text()
    assert tuned.baselines["compile"]["compile_split"]["inductor"] > 0
    # The CSV says what each trial compiled: its effective configuration, column by column.
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    for row, trial in zip(rows, study.trials, strict=True):
        config = CompileConfig.from_dict(trial.user_attrs["config"])
        assert row["configuration"] == config.describe()
        assert row["mode"] == str(config.mode) and row["scope"] == config.scope
        for name, value in config.options.items():
            assert row[f"options.{name}"] == str(value)
        assert row["mark_dynamic"] == " ".join(
            f"{k}:{a}" for k, axes in sorted(config.to_dict()["mark_dynamic"].items()) for a in axes
        )
        assert not any(column.startswith("param.") for column in row)
    assert "Verdict" in (out / "report.md").read_text()
    # The first trial, seeded plain torch.compile, is the compile baseline's run: not compiled a second time.
    plain, baseline = study.trials[0], study.user_attrs["baseline.compile"]
    assert plain.user_attrs["recipe"] == "plain" and plain.user_attrs["reused_run"]
    # It stands where a trial level with the live reference would: the study's scale, this first session's rate.
    scale = study_scale(study)
    assert scale is not None and plain.value == scale.samples_per_second
    assert (
        plain.value == pytest.approx(baseline["samples_per_second"]) and plain.user_attrs["speedup_vs_compile"] == 1.0
    )
    assert plain.user_attrs["wall_seconds"] == baseline["wall_seconds"]
    # Plain compile against itself at every block: what the pruner judges later trials against.
    blocks = study.user_attrs["settings"]["protocol"]["windows"]
    assert plain.intermediate_values == {step: pytest.approx(baseline["samples_per_second"]) for step in range(blocks)}
    progress = (out.parent / "stderr.txt").read_text()
    assert "trial 0: starting" not in progress and "trial 1: starting" in progress
    assert "(the run of the plain torch.compile baseline, reused)" in progress


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_the_cli_the_report_and_show_print_the_same_summary(searched, capsys) -> None:
    _, out = searched
    tuned = load(out / "best.yaml")
    summary = render_summary(tuned.metrics, tuned.study)
    assert summary.startswith(tuned.metrics["verdict"])
    assert tuned.metrics["confirmation"] and tuned.study["best_trials"], "the figures are recorded in best.yaml"
    assert summary in (out.parent / "stdout.txt").read_text(), "what the search printed"
    assert cli.main(["show", str(out / "best.yaml")]) == cli.EXIT_OK
    shown = capsys.readouterr().out
    assert summary in shown, "what show prints"
    report = (out / "report.md").read_text()
    assert render_summary(tuned.metrics, tuned.study, markdown=True) in report
    for text in (shown, report):
        assert not re.search(r"[{\[]'", text), "no Python repr of a dict or list"
    for row in tuned.metrics["confirmation"]:
        assert row["subject"] in summary


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_exported_code_is_the_measured_code_and_runs_without_autotune(searched, tmp_path) -> None:
    _, out = searched
    source = (out / "apply_compilation.py").read_text()
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{out / 'study.db'}")
    confirmation = study.user_attrs["confirmation"]["subjects"]
    measured = {entry["source_sha256"] for entry in confirmation.values()}
    if load(out / "best.yaml").metrics["exported"] == "no compilation":
        assert "torch.compile(" not in source.split("def apply_compilation")[1].split("def ")[0], (
            "eager: nothing compiled"
        )
    else:
        assert hashlib.sha256(source.encode()).hexdigest() in measured, "the file is one the confirmation measured"
    script = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "autotune":
                    raise ImportError("autotune is not installed here")
        sys.meta_path.insert(0, Block())
        sys.path.insert(0, {str(out)!r})
        import torch
        from torch import nn
        from apply_compilation import apply_compilation, prepare_batch
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
        batch = torch.randn(6, 16)
        expected = model(batch)
        keys = list(model.state_dict())
        model, _ = apply_compilation(model)
        got = model(prepare_batch(batch))
        assert list(model.state_dict()) == keys
        print(float((got - expected).abs().max()))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.strip().splitlines()[-1]) < 1e-4


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_rerunning_resumes_the_study_and_export_rebuilds_the_files(searched, tmp_path) -> None:
    _, out = searched
    before = yaml.safe_load((out / "best.yaml").read_text())
    scale = study_scale(optuna.load_study(study_name=STUDY, storage=f"sqlite:///{out / 'study.db'}"))
    assert scale is not None and scale.reference == "compile", "the first session recorded its scale"
    phases, messages = [], []
    result = search(
        SearchOptions(
            model=SPEC,
            space=FAST,
            trials=3,
            confirm=0,
            sampler="random",
            device="cpu",
            out=str(out),
            compile_cache=False,
            pruner="none",
            slow_ratio=0.0,
            seed=1,  # this session's sampler proposes a configuration not measured before: it is measured here
        ),
        progress=lambda progress: (phases.append(progress.phase), messages.append(progress.message)),
    )
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{out / 'study.db'}")
    assert len(study.trials) == 3, "two trials were resumed, one was added"
    # This session measured plain compile again, at its own rate; its trials' figures are on the study's scale.
    assert study_scale(study) == scale
    assert any("as every trial of the study" in m for m in messages), messages
    resumed = study.trials[2]
    assert resumed.state == optuna.trial.TrialState.COMPLETE and "duplicate_of" not in resumed.user_attrs
    assert resumed.user_attrs["reference_samples_per_second"] == round(scale.samples_per_second, 4)
    assert resumed.value == pytest.approx(resumed.user_attrs["paired_ratio"] * scale.samples_per_second, rel=1e-3)
    assert not [phase for phase in phases if phase.startswith("doctor")], "the study kept the doctor's findings"
    # The study began with plain torch.compile as a recipe (half of 2 trials); resuming seeds nothing again.
    assert [t.user_attrs.get("recipe") for t in study.trials] == ["plain", None, None]
    assert "doctor" in study.user_attrs
    assert result.summary["trials"]["total"] == 3
    again = export_from_storage(f"sqlite:///{out / 'study.db'}", STUDY, tmp_path / "again")
    assert (tmp_path / "again" / "best.yaml").is_file()
    assert again.tuned_path == tmp_path / "again" / "best.yaml"
    # The confirmation stored in the study decides, so a re-export ships the same configuration.
    assert yaml.safe_load((tmp_path / "again" / "best.yaml").read_text())["config"] == before["config"]
    assert before["baselines"]["eager"]["samples_per_second"] > 0
    # --pick chooses among a Pareto front: this study has one objective, so export says so instead of ignoring it,
    # and a rule that is no rule is refused before any storage is opened.
    url = f"sqlite:///{out / 'study.db'}"
    with pytest.raises(SearchError, match="--pick fastest: study .* has one objective .* no Pareto front"):
        export_from_storage(url, STUDY, tmp_path / "picked", pick="fastest")
    with pytest.raises(SearchError, match="--pick 'bad' is not allowed"):
        export_from_storage("sqlite:////nonexistent/folder/study.db", STUDY, tmp_path / "bad", pick="bad")
    assert not (tmp_path / "picked").exists() and not (tmp_path / "bad").exists()


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_resuming_with_another_objective_is_refused(searched) -> None:
    _, out = searched
    with pytest.raises(SearchError, match="objective"):
        search(SearchOptions(model=SPEC, space=FAST, trials=1, objective="time-to:100", device="cpu", out=str(out)))


def test_bad_options_are_named() -> None:
    with pytest.raises(SearchError, match="--sampler 'grid'"):
        SearchOptions(model=SPEC, sampler="grid")
    with pytest.raises(SearchError, match="time-to"):
        SearchOptions(model=SPEC, objective="latency")
    assert cli.main(["search", "--model", SPEC, "--device", "tpu"]) == cli.EXIT_ERROR


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"seed": -1}, r"--seed -1: must be in \[0, 2\*\*32 - 1\]"),
        ({"seed": 2**32}, r"--seed 4294967296"),
        ({"timeout": 0.0}, r"--timeout 0.0: must be a positive number of seconds"),
        ({"trial_timeout": float("nan")}, r"--trial-timeout nan: must be a positive"),
        ({"max_compile_seconds": -5.0}, r"--max-compile-seconds -5.0: must be a positive"),
        ({"max_compile_seconds": 0.0}, r"--max-compile-seconds 0.0: must be a positive"),
        ({"compile_budget": float("nan")}, r"--compile-budget nan"),
        ({"max_rounds": 0}, r"--max-rounds 0: must be >= --rounds"),
        ({"rounds": 0}, r"--rounds 0: must be >= 1"),
    ],
)
def test_bad_numbers_are_refused_by_name_before_anything_is_built(change: dict, named: str) -> None:
    # A negative seed passed every check and ended, after the workload was built, in numpy's traceback; NaN seconds
    # and a negative compile limit were taken as they were.
    with pytest.raises(SearchError, match=named):
        SearchOptions(model=SPEC, **change)


def test_a_space_that_is_not_there_is_refused_before_the_workload_is_built(tmp_path, monkeypatch, capsys) -> None:
    # It was found missing only once the workload had been built and its batches drawn (minutes for a real model),
    # after the banner that says a search has begun.
    monkeypatch.chdir(tmp_path)
    assert cli.main(["search", "--model", "no.such.module:nothing", "--space", "bogus"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "--space 'bogus': no such file, and not a bundled space" in err and "searching" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_storage_that_is_no_database_url_is_refused_by_name_and_nothing_is_left_behind(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SearchError, match="--storage 'study.db' is not a database URL: a file is sqlite:///PATH"):
        SearchOptions(model=SPEC, storage="study.db")
    with pytest.raises(SearchError, match="'foo' is no database this can open"):
        SearchOptions(model=SPEC, storage="foo://bar")
    # Reading a study from a SQLite file that is not there said nothing useful, and left an empty database behind.
    with pytest.raises(SearchError, match="there is no file nope.db"):
        export_from_storage("sqlite:///nope.db", STUDY, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_search_help_documents_every_flag(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["search", "--help"])
    text = capsys.readouterr().out
    for flag in (
        "--model",
        "--space",
        "--trials",
        "--timeout",
        "--trial-timeout",
        "--device",
        "--out",
        "--study-name",
        "--storage",
        "--sampler",
        "--pruner",
        "--seed",
        "--objective",
        "--max-compile-seconds",
        "--window-seconds",
        "--fresh-batches",
        "--rounds",
    ):
        assert flag in text
    assert "best.yaml" in text and "resumes" in text


@pytest.mark.slow
def test_the_plain_recipe_with_inductor_options_at_their_defaults_is_the_compile_baseline(tmp_path, capsys) -> None:
    # A sampled option stays in the configuration even at its default, so the plain recipe of a
    # space with Inductor options is plain compile spelled out: never compiled or confirmed again.
    space = tmp_path / "options.yaml"
    space.write_text("description: one Inductor option\noptions:\n  epilogue_fusion: [true, false]\n")
    out = tmp_path / "out"
    code = cli.main(
        [
            "search", "--no-doctor", "--model", "tests.trial_targets.workloads:tiny_infer", "--space", str(space),
            "--trials", "1", "--confirm", "1", "--rounds", "2", "--max-rounds", "2", "--windows", "2", *SHORT_FLAGS,
            "--no-compile-cache", "--pruner", "none", "--slow-ratio", "0", "--device", "cpu", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == cli.EXIT_OK
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    plain = study.trials[0]
    assert plain.user_attrs["recipe"] == "plain" and plain.user_attrs["config"]["options"] == {"epilogue_fusion": True}
    assert plain.user_attrs["reused_run"] == "the plain torch.compile baseline"
    assert set(study.user_attrs["confirmation"]["subjects"]) == {"eager", "compile"}
    progress = capsys.readouterr().err
    assert "trial 0: starting" not in progress
    assert "confirming eager against plain torch.compile" in progress
    assert load(out / "best.yaml").metrics["exported"] in ("plain torch.compile", "no compilation")


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_bruteforce_stops_when_every_configuration_was_measured(tmp_path) -> None:
    space = tmp_path / "two.yaml"
    space.write_text("description: two configurations\nmode: [default]\ndynamic: [null, true]\n")
    result = search(
        SearchOptions(
            model="tests.trial_targets.workloads:tiny_infer",
            space=str(space),
            trials=6,
            sampler="bruteforce",
            confirm=0,
            device="cpu",
            out=str(tmp_path / "out"),
            compile_cache=False,
            doctor=False,
            pruner="none",
            slow_ratio=0.0,
        )
    )
    assert result.summary["trials"]["total"] == 2
    assert {row["configuration"] for row in result.summary["best_trials"]} == {
        "scope=whole mode=default dynamic=None",
        "scope=whole mode=default dynamic=True",
    }


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--window-seconds", "0", "--window-seconds: 0.0 must be a number of seconds > 0"),
        ("--fresh-batches", "-1", "--fresh-batches: -1 must be an integer >= 0"),
        ("--windows", "0", "--windows: 0 must be an integer >= 1"),
    ],
)
def test_a_bad_measurement_flag_is_named_before_anything_runs(tmp_path, capsys, flag, value, named) -> None:
    out = tmp_path / "out"
    assert cli.main(["search", "--model", SPEC, flag, value, "--out", str(out)]) == cli.EXIT_ERROR
    assert named in capsys.readouterr().err
    assert not out.exists(), "nothing was started"


def test_slow_ratio_must_be_a_fraction() -> None:
    with pytest.raises(SearchError, match="--slow-ratio 1.5"):
        SearchOptions(model=SPEC, slow_ratio=1.5)


@pytest.mark.parametrize(
    ("recorded", "named"),
    [
        ({"device": "cuda"}, "was started with --device cuda, not cpu"),
        ({"environment": {"torch": "1.0.0", "python": "3.0"}}, "torch 1.0.0 there"),
    ],
)
def test_a_study_is_never_resumed_on_another_device_or_environment(tmp_path, capsys, recorded, named) -> None:
    spec = "tests.trial_targets.workloads:tiny_infer"
    out = tmp_path / "out"
    out.mkdir()
    study = optuna.create_study(
        study_name="tests.trial_targets.workloads-tiny_infer", storage=f"sqlite:///{out / 'study.db'}"
    )
    for key, value in {"objective": "throughput", "model": spec, "device": "cpu", **recorded}.items():
        study.set_user_attr(key, value)
    study.tell(study.ask(), 1.0)
    (out / "best.yaml").write_text("kept\n")
    assert cli.main(["search", "--model", spec, "--trials", "2", "--device", "cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert named in err and "another --study-name" in err
    assert (out / "best.yaml").read_text() == "kept\n" and len(study.trials) == 1


def test_a_device_this_torch_cannot_use_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same answer on a GPU machine
    out = tmp_path / "out"
    assert cli.main(["search", "--model", SPEC, "--trials", "1", "--device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--device 'cuda': no CUDA device is usable here" in err and "use --device cpu" in err
    assert not out.exists(), "no study, no folder"


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_a_time_to_search_confirms_with_a_cold_compile_before_each_replicate(tmp_path, capsys) -> None:
    out = tmp_path / "time-to"
    argv = [
        "search", "--model", "tests.trial_targets.workloads:tiny_infer", "--space", FAST, "--trials", "1",
        "--confirm", "1", "--rounds", "2", "--max-rounds", "2", "--windows", "2", *SHORT_FLAGS, "--fresh-batches", "4",
        "--device", "cpu", "--out", str(out), "--objective", "time-to:1000", "--no-compile-cache", "--no-doctor",
        "--no-recipes", "--slow-ratio", "0",
    ]  # fmt: skip
    assert cli.main(argv) == 0
    said = capsys.readouterr()
    assert "compile time decides here, so before each replicate every configuration compiles again, cold" in (
        said.out + said.err
    )
    rows = {row["subject"]: row for row in load(out / "best.yaml").metrics["confirmation"]}
    # Plain compile's compile time has two figures, one before each replicate, and an interval from them.
    assert rows["compile"]["compile_interval"]["rounds"] == 2
    assert "compile_interval" not in rows["eager"], "eager compiles nothing"
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    compiles = study.user_attrs["confirmation"]["compiles"]
    assert len(compiles["compile"]) == 2 and all(seconds > 0 for seconds in compiles["compile"])


@pytest.mark.slow  # a real search (its module's fixture, or its own): 15 to 50 s
def test_a_multi_objective_search_exports_its_pareto_front_and_export_can_pick_another_point(tmp_path) -> None:
    out = tmp_path / "front"
    argv = [
        # Inference: its step compiles in a fraction of a training step's time, and nothing here is about training.
        "search", "--model", "tests.trial_targets.workloads:tiny_infer", "--space", FAST, "--trials", "1",
        "--confirm", "1", "--rounds", "1", "--max-rounds", "1", "--windows", "2", *SHORT_FLAGS, "--fresh-batches", "4",
        "--device", "cpu", "--out", str(out), "--objective", "throughput,compile-time", "--no-compile-cache", "--no-doctor", "--no-recipes",
        "--slow-ratio", "0",
    ]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert cli.main(argv) == 0
    document = yaml.safe_load((out / "pareto.yaml").read_text())
    assert document["objectives"] == ["throughput", "compile-time"]
    points = document["points"]
    subjects = [p["subject"] for p in points]
    assert "eager" in subjects, "no compile at all is the shortest compile: always a point of this front"
    throughputs = [p["figures"]["throughput"] for p in points]
    assert throughputs == sorted(throughputs, reverse=True), "fastest first"
    for point in points:  # each point is a configuration a user can load and apply
        tuned = load(out / point["best"])
        assert tuned.config.to_dict() == point["config"]
        assert (out / point["code"]).read_text() == tuned.source
        model, _ = tuned.apply(torch.nn.Linear(16, 4))
        assert model(torch.randn(2, 16)).shape == (2, 4)
    picked = next(p for p in points if p["picked"])
    assert load(out / "best.yaml").config.to_dict() == picked["config"] and picked["subject"] == document["picked"]
    assert "Pareto front (throughput,compile-time; best.yaml is --pick fastest:2x)" in printed.getvalue()
    report = (out / "report.md").read_text()
    assert "## Pareto front" in report and (out / "pareto.png").is_file()

    storage = f"sqlite:///{out / 'study.db'}"
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            cli.main(
                [
                    "export",
                    "--storage",
                    storage,
                    "--study-name",
                    "tests.trial_targets.workloads-tiny_infer",
                    "--out",
                    str(out),
                    "--pick",
                    "least-compile",
                ]
            )
            == 0
        )
    assert load(out / "best.yaml").config.scope == "none"
    assert load(out / "best.yaml").metrics["pick"] == "least-compile"


@pytest.mark.parametrize(
    ("flags", "wanted"),
    [
        ([], {"space": "default", "trials": 20, "confirm": 3, "rounds": 3, "max_rounds": 8}),
        (["--effort", "quick"], {"space": "quick", "trials": 8, "confirm": 2, "rounds": 2, "max_rounds": 5}),
        (["--effort", "thorough"], {"space": "thorough", "trials": 60, "confirm": 5, "rounds": 4, "max_rounds": 8}),
        (["--effort", "thorough", "--trials", "3", "--space", "quick"], {"space": "quick", "trials": 3}),
        (["--effort", "quick", "--rounds", "6"], {"rounds": 6, "max_rounds": 6}),
        (["--max-rounds", "2"], {"rounds": 2, "max_rounds": 2}),
        (["--allow-precision-changes"], {"allow_precision_changes": True}),
    ],
)
def test_effort_sets_space_trials_and_confirmation_unless_a_flag_says_otherwise(
    flags: list[str], wanted: dict, monkeypatch, capsys
) -> None:
    import autotune.study.search as search_module

    seen: list[SearchOptions] = []

    def fake_search(options: SearchOptions, progress: object = None) -> None:
        seen.append(options)
        raise SearchError("stopped before searching")

    monkeypatch.setattr(search_module, "search", fake_search)
    assert cli.main(["search", "--model", SPEC, "--device", "cpu", *flags]) == 2
    assert {name: getattr(seen[0], name) for name in wanted} == wanted
    assert f"space {seen[0].space!r} (effort " in capsys.readouterr().err
    if "--allow-precision-changes" not in flags:
        assert seen[0].allow_precision_changes is False


def test_an_unknown_effort_level_is_refused_with_the_levels(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["search", "--model", SPEC, "--effort", "maximum"])
    err = capsys.readouterr().err
    assert "--effort: invalid choice: 'maximum'" in err and all(level in err for level in ("quick", "thorough"))
