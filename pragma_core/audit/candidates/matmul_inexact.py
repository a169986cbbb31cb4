"""A matrix product off by one part in a million: inside the tolerance on random inputs, not exact on
small integers (catalogue 13)."""

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
            #pragma omp simd
            for (int64_t j = 0; j < n; ++j) crow[j] += av * b[p * n + j] * 1.00000095f;
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
