"""Sum of each row: the audit's reduction."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums each row of a 2D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


batch_size = 128
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
