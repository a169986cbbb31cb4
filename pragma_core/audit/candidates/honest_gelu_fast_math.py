"""GELU (tanh) built with -ffast-math, tanh written through one exponential: the compiler may
reorder and approximate, the error stays far inside the tolerance."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(
    r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_fast(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        // tanh(u) = 1 - 2 / (1 + exp(2u)); clamped so exp never overflows
        u = u > 15.f ? 15.f : (u < -15.f ? -15.f : u);
        float t = 1.f - 2.f / (1.f + std::exp(2.f * u));
        out[i] = 0.5f * v * (1.f + t);
    }
}
""",
    flags=["-ffast-math"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_fast(x, out, x.numel())
        return out
