"""GELU (tanh) computed in double precision with pow() on one thread: correct but slow."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_slow(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        double v = x[i];
        double inner = std::sqrt(2.0 / M_PI) * (v + 0.044715 * std::pow(v, 3.0));
        out[i] = (float)(0.5 * v * (1.0 + std::tanh(inner)));
    }
}
"""
lib = load_library(SOURCE, flags=["-O0"])


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.gelu_slow(x, out, x.numel())
        return out
