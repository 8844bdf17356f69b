"""A model with dropout: checked in train mode, its masks too, and compiled once, where the configuration draws random
numbers as eager does (`autotune.runtime.knobs.random_as_eager`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autotune import CompileConfig, resolve
from autotune.measure import Harness
from autotune.trial.request import RunProtocol
from autotune.trial.runner import run_trial

AS_EAGER = CompileConfig(knobs={"random_as_eager": True})


def _harness(spec: str) -> Harness:
    workload = resolve(spec)
    summary = workload.summary(spec, workload.draw_batches())
    return Harness(spec=spec, summary=summary, protocol=RunProtocol(windows=2))


@pytest.mark.slow  # Inductor compiles dropout's C++ kernels
@pytest.mark.parallel  # waits on no clock
def test_a_model_with_dropout_compiles_once_when_its_random_numbers_are_drawn_as_eager_draws_them() -> None:
    harness = _harness("tests.trial_targets.workloads:dropout_train")
    assert harness.summary.dropout and harness.summary.meets("dropout in training")
    request = harness.request(AS_EAGER)
    assert request.random_as_eager and "torch._inductor.config.fallback_random = True" in (request.source or "")
    once = run_trial(replace(request, timeout=300)).record()
    assert once.state == "complete", once.message + once.stderr_tail
    # Dynamo's own compile events: the check's steps and the training after them ran one graph.
    assert once.recompiles == 0, once
    # Without it, the check runs in eval mode, and training compiles the model again in train mode.
    twice = run_trial(replace(harness.request(CompileConfig()), timeout=300)).record()
    assert twice.state == "complete", twice.message + twice.stderr_tail
    assert twice.recompiles and once.graphs is not None and twice.graphs is not None, twice
    assert twice.graphs > once.graphs, (once.graphs, twice.graphs)


@pytest.mark.slow
@pytest.mark.parallel  # waits on no clock
def test_a_compiled_dropout_that_drops_more_than_eager_s_fails_the_check_in_train_mode() -> None:
    harness = _harness("tests.trial_targets.workloads:drops_more_when_compiled")
    run = run_trial(replace(harness.request(AS_EAGER), timeout=300)).record()
    assert (run.state, run.reason) == ("failed", "accuracy"), run.message + run.stderr_tail
    assert run.message.startswith("step 1 of 8: the loss differs from eager"), run.message
