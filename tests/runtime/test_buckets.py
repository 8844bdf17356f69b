"""Padding buckets learned from the workload's lengths: the exact choice, its round trip, padding and compiling."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import optuna
import pytest
import torch
from torch import nn

from autotune import CompileConfig
from autotune.errors import ConfigError
from autotune.runtime import codegen
from autotune.runtime.batching import padded_length
from autotune.runtime.buckets import choose_buckets, padding_waste
from autotune.runtime.summary import WorkloadSummary
from autotune.runtime.tuned import read
from autotune.study.search import load_space, params_for
from tests.best_yaml import write_best

pytestmark = pytest.mark.parallel

SUMMARY = WorkloadSummary(
    spec="m:f",
    task="infer",
    modules=("body",),
    blocks=(),
    dynamic_dims={"input_ids": (1,), "attention_mask": (1,)},
    pad_values={"input_ids": 0},
)
SHARED = [[("input_ids", 1), ("attention_mask", 1)]]


def padded_total(lengths: list[int], bounds: tuple[int, ...]) -> int:
    return sum(padded_length(n, "buckets", None, bounds) for n in lengths)


def brute_force(lengths: list[int], count: int) -> int:
    """The least total padded length over every choice of at most `count` boundaries that fit every length."""
    values = sorted(set(lengths))
    best = None
    for size in range(1, count + 1):
        for chosen in itertools.combinations(values[:-1], size - 1):
            total = padded_total(lengths, (*chosen, values[-1]))
            best = total if best is None else min(best, total)
    assert best is not None
    return best


def test_the_chosen_buckets_waste_as_little_as_the_best_of_every_choice() -> None:
    draw = random.Random(7)
    for case in range(60):
        lengths = [draw.randint(1, 40) for _ in range(draw.randint(1, 14))]
        count = draw.randint(1, 4)
        bounds = choose_buckets(lengths, count)
        assert len(bounds) <= count and bounds == tuple(sorted(set(bounds))) and bounds[-1] == max(lengths)
        assert padded_total(lengths, bounds) == brute_force(lengths, count), (case, lengths, count, bounds)


def test_a_skewed_distribution_gets_a_bucket_for_its_common_short_lengths() -> None:
    # As in the captioning example: 90% short, 9% medium, 1% long.
    lengths = [6] * 90 + [40] * 9 + [200]
    assert choose_buckets(lengths, 3) == (6, 40, 200)
    # With two, the long tail shares a bucket with the medium lengths: (6, 200) wastes 9 x 160, (40, 200) 90 x 34.
    assert choose_buckets(lengths, 2) == (6, 200)
    assert choose_buckets([12, 12, 30], 8) == (12, 30)
    waste = padding_waste(lengths, [padded_length(n, "buckets", None, (6, 200)) for n in lengths])
    assert waste == pytest.approx(1 - (540 + 360 + 200) / (540 + 1800 + 200))
    with pytest.raises(ValueError, match="at least one observed length"):
        choose_buckets([], 2)


def test_a_length_above_the_last_bucket_goes_to_the_declared_maximum_or_stays() -> None:
    assert padded_length(7, "buckets", None, (8, 16)) == 8
    assert padded_length(16, "buckets", None, (8, 16)) == 16
    assert padded_length(17, "buckets", 64, (8, 16)) == 64
    assert padded_length(17, "buckets", None, (8, 16)) == 17


def test_buckets_go_through_best_yaml_and_the_generated_code_pads_to_them(tmp_path: Path) -> None:
    buckets = {"input_ids": {1: (8, 16, 40)}, "attention_mask": {1: (8, 16, 40)}}
    config = CompileConfig(dynamic=False, padding_alignment="buckets", padding_buckets=buckets)
    assert config.describe().endswith("pad=buckets(8,16,40)")
    write_best(tmp_path / "best.yaml", SUMMARY, config, created="2026-11-25T00:00:00+00:00", environment={})
    again = read(tmp_path / "best.yaml")
    assert again.config == config and again.config.padding_buckets == buckets
    assert "padding_buckets:\n    input_ids:\n      1:\n      - 8\n" in (tmp_path / "best.yaml").read_text()
    assert "a longer batch is left as it is, a new shape that compiles" in again.source
    module = codegen.load_module(again.source)
    for length, expected in ((5, 8), (9, 16), (40, 40), (41, 41)):
        batch = {"input_ids": torch.ones(2, length, dtype=torch.long), "attention_mask": torch.ones(2, length)}
        prepared = module.prepare_batch(batch)
        assert prepared["input_ids"].shape == (2, expected) == prepared["attention_mask"].shape
        assert int(prepared["attention_mask"].sum()) == 2 * length, "the padding is masked out"


def test_bucket_settings_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ConfigError, match="'buckets' needs padding_buckets"):
        CompileConfig(padding_alignment="buckets")
    with pytest.raises(ConfigError, match="padding_alignment is 8"):
        CompileConfig(padding_alignment=8, padding_buckets={"x": {1: (4,)}})
    with pytest.raises(ConfigError, match=r"padding_buckets.x.1: \(8, 4\) must be 1 to 32 increasing lengths"):
        CompileConfig(padding_alignment="buckets", padding_buckets={"x": {1: (8, 4)}})
    undeclared = CompileConfig(padding_alignment="buckets", padding_buckets={"labels": {1: (4, 8)}})
    with pytest.raises(ConfigError, match=r"padding_buckets: 'labels' axes \[1\] are not declared dynamic"):
        codegen.generate(undeclared, SUMMARY, created="x", version="y")


class Answers:
    """A trial that answers the given questions so, and every other with its first choice."""

    def __init__(self, **answers: object) -> None:
        self.answers = answers

    def suggest_categorical(self, name: str, choices):
        return self.answers.get(name, choices[0])


def test_the_search_learns_buckets_from_the_lengths_and_drops_them_without_lengths() -> None:
    lengths = {("input_ids", 1): [6] * 18 + [40, 41, 200], ("attention_mask", 1): [6] * 18 + [40, 41, 200]}
    space = load_space("default").adapt(SUMMARY, "cpu", shared_lengths=SHARED, lengths=lengths)
    assert space.dimensions()["bucket_count"] == (2, 4, 8)
    config = space.suggest(Answers(padding_alignment="buckets", bucket_count=2, dynamic=False))
    assert config.padding_alignment == "buckets"
    assert config.padding_buckets == {"input_ids": {1: (6, 200)}, "attention_mask": {1: (6, 200)}}
    params = params_for(space, config)
    assert params is not None and space.suggest(optuna.trial.FixedTrial(params)) == config
    without = load_space("default").adapt(SUMMARY, "cpu", shared_lengths=SHARED)
    assert "buckets" not in without.padding_alignment
    assert any("no lengths were sampled to learn buckets from" in d for d in without.dropped)


class Embedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(hidden.sum(1) / attention_mask.sum(1, keepdim=True))


def test_static_shapes_with_four_buckets_compile_at_most_four_graphs_over_a_hundred_lengths() -> None:
    draw = random.Random(3)
    stream = [draw.randint(1, 64) for _ in range(100)]
    bounds = choose_buckets(stream, 4)
    buckets = {"input_ids": {1: bounds}, "attention_mask": {1: bounds}}
    declared = WorkloadSummary(**{**_fields(SUMMARY), "max_lengths": {"input_ids": {1: 64}, "attention_mask": {1: 64}}})
    config = CompileConfig(dynamic=False, padding_alignment="buckets", padding_buckets=buckets)
    source = codegen.generate(config, declared, created="x", version="y")
    assert "a longer batch is padded to the declared maximum (MAX_LENGTHS)" in source
    module = codegen.load_module(source)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model, _ = module.apply_compilation(Embedder().eval())
    with torch.no_grad():
        for length in stream:
            ids, mask = torch.ones(2, length, dtype=torch.long), torch.ones(2, length)
            model(**module.prepare_batch({"input_ids": ids, "attention_mask": mask}))
    # 100 batches of 64 different lengths: one static graph per bucket, and not one recompile more.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == len(bounds) == 4


def _fields(summary: WorkloadSummary) -> dict:
    return {name: getattr(summary, name) for name in summary.__dataclass_fields__}


def test_the_padding_benchmark_pits_learned_buckets_against_the_fixed_strategies() -> None:
    from autotune import resolve
    from autotune.study.search import observed_lengths
    from examples.padding_benchmark import _markdown, _padded

    spec = "examples.captioning:captioning_dynamic"
    workload = resolve(spec)
    fixed = workload.draw_batches()
    summary = workload.summary(spec, fixed)
    lengths = observed_lengths(summary, [*fixed, *workload.fresh_batches(count=8)])
    subjects = {s.name: s.config for s in _padded(summary, lengths, fixed, 4)}
    assert list(subjects) == ["pad 8", "pad pow2", "pad max", "buckets 4"]  # the captions declare their maximum
    learned = subjects["buckets 4"].padding_buckets
    seen = sorted({n for values in lengths.values() for n in values})
    assert set(learned) == set(summary.dynamic_dims) and all(
        bounds == choose_buckets(lengths[(key, 1)], 4) and bounds[-1] == seen[-1]
        for key, axes in learned.items()
        for bounds in axes.values()
    )
    text = _markdown(
        {
            "model": spec,
            "date": "2026-11-25",
            "machine": {"device_name": "cpu", "cores": 2, "torch": "t", "python": "p", "autotune": "a"},
            "load_before": 0.1,
            "load_after": 0.2,
            "seconds": 10.0,
            "waste": [
                {"inputs": "labels:1", "strategy": "buckets (4)", "waste": 0.057, "shapes": 4, "buckets": [6, 16]}
            ],
            "subjects": [{"subject": "buckets 4", "fresh_recompiles": 2, "vs_compile": None}],
            "stopped": "budget spent",
        },
        "(table)",
        ["--buckets", "4"],
    )
    assert "`python -m examples.padding_benchmark --buckets 4`" in text
    assert "| labels:1 | buckets (4) | 5.7% | 4 | 6, 16 |" in text and "| buckets 4 | 2 | – |" in text
