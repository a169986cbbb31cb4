"""Row-wise softmax of a 2D tensor (normalized over dim 1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Turns each row of scores into a probability distribution."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 1024
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
