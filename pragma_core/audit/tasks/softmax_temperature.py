"""Softmax over rows of 4096 at a high temperature: every output is close to 1/4096, so the outputs
are smaller than the absolute tolerance and a constant would pass an elementwise check alone."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax(x / temperature) over each row."""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x / self.temperature, dim=1)


batch_size = 32
dim = 4096
temperature = 20.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [temperature]
