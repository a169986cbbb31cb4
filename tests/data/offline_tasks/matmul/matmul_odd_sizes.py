"""Rectangular matrix product whose sizes are no multiple of any tile."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """(M, K) @ (K, N) with odd, unequal M, K and N."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.mm(A, B)


M = 1021
K = 771
N = 517


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
