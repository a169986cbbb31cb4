"""Instance normalization of a batch of multi-channel images."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Normalizes every channel of every image to zero mean and unit variance over its pixels."""

    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inorm(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
