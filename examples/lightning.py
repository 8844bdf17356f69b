"""Training with PyTorch Lightning: the Trainer, module and datamodule are the target, and the tuned configuration
goes back in as a callback.

A small causal language model (two transformer blocks, random weights) learns a generated
language: runs of counting, modulo the vocabulary, whose lengths vary as real text does (most
short, a few long). The datamodule's collate function pads each batch to its longest sequence, so
the sequence length changes from batch to batch; a batch is a dict of `input_ids`,
`attention_mask` and `labels` (-100 where padded).

    autotune search --model examples.lightning:trainer --trials 3   # autotune derives the workload from the Trainer
    python -m examples.lightning outputs/<study>/best.yaml           # trains with the tuned configuration applied
    python -m examples.lightning                                     # the same training, uncompiled

The training run prints the last loss and the seconds per step after the warm-up.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.utilities.types import OptimizerLRScheduler
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler

from examples._shared import StepClock, counting_rows, seeded
from examples.toy import Block

__all__ = ["CountingData", "CountingLM", "pad_batch", "trainer"]

VOCAB = 64
"""Token ids 0..VOCAB-1: 0 pads, 1 ends a sequence, the rest are words."""
PAD_ID, EOS_ID = 0, 1
MAX_LEN = 64
LENGTHS = ((6, 24, 0.9), (25, MAX_LEN, 0.1))
"""(shortest, longest, share) of the generated sequences: 90% short, 10% long."""
WARMUP_STEPS = 5


class CountingText(Dataset[list[int]]):
    """Sequences that count up from a random word with a random stride, ending with EOS; lengths as in LENGTHS."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.rows = counting_rows(size, vocab=VOCAB, lengths=LENGTHS, eos_id=EOS_ID, seed=seed)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> list[int]:
        return self.rows[index]


def pad_batch(rows: list[list[int]]) -> dict[str, torch.Tensor]:
    """Pad the rows to the longest of them: ids with PAD_ID, a 0/1 attention mask, labels with -100."""
    longest = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), longest), PAD_ID, dtype=torch.long)
    for index, row in enumerate(rows):
        input_ids[index, : len(row)] = torch.tensor(row)
    lengths = torch.tensor([len(row) for row in rows])
    attention_mask = (torch.arange(longest)[None, :] < lengths[:, None]).long()
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class CountingData(L.LightningDataModule):
    """The generated sequences in shuffled batches of `batch_size`, padded per batch."""

    def __init__(self, size: int = 512, batch_size: int = 8) -> None:
        super().__init__()
        self.size, self.batch_size = size, batch_size
        self.train: CountingText | None = None

    def setup(self, stage: str) -> None:
        self.train = CountingText(self.size)

    def train_dataloader(self) -> DataLoader[list[int]]:
        assert self.train is not None, "setup('fit') builds the dataset"
        return DataLoader(
            self.train, batch_size=self.batch_size, sampler=EpochShuffle(len(self.train)), collate_fn=pad_batch
        )


class EpochShuffle(Sampler[int]):
    """A shuffled order that depends only on the seed and the epoch (Lightning sets it): every fit, and
    every pass autotune draws, sees the same batches, whatever else drew random numbers before."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size, self.seed, self.epoch = size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        order = torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        return iter(order.tolist())


class CountingLM(L.LightningModule):
    """Token and position embeddings, `depth` pre-norm transformer blocks, a norm and a vocabulary head."""

    def __init__(self, dim: int = 32, heads: int = 2, depth: int = 2, lr: float = 3e-3) -> None:
        super().__init__()
        self.lr = lr
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Embedding(MAX_LEN, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, VOCAB))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tokens(input_ids) + self.positions(positions)
        for block in self.blocks:
            x = block(x, attention_mask)
        return self.head(x)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        logits = self(batch["input_ids"], batch["attention_mask"])
        # Next-token prediction; padded positions carry label -100 and are ignored.
        labels = batch["labels"][:, 1:].reshape(-1)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels, ignore_index=-100)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> OptimizerLRScheduler:
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.01)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}


def trainer(max_steps: int = 40, **options: Any) -> tuple[L.Trainer, CountingLM, CountingData]:
    """What `trainer.fit(module, datamodule)` takes: a CPU Trainer on one device without logger,
    checkpoints or progress bar, the module (the same weights in every process) and the datamodule.
    `options` are further Trainer arguments (precision, accumulate_grad_batches, callbacks, ...)."""
    settings: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "max_steps": max_steps,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        **options,
    }
    # The Trainer's start-up lines (GPU/TPU availability, a logging tip) would be printed by every trial's process.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    with seeded(0):
        module = CountingLM()
    return L.Trainer(**settings), module, CountingData()


class _Ticks(L.Callback):
    """Ticks a StepClock at the end of every training batch."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        self.clock.tick()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.lightning", description="Train the example with a tuned configuration applied."
    )
    parser.add_argument("config", nargs="?", help="a best.yaml from `autotune search` (none: train uncompiled)")
    parser.add_argument("--steps", type=int, default=40, help="training steps (default 40)")
    options = parser.parse_args(argv)
    clock = StepClock()
    callbacks: list[L.Callback] = [_Ticks(clock)]
    if options.config:
        # Imported only when used: training uncompiled needs nothing from autotune.
        from autotune.integrations.lightning import AutotuneCallback

        callbacks.append(AutotuneCallback(options.config))
    fit, module, data = trainer(max_steps=options.steps, callbacks=callbacks)
    fit.fit(module, data)
    loss = fit.callback_metrics.get("train_loss")
    timing = clock.summary()
    shown = f"{float(loss):.4f}" if loss is not None else "not logged"
    print(f"final training loss {shown}; {timing}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
