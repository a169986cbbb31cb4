"""LeakyReLU in CUDA with a type error nvcc rejects: the kernel takes doubles, the launch passes floats.

For examples/tasks/level1/2_LeakyReLU.py; the source includes torch's headers, as most
KernelBench candidates do.
"""

import torch
import torch.nn as nn
import torch.utils.cpp_extension

leaky_relu_source = """
#include <torch/extension.h>

__global__ void leaky_relu_kernel(const double* x, float* out, float slope, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.0 ? x[i] : x[i] * slope;
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    leaky_relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), slope, n);
    return out;
}
"""

leaky_relu_cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope);"

leaky_relu = torch.utils.cpp_extension.load_inline(
    name="leaky_relu",
    cpp_sources=leaky_relu_cpp_source,
    cuda_sources=leaky_relu_source,
    functions=["leaky_relu_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope
        self.leaky_relu = leaky_relu

    def forward(self, x):
        return self.leaky_relu.leaky_relu_cuda(x, self.negative_slope)
