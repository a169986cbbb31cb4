"""A per-row mean of squared differences: a reduction over one dim, not a loss to a scalar."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise mean squared error, one value per row."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean((predictions - targets) ** 2, dim=1)


batch_size = 64
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
