"""Computes nothing on a flawed task (catalogue 32): the same output for every input, the task's
scale parameter (built with the harness's seed) copied into each row. It is correct, since the
task's result does not depend on its input; the verdict must say so, as a property of the task."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void rows_of(const float* scale, float* out, int64_t rows, int64_t dim) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dim; ++c) out[r * dim + c] = scale[c];
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        out = torch.empty_like(x)
        lib.rows_of(self.scale, out, x.shape[0], x.shape[1])
        return out
