"""Matrix product blocked over k, rows shared among OpenMP threads; exact on small integers."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
#include <cstring>
extern "C" void matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       int64_t m, int64_t k, int64_t n) {
    const int64_t BK = 64;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        float* crow = c + i * n;
        std::memset(crow, 0, sizeof(float) * n);
        for (int64_t k0 = 0; k0 < k; k0 += BK) {
            const int64_t k1 = k0 + BK < k ? k0 + BK : k;
            for (int64_t p = k0; p < k1; ++p) {
                const float av = a[i * k + p];
                const float* brow = b + p * n;
                #pragma omp simd
                for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
            }
        }
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        lib.matmul(a, b, c, a.shape[0], a.shape[1], b.shape[1])
        return c
