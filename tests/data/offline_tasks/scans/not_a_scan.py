"""A running maximum: a scan, but not a sum or product."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cummax(x, dim=1).values


batch_size = 64
length = 1024


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return []
