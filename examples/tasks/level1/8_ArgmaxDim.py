"""Index of the largest element along the middle dimension of a 3D tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns int64 argmax indices over dim 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=1)


batch_size = 64
dim1 = 512
dim2 = 512


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
