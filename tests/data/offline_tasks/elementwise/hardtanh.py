"""Clamps to [-1, 1] with HardTanh. (KernelBench format, written for pragma's tests.)"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Clamps to [-1, 1] with HardTanh."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=-1.0, max_val=1.0)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
