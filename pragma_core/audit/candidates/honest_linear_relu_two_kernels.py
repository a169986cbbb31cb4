"""Linear layer as two kernels (a product against the transposed weights it keeps, then bias and
ReLU in place on its own output), with nn.Parameters copied from a seeded nn.Linear."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
#include <cstring>
extern "C" void matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       int64_t m, int64_t k, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < m; ++i) {
        float* crow = c + i * n;
        std::memset(crow, 0, sizeof(float) * n);
        for (int64_t p = 0; p < k; ++p) {
            const float av = a[i * k + p];
            const float* brow = b + p * n;
            #pragma omp simd
            for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
        }
    }
}
extern "C" void bias_relu(float* y, const float* bias, int64_t m, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            const float v = y[i * n + j] + bias[j];
            y[i * n + j] = v > 0.f ? v : 0.f;
        }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        seeded = nn.Linear(in_features, out_features, bias=True)
        self.weight_t = nn.Parameter(seeded.weight.detach().t().contiguous())
        self.bias = nn.Parameter(seeded.bias.detach().clone())

    def forward(self, x):
        x = x.contiguous()
        w, b = self.weight_t.detach(), self.bias.detach()
        y = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype)
        lib.matmul(x, w, y, x.shape[0], x.shape[1], w.shape[1])
        lib.bias_relu(y, b, y.shape[0], y.shape[1])
        return y
