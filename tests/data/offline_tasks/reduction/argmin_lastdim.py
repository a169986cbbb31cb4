"""Index of the smallest element of each row, keeping the reduced dimension."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns int64 argmin indices over the last dim with keepdim."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=-1, keepdim=True)


batch_size = 256
dim1 = 64
dim2 = 1024


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
