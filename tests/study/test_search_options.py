"""What `autotune search` refuses, and what its flags set, before any workload is built or any worker started."""

from __future__ import annotations

import optuna
import pytest

from autotune import cli
from autotune.errors import SearchError
from autotune.study.report import export_from_storage
from autotune.study.search import SearchOptions
from autotune.study.storage import read_study_record, update_study_record

pytestmark = pytest.mark.parallel  # nothing here is timed, and nothing runs a worker

SPEC = "tests.trial_targets.workloads:tiny_train"
STUDY = "tests.trial_targets.workloads-tiny_train"  # derived from SPEC


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
        ({"max_replicates": 0}, r"--max-replicates 0: must be >= --replicates"),
        ({"replicates": 0}, r"--replicates 0: must be >= 1"),
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
    with pytest.raises(SearchError, match="--storage 'study.db' is not a storage URL: a file is sqlite:///PATH"):
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
        "--replicates",
    ):
        assert flag in text
    assert "best.yaml" in text and "resumes" in text


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
    update_study_record(study, **{"objective": "throughput", "model": spec, "device": "cpu", **recorded})
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


@pytest.mark.parametrize(
    ("flags", "wanted"),
    [
        ([], {"space": "default", "trials": 20, "confirm": 3, "replicates": 3, "max_replicates": 9}),
        (["--effort", "quick"], {"space": "quick", "trials": 8, "confirm": 2, "replicates": 2, "max_replicates": 5}),
        (
            ["--effort", "thorough"],
            {"space": "thorough", "trials": 60, "confirm": 5, "replicates": 4, "max_replicates": 9},
        ),
        (["--effort", "thorough", "--trials", "3", "--space", "quick"], {"space": "quick", "trials": 3}),
        (["--effort", "quick", "--replicates", "6"], {"replicates": 6, "max_replicates": 6}),
        (["--max-replicates", "2"], {"replicates": 2, "max_replicates": 2}),
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


def test_a_library_caller_passes_optuna_sampler_and_pruner_objects_as_they_are(tmp_path) -> None:
    from autotune.measure import Objectives
    from autotune.runtime.summary import WorkloadSummary
    from autotune.study.search import open_search_study

    sampler, pruner = optuna.samplers.RandomSampler(seed=7), optuna.pruners.PercentilePruner(25.0)
    options = SearchOptions(model="m:w", device="cpu", out=str(tmp_path), sampler=sampler, pruner=pruner)
    assert (options.sampler_name, options.pruner_name, options.brute_force) == (
        "RandomSampler",
        "PercentilePruner",
        False,
    )
    study, _ = open_search_study(
        options, Objectives.parse("throughput"), WorkloadSummary(spec="m:w", task="infer"), {}, "default"
    )
    assert study.sampler is sampler and study.pruner is pruner, "used as they are, not rebuilt from a name"
    assert read_study_record(study).settings.sampler == "RandomSampler"
    brute = SearchOptions(model="m:w", device="cpu", sampler=optuna.samplers.BruteForceSampler(seed=0))
    assert brute.brute_force, "a brute-force object, like the name, is seeded with no recipe"
    with pytest.raises(SearchError, match=r"--sampler 42: must be one of .* or an Optuna BaseSampler object; got int"):
        SearchOptions(model="m:w", device="cpu", sampler=42)  # type: ignore[arg-type]
    with pytest.raises(SearchError, match="--pruner 'sometimes' is not allowed"):
        SearchOptions(model="m:w", device="cpu", pruner="sometimes")


def test_a_library_caller_passes_an_optuna_storage_object_and_the_study_is_opened_in_it(tmp_path) -> None:
    from autotune.measure import Objectives
    from autotune.runtime.summary import WorkloadSummary
    from autotune.study.search import open_search_study
    from autotune.study.storage import opened_in

    url = f"sqlite:///{tmp_path / 'own.db'}"
    storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})
    options = SearchOptions(model="m:w", device="cpu", out=str(tmp_path / "out"), storage=storage)
    assert options.storage_url == url and options.storage_object is storage and not options.shared
    study, _ = open_search_study(
        options, Objectives.parse("throughput"), WorkloadSummary(spec="m:w", task="infer"), {}, "default"
    )
    assert opened_in(study) is storage, "used as it is, with its own engine settings, not opened again from its URL"
    assert read_study_record(optuna.load_study(study_name=study.study_name, storage=url)).model == "m:w"
    assert not (tmp_path / "out" / "study.db").exists(), "nothing is written beside it"
    with pytest.raises(SearchError, match="storage: InMemoryStorage is not allowed; give a database URL or an "):
        SearchOptions(model="m:w", device="cpu", storage=optuna.storages.InMemoryStorage())  # type: ignore[arg-type]
