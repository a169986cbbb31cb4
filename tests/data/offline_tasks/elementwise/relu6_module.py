"""ReLU6 as a module. (KernelBench format, written for pragma's tests.)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU6 as a module."""

    def __init__(self):
        super().__init__()
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
