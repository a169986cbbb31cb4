"""Mean of a 3D tensor over a chosen dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Averages over `dim`, which is dropped from the output."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 64
dim1 = 256
dim2 = 1024
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
