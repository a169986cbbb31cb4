"""Row sums in two kernels through a scratch buffer of partial sums that the module keeps and
reuses on every call (the first kernel overwrites all of it), the output fresh each time."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void partial_sums(const float* x, double* partial, int64_t rows, int64_t cols, int64_t chunks) {
    const int64_t width = (cols + chunks - 1) / chunks;
    #pragma omp parallel for collapse(2)
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < chunks; ++k) {
            double s = 0.0;
            const int64_t end = (k + 1) * width < cols ? (k + 1) * width : cols;
            for (int64_t c = k * width; c < end; ++c) s += x[r * cols + c];
            partial[r * chunks + k] = s;
        }
}
extern "C" void combine(const double* partial, float* out, int64_t rows, int64_t chunks) {
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t k = 0; k < chunks; ++k) s += partial[r * chunks + k];
        out[r] = (float)s;
    }
}
""")

CHUNKS = 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = torch.empty(0, dtype=torch.float64)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        if self.scratch.numel() != rows * CHUNKS:
            self.scratch = torch.empty(rows * CHUNKS, dtype=torch.float64)
        out = torch.empty(rows, dtype=x.dtype)
        lib.partial_sums(x, self.scratch, rows, cols, CHUNKS)
        lib.combine(self.scratch, out, rows, CHUNKS)
        return out
