"""Suffix sums: the running total from the end of each row back to each element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Reverses the rows, takes the prefix sum, and reverses back."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


batch_size = 256
length = 8192
dim = 1


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [dim]
