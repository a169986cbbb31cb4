import torch
import torch.nn as nn
from pragma_backend_c import load_c

kernels = load_c(r"""
#include <stdint.h>
void relu(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        kernels.relu(x, out, x.numel())
        return out
