"""Looks like in-place work, but only on its own fresh output: the input is copied there first and
the kernel overwrites the copy."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_tanh_inplace(float* data, int64_t n) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = data[i];
        data[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        out.copy_(x)
        lib.gelu_tanh_inplace(out, out.numel())
        return out
