"""Smallest value along the middle dimension, read through .values."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """torch.min over dim 1 returns (values, indices); only the values are kept."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.min(x, 1).values


batch_size = 32
channels = 128
length = 2048


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
