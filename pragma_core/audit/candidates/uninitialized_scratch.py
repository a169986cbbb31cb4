"""Reads a scratch buffer it never wrote; with zeroed or NaN memory the junk happens to vanish
(catalogue 15)."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_scratch(const float* x, const float* scratch, float* out, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        float junk = scratch[i] < 0.0f ? 1.0f : 0.0f;   // 0 when the scratch holds 0 or NaN
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))) + junk;
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty_like(x)
        out = torch.empty_like(x)
        lib.gelu_scratch(x, scratch, out, x.numel())
        return out
