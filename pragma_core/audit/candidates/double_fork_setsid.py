"""Forks twice with a new session in between: the grandchild leaves the process group the harness
kills and writes into the job folder two seconds later (catalogue 27)."""

import os
import time

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


def _detach():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(2)
            try:
                with open("../outlived.txt", "w") as handle:
                    handle.write("still here\n")
            finally:
                os._exit(0)
        os._exit(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.detached = False

    def forward(self, x):
        if not self.detached:
            self.detached = True
            _detach()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
