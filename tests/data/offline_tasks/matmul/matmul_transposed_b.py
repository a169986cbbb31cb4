"""Matrix product with the second operand stored transposed: C = A @ B^T."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """A is (M, K); B is stored (N, K); the result is (M, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B.transpose(0, 1)


M = 1024
K = 1024
N = 768


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []
