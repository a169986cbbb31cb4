"""Softmax over the middle dimension of a 3D tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Normalizes each (batch, :, position) fiber with F.softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(x, dim=1)


batch_size = 32
channels = 256
length = 1024


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
