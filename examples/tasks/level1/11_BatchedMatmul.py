"""Batch of independent matrix products computed with torch.bmm."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies (B, M, K) by (B, K, N) one batch entry at a time."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


batch_size = 64
M = 256
K = 256
N = 256


def get_inputs():
    return [torch.randn(batch_size, M, K), torch.randn(batch_size, K, N)]


def get_init_inputs():
    return []
