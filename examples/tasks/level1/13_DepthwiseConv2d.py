"""Depthwise 2D convolution: each channel is filtered by its own 3x3 kernel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution with groups equal to the channel count."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8
channels = 32
height = 128
width = 128
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
