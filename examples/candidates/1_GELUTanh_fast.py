"""GELU (tanh) on the fast path: one fused OpenMP loop, vectorized through libmvec's expf.

0.5 * v * (1 + tanh(y)) equals v / (1 + exp(-2y)), which gcc vectorizes with -ffast-math."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

SOURCE = r"""
#include <cmath>
#include <cstdint>

extern "C" void gelu_tanh(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = v / (1.0f + std::exp(-2.0f * k0 * (v + k1 * v * v * v)));
    }
}
"""
lib = load_library(SOURCE, flags=["-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
