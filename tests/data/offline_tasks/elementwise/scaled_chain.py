"""A small chain: scale, shift, clamp, then SiLU. (KernelBench format, written for pragma's tests.)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """A small chain: scale, shift, clamp, then SiLU."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.clamp(x * 2.0 - 0.5, min=-3.0, max=3.0)
        return y * torch.sigmoid(y)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
