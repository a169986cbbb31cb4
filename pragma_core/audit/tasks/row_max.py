"""Each row's maximum and where it is: a tuple of a float and an int64 output."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """(values, indices) of the maximum of each row."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.max(x, dim=1)
        return values, indices


batch_size = 128
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
