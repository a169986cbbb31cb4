"""Elementwise LeakyReLU activation with a configurable negative slope."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Keeps positive values and scales negative ones by negative_slope."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 1024
dim = 8192
negative_slope = 0.01


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope]
