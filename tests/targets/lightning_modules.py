"""Lightning targets for `autotune.resolve`: a module that brings its own batches, and tuples of the wrong shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    """A linear regression over (x, y) tuple batches, with its own train_dataloader.

    `configure` replaces what configure_optimizers returns; `step_returns` what training_step returns.
    """

    def __init__(
        self,
        configure: Callable[[Regression], Any] | None = None,
        step_returns: Callable[[torch.Tensor], Any] | None = None,
    ) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.configure = configure
        self.step_returns = step_returns
        self.batch_indices: list[int] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> Any:
        self.batch_indices.append(batch_idx)
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("loss", loss)
        return self.step_returns(loss) if self.step_returns is not None else loss

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def configure_optimizers(self) -> Any:
        if self.configure is not None:
            return self.configure(self)
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

    def train_dataloader(self) -> DataLoader[Any]:
        generator = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(64, 4, generator=generator), torch.randn(64, 1, generator=generator))
        return DataLoader(data, batch_size=8, shuffle=True)


class NoLoader(L.LightningModule):
    """A module that leaves its batches to a datamodule."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return F.mse_loss(self.layer(batch[0]), batch[1])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def regression() -> Regression:
    """A bare LightningModule target."""
    return Regression()


def swapped() -> tuple[Regression, L.Trainer]:
    """The module and the trainer in the wrong order."""
    return Regression(), L.Trainer(accelerator="cpu", devices=1, logger=False)
