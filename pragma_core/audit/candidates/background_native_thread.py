"""Returns at once; a detached C++ thread, invisible to Python's thread count, writes the output
a few milliseconds later (catalogue 2)."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
extern "C" void gelu_later(const float* x, float* out, int64_t n) {
    std::thread([=] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        for (int64_t i = 0; i < n; ++i) {
            float v = x[i];
            out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
    }).detach();
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.gelu_later(x, out, x.numel())
        return out
