"""Matrix-vector product: a tall matrix times one column."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """(M, K) @ (K, 1) -> (M, 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 8192
K = 2048


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
