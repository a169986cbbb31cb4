"""Minimum over the channel dimension of a 4D tensor, with negative dim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """amin over dim -3 of (batch, channels, height, width)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amin(dim=-3)


batch_size = 16
channels = 64
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
