"""GELU (tanh) in KernelBench style, through torch.utils.cpp_extension.load_inline."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor gelu_tanh(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = in[i];
        o[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
    return out;
}
"""

gelu = load_inline(
    name="pragma_test_gelu_inline",
    cpp_sources=cpp_source,
    functions=["gelu_tanh"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return gelu.gelu_tanh(x.contiguous())
