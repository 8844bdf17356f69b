"""GPT-2 reading prompts of varying length: the prefill pass of text generation, for inference.

Each batch is a set of prompts, right-padded to the longest one, and one forward pass of
`GPT2LMHeadModel` computes the logits that the first generated token would be drawn from.
No key/value cache is returned: this workload measures the prompt pass alone, where prompt
lengths change from batch to batch (dynamic shapes) and the batch is processed at once.

    autotune search --model examples.gpt2_generate:gpt2_generate

Tiny (2 layers, 64 wide, vocabulary 1024, 4 prompts of 4-64 tokens) unless
`AUTOTUNE_EXAMPLE_SIZE=full`: GPT-2 small (12 layers, 768 wide, vocabulary 50257),
16 prompts of 16-512 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from autotune import Workload
from examples._shared import checked_size, length_mask, seeded

__all__ = ["PromptSize", "build_model", "gpt2_generate", "make_batches", "workload"]


@dataclass(frozen=True, kw_only=True)
class PromptSize:
    """The dimensions of one size of the prompt workload."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    positions: int
    batch_size: int
    shortest: int
    longest: int


SIZES = {
    "full": PromptSize(
        vocab=50257, hidden=768, layers=12, heads=12, positions=1024, batch_size=16, shortest=16, longest=512
    ),
    "tiny": PromptSize(vocab=1024, hidden=64, layers=2, heads=4, positions=128, batch_size=4, shortest=4, longest=64),
}


def build_model(dims: PromptSize) -> GPT2LMHeadModel:
    """GPT-2 with seeded random weights, in eval mode and without a key/value cache in its output."""
    config = GPT2Config(
        vocab_size=dims.vocab,
        n_positions=dims.positions,
        n_embd=dims.hidden,
        n_layer=dims.layers,
        n_head=dims.heads,
        bos_token_id=dims.vocab - 1,
        eos_token_id=dims.vocab - 1,
        use_cache=False,
    )
    with seeded(0):
        model = GPT2LMHeadModel(config)
    return model.eval()


def make_batches(dims: PromptSize, count: int) -> list[dict[str, torch.Tensor]]:
    """`count` batches of prompts with lengths uniform in [shortest, longest], right-padded with the end token."""
    batches = []
    end = dims.vocab - 1
    for _ in range(count):
        lengths = torch.randint(dims.shortest, dims.longest + 1, (dims.batch_size,))
        mask = length_mask(lengths, int(lengths.max()))
        tokens = torch.randint(0, end, mask.shape).masked_fill(mask == 0, end)
        batches.append({"input_ids": tokens, "attention_mask": mask})
    return batches


def workload(size: str | None = None) -> Workload:
    """The prompt workload at `size` ('tiny' or 'full'; None reads $AUTOTUNE_EXAMPLE_SIZE)."""
    dims = SIZES[checked_size(size)]
    return Workload(
        model=build_model(dims),
        batches=lambda: make_batches(dims, count=8),
        task="infer",
        dynamic_dims={"input_ids": [1], "attention_mask": [1]},
        pad_values={"input_ids": dims.vocab - 1},
        # Prompts are drawn no longer than `longest`: what 'max' padding pads to.
        max_lengths={"input_ids": dims.longest, "attention_mask": dims.longest},
    )


def gpt2_generate() -> Workload:
    """The prompt pass at the size chosen by $AUTOTUNE_EXAMPLE_SIZE (default tiny)."""
    return workload()
