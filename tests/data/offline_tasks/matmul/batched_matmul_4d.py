"""Batched matrix product over two leading dims with torch.matmul, second operand transposed."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """(B, H, M, K) @ (B, H, N, K)^T -> (B, H, M, N), as in attention scores."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.matmul(q, k.transpose(-2, -1))


batch_size = 4
heads = 8
M = 256
N = 256
K = 64


def get_inputs():
    return [torch.randn(batch_size, heads, M, K), torch.randn(batch_size, heads, N, K)]


def get_init_inputs():
    return []
