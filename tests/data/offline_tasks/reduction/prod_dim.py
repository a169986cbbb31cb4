"""Product over a short middle dimension of a 3D tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies the `dim` entries of each fiber; short enough that products stay in range."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.prod(x, dim=self.dim)


batch_size = 64
dim1 = 16
dim2 = 8192
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
