"""`cudagraph_capture_sizes`: under a CUDA-graph mode with 'buckets' padding, the compiled regions get the learned
bucket lengths as Inductor's capture sizes; elsewhere it is refused with the reason, and a search asks it only on
a GPU, where the space learns the buckets."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.errors import ConfigError
from autotune.runtime import codegen
from autotune.runtime.config import CompileConfig, mode_options
from autotune.study.search import load_space, params_for
from tests.study.summaries import SHARED, TOY_LIKE

pytestmark = pytest.mark.parallel

BUCKETS = {key: {1: (16, 32, 64)} for key in ("input_ids", "attention_mask", "labels")}
LENGTHS = {(key, 1): [9, 14, 16, 20, 30, 31, 40, 50, 64] for key in ("input_ids", "attention_mask", "labels")}


def _config(**settings: object) -> CompileConfig:
    base = {"mode": "reduce-overhead", "padding_alignment": "buckets", "padding_buckets": BUCKETS}
    return CompileConfig(**{**base, **settings})  # type: ignore[arg-type]


def test_every_compiled_region_gets_the_buckets_as_capture_sizes_with_its_mode_spelled_as_options() -> None:
    config = _config(knobs={"cudagraph_capture_sizes": True})
    kwargs = config.compile_kwargs()
    assert "mode" not in kwargs
    assert kwargs["options"] == {**mode_options("reduce-overhead"), "triton.cudagraph_capture_sizes": (16, 32, 64)}
    source = codegen.generate(config, TOY_LIKE, created="2026-01-02T03:04:05Z", version="0.0.0")
    assert "'triton.cudagraph_capture_sizes': (16, 32, 64)" in source
    assert "cudagraphs at the buckets only" in config.describe()


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"padding_alignment": 8, "padding_buckets": {}}, "which this configuration does not pad to"),
        ({"mode": "default"}, "CUDA graphs, which this configuration does not record"),
        (
            {"padding_buckets": {**BUCKETS, "labels": {1: (16, 64)}}},
            "the padded inputs have different buckets",
        ),
    ],
)
def test_where_it_cannot_apply_the_configuration_is_refused_with_the_reason(settings: dict, why: str) -> None:
    with pytest.raises(ConfigError, match=f"cudagraph_capture_sizes: True does not apply here: .*{why}"):
        _config(**settings, knobs={"cudagraph_capture_sizes": True})


def test_a_search_asks_it_on_a_gpu_where_it_applies_and_finds_the_answer_again_and_drops_it_on_a_cpu() -> None:
    on_gpu = load_space("default").adapt(TOY_LIKE, "cuda:0", shared_lengths=SHARED, lengths=LENGTHS)
    assert on_gpu.knobs["cudagraph_capture_sizes"] == (False, True)
    answers = {
        name: (True if name.startswith("mark_dynamic") else choices[0]) for name, choices in on_gpu.dimensions().items()
    }
    answers |= {"mode": "reduce-overhead", "padding_alignment": "buckets", "cudagraph_capture_sizes": True}
    config = on_gpu.suggest(_Answers(answers))
    assert config.knobs == {"cudagraph_capture_sizes": True}, config.describe()
    assert params_for(on_gpu, config) is not None
    # Without buckets it is not asked at all.
    plain = on_gpu.suggest(_Answers({**answers, "padding_alignment": None}))
    assert plain.knobs == {} and dataclasses.replace(plain, knobs={}) == plain
    on_cpu = load_space("default").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED, lengths=LENGTHS)
    assert "cudagraph_capture_sizes" not in on_cpu.knobs
    assert "cudagraph_capture_sizes [True]: CUDA graphs need a GPU" in on_cpu.dropped


class _Answers:
    """A trial that answers from a mapping, else with the first choice."""

    def __init__(self, answers: dict) -> None:
        self.answers = answers

    def suggest_categorical(self, name: str, choices: list) -> object:
        return self.answers.get(name, choices[0])
