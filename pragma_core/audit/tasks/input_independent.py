"""A flawed task (catalogue 32): a softmax over a dimension of size one is 1 everywhere, so the
output is the scale parameter broadcast over the batch, whatever the input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Weights a learned scale by a softmax over a dimension of size one."""

    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(x.sum(dim=1, keepdim=True), dim=1)
        return weights * self.scale


batch_size = 64
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
