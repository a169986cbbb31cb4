"""Sum of a 3D tensor over its middle dimension, keeping that dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Reduces dim 1 by summation; the output has size 1 along dim 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


batch_size = 128
dim1 = 512
dim2 = 512


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
