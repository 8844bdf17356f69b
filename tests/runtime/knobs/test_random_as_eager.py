"""`random_as_eager`: every trial of a model with dropout draws its random numbers as eager does, in every bundled
space; a model without dropout, or inference, is never asked. That it compiles once and is checked in train mode is
tests/trial/test_dropout.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from autotune.runtime import codegen
from autotune.runtime.config import CompileConfig
from autotune.study.search import bundled_spaces, load_space
from tests.study.summaries import TOY_LIKE

pytestmark = pytest.mark.parallel

WITH_DROPOUT = dataclasses.replace(TOY_LIKE, dropout=True)


class FirstChoices:
    """Answers every question of a space with its first choice."""

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return choices[0]


@pytest.mark.parametrize("name", [s for s in bundled_spaces() if s != "inference"])
def test_every_trial_of_a_model_with_dropout_draws_as_eager_in_each_training_space(name: str) -> None:
    space = load_space(name).adapt(WITH_DROPOUT, "cpu")
    assert space.knobs["random_as_eager"] == (True,)
    assert space.suggest(FirstChoices()).random_as_eager


def test_a_model_without_dropout_or_inference_is_never_asked_and_the_space_says_why() -> None:
    assert not TOY_LIKE.dropout
    plain = load_space("default").adapt(TOY_LIKE, "cpu")
    assert "random_as_eager" not in plain.knobs and not plain.suggest(FirstChoices()).random_as_eager
    assert any(d.startswith("random_as_eager [True]: the model has no dropout") for d in plain.dropped), plain.dropped
    inference = load_space("default").adapt(dataclasses.replace(WITH_DROPOUT, task="infer"), "cpu")
    assert "random_as_eager" not in inference.knobs


def test_the_generated_file_sets_inductor_s_fallback_to_eager_random_numbers() -> None:
    source = codegen.generate(CompileConfig(knobs={"random_as_eager": True}), WITH_DROPOUT, created="now", version="0")
    assert "torch._inductor.config.fallback_random = True" in source
    assert "fallback_random" not in codegen.generate(CompileConfig(), WITH_DROPOUT, created="now", version="0")
