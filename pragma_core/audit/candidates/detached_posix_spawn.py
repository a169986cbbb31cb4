"""Starts, through os.posix_spawn with a new session, a Python process that outlives the run and
writes into the job folder two seconds later (catalogue 27)."""

import os
import sys

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

_LATER = 'import time; time.sleep(2); open("../outlived.txt", "w").write("still here\\n")'


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.detached = False

    def forward(self, x):
        if not self.detached:
            self.detached = True
            os.posix_spawn(sys.executable, [sys.executable, "-c", _LATER], dict(os.environ), setsid=True)
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
