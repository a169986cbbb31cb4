"""A cache keyed on the input's address plus 64 sampled values: it hits only when the values repeat,
so its results are right, and its timing is a lie wherever timed inputs repeat (catalogue 23).
Fresh values on every timed call make it miss, and it becomes an honest kernel."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_tanh(const float* x, float* out, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
""")


def _key(x):
    flat = x.reshape(-1)
    step = max(1, flat.numel() // 64)
    return (x.data_ptr(), tuple(x.shape), tuple(flat[::step][:64].tolist()))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = _key(x)
        hit = self.cache.get(key)
        if hit is not None:
            lib.gelu_tanh(x[:1], hit[:1].clone(), x[:1].numel())  # a kernel call, for the counter
            return hit
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        self.cache[key] = out
        return out
