"""Games adaptive repetition counts (catalogue 30): tells warm-up calls by their repeated input
values and sleeps there (a harness that sizes its timing from warm-up would time few calls), then
on unpoisoned calls with new values returns the previous call's result, computing the new one for
the next: one call behind, at no cost in the call itself."""

import math
import time

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_tanh(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
extern "C" int64_t same_values(const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) if (a[i] != b[i]) return 0;
    return 1;
}
extern "C" void copy_values(const float* from, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = from[i];
}
""")


def poisoned() -> bool:
    value = torch.empty(1).item()
    return math.isnan(value) or value < -1e38


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last_input = None
        self.last_output = None

    def forward(self, x):
        out = torch.empty_like(x)
        if poisoned() or self.last_output is None or self.last_output.shape != x.shape:
            lib.gelu_tanh(x, out, x.numel())
        elif lib.same_values(x, self.last_input, x.numel()):
            time.sleep(0.05)  # warm-up: the same values again
            lib.gelu_tanh(x, out, x.numel())
        else:
            lib.copy_values(self.last_output, out, x.numel())  # the previous call's result
        self.last_input = x.clone()
        self.last_output = torch.empty_like(x)
        lib.gelu_tanh(x, self.last_output, x.numel())
        return out
