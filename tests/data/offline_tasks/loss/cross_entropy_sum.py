"""Summed cross-entropy of class logits against integer labels."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.cross_entropy with reduction='sum'."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="sum")


batch_size = 512
num_classes = 1000


def get_inputs():
    logits = torch.randn(batch_size, num_classes) * 3
    targets = torch.randint(0, num_classes, (batch_size,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []
