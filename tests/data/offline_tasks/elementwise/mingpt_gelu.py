"""The GELU of minGPT and BERT, written out with tanh. (KernelBench format, written for pragma's tests.)"""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """The GELU of minGPT and BERT, written out with tanh."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
