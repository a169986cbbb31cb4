"""Smooth L1 loss with the default beta of 1."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Quadratic below |difference| = 1, linear above, averaged."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(predictions, targets)


batch_size = 1024
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim) * 2, torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
