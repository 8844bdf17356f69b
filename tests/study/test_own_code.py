"""The code people run: a plain loop's own step, a bare module with example inputs.

The fast tier resolves them and applies an export to the loop in this process on dynamo's
eager backend (a trial of a workload's own step is `tests/workload/test_own_step.py`'s); the
full tier runs the commands the examples give, with Inductor, and trains the loop with what
the search exported.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from autotune import CompileConfig, cli, load, resolve
from autotune.errors import WorkloadError
from autotune.trial.accuracy import compare, tolerance_for
from autotune.trial.compile_counts import frames_compiled, watch_compiles
from examples import loop, nanogpt_loop
from tests.short_runs import run_config, source_for

ROOT = Path(__file__).resolve().parents[2]
ONE_OF_EACH = str(ROOT / "tests" / "search_spaces" / "trainer.yaml")
"""One configuration: the sequence axis marked dynamic, padded to a multiple of 8, and optimizer.step compiled."""
BOUNDED = ("--no-doctor", "--confirm", "1", "--max-replicates", "3")
"""The example's command, its confirmation bounded: the full tier checks that it searches and exports (16 minutes
on two cores without these, 8 of them confirming), not which configuration wins. Its asserts rest on no timing, so
it runs beside other tests."""


def _search(tmp_path: Path, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", "search", *argv, "--device", "cpu", "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _exported(path: Path) -> Any:
    """The exported apply_compilation.py, loaded as a module."""
    return loop.load(str(path))


def _same_losses(eager: list[float], tuned: list[float]) -> None:
    """Step by step, each loss within the product's float32 tolerance of eager's."""
    assert len(eager) == len(tuned)
    for step, (want, got) in enumerate(zip(eager, tuned, strict=True), 1):
        error = compare(torch.tensor(want), torch.tensor(got), tolerance_for(torch.float32))
        assert error is None, f"step {step}: loss {got} against eager's {want} (relative error {error})"


@pytest.fixture
def eager_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile in this process on dynamo's eager backend, as the workers compiled."""
    real: Callable[..., Any] = torch.compile

    def compile_eagerly(model: Any = None, **kwargs: Any) -> Any:
        kwargs = {k: v for k, v in kwargs.items() if k not in ("mode", "options", "backend")}
        return real(model, backend="eager", **kwargs)

    monkeypatch.setattr(torch, "compile", compile_eagerly)


# -- the plain loop's own step ------------------------------------------------------------------


@pytest.mark.parallel  # times nothing
def test_the_loop_trains_as_eager_with_an_export_applied_to_its_model_and_optimizer(
    tmp_path: Path, eager_backend: None
) -> None:
    # What a search of the loop exports, applied to the loop as it is: the compiled model and optimizer step, and
    # prepare_batch's padding to 8 (the labels padded with -100, which the loss ignores) under the schedule.
    config = CompileConfig(compile_optimizer=True, padding_alignment=8)
    (tmp_path / "apply_compilation.py").write_text(source_for("examples.loop:workload", config))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = loop.train(6, _exported(tmp_path / "apply_compilation.py"))
    _same_losses(loop.train(6), tuned)
    # The compiled step keeps the scheduler's mark on optimizer.step, so the loop's schedule does not warn.
    assert not [w for w in caught if "overridden after learning rate scheduler" in str(w.message)]


@pytest.mark.slow  # Inductor compiles the toy language model in every trial
@pytest.mark.parallel  # times nothing
def test_the_loop_example_is_searched_as_its_docstring_says_and_trains_as_eager_with_the_export(
    tmp_path: Path,
) -> None:
    assert "autotune search --model examples.loop:workload --trials 4" in (loop.__doc__ or "")
    # One trial, in a space of one configuration with every part a search of the loop exports: the compiled
    # optimizer step (which meets the loop's clipping and schedule under Inductor), the inputs marked dynamic and
    # padded. Each of the docstring's four trials is a cold compile of the model and its step: 10 minutes for three.
    done = _search(
        tmp_path, "--model", "examples.loop:workload", "--space", ONE_OF_EACH, "--trials", "1", *BOUNDED, timeout=2400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "accuracy" not in _failed_reasons(tmp_path / "out" / "trials.csv"), "every configuration trains as eager"
    _same_losses(loop.train(20), loop.train(20, _exported(tmp_path / "out" / "apply_compilation.py")))


# -- nanoGPT's loop: a Python-float learning rate set every step ------------------------------


@pytest.mark.parallel  # waits on no clock
def test_nanogpts_loop_with_a_float_rate_has_its_compiled_optimizer_step_checked_and_noted_not_refused() -> None:
    # The whole-step check runs the loop's own step, compiled, over the schedule's next values and counts what
    # compiles: once more at the first new rate, then nothing; the configuration is measured, with that noted.
    spec = "tests.trial_targets.examples_eagerly:nanogpt_loop"
    config = CompileConfig(compile_optimizer=True)
    run = run_config(spec, config, timeout=600)
    assert run.state == "complete", run.message + run.stderr_tail
    assert run.notes == ["one recompile of the step when the learning rate first changed; none in the 6 steps after"]


@pytest.mark.parallel  # times nothing
def test_nanogpts_loop_with_the_export_trains_as_eager_over_16_steps_compiling_again_only_at_the_first_new_rate(
    tmp_path: Path, eager_backend: None
) -> None:
    (tmp_path / "apply_compilation.py").write_text(
        source_for("examples.nanogpt_loop:workload", CompileConfig(compile_optimizer=True))
    )
    exported = _exported(tmp_path / "apply_compilation.py")
    torch._dynamo.reset()
    watch_compiles()
    counts: list[int] = []
    real_step = nanogpt_loop.train_step

    def counted(*args: Any) -> Any:
        before = frames_compiled()
        loss = real_step(*args)
        counts.append(frames_compiled() - before)
        return loss

    try:
        nanogpt_loop.train_step = counted  # type: ignore[assignment]
        tuned = nanogpt_loop.train(16, exported)
    finally:
        nanogpt_loop.train_step = real_step  # type: ignore[assignment]
        torch._dynamo.reset()
    _same_losses(nanogpt_loop.train(16), tuned)
    assert counts[0] > 0, "the first iteration compiles the model and the optimizer step"
    assert counts[1:] == [1] + [0] * 14, f"frames compiled per iteration: {counts}"


def _failed_reasons(csv: Path) -> str:
    return " ".join(line for line in csv.read_text().splitlines() if ",failed," in line)


# -- a bare module with example inputs ----------------------------------------------------------


@pytest.mark.parallel  # times nothing
def test_a_bare_module_with_example_inputs_is_an_inference_workload_with_the_axes_its_batches_vary_on() -> None:
    workload = resolve("examples.toy_module:Net,inputs=examples.toy_module:batches")
    assert workload.task == "infer"
    assert workload.dynamic_dims == {0: (1,), 1: (1,)}, "tokens and mask vary in length, not in batch size"
    batch = workload.draw_batches()[0]
    assert workload.run_forward(workload.model, batch).shape == (16, 4)


@pytest.mark.parallel  # times nothing
def test_a_module_with_an_example_inputs_method_needs_no_flag(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "served.py").write_text(
        "import torch\n"
        "from torch import nn\n\n"
        "class Served(nn.Linear):\n"
        "    def __init__(self):\n"
        "        super().__init__(16, 4)\n\n"
        "    def example_inputs(self):\n"
        "        return [torch.randn(2, n, 16) for n in (5, 9, 5, 7)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    workload = resolve("served:Served")
    assert (workload.task, workload.dynamic_dims) == ("infer", {0: (1,)})


@pytest.mark.parallel  # times nothing
def test_a_bare_module_without_inputs_is_refused_with_a_workload_that_works(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "netpkg").mkdir()
    (tmp_path / "netpkg" / "__init__.py").write_text("")
    model_file = tmp_path / "netpkg" / "net.py"
    model_file.write_text(
        "from torch import nn\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.Linear(24, 8), nn.ReLU(), nn.Linear(8, 2))\n\n"
        "    def forward(self, x):\n"
        "        return self.body(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(WorkloadError) as refused:
        resolve("netpkg.net:Net")
    message = str(refused.value)
    assert "the target is a bare Net, and autotune cannot tell what batches to feed it" in message
    assert "--inputs" in message and "example_inputs()" in message
    said = re.search(
        r"e\.g\. in netpkg/net\.py:\n\n(.*?)\n\nand search it with: autotune search --model (\S+)$", message, re.S
    )
    assert said, message
    # The Workload it shows, added to the model's file as it says, is one autotune runs.
    model_file.write_text(model_file.read_text() + "\n\n" + said.group(1) + "\n")
    sys.modules.pop("netpkg.net")
    importlib.invalidate_caches()
    workload = resolve(said.group(2))
    assert said.group(2) == "netpkg.net:workload" and workload.task == "infer"
    assert workload.run_forward(workload.model, workload.draw_batches()[0]).shape == (8, 2)


@pytest.mark.parallel  # times nothing
def test_inputs_for_a_target_that_has_its_own_batches_and_a_task_it_cannot_do_are_refused(capsys) -> None:
    with pytest.raises(WorkloadError, match="gives a Workload, which says its own batches: --inputs"):
        resolve("examples.toy:model,inputs=examples.toy_module:batches")
    base = ["search", "--model", "examples.toy_module:Net", "--device", "cpu"]
    assert cli.main([*base, "--inputs", "examples.toy_module:batches", "--task", "train"]) == cli.EXIT_ERROR
    assert "--task train: a bare module with example inputs is tuned for inference" in capsys.readouterr().err
    assert cli.main([*base, "--task", "infer"]) == cli.EXIT_ERROR
    assert "--task infer: applies to a bare nn.Module given with --inputs" in capsys.readouterr().err
    with pytest.raises(WorkloadError, match="--inputs 'examples.toy_module': expected 'package.module:attribute'"):
        resolve("examples.toy_module:Net,inputs=examples.toy_module")


@pytest.mark.slow  # Inductor compiles the module in every trial
@pytest.mark.parallel  # times nothing
def test_the_bare_module_example_is_searched_with_the_command_its_docstring_gives(tmp_path: Path) -> None:
    from examples import toy_module

    command = "autotune search --model examples.toy_module:Net --inputs examples.toy_module:batches --task infer"
    assert command in (toy_module.__doc__ or "")
    # Two trials: plain compile (the baseline's run) and the dynamic axes it found, marked dynamic.
    done = _search(tmp_path, *command.split()[2:], "--trials", "2", *BOUNDED)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dynamic axes, found by comparing their shapes: input 0 axes [1], input 1 axes [1]" in done.stderr
    tuned = load(tmp_path / "out" / "best.yaml")
    assert tuned.workload.spec == "examples.toy_module:Net,inputs=examples.toy_module:batches"
    assert tuned.workload.task == "infer" and tuned.workload.dynamic_dims == {0: (1,), 1: (1,)}
