"""Summed squared error through the nn.MSELoss module."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.MSELoss(reduction='sum') on 3-d inputs."""

    def __init__(self):
        super().__init__()
        self.loss = nn.MSELoss(reduction="sum")

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(predictions, targets)


batch_size = 64
channels = 16
length = 4096


def get_inputs():
    return [torch.randn(batch_size, channels, length), torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
