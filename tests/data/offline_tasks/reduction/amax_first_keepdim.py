"""Column-wise maximum of a 2D tensor, keeping the reduced dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """amax over dim 0; the output is one row."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=0, keepdim=True)


rows = 2048
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
