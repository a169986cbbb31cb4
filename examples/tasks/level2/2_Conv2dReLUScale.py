"""3x3 convolution, then ReLU, then multiplication by a constant scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(conv3x3(x)) * scale."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) * self.scale


batch_size = 8
in_channels = 16
out_channels = 32
height = 128
width = 128
kernel_size = 3
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale]
