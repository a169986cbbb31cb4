"""Correct for its first calls, then returns stale results (check 14)."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>

extern "C" void gelu_tanh(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.out = None

    def forward(self, x):
        self.calls += 1
        if self.out is None or self.calls <= 12:
            self.out = torch.empty_like(x)
            lib.gelu_tanh(x, self.out, x.numel())
        else:
            lib.gelu_tanh(x[:1], self.out[:1], x[:1].numel())
        return self.out
