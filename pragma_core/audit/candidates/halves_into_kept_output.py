"""Configurations that add up (catalogue 31): one output buffer kept across calls, and each call
runs one of two "configurations", each computing half the elements (even calls the first half,
odd calls the second), so the buffer only looks whole because an earlier call filled the rest."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_tanh(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None
        self.calls = 0

    def forward(self, x):
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        half = x.numel() // 2
        flat_x, flat_out = x.reshape(-1), self.out.reshape(-1)
        if self.calls % 2 == 0:
            lib.gelu_tanh(flat_x, flat_out, half)
        else:
            lib.gelu_tanh(flat_x[half:], flat_out[half:], x.numel() - half)
        self.calls += 1
        return self.out
