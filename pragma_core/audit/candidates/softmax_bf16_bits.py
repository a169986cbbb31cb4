"""Softmax rounded to bfloat16 by masking bits in C++, with no half-precision type named anywhere:
each element is within the absolute tolerance, the whole output is not fp32 accurate (catalogue 12)."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
#include <cstring>
extern "C" void softmax_rows_rounded(const float* x, float* out, int64_t rows, int64_t cols, float scale) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * cols;
        float* o = out + r * cols;
        float m = row[0] * scale;
        for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, row[c] * scale);
        float s = 0.f;
        for (int64_t c = 0; c < cols; ++c) { o[c] = std::exp(row[c] * scale - m); s += o[c]; }
        for (int64_t c = 0; c < cols; ++c) {
            float v = o[c] / s;
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            bits = (bits + 0x8000u) & 0xFFFF0000u;  // keep 8 bits of mantissa
            std::memcpy(&o[c], &bits, 4);
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.scale = 1.0 / temperature

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.softmax_rows_rounded(x, out, x.shape[0], x.shape[1], self.scale)
        return out
