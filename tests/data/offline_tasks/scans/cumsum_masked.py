"""Prefix sums that count only the elements a boolean mask keeps."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Zeroes the masked-out elements, then takes the running total along the dim."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)


batch_size = 256
length = 8192
dim = 1


def get_inputs():
    x = torch.randn(batch_size, length)
    mask = torch.randint(0, 2, (batch_size, length)).bool()
    return [x, mask]


def get_init_inputs():
    return [dim]
