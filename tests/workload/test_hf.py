"""Bare transformers models: batches synthesised from the config, one compiled step each, and clear refusals."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertForTokenClassification,
    CLIPConfig,
    CLIPModel,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
    PretrainedConfig,
    PreTrainedModel,
    T5Config,
    T5ForConditionalGeneration,
    T5Model,
)

from autotune import resolve
from autotune.errors import WorkloadError
from autotune.workload import Workload
from autotune.workload.hf import BATCH_SIZE, TEXT_LENGTHS, is_pretrained_model, workload_for
from tests.dynamo import fresh_dynamo  # noqa: F401

pytestmark = pytest.mark.parallel

SMALL_T5 = {"vocab_size": 50, "d_model": 16, "d_ff": 32, "d_kv": 8, "num_heads": 2, "num_layers": 1}
SMALL_BERT = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}


@pytest.fixture(scope="module")
def gpt2() -> Workload:
    return resolve("examples.hf:gpt2")


@pytest.fixture(scope="module")
def bert() -> Workload:
    return resolve("examples.hf:bert")


@pytest.fixture(scope="module")
def vit() -> Workload:
    return resolve("examples.hf:vit")


def eager_then_compiled_loss(workload: Workload, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
    """The loss of one training step in eager mode and with the model compiled, from the same weights and RNG."""
    eager = copy.deepcopy(workload.model)
    torch.manual_seed(0)
    want = float(workload.compute_loss(workload.run_forward(eager, batch), batch))
    model = copy.deepcopy(workload.model)
    model.compile()
    optimizer = workload.optimizer(model.parameters())  # type: ignore[misc]
    torch.manual_seed(0)
    loss = workload.compute_loss(workload.run_forward(model, batch), batch)
    loss.backward()
    optimizer.step()
    assert counters["stats"]["unique_graphs"] >= 1, "nothing was compiled"
    assert not counters["graph_break"], f"graph breaks: {dict(counters['graph_break'])}"
    return want, float(loss.detach())


def test_text_model_gets_token_batches(gpt2: Workload) -> None:
    assert gpt2.task == "train"
    assert isinstance(gpt2.optimizer(nn.Linear(1, 1).parameters()), torch.optim.AdamW)  # type: ignore[misc]
    assert gpt2.dynamic_dims == {"input_ids": (1,), "attention_mask": (1,), "labels": (1,)}
    assert gpt2.pad_values == {"labels": -100}
    batches = gpt2.draw_batches()
    widths = {b["input_ids"].shape[1] for b in batches}
    assert len(widths) > 1
    for batch in batches:
        ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        assert ids.shape[0] == BATCH_SIZE
        lengths = mask.sum(1)
        assert TEXT_LENGTHS[0] <= int(lengths.min()) and int(lengths.max()) == ids.shape[1] <= TEXT_LENGTHS[1]
        assert int(ids.min()) >= 0 and int(ids.max()) < gpt2.model.config.vocab_size
        assert torch.equal(labels, ids.masked_fill(mask == 0, -100))


def test_classifier_gets_one_label_per_sequence(bert: Workload) -> None:
    assert bert.task == "train"
    assert bert.dynamic_dims == {"input_ids": (1,), "attention_mask": (1,)}
    batch = bert.draw_batches()[0]
    assert batch["labels"].shape == (BATCH_SIZE,) and int(batch["labels"].max()) < 3
    loss = bert.compute_loss(bert.run_forward(bert.model, batch), batch)
    assert math.isfinite(float(loss))


def test_vision_model_gets_pixel_batches(vit: Workload) -> None:
    assert vit.task == "train"
    assert vit.dynamic_dims == {}
    for batch in vit.draw_batches():
        assert batch["pixel_values"].shape == (BATCH_SIZE, 3, 32, 32)
        assert batch["labels"].shape == (BATCH_SIZE,)
        assert int(batch["labels"].min()) >= 0 and int(batch["labels"].max()) < 10


@pytest.mark.slow
# One text and one vision model; BERT's compiled training runs in tests/project/test_examples.py
# (bert_classify), so examples.hf:bert is checked eagerly below to save a compile.
@pytest.mark.parametrize("name", ["gpt2", "vit"])
def test_bare_model_runs_one_compiled_step(name: str, request: pytest.FixtureRequest) -> None:
    workload = request.getfixturevalue(name)
    batch = workload.draw_batches()[0]
    # Compiled dropout draws its own random masks unless told to use eager's generator.
    with torch._inductor.config.patch(fallback_random=True):
        want, got = eager_then_compiled_loss(workload, batch)
    assert math.isfinite(got)
    assert got == pytest.approx(want, rel=1e-3)


def test_lengths_are_clamped_to_the_model_positions() -> None:
    model = GPT2Model(GPT2Config(vocab_size=50, n_positions=24, n_embd=16, n_layer=1, n_head=2))
    workload = workload_for(model)
    assert workload.task == "infer"
    assert not model.training
    for batch in workload.draw_batches():
        assert set(batch) == {"input_ids", "attention_mask"}
        assert batch["input_ids"].shape[1] <= 24
    with torch.no_grad():
        output = workload.run_forward(model, workload.draw_batches()[0])
    assert output.last_hidden_state.shape[:2] == workload.draw_batches()[0]["input_ids"].shape


HEADS = {
    "sequence_classification": (lambda: BertForSequenceClassification(BertConfig(**SMALL_BERT, num_labels=3)), "batch"),
    "token_classification": (lambda: BertForTokenClassification(BertConfig(**SMALL_BERT, num_labels=5)), "tokens"),
    "masked_lm": (lambda: BertForMaskedLM(BertConfig(**SMALL_BERT)), "tokens"),
    "causal_lm": (
        lambda: GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=64, n_embd=16, n_layer=1, n_head=2)),
        "tokens",
    ),
    "seq2seq_lm": (lambda: T5ForConditionalGeneration(T5Config(**SMALL_T5, decoder_start_token_id=0)), "tokens"),
}


@pytest.mark.parametrize("head", HEADS)
def test_heads_get_labels_they_train_on(head: str) -> None:
    build, label_shape = HEADS[head]
    model = build()
    workload = workload_for(model)
    assert workload.task == "train"
    batch = workload.draw_batches()[0]
    labels = batch["labels"]
    if label_shape == "batch":
        assert labels.shape == (BATCH_SIZE,) and int(labels.max()) < model.config.num_labels
        assert "labels" not in workload.dynamic_dims
    else:
        assert labels.shape == batch["input_ids"].shape
        assert workload.dynamic_dims["labels"] == (1,) and workload.pad_values["labels"] == -100
        assert bool((labels[batch["attention_mask"] == 0] == -100).all())
    loss = workload.compute_loss(workload.run_forward(model, batch), batch)
    assert math.isfinite(float(loss))


def test_regression_heads_get_float_targets() -> None:
    model = BertForSequenceClassification(BertConfig(**SMALL_BERT, num_labels=1))
    batch = workload_for(model).draw_batches()[0]
    assert batch["labels"].dtype == torch.float32 and batch["labels"].shape == (BATCH_SIZE,)


def test_is_pretrained_model() -> None:
    assert is_pretrained_model(GPT2Model(GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2)))
    assert not is_pretrained_model(nn.Linear(2, 2))
    assert not is_pretrained_model("gpt2")


class NoInputsConfig(PretrainedConfig):
    model_type = "no-inputs"


class NoInputsModel(PreTrainedModel):
    """A model whose config says nothing about its inputs."""

    config_class = NoInputsConfig

    def __init__(self, config: NoInputsConfig) -> None:
        super().__init__(config)
        self.linear = nn.Linear(4, 4)

    def forward(self, input_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.linear(input_ids)


class MysteryHeadModel(NoInputsModel):
    """Takes labels, but not of any kind autotune knows."""


class NeedsStatesModel(NoInputsModel):
    def forward(self, input_ids: torch.Tensor, states: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.linear(states)


def test_config_without_vocab_or_image_size_is_refused() -> None:
    model = NoInputsModel(NoInputsConfig())
    with pytest.raises(WorkloadError, match=r"NoInputsModel.*NoInputsConfig.*neither `vocab_size`.*nor `image_size`"):
        workload_for(model)


def test_composite_config_is_refused() -> None:
    small = {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2, "num_hidden_layers": 1}
    model = CLIPModel(CLIPConfig(text_config=small, vision_config=small))
    with pytest.raises(WorkloadError, match=r"CLIPModel.*CLIPConfig.*neither `vocab_size`"):
        workload_for(model)


def test_encoder_decoder_without_lm_head_is_refused() -> None:
    with pytest.raises(WorkloadError, match=r"T5Model: an encoder-decoder model.*decoder inputs"):
        workload_for(T5Model(T5Config(**SMALL_T5)))


def test_seq2seq_model_without_decoder_start_is_refused() -> None:
    with pytest.raises(WorkloadError, match=r"T5ForConditionalGeneration: config.decoder_start_token_id is not set"):
        workload_for(T5ForConditionalGeneration(T5Config(**SMALL_T5)))


def test_unknown_labels_are_refused() -> None:
    config = NoInputsConfig(vocab_size=10)
    with pytest.raises(WorkloadError, match=r"MysteryHeadModel: its forward takes `labels`.*causal_lm"):
        workload_for(MysteryHeadModel(config))


def test_required_inputs_it_cannot_make_are_refused() -> None:
    config = NoInputsConfig(vocab_size=10)
    with pytest.raises(WorkloadError, match=r"NeedsStatesModel: its forward requires \['states'\]"):
        workload_for(NeedsStatesModel(config))


def test_resolve_reports_the_synthesis_error() -> None:
    with pytest.raises(WorkloadError, match=r"NoInputsModel"):
        resolve("tests.workload.test_hf:no_inputs")


def no_inputs() -> NoInputsModel:
    """A target for resolve(): a bare PreTrainedModel that cannot be given inputs."""
    return NoInputsModel(NoInputsConfig())
