"""Row sums accumulated in double precision, rounded once at the end."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void row_sum(const float* x, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
        out[r] = (float)s;
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        lib.row_sum(x, out, x.shape[0], x.shape[1])
        return out
