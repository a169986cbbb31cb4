"""Matrix product with the first operand stored transposed: C = A^T @ B."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """A is stored (K, M); B is (K, N); the result is (M, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


M = 1024
K = 768
N = 1024


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []
