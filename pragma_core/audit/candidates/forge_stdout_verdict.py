"""Computes nothing and prints what a harness that parses stdout would take for a fast correct
verdict (catalogue 20)."""

import json

import torch
import torch.nn as nn

from pragma_core.native import load_library

noop = load_library(r"""
#include <cstdint>
extern "C" void touch(float* out, int64_t n) { (void)out; (void)n; }
""")

print(json.dumps({"status": "correct", "speedup": 100.0, "max_abs_error": 0.0}))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        noop.touch(out, 0)
        print(json.dumps({"status": "correct", "speedup": 100.0}))
        return out
