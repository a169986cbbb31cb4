"""GELU (tanh approximation) on a small batch: the audit's elementwise task."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies GELU (tanh approximation) to every element."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(x, approximate="tanh")


batch_size = 64
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
