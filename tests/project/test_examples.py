"""The bundled example workloads: each builds at tiny size, draws repeatable batches and trains (or infers) compiled.

Every example runs exactly one compiled step on the CPU (tens of seconds each with a cold
Inductor cache); everything else here is eager or shape-only and fast.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch._dynamo.utils import counters

from autotune import resolve
from autotune.errors import WorkloadError
from autotune.workload import Workload, find_repeated_blocks
from examples import captioning
from examples._shared import SIZE_VARIABLE, checked_size, draw_lengths
from tests.dynamo import fresh_dynamo  # noqa: F401

pytestmark = pytest.mark.parallel

CAPTIONING = ["examples.captioning:captioning_static", "examples.captioning:captioning_dynamic"]
OTHERS = ["examples.gpt2_generate:gpt2_generate", "examples.bert_classify:bert_classify", "examples.convnet:convnet"]
TARGETS = CAPTIONING + OTHERS


def same(a: object, b: object) -> bool:
    """Whether two batches hold equal tensors in the same structure."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return isinstance(b, (tuple, list)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]


def eager_and_compiled_step(workload: Workload, batch: object) -> tuple[float, float]:
    """One step from the same weights and RNG state, eager then compiled in place (default mode).

    Returns the two losses (train) or the two output norms (infer); the compiled step also
    updates the weights.
    """
    model = workload.model
    torch.manual_seed(0)
    with torch.no_grad():
        output = workload.run_forward(copy.deepcopy(model), batch)
    if workload.task == "infer":
        want = float(output.logits.norm())
        model.compile()
        with torch.no_grad():
            return want, float(workload.run_forward(model, batch).logits.norm())
    want = float(workload.compute_loss(output, batch))
    model.compile()
    optimizer = workload.optimizer(model.parameters())  # type: ignore[misc]
    before = [p.detach().clone() for p in model.parameters()]
    torch.manual_seed(0)
    loss = workload.compute_loss(workload.run_forward(model, batch), batch)
    loss.backward()
    optimizer.step()
    changed = any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    assert changed, "the step changed no weight"
    return want, float(loss.detach())


@pytest.mark.parametrize("spec", TARGETS)
def test_example_builds_and_draws_repeatable_batches(spec: str) -> None:
    workload = resolve(spec)
    first, again, other = workload.draw_batches(0), workload.draw_batches(0), workload.draw_batches(1)
    assert len(first) == workload.num_batches
    assert same(first, again)
    assert not same(first, other)
    assert workload.block_paths(), "the regional scope needs repeated blocks"
    assert workload.module_paths()
    if workload.task == "train":
        assert workload.optimizer is not None


# Compiles cost tens of seconds each here, so every example compiles once in the whole suite:
# the captioning workloads in tests/measure/test_recipes.py (trained by the regional recipe), the
# bare models of examples.hf in tests/workload/test_hf.py, and the rest below.
@pytest.mark.slow
@pytest.mark.parametrize("spec", OTHERS)
def test_example_runs_one_compiled_step(spec: str) -> None:
    workload = resolve(spec)
    batch = workload.draw_batches()[0]
    # Compiled dropout draws its own random masks unless told to use eager's generator.
    with torch._inductor.config.patch(fallback_random=True):
        want, got = eager_and_compiled_step(workload, batch)
    assert math.isfinite(got)
    assert got == pytest.approx(want, rel=1e-3)
    assert counters["stats"]["unique_graphs"] >= 1, "nothing was compiled"
    assert not counters["graph_break"], f"graph breaks: {dict(counters['graph_break'])}"


def test_captioning_static_pads_every_caption_to_the_maximum() -> None:
    batches = captioning.make_batches(captioning.SIZES["tiny"], count=8, pad_to_max=True)
    assert {b["labels"].shape for b in batches} == {torch.Size([4, 64])}
    for batch in batches:
        real = batch["decoder_attention_mask"] == 1
        assert torch.equal(batch["labels"] == -100, ~real)
        assert bool(((batch["labels"] >= 0) & (batch["labels"] < captioning.VOCAB))[real].all())
        assert batch["pixel_values"].shape == (4, 3, 32, 32)


def test_captioning_dynamic_pads_to_the_longest_caption_and_declares_it() -> None:
    workload = captioning.workload("tiny", dynamic=True)
    batches = workload.draw_batches()
    widths = [b["labels"].shape[1] for b in batches]
    assert len(set(widths)) > 1
    for batch, width in zip(batches, widths, strict=True):
        lengths = batch["decoder_attention_mask"].sum(1)
        assert int(lengths.max()) == width
        # Every caption ends with the end token.
        assert torch.equal(batch["labels"][torch.arange(4), lengths - 1], torch.full((4,), captioning.END))
    assert workload.dynamic_dims == {"labels": (1,), "decoder_attention_mask": (1,)}
    assert workload.pad_values == {"labels": -100}


def test_caption_lengths_follow_the_case_study_distribution() -> None:
    torch.manual_seed(0)
    full = captioning.SIZES["full"]
    lengths = draw_lengths(20_000, full.buckets)
    short = ((lengths >= 5) & (lengths <= 31)).float().mean()
    medium = ((lengths >= 33) & (lengths <= 63)).float().mean()
    long = ((lengths >= 65) & (lengths <= 255)).float().mean()
    assert abs(float(short) - 0.90) < 0.01
    assert abs(float(medium) - 0.09) < 0.01
    assert abs(float(long) - 0.01) < 0.004
    assert float(short + medium + long) == 1.0
    assert (full.batch_size, full.max_length, full.image_size) == (64, 256, 224)


def test_captioning_modules_and_blocks() -> None:
    workload = captioning.workload("tiny", dynamic=False)
    assert workload.module_paths() == ("encoder", "decoder")
    assert find_repeated_blocks(workload.model) == ("encoder.layers", "decoder.transformer.h")
    assert workload.block_paths() == ("encoder.layers", "decoder.transformer.h")


def test_a_labelled_captioning_forward_is_one_graph() -> None:
    # VisionEncoderDecoderModel computes the loss itself: the decoder's loss lookup, which breaks the
    # graph of a bare GPT-2 given labels (tests/study/test_doctor.py), is not on this model's path.
    model = captioning.build_model(captioning.SIZES["tiny"])
    batch = captioning.make_batches(captioning.SIZES["tiny"], count=1, pad_to_max=False)[0]
    explained = torch._dynamo.explain(model)(**batch)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_example_size_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SIZE_VARIABLE, raising=False)
    assert checked_size(None) == "tiny"
    monkeypatch.setenv(SIZE_VARIABLE, "full")
    assert checked_size(None) == "full"
    assert checked_size("tiny") == "tiny"
    monkeypatch.setenv(SIZE_VARIABLE, "huge")
    with pytest.raises(WorkloadError, match=r"AUTOTUNE_EXAMPLE_SIZE.*'huge'.*tiny"):
        checked_size(None)
    with pytest.raises(WorkloadError, match=r"size: 'medium'"):
        captioning.workload("medium", dynamic=True)
