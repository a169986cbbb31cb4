"""Linear + bias + ReLU in one kernel, on the parameters of an nn.Linear built in __init__: the
harness seeds both models alike, so its weights are the reference's."""

import torch
import torch.nn as nn

from pragma_core.native import load_library

lib = load_library(r"""
#include <cstdint>
extern "C" void linear_relu(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                            float* __restrict__ y, int64_t batch, int64_t in, int64_t out) {
    #pragma omp parallel for collapse(2)
    for (int64_t i = 0; i < batch; ++i)
        for (int64_t j = 0; j < out; ++j) {
            float s = b[j];
            const float* xr = x + i * in;
            const float* wr = w + j * in;
            #pragma omp simd reduction(+:s)
            for (int64_t k = 0; k < in; ++k) s += xr[k] * wr[k];
            y[i * out + j] = s > 0.f ? s : 0.f;
        }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight.detach().contiguous(), self.linear.bias.detach().contiguous()
        y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype)
        lib.linear_relu(x, w, b, y, x.shape[0], x.shape[1], w.shape[0])
        return y
