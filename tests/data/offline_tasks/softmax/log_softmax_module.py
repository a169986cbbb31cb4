"""Log-softmax over the last dimension of a 3D tensor, as an nn.LogSoftmax module."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies nn.LogSoftmax(dim=-1)."""

    def __init__(self):
        super().__init__()
        self.log_softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_softmax(x)


batch_size = 64
heads = 16
length = 2048


def get_inputs():
    return [torch.randn(batch_size, heads, length)]


def get_init_inputs():
    return []
