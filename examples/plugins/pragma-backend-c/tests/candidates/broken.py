import torch
import torch.nn as nn
from pragma_backend_c import load_c

kernels = load_c(r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : undeclared_zero;
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        kernels.relu(x, out, x.numel())
        return out
