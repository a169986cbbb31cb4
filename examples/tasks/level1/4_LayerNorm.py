"""Layer normalization over the last dimension with learnable scale and shift."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Normalizes each row to zero mean and unit variance, then applies an affine map."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 1024
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
