"""Fine-tuning with a Hugging Face `Trainer`: the Trainer itself is the target, and the tuned configuration goes back
into it in one line.

A 2-layer GPT-2 built from a config (random weights, nothing downloaded) learns a tiny generated
language: runs of counting, modulo the vocabulary, whose lengths vary as real text does (most
short, a few long). A word-level tokenizer built in memory pads them, and transformers'
`DataCollatorForLanguageModeling` collates batches padded to their longest sequence, so the
sequence length changes from batch to batch.

    autotune search --model examples.trainer:trainer --trials 6   # autotune derives the workload from the Trainer
    python -m examples.trainer outputs/<study>/best.yaml          # trains with the tuned configuration applied
    python -m examples.trainer                                    # the same training, uncompiled

With gradient accumulation (4 batches per optimizer step), searched and applied the same way:

    autotune search --model examples.trainer:accumulating_trainer --trials 6
    python -m examples.trainer outputs/<study>/best.yaml --accumulate 4

The training run prints the loss every 10 steps and the seconds per step after the warm-up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import (
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from examples._shared import StepClock, counting_rows, seeded

__all__ = ["ACCUMULATION", "VOCAB", "accumulating_trainer", "build_tokenizer", "dataset", "model", "trainer"]

VOCAB = 256
"""Token ids 0..VOCAB-1: [PAD], [EOS], then the words t0, t1, ..."""
PAD_ID, EOS_ID = 0, 1
LENGTHS = ((8, 32, 0.9), (33, 96, 0.1))
"""(shortest, longest, share) of the generated sequences: 90% short, 10% long."""


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over t0 .. t253, built in memory."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": PAD_ID, "[EOS]": EOS_ID, **{f"t{i}": i + 2 for i in range(VOCAB - 2)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[EOS]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", eos_token="[EOS]")


class CountingText(torch.utils.data.Dataset):
    """Sequences that count up from a random word with a random stride, ending with [EOS]; lengths as in LENGTHS."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.rows = counting_rows(size, vocab=VOCAB, lengths=LENGTHS, eos_id=EOS_ID, seed=seed)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return {"input_ids": self.rows[index]}


def dataset(size: int = 512) -> CountingText:
    return CountingText(size)


def model() -> GPT2LMHeadModel:
    """The 2-layer GPT-2, the same weights in every process."""
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=128,
        n_embd=64,
        n_layer=2,
        n_head=4,
        bos_token_id=EOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        use_cache=False,
        # No dropout: a compiled run draws its random numbers differently from eager, and without
        # dropout the two runs' losses can be compared step by step.
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    with seeded(0):
        built = GPT2LMHeadModel(config)
    # Named, the causal-LM loss needs no lookup inside forward (a lookup that logs is a graph break).
    built.loss_type = "ForCausalLM"
    return built


def trainer(output_dir: str = "outputs/trainer-example", max_steps: int = 60, **arguments: Any) -> Trainer:
    """The Trainer autotune searches, and the one it is applied to: AdamW, a linear schedule, batches of 8."""
    settings: dict[str, Any] = {
        "output_dir": output_dir,
        "per_device_train_batch_size": 8,
        "learning_rate": 1e-3,
        "warmup_steps": 5,
        "max_steps": max_steps,
        "logging_steps": 10,
        "save_strategy": "no",
        "report_to": "none",
        "seed": 0,
        "dataloader_num_workers": 0,
        "dataloader_pin_memory": torch.cuda.is_available(),  # pinning means nothing without a GPU, and warns
        "disable_tqdm": True,
        **arguments,
    }
    return Trainer(
        model=model(),
        args=TrainingArguments(**settings),
        train_dataset=dataset(),
        data_collator=DataCollatorForLanguageModeling(build_tokenizer(), mlm=False),
    )


ACCUMULATION = 4
"""Micro-batches per optimizer step in `accumulating_trainer`."""


def accumulating_trainer(output_dir: str = "outputs/trainer-example", max_steps: int = 15, **arguments: Any) -> Trainer:
    """The same Trainer accumulating gradients over ACCUMULATION batches of 8: an optimizer step sees 32 samples."""
    return trainer(output_dir, max_steps, gradient_accumulation_steps=ACCUMULATION, **arguments)


class _Ticks(TrainerCallback):
    """Ticks a StepClock at the end of every optimizer step."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.clock.tick()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.trainer", description="Train the example with a tuned configuration applied."
    )
    parser.add_argument("config", nargs="?", help="a best.yaml from `autotune search` (none: train uncompiled)")
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps (default 60)")
    parser.add_argument(
        "--accumulate",
        type=int,
        default=1,
        metavar="K",
        help="gradient accumulation: K batches per optimizer step (default 1; search "
        "examples.trainer:accumulating_trainer for K=4)",
    )
    options = parser.parse_args(argv)
    built = trainer(max_steps=options.steps, gradient_accumulation_steps=options.accumulate)
    if options.config:
        from autotune.integrations.transformers import apply_to_trainer

        tuned = apply_to_trainer(built, Path(options.config))
        print(f"applied: {tuned.config.describe()}", file=sys.stderr)
    clock = StepClock()
    built.add_callback(_Ticks(clock))
    result = built.train()
    timing = clock.summary()
    print(f"final training loss {result.training_loss:.4f}; {timing}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
