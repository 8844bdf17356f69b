"""A residual convolutional network trained on image classification, with static shapes.

Pure torch (no transformers): a ResNet-style stem, a sequence of residual blocks
(convolution, batch norm, ReLU) and a linear classifier, trained with SGD and momentum.
Every batch has the same shape, so what compilation buys here comes from fusing the
element-wise work around the convolutions (batch norm, ReLU, residual adds) and from
cheaper kernels, not from handling shapes.

    autotune search --model examples.convnet:convnet

Batches are `(images, labels)` tuples; the model sees only the images. Tiny (32x32 images,
16-32 channels, batches of 8) unless `AUTOTUNE_EXAMPLE_SIZE=full`: a ResNet-18 layout on
224x224 images, 1000 classes, batches of 64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from autotune import Workload
from examples._shared import checked_size, seeded

__all__ = ["ConvNet", "ConvSize", "ResidualBlock", "convnet", "make_batches", "workload"]


@dataclass(frozen=True, kw_only=True)
class ConvSize:
    """The dimensions of one size of the convolutional workload."""

    image_size: int
    widths: tuple[int, ...]
    """Channels of each stage; every stage after the first halves the resolution."""
    blocks_per_stage: int
    classes: int
    batch_size: int


SIZES = {
    "full": ConvSize(image_size=224, widths=(64, 128, 256, 512), blocks_per_stage=2, classes=1000, batch_size=64),
    "tiny": ConvSize(image_size=32, widths=(16, 32), blocks_per_stage=2, classes=10, batch_size=8),
}


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with batch norm, and a shortcut (a 1x1 convolution when the shape changes)."""

    def __init__(self, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.BatchNorm2d(channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(channels_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride=stride, bias=False), nn.BatchNorm2d(channels_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(y)) + self.shortcut(x))


class ConvNet(nn.Module):
    """Stem, residual blocks (one flat Sequential, so the regional scope finds them) and a classifier."""

    def __init__(self, dims: ConvSize) -> None:
        super().__init__()
        first = dims.widths[0]
        self.stem = nn.Sequential(nn.Conv2d(3, first, 3, padding=1, bias=False), nn.BatchNorm2d(first), nn.ReLU())
        blocks = []
        channels = first
        for stage, width in enumerate(dims.widths):
            for index in range(dims.blocks_per_stage):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(ResidualBlock(channels, width, stride))
                channels = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(channels, dims.classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.blocks(self.stem(images))
        return self.head(features.mean(dim=(2, 3)))


def make_batches(dims: ConvSize, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`count` batches of (normally distributed images, class labels), all of one shape."""
    return [
        (
            torch.randn(dims.batch_size, 3, dims.image_size, dims.image_size),
            torch.randint(0, dims.classes, (dims.batch_size,)),
        )
        for _ in range(count)
    ]


def workload(size: str | None = None) -> Workload:
    """The convolutional workload at `size` ('tiny' or 'full'; None reads $AUTOTUNE_EXAMPLE_SIZE)."""
    dims = SIZES[checked_size(size)]
    with seeded(0):
        model = ConvNet(dims)
    return Workload(
        model=model,
        batches=lambda: make_batches(dims, count=8),
        task="train",
        optimizer=lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
        forward=lambda model, batch: model(batch[0]),
        loss=lambda logits, batch: F.cross_entropy(logits, batch[1]),
    )


def convnet() -> Workload:
    """The convolutional workload at the size chosen by $AUTOTUNE_EXAMPLE_SIZE (default tiny)."""
    return workload()
