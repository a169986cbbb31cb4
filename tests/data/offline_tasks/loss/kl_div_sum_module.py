"""Summed KL divergence through nn.KLDivLoss, with log-probabilities given as the input."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.KLDivLoss(reduction='sum') of log-probabilities against probabilities."""

    def __init__(self):
        super().__init__()
        self.loss = nn.KLDivLoss(reduction="sum")

    def forward(self, log_predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(log_predictions, targets)


batch_size = 256
dim = 2048


def get_inputs():
    log_predictions = torch.randn(batch_size, dim).log_softmax(dim=-1)
    targets = torch.randn(batch_size, dim).softmax(dim=-1)
    return [log_predictions, targets]


def get_init_inputs():
    return []
