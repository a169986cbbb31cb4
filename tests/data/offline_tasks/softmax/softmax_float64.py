"""Softmax computed in float64 (a dtype change the softmax recipe does not write)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over dim 1 with dtype=torch.float64."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1, dtype=torch.float64)


batch_size = 16
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
