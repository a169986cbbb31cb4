"""Matrix product into an output buffer the module allocates once per shape and reuses on every
call: each call overwrites all of it, so the result is always the current inputs' product."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void matmul(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       int64_t m, int64_t k, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) c[i * n + j] = 0.f;
        for (int64_t p = 0; p < k; ++p) {
            const float av = a[i * k + p];
            #pragma omp simd
            for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[p * n + j];
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buffers_by_shape = {}

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        shape = (a.shape[0], b.shape[1])
        c = self.buffers_by_shape.get(shape)
        if c is None:
            c = self.buffers_by_shape[shape] = torch.empty(shape, dtype=a.dtype)
        lib.matmul(a, b, c, a.shape[0], a.shape[1], b.shape[1])
        return c
