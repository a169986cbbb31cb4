"""Applies ELU with a given alpha. (KernelBench format, written for pragma's tests.)"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Applies ELU with a given alpha."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [1.0]
