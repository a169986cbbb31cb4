"""Running product of standard normal values: the products shrink to zero within a few hundred steps."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Each element becomes the product of its row up to that point."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumprod(x, dim=self.dim)


batch_size = 128
length = 4000
dim = 1


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [dim]
