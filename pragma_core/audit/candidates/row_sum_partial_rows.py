"""Sums only the first seven eighths of the rows and zeroes the rest (catalogue 13)."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void row_sum_partial(const float* x, float* out, int64_t rows, int64_t cols) {
    const int64_t done = rows - rows / 8;
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.f;
        if (r < done) for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
        out[r] = s;
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        lib.row_sum_partial(x, out, x.shape[0], x.shape[1])
        return out
