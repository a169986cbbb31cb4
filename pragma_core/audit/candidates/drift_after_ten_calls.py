"""Correct for its first ten calls, then computes only the first quarter of the elements, leaving
the rest as the input (catalogue 14)."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_tanh(const float* x, float* out, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = torch.empty_like(x)
        if self.calls <= 10:
            lib.gelu_tanh(x, out, x.numel())
            return out
        out.copy_(x)
        n = x.numel() // 4
        lib.gelu_tanh(x.view(-1)[:n], out.view(-1)[:n], n)
        return out
