"""A kernel with a type error the compiler rejects."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void gelu(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        out[i] = x[i] * undefined_scale;
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.gelu(x, out, x.numel())
        return out
