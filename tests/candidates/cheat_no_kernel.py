"""Computes in NumPy and never calls a compiled kernel (check 19)."""

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        v = x.numpy().astype(np.float64)
        out = 0.5 * v * (1.0 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))
        return torch.from_numpy(out.astype(np.float32))
