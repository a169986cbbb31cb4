"""Mean cross-entropy loss of class logits against integer class labels."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Log-softmax over classes followed by the mean negative log-likelihood."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits, targets)


batch_size = 1024
num_classes = 8192


def get_inputs():
    logits = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []
