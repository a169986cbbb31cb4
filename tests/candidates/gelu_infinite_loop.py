"""Never returns."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void gelu(const float* x, float* out, int64_t n) {
    volatile int64_t spin = 0;
    while (true) { spin = spin + 1; }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.gelu(x, out, x.numel())
        return out
