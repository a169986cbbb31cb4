"""Writes its kernel source to a file in its own working folder and compiles what it reads back:
files in the candidate's own folder are its own business."""

from pathlib import Path

import torch
import torch.nn as nn

from pragma_core.native import load_library

SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void gelu_tanh(const float* x, float* out, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
"""

notes = Path("gelu_kernel.cpp")
notes.write_text(SOURCE)
lib = load_library(notes.read_text())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        Path("constructed.txt").write_text("ModelNew constructed\n")

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
