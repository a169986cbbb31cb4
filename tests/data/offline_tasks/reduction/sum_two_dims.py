"""Sum over two dimensions at once (not a one-dimension reduction)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Reduces dims 1 and 2 together."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=(1, 2))


batch_size = 16
dim1 = 64
dim2 = 64


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
