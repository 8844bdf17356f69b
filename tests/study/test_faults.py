"""Fault injection: what autotune survives when machines, storage, files or workloads misbehave.

Each test injects one fault and checks that autotune ends with a clear message and a
documented exit code, leaves nothing running or lying around, and trusts nothing it
should not. README's "What autotune survives" lists these faults; the ones handled by
the trial runner itself (hang, segfault, wrong numbers) are in test_runner.py.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from autotune import CompileConfig, cli
from autotune.errors import ConfigError, SpaceError
from autotune.measure import Objective
from autotune.runtime import compile_cache, limits
from autotune.runtime.summary import WorkloadSummary
from autotune.runtime.tuned import read
from autotune.study.doctor import diagnose
from autotune.study.retune import _publish as publish
from autotune.study.search import SearchOptions, TrialLoop, load_space, search
from autotune.study.search import _loop as trials
from autotune.study.storage import create_study, failure_of, read_study_record, record_of, update_study_record
from autotune.trial import live, runner
from autotune.trial.request import RunProtocol, TrialRequest
from tests.best_yaml import tuned_config, write_best
from tests.processes import alive, command_line, gone, with_command_line, workers_of
from tests.short_runs import SHORT_FLAGS
from tests.trial_targets import workloads

TARGETS = "tests.trial_targets.workloads"


# -- 1. two searches opening one new study at once -------------------------------------------


def _open_at(url: str, start: float) -> str:
    time.sleep(max(start - time.time(), 0))
    try:
        create_study("race", url, direction="maximize")
    except Exception as exc:  # what a user would have seen as a traceback
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@pytest.mark.slow  # a dozen searches started at once: half a minute of two cores
@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_many_processes_creating_one_new_sqlite_study_at_once_all_open_it(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for attempt in range(3):
        url = f"sqlite:///{tmp_path / f'study{attempt}.db'}"
        with context.Pool(12) as pool:
            start = time.time() + 1.0
            outcomes = pool.starmap(_open_at, [(url, start)] * 12)
        assert outcomes == ["ok"] * 12
        assert len(optuna.get_all_study_summaries(url)) == 1


def _loop(study: optuna.Study, trials: int = 3) -> TrialLoop:
    options = SimpleNamespace(
        trials=trials, reuse_since=0, max_compile_seconds=None, compile_budget=4.0, pruner_name="median", slow_ratio=0.5
    )
    harness = SimpleNamespace(timeout=900.0, device="cpu", protocol=RunProtocol())
    return TrialLoop(study, harness, options, Objective.parse("throughput"), lambda *args, **kwargs: None)  # type: ignore[arg-type]


def _running_trial(study: optuna.Study, pid: int) -> int:
    trial = study.ask()
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", pid)
    return trial.number


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_trials_budget_counts_those_other_live_searches_are_running(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _running_trial(study, other.pid)
        finished = study.ask()
        study.tell(finished, 1.0)
        loop = _loop(study)
        assert len(loop.ledger.finished()) == 1
        assert loop.ledger.started() == 2, "the other search's running trial counts towards --trials"
        assert loop.ledger.reap_abandoned() == 0, "a trial whose search is alive is not abandoned"
    finally:
        other.kill()
        other.wait()
    assert loop.ledger.started() == 1, "a dead search's trial no longer counts"


# -- 2. a damaged study ------------------------------------------------------------------------


def _damaged_study(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{folder / 'study.db'}"
    study = optuna.create_study(study_name="examples.toy-model", storage=url, direction="maximize")
    update_study_record(study, workload=WorkloadSummary(spec="examples.toy:model", task="infer"))
    for value in range(20):
        study.tell(study.ask(), float(value))
    size = (folder / "study.db").stat().st_size
    with open(folder / "study.db", "r+b") as db:
        db.truncate(size // 2)
    return url


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_truncated_study_is_named_as_damaged_by_every_command_with_exit_code_2(tmp_path: Path, capsys) -> None:
    url = _damaged_study(tmp_path / "out")
    export = ["export", "--storage", url, "--study-name", "examples.toy-model", "--out", str(tmp_path / "x")]
    search = [
        "search",
        "--no-doctor",
        "--model",
        "examples.toy:model",
        "--trials",
        "1",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "out"),
    ]
    write_best(
        tmp_path / "out" / "best.yaml",
        WorkloadSummary(spec="examples.toy:model", task="train"),
        CompileConfig(),
        created="2026-01-01T00:00:00Z",
        study={"name": "examples.toy-model", "storage": "study.db"},
    )
    retune = ["retune", str(tmp_path / "out" / "best.yaml"), "--device", "cpu"]
    for argv in (export, search, retune):
        assert cli.main(argv) == cli.EXIT_ERROR
        err = capsys.readouterr().err
        assert "study.db is damaged" in err and "restore it from a copy" in err
        assert "Traceback" not in err


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_an_unexpected_error_still_exits_with_a_documented_code(monkeypatch, capsys) -> None:
    from autotune.study.search import _space_file

    def broken() -> dict[str, Path]:
        raise OSError("disk on fire")

    monkeypatch.setattr(_space_file, "bundled_spaces", broken)
    # The command takes the name from the package, which bound it when first imported: patched there too, so that
    # what this process read of the spaces before (another test beside it) cannot answer instead.
    monkeypatch.setattr("autotune.study.search.bundled_spaces", broken)
    assert cli.main(["spaces"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "autotune: error: unexpected error: OSError: disk on fire" in err


# -- 3. a compile cache torch cannot use --------------------------------------------------------


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_cache_with_a_valid_header_and_an_unusable_payload_loads_nothing(tmp_path: Path) -> None:
    path = tmp_path / "compile_cache.bin"
    # The header's fingerprint and SHA-256 are right: integrity holds, but torch can use none of it.
    compile_cache.write_cache_file(path, b"not torch artifacts" * 50, compile_cache.running_fingerprint("cpu"))
    with pytest.warns(UserWarning, match="torch found nothing it can use in it"):
        assert compile_cache.load_compile_cache(str(path)) == {}


# -- 4. out of memory ---------------------------------------------------------------------------


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_cpu_out_of_memory_is_recorded_as_oom() -> None:
    run = runner.run_trial(TrialRequest(spec=f"{TARGETS}:oom_on_cpu", source=None, timeout=120))
    assert run.state == "failed" and run.reason == "oom", (run.reason, run.message)
    assert "can't allocate memory" in run.message


@pytest.mark.parallel  # times nothing and waits on no tight deadline
@pytest.mark.parametrize("oom_killer_ran", [True, False])
def test_a_sigkill_is_called_a_likely_oom_only_when_the_kernel_counted_one(monkeypatch, oom_killer_ran: bool) -> None:
    counts = iter([7, 8 if oom_killer_ran else 7])
    monkeypatch.setattr(live, "oom_kills", lambda: next(counts))
    run = runner.run_trial(TrialRequest(spec=f"{TARGETS}:killed_from_outside", source=None, timeout=120))
    assert run.state == "failed"
    if oom_killer_ran:
        assert run.reason == "oom" and "likely out of memory" in run.message
    else:
        assert run.reason == "crash" and "SIGKILL" in run.message and "no out-of-memory kill" in run.message


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_the_kernel_oom_counter_is_read(tmp_path: Path) -> None:
    stats = tmp_path / "vmstat"
    stats.write_text("pgfault 12\noom_kill_other 5\noom_kill 7\nnr_free_pages 3\n")
    assert runner.oom_kills(str(stats)) == 7
    # Where the kernel does not say (an older kernel, no /proc, a line that is no number), no kill is counted.
    stats.write_text("pgfault 12\n")
    assert runner.oom_kills(str(stats)) == 0
    stats.write_text("oom_kill many\n")
    assert runner.oom_kills(str(stats)) == 0
    assert runner.oom_kills(str(tmp_path / "missing")) == 0
    # And this kernel's own count, where it keeps one.
    kernel = Path("/proc/vmstat").read_text()
    if "\noom_kill " in kernel:
        assert runner.oom_kills() == int(kernel.split("\noom_kill ")[1].split()[0])


# -- 5. a killed search -------------------------------------------------------------------------

_PARENT = textwrap.dedent(
    """
    import signal
    # A process started from a background job inherits SIGINT ignored, and Python then leaves it
    # so; a search run from a terminal gets Ctrl-C. Restore that, whatever started the tests.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from autotune.trial.request import RunProtocol, TrialRequest
    from autotune.trial.runner import run_trial
    run_trial(TrialRequest(spec="tests.trial_targets.workloads:hangs", source=None, timeout=600))
    """
)


def _worker_pids(parent: subprocess.Popen, pidfile: Path) -> tuple[int, int]:
    """The hanging worker's pid and its child's, once the worker has written them."""
    deadline = time.monotonic() + 120
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline and parent.poll() is None, "the worker never started"
        time.sleep(0.2)
    worker, grandchild = map(int, pidfile.read_text().split())
    return worker, grandchild


def test_a_killed_parent_takes_its_worker_with_it_and_its_folder_is_cleaned_up(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    env = {**os.environ, "AUTOTUNE_TEST_PIDFILE": str(pidfile)}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], env=env)
    worker, grandchild = _worker_pids(parent, pidfile)
    leftovers = list(Path(runner.tempfile.gettempdir()).glob(f"{runner.WORKDIR_PREFIX}{parent.pid}-*"))
    assert len(leftovers) == 1
    parent.kill()
    parent.wait()
    assert gone(worker, within=10) and gone(grandchild, within=10), "the worker and its children die with the parent"
    assert leftovers[0].exists(), "the killed parent could not remove its folder"
    assert runner.remove_abandoned_workdirs() >= 1
    assert not leftovers[0].exists()


def test_ctrl_c_in_the_parent_kills_the_worker_at_once(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    env = {**os.environ, "AUTOTUNE_TEST_PIDFILE": str(pidfile)}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], env=env, stderr=subprocess.PIPE)
    worker, grandchild = _worker_pids(parent, pidfile)
    interrupted = time.monotonic()
    parent.send_signal(signal.SIGINT)
    _, err = parent.communicate(timeout=60)
    assert time.monotonic() - interrupted < 15, "the parent does not wait for the worker's 600 s timeout"
    assert b"KeyboardInterrupt" in err
    assert gone(worker, within=1) and gone(grandchild, within=1)


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_ctrl_c_during_a_trial_records_it_as_interrupted(tmp_path: Path, monkeypatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(trials, "measure_trial", interrupted)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize")
    loop = _loop(study)
    loop.harness.source = lambda config, created: "# generated"
    loop.harness.request = lambda config, source, cache_dir: None
    loop.space = load_space("quick")
    with pytest.raises(KeyboardInterrupt):
        loop.one_trial()
    (trial,) = study.trials
    assert trial.state == optuna.trial.TrialState.FAIL and record_of(trial).reason == "interrupted"


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_running_folder_of_a_live_parent_is_left_alone(tmp_path: Path) -> None:
    mine = Path(runner.tempfile.mkdtemp(prefix=f"{runner.WORKDIR_PREFIX}{os.getpid()}-"))
    try:
        runner.remove_abandoned_workdirs()
        assert mine.exists()
    finally:
        mine.rmdir()


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_trial_left_running_by_a_killed_search_is_failed_with_a_reason(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    number = _running_trial(study, dead.pid)
    assert _loop(study).ledger.reap_abandoned() == 1
    trial = study.trials[number]
    assert trial.state == optuna.trial.TrialState.FAIL
    reason, message = failure_of(trial, read_study_record(study))
    assert reason == "abandoned" and f"pid {dead.pid}" in message and "was killed" in message


@pytest.mark.slow
def test_a_search_killed_during_a_trial_resumes_and_reports_the_abandoned_trial(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [
        sys.executable, "-m", "autotune", "search", "--no-doctor", "--model", f"{TARGETS}:tiny_infer", "--space", "quick",
        "--trials", "2", "--confirm", "0", "--windows", "2", *SHORT_FLAGS, "--no-compile-cache", "--device", "cpu",
        "--out", str(out),
    ]  # fmt: skip
    search = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"sqlite:///{out / 'study.db'}"
    deadline = time.monotonic() + 300
    workers: list[int] = []
    while not workers:  # a worker runs (seen by its command line): its trial cannot be told before it ends
        assert time.monotonic() < deadline and search.poll() is None, "no trial started"
        time.sleep(0.2)
        # A RUNNING trial whose own worker runs: its generated code, stamped with the trial's 'created', is in one of
        # the search's work folders. Neither a RUNNING trial nor a worker alone tells: the seeded plain-compile trial
        # reuses the baseline's run (RUNNING for an instant, no worker of its own) while the live reference's worker
        # runs the whole time.
        stamps = {
            str(record_of(t).created)
            for t in _running(out, url)
            if record_of(t).created is not None and not record_of(t).reused_run
        }
        if stamps and _runs_code_stamped(search.pid, stamps):
            workers = workers_of(search.pid)
    folders = list(Path(runner.tempfile.gettempdir()).glob(f"{runner.WORKDIR_PREFIX}{search.pid}-*"))
    search.kill()
    search.wait()
    assert all(gone(pid, within=10) for pid in workers)
    # What the killed search left running, read once it is gone: a trial may have ended since the loop saw one.
    running = _running(out, url)
    assert running, "the search was killed during a trial"

    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == cli.EXIT_OK, resumed.stderr[-3000:]
    study = optuna.load_study(study_name=f"{TARGETS}-tiny_infer", storage=url)
    trials = study.trials
    abandoned = [t for t in trials if failure_of(t, read_study_record(study))[0] == "abandoned"]
    assert [t.number for t in abandoned] == [running[0].number]
    assert f"FAIL abandoned: the search that ran it (pid {search.pid}) was killed" in resumed.stderr + resumed.stdout
    assert len(trials) == 2, "the abandoned trial counts towards --trials"
    assert not any(folder.exists() for folder in folders)
    assert (out / "best.yaml").exists()


def _runs_code_stamped(pid: int, stamps: set[str]) -> bool:
    """Whether a work folder of the search `pid` holds generated code stamped with one of `stamps`."""
    for folder in Path(runner.tempfile.gettempdir()).glob(f"{runner.WORKDIR_PREFIX}{pid}-*"):
        try:
            code = (folder / "apply_compilation.py").read_text()
        except OSError:
            continue
        if any(stamp in code for stamp in stamps):
            return True
    return False


def _running(out: Path, url: str) -> list[optuna.trial.FrozenTrial]:
    """The study's RUNNING trials, or none while it does not exist yet."""
    if not (out / "study.db").exists():
        return []
    try:
        study = optuna.load_study(study_name=f"{TARGETS}-tiny_infer", storage=url)
        return study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    except (KeyError, Exception):
        return []


# -- 6. hostile search-space files and values quoted in messages --------------------------------

_BOMB = "\n".join(
    ["description: nine levels of nine aliases", "l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    + ["mode: *l9"]
)


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_an_alias_bomb_space_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_BOMB)
    # Expanded, it would be 9**10 values: refused by its count, before it is built.
    with pytest.raises(SpaceError, match="more than .* values once its aliases are expanded"):
        load_space(str(path))
    assert len(_BOMB) < 600


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_huge_list_of_choices_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text("description: many\npadding_alignment: [" + ", ".join(str(i) for i in range(2, 2_002)) + "]\n")
    with pytest.raises(SpaceError, match="2000 choices; a dimension may list at most 64"):
        load_space(str(path))


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_huge_space_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("description: big\n" + "#" * (2 << 20))
    with pytest.raises(SpaceError, match="too large for a search space"):
        load_space(str(path))


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_values_quoted_in_messages_are_short_and_escaped(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(f'description: long\nmode: ["\\e[2J{"x" * 100_000}"]\n')
    with pytest.raises(SpaceError) as raised:
        load_space(str(path))
    message = str(raised.value)
    assert len(message) < 800 and "\x1b" not in message and "\\x1b[2J" in message


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_best_yaml_alias_bomb_is_refused_before_anything_walks_it(tmp_path: Path) -> None:
    path = tmp_path / "best.yaml"
    path.write_text(_BOMB.replace("mode: *l9", "metrics: *l9"))
    with pytest.raises(ConfigError, match="refused as a best.yaml file: more than 100000 values"):
        read(path)


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_expanded_yaml_is_counted_exactly() -> None:
    assert limits.yaml_nodes("a: [1, 2, 3]\nb: {x: 1}") == 10
    assert limits.yaml_nodes("a: &a [1, 2]\nb: [*a, *a]") == 1 + (1 + 3) + (1 + 1 + 3 + 3)


# -- 7. a workload factory that exits, is interrupted or aborts ---------------------------------


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("exits_in_factory", "calling the factory raised SystemExit"),
        ("interrupted_in_factory", "calling the factory raised KeyboardInterrupt"),
        ("aborts_in_factory", "the process building the workload was killed by SIGABRT"),
        ("quits_in_factory", "the process building the workload ended with exit code 0 before the workload was built"),
        ("quits_on_import", "the process building the workload ended with exit code 0 before the workload was built"),
    ],
)
@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_factory_that_exits_or_aborts_is_a_workload_error(factory: str, said: str, tmp_path: Path, capsys) -> None:
    module = "tests.targets.quits" if factory == "quits_on_import" else TARGETS
    argv = ["search", "--model", f"{module}:{factory}", "--trials", "1", "--device", "cpu", "--out", str(tmp_path)]
    assert cli.main(argv) == cli.EXIT_ERROR
    assert said in capsys.readouterr().err
    assert not (tmp_path / "study.db").exists(), "nothing is created for a workload that does not build"


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_factory_that_leaves_a_process_behind_is_a_workload_error(tmp_path: Path, capsys) -> None:
    # Before, the build in a child waited on its output pipe, which the helper held open: the search hung for
    # as long as the helper lived (here 10 minutes), and each trial's worker would have started one more.
    argv = ["search", "--model", f"{TARGETS}:leaves_a_process_in_factory", "--trials", "1", "--device", "cpu"]
    started = time.monotonic()
    assert cli.main([*argv, "--out", str(tmp_path)]) == cli.EXIT_ERROR
    assert time.monotonic() - started < 60
    err = capsys.readouterr().err
    said = re.search(r"started 1 process\(es\) that were still running .*: pid (\d+): (.*?)\. autotune", err)
    assert said, err
    assert "left-behind helper" in said.group(2) and "they were killed" in err
    assert gone(int(said.group(1)), within=5), "the helper was killed"
    assert not (tmp_path / "study.db").exists(), "nothing is created for a workload that does not build"


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("loss_is_none", "Workload.loss returned None; it must return the loss as a tensor of one element"),
        ("loss_is_a_vector", "Workload.loss returned a tensor of shape (6,); it must return the loss as a tensor"),
        ("loss_is_nan", "eager's own loss is nan on fixed batch 0: the workload does not compute finite numbers"),
        ("outputs_are_infinite", "eager's own output is nan on fixed batch 0"),  # inf times weights of both signs
        ("raises", "eager's own step failed on fixed batch 0: RuntimeError: the model refuses this batch (raised at "),
    ],
)
@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_workload_whose_own_eager_step_is_wrong_is_named_before_any_trial(
    target: str, said: str, tmp_path: Path, capsys
) -> None:
    # Each ended in a traceback, or in every compiled trial failing 'accuracy' as if the compiler were wrong and
    # plain compile exported with exit 0. The eager baseline's own step says what the workload does wrong.
    out = tmp_path / "out"
    argv = ["search", "--no-doctor", "--model", f"tests.trial_targets.dynamo_only:{target}", "--trials", "2"]
    assert cli.main([*argv, "--device", "cpu", "--out", str(out)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "the workload does not run eagerly" in err and "workload_error" in err and said in err, err
    # A forward that raises printed the worker's traceback under the error, and was called a compile error.
    assert "Traceback" not in err and err.count("autotune: error:") == 1, err
    assert not out.exists(), "no trial was spent: no study, no folder"


@pytest.mark.slow  # a search's baselines and one trial: half a minute on two cores
@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_configuration_wrong_only_in_its_warm_restart_fails_the_search_trial_by_name_and_is_not_exported(
    tmp_path: Path,
) -> None:
    # Right in its first run, 10% off in any later run from its cache folder (what a cache entry may load): its
    # warm restart ran eager's reference again, and said nothing of which run it was nor of the first run's record.
    space = tmp_path / "one.yaml"
    space.write_text("description: one configuration\nmode: [default]\ndynamic: [true]\n")
    out = tmp_path / "out"
    options = SearchOptions(
        model="tests.trial_targets.dynamo_only:wrong_when_warm_train",
        space=str(space),
        trials=1,
        sampler="bruteforce",
        device="cpu",
        out=str(out),
        doctor=False,
        pruner="none",
        compile_cache=False,
    )
    result = search(options)
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}")
    ((trial,),) = [study.get_trials(deepcopy=False)]
    record = record_of(trial)
    assert trial.state == optuna.trial.TrialState.FAIL and record.config and record.config["dynamic"] is True
    assert (record.own.state, record.own.reason) == ("failed", "accuracy"), record.own.message
    said = "its warm restart, after a complete first run: a run started from the configuration's warm cache folder, "
    assert record.own.message.startswith(said + "checked against what eager computed: step 1 of 8: the loss"), (
        record.own.message
    )
    # Plain compile's warm restart loads from its folder too, and fails the same check: eager is exported.
    baseline = read_study_record(study).baselines.of("compile")
    assert (baseline.state, baseline.reason) == ("failed", "accuracy") and "warm cache folder" in baseline.message
    assert result is not None and result.best_number is None
    tuned = read(out / "best.yaml")
    assert tuned.config.scope == "none", "eager, not the configuration that failed"


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("loss_is_none", "Workload.loss returned None; it must return the loss as a tensor of one element"),
        ("own_step_returns_none", "Workload.step returned None; it must return the step's loss"),
        ("raises", "RuntimeError: the model refuses this batch (raised at tests/trial_targets/workloads.py:"),
    ],
)
@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_workload_that_does_not_run_eagerly_stops_the_search_at_the_doctor_in_one_message(
    target: str, said: str, tmp_path: Path
) -> None:
    # The doctor, which runs first, printed the worker's traceback, then "searching anyway"; the baselines then
    # stopped the search with the same error a second time.
    out = tmp_path / "out"
    argv = ["search", "--model", f"tests.trial_targets.dynamo_only:{target}", "--trials", "2", "--device", "cpu"]
    done = subprocess.run(
        [sys.executable, "-m", "autotune", *argv, "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    output = done.stdout + done.stderr
    assert done.returncode == cli.EXIT_ERROR, output
    errors = [line for line in output.splitlines() if line.startswith("autotune: error:")]
    assert len(errors) == 1 and "the workload does not run eagerly" in errors[0] and said in errors[0], output
    assert "Traceback" not in output and "searching anyway" not in output and "baselines" not in output, output
    assert not out.exists(), "no trial was spent: no study, no folder"


def _sleeping(seconds: str) -> list[int]:
    """The live `sleep SECONDS` processes (the daemons of `trial_targets.workloads`, each with its own SECONDS)."""
    return [pid for pid in with_command_line(seconds) if command_line(pid) == ["sleep", seconds] and alive(pid)]


@pytest.mark.parametrize("how", ["new_session", "double_fork"])
@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_target_that_starts_a_detached_daemon_is_refused_and_the_daemon_killed(how: str, tmp_path: Path) -> None:
    # A daemon in a session of its own left the process group that was checked: the search exited 0, and every
    # process that built the target (the search, each worker) left one more running.
    seconds = workloads.DAEMON_SECONDS[how]
    factory = "starts_a_daemon_in_factory" if how == "new_session" else "double_forks_a_daemon_in_factory"
    argv = ["search", "--model", f"{TARGETS}:{factory}", "--trials", "2", "--device", "cpu", "--out", str(tmp_path)]
    try:
        done = subprocess.run([sys.executable, "-m", "autotune", *argv], capture_output=True, text=True, timeout=600)
        output = done.stdout + done.stderr
        assert done.returncode == cli.EXIT_ERROR, output
        said = re.search(
            rf"started 1 process\(es\) that were still running after it was built: pid (\d+): sleep {seconds}\.", output
        )
        assert said, output
        assert "they were killed" in output and "Traceback" not in output, output
        assert gone(int(said.group(1)), within=5), "the daemon was killed"
        assert not _sleeping(seconds), "nothing is left running"
        assert not (tmp_path / "study.db").exists(), "nothing is created for a workload that does not build cleanly"
    finally:
        for pid in _sleeping(seconds):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_trial_process_ends_the_daemons_its_build_detached() -> None:
    # The doctor checks nothing before it builds the target in its process, as a trial's worker would if the check
    # before the search let such a target through: each such process left its daemon running.
    seconds = workloads.DAEMON_SECONDS["in_every_build"]
    try:
        diagnose(f"{TARGETS}:starts_a_daemon_in_every_build", "cpu", protocol=RunProtocol(fresh_batches=0))
        assert not _sleeping(seconds), "the process that built the target ended the daemon it detached"
    finally:
        for pid in _sleeping(seconds):
            os.kill(pid, signal.SIGKILL)


# -- 8. terminal escape sequences in best.yaml --------------------------------------------------


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_show_escapes_control_characters_read_from_best_yaml(tmp_path: Path, capsys) -> None:
    tuned = tuned_config(
        WorkloadSummary(spec="examples.toy:model", task="infer", model_class="Toy\x1b]0;pwned\x07"),
        CompileConfig(),
        created="2026-01-01\x1b[2J",
        metrics={"verdict": "\x1b[31mall good\x1b[0m"},
    )
    path = tuned.write(tmp_path / "best.yaml")
    assert cli.main(["show", str(path)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "2026-01-01\\x1b[2J" in out and "\\x1b[31mall good" in out


# -- 9. a replacement killed before its journal existed -----------------------------------------

_KILLED_REPLACE = textwrap.dedent(
    """
    import os, signal, sys
    from autotune.study.retune import _publish as publish
    def die(folder, entry):
        os.kill(os.getpid(), signal.SIGKILL)
    publish._write_journal = die
    publish.replace_together(sys.argv[1], {"apply_compilation.py": "new code", "best.yaml": "new: 1"}, commit="best.yaml")
    """
)


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_replacement_killed_before_its_journal_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "best.yaml").write_text("old: 1")
    (tmp_path / "apply_compilation.py").write_text("old code")
    killed = subprocess.run([sys.executable, "-c", _KILLED_REPLACE, str(tmp_path)], capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    strays = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert any(name.endswith(".new") for name in strays) and ".best.yaml.old" in strays
    assert publish.recover(tmp_path) is False, "no journal: nothing to put back"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apply_compilation.py", "best.yaml"]
    assert (tmp_path / "best.yaml").read_text() == "old: 1"


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_staged_cache_of_a_live_process_is_left_alone(tmp_path: Path) -> None:
    live = tmp_path / f".compile_cache.bin.{os.getpid()}.abc123.staged"
    dead_pid = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_pid.wait()
    dead = tmp_path / f".compile_cache.bin.{dead_pid.pid}.abc123.staged"
    live.write_bytes(b"x")
    dead.write_bytes(b"x")
    publish.recover(tmp_path)
    assert live.exists() and not dead.exists()


# -- a search whose start or confirmation fails ------------------------------------------------


@pytest.mark.parallel  # times nothing and waits on no tight deadline
def test_a_search_whose_baselines_fail_leaves_no_empty_study(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = [
        "search",
        "--no-doctor",
        "--model",
        f"{TARGETS}:raises",
        "--trials",
        "1",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == cli.EXIT_ERROR
    assert "the workload does not run eagerly" in capsys.readouterr().err
    assert not out.exists(), "no study.db, no empty folder"


@pytest.mark.slow
def test_nothing_is_exported_when_every_confirmation_run_failed(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AUTOTUNE_TEST_COUNTER", str(tmp_path / "runs"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "best.yaml").write_text("a previous result\n")
    argv = [
        "search", "--no-doctor", "--model", f"{TARGETS}:fails_after_the_baselines", "--space", "quick", "--trials", "1",
        "--confirm", "1", "--replicates", "1", "--max-replicates", "1", "--windows", "2", *SHORT_FLAGS, "--pruner", "none", "--slow-ratio", "0",
        "--no-compile-cache", "--device", "cpu", "--out", str(out),
    ]  # fmt: skip
    assert cli.main(argv) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "every confirmation run failed" in err and "nothing was exported" in err
    assert (out / "best.yaml").read_text() == "a previous result\n"
    assert not (out / "apply_compilation.py").exists()
