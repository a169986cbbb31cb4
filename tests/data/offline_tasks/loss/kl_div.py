"""KL divergence between two softmax distributions, averaged over the batch."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.kl_div of log-predictions against target probabilities, reduction='batchmean'."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 1024
dim = 8192


def get_inputs():
    predictions = torch.randn(batch_size, dim).softmax(dim=-1)
    targets = torch.randn(batch_size, dim).softmax(dim=-1)
    return [predictions, targets]


def get_init_inputs():
    return []
