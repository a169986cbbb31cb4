"""Hand-written affine layer (weight and bias parameters), a per-feature scale, then a sigmoid."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = sigmoid((x @ W^T + b) * scale * 0.5)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features**0.5)
        self.bias = nn.Parameter(torch.randn(out_features))
        self.scale = nn.Parameter(torch.rand(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.weight.T + self.bias
        return torch.sigmoid(y * self.scale * 0.5)


batch_size = 384
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
