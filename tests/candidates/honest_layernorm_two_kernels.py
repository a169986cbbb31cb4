"""Layer norm as two kernels with its own scratch buffers, the affine step in place on the output."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void row_stats(const float* x, float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * cols;
        double s = 0.0, s2 = 0.0;
        for (int64_t c = 0; c < cols; ++c) { s += row[c]; s2 += (double)row[c] * row[c]; }
        double mu = s / cols;
        mean[r] = (float)mu;
        rstd[r] = (float)(1.0 / std::sqrt(s2 / cols - mu * mu + eps));
    }
}
extern "C" void normalize(const float* x, const float* mean, const float* rstd, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = (x[r * cols + c] - mean[r]) * rstd[r];
}
extern "C" void affine_inplace(float* out, const float* w, const float* b, int64_t rows, int64_t cols) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = out[r * cols + c] * w[c] + b[c];
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=True)

    def forward(self, x):
        rows, cols = x.shape[0], x.shape[1]
        mean = torch.empty(rows)
        rstd = torch.empty(rows)
        out = torch.empty_like(x)
        lib.row_stats(x, mean, rstd, rows, cols, self.norm.eps)
        lib.normalize(x, mean, rstd, out, rows, cols)
        lib.affine_inplace(out, self.norm.weight, self.norm.bias, rows, cols)
        return out
