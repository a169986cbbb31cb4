"""Hinge loss for +-1 labels, one label per prediction."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of max(0, 1 - prediction * label)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 1024
dim = 8192


def get_inputs():
    labels = torch.randint(0, 2, (batch_size, dim)).float() * 2 - 1
    return [torch.randn(batch_size, dim), labels]


def get_init_inputs():
    return []
