"""A plain nn.Module and its example inputs: nothing of autotune's in the model's file.

A small text classifier: token embeddings, two convolutions over the sequence, pooling over
the tokens that are there (a mask) and a linear head. Requests come in batches of sentences of
different lengths, so the sequence axis changes from batch to batch; autotune finds that from
the example batches' shapes:

    autotune search --model examples.toy_module:Net --inputs examples.toy_module:batches --task infer
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 1000
CLASSES = 4


class Net(nn.Module):
    """Embeddings, two 1-D convolutions, masked mean pooling, a classifier head."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.conv1 = nn.Conv1d(dim, 2 * dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(2 * dim, dim, kernel_size=3, padding=1)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens).transpose(1, 2)
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).transpose(1, 2)
        weights = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.head(pooled)


def batches(count: int = 8, size: int = 16) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`count` batches of `size` sentences, each batch as long as its longest sentence (16 to 96 tokens)."""
    drawn = []
    for _ in range(count):
        lengths = torch.randint(16, 97, (size,))
        longest = int(lengths.max())
        mask = torch.arange(longest)[None, :] < lengths[:, None]
        tokens = torch.randint(1, VOCAB, (size, longest)) * mask
        drawn.append((tokens, mask))
    return drawn
