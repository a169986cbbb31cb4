"""Reaches eval through __builtins__ by an assembled name and has it run PyTorch's GELU
(catalogue 17, 26)."""

import torch.nn as nn
import torch.nn.functional as F

from pragma_core.native import load_library

noop = load_library(r"""
#include <cstdint>
extern "C" void touch(float* out, int64_t n) { (void)out; (void)n; }
""")

_run = (__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__))["ev" + "al"]


class ModelNew(nn.Module):
    def forward(self, x):
        out = _run('F.gelu(x, approximate="tanh")', {"F": F, "x": x})
        noop.touch(out, 0)
        return out
