"""Mean cross-entropy where some rows carry the ignored label."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.cross_entropy with ignore_index=0: rows labelled 0 count neither in the sum nor the mean."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, ignore_index=0)


batch_size = 256
num_classes = 10


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []
