"""A BERT encoder fine-tuned for sequence classification on texts of varying length.

`BertForSequenceClassification` built from a `BertConfig` with random weights, trained with
AdamW on synthetic token sequences, each batch right-padded to its longest sequence as a
collator would. Labels are one class per sequence; the classification reads the first
token, so padding at the end (masked out) leaves the loss unchanged.

    autotune search --model examples.bert_classify:bert_classify

Tiny (2 layers, 64 wide, vocabulary 1024, 4 sequences of 8-64 tokens) unless
`AUTOTUNE_EXAMPLE_SIZE=full`: BERT-Base (12 layers, 768 wide, vocabulary 30522),
32 sequences of 16-256 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import BertConfig, BertForSequenceClassification

from autotune import Workload
from examples._shared import checked_size, length_mask, seeded

__all__ = ["ClassifySize", "bert_classify", "build_model", "make_batches", "workload"]

CLASSES = 4


@dataclass(frozen=True, kw_only=True)
class ClassifySize:
    """The dimensions of one size of the classification workload."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    batch_size: int
    shortest: int
    longest: int


SIZES = {
    "full": ClassifySize(vocab=30522, hidden=768, layers=12, heads=12, batch_size=32, shortest=16, longest=256),
    "tiny": ClassifySize(vocab=1024, hidden=64, layers=2, heads=4, batch_size=4, shortest=8, longest=64),
}


def build_model(dims: ClassifySize) -> BertForSequenceClassification:
    """BERT with a classification head and seeded random weights."""
    config = BertConfig(
        vocab_size=dims.vocab,
        hidden_size=dims.hidden,
        num_hidden_layers=dims.layers,
        num_attention_heads=dims.heads,
        intermediate_size=4 * dims.hidden,
        max_position_embeddings=512,
        num_labels=CLASSES,
        # Said up front; otherwise the model infers it from the labels on its first call.
        problem_type="single_label_classification",
    )
    with seeded(0):
        return BertForSequenceClassification(config)


def make_batches(dims: ClassifySize, count: int) -> list[dict[str, torch.Tensor]]:
    """`count` batches: token ids (0 is padding), attention masks and one class label per sequence."""
    batches = []
    for _ in range(count):
        lengths = torch.randint(dims.shortest, dims.longest + 1, (dims.batch_size,))
        mask = length_mask(lengths, int(lengths.max()))
        tokens = torch.randint(1, dims.vocab, mask.shape) * mask
        labels = torch.randint(0, CLASSES, (dims.batch_size,))
        batches.append({"input_ids": tokens, "attention_mask": mask, "labels": labels})
    return batches


def workload(size: str | None = None) -> Workload:
    """The classification workload at `size` ('tiny' or 'full'; None reads $AUTOTUNE_EXAMPLE_SIZE)."""
    dims = SIZES[checked_size(size)]
    return Workload(
        model=build_model(dims),
        batches=lambda: make_batches(dims, count=8),
        task="train",
        optimizer=lambda params: torch.optim.AdamW(params, lr=2e-5),
        dynamic_dims={"input_ids": [1], "attention_mask": [1]},
        # Texts are drawn no longer than `longest`: what 'max' padding pads to.
        max_lengths={"input_ids": dims.longest, "attention_mask": dims.longest},
    )


def bert_classify() -> Workload:
    """Sequence classification at the size chosen by $AUTOTUNE_EXAMPLE_SIZE (default tiny)."""
    return workload()
