"""A small causal language model trained on variable-length batches.

Small enough that Inductor's CPU backend compiles it in well under a minute, yet with what
makes tuning matter on real models: repeated transformer blocks (regional scope), a few
top-level submodules (modular scope), and sequence lengths that change from batch to batch
(dynamic shapes, padding, mark_dynamic). Padding at the end of a sequence leaves the loss
unchanged: attention is causal and padded labels are ignored.

    autotune search --model examples.toy:model --trials 8
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from autotune import Workload

VOCAB = 512
MAX_LEN = 128


class LMOutput(NamedTuple):
    loss: torch.Tensor
    logits: torch.Tensor


class Block(nn.Module):
    """Pre-norm attention and MLP, like a GPT-2 block, with GPT-2's dropout on each residual branch (none by default)."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads = heads
        self.dropout: nn.Module = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, dim // self.heads).unbind(2)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        allowed = causal & attention_mask[:, None, None, :].bool()
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=allowed)
        x = x + self.dropout(self.proj(y.transpose(1, 2).reshape(batch, length, dim)))
        return x + self.dropout(self.mlp(self.norm2(x)))


class Embeddings(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Embedding(MAX_LEN, dim)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.tokens(input_ids) + self.positions(positions)


class Encoder(nn.Module):
    def __init__(self, dim: int, heads: int, depth: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads, dropout) for _ in range(depth))

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, attention_mask)
        return x


class ToyLM(nn.Module):
    """Token and position embeddings, `depth` blocks, a norm and a vocabulary head."""

    def __init__(self, dim: int = 64, heads: int = 4, depth: int = 3, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed = Embeddings(dim)
        self.encoder = Encoder(dim, heads, depth, dropout)
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, VOCAB))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> LMOutput:
        logits = self.head(self.encoder(self.embed(input_ids), attention_mask))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
        return LMOutput(loss, logits)


def make_batches(
    count: int = 8, batch_size: int = 8, min_len: int = 8, max_len: int = 64
) -> list[dict[str, torch.Tensor]]:
    """Batches padded to their own longest sequence, as a collator would pad them."""
    batches = []
    for _ in range(count):
        lengths = torch.randint(min_len, max_len + 1, (batch_size,))
        longest = int(lengths.max())
        positions = torch.arange(longest)[None, :]
        mask = (positions < lengths[:, None]).long()
        input_ids = torch.randint(1, VOCAB, (batch_size, longest)) * mask
        labels = input_ids.masked_fill(mask == 0, -100)
        batches.append({"input_ids": input_ids, "attention_mask": mask, "labels": labels})
    return batches


def model(dropout: float = 0.0, batches: Callable[[], list[dict[str, torch.Tensor]]] = make_batches) -> Workload:
    """The toy workload: train ToyLM with AdamW on 8 variable-length batches."""
    return Workload(
        model=ToyLM(dropout=dropout),
        batches=batches,
        task="train",
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3),
        dynamic_dims={"input_ids": [1], "attention_mask": [1], "labels": [1]},
        pad_values={"labels": -100},
        # make_batches never draws a sequence longer than 64: what 'max' padding pads to.
        max_lengths={"input_ids": 64, "attention_mask": 64, "labels": 64},
    )


def model_with_dropout() -> Workload:
    """The toy with dropout at 0.1 on every residual branch, as GPT-2 trains, on sequences all 64 tokens long (one
    block size, as nanoGPT trains): one shape, so that whatever compiles again is the dropout's doing."""
    return model(dropout=0.1, batches=lambda: make_batches(min_len=64, max_len=64))
