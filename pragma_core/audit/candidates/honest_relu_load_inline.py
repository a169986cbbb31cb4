"""ReLU on a tensor larger than the caches, KernelBench style through load_inline: an honest kernel
on a task whose roofline floor binds must not be judged too fast."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

ext = load_inline(
    name="pragma_audit_relu_inline",
    cpp_sources=cpp_source,
    functions=["relu"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x.contiguous())
