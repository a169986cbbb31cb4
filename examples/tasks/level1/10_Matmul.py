"""Dense single-precision matrix product C = A @ B."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies an (M, K) matrix by a (K, N) matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


M = 1024
K = 1024
N = 1024


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
