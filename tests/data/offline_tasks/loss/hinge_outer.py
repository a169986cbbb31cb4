"""Hinge loss whose (batch, 1) scores broadcast against (batch,) labels: a (batch, batch) grid."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean of max(0, 1 - score_i * label_j) over every pair (i, j)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 2048


def get_inputs():
    labels = torch.randint(0, 2, (batch_size,)).float() * 2 - 1
    return [torch.randn(batch_size, 1), labels]


def get_init_inputs():
    return []
