"""LeakyReLU in CUDA, KernelBench style: float4 loads and stores where aligned, a scalar rest, launch checked.

For examples/tasks/level1/2_LeakyReLU.py. Builds with load_inline at import, so it needs a CUDA
build of torch and a GPU to run; tests/test_cuda_compile.py compiles its source with nvcc alone.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void leaky_relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ out,
                                       int64_t n4, float slope) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
         i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = v.x > 0.0f ? v.x : v.x * slope;
        v.y = v.y > 0.0f ? v.y : v.y * slope;
        v.z = v.z > 0.0f ? v.z : v.z * slope;
        v.w = v.w > 0.0f ? v.w : v.w * slope;
        out[i] = v;
    }
}

__global__ void leaky_relu_scalar_kernel(const float* __restrict__ x, float* __restrict__ out,
                                         int64_t start, int64_t n, float slope) {
    for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        out[i] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor leaky_relu(torch::Tensor x, double negative_slope) {
    TORCH_CHECK(x.is_cuda(), "leaky_relu: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "leaky_relu: x must be float32");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;
    const float slope = static_cast<float>(negative_slope);
    // a view can start anywhere in its storage: float4 access needs 16-byte alignment
    const bool aligned = reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0;
    const int64_t n4 = aligned ? n / 4 : 0;
    const int threads = 256;
    if (n4 > 0) {
        const int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, 4096);
        leaky_relu_vec4_kernel<<<blocks, threads>>>(
            reinterpret_cast<const float4*>(x.data_ptr<float>()),
            reinterpret_cast<float4*>(out.data_ptr<float>()), n4, slope);
    }
    const int64_t rest = n - n4 * 4;
    if (rest > 0) {
        const int blocks = (int)std::min<int64_t>((rest + threads - 1) / threads, 4096);
        leaky_relu_scalar_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n, slope);
    }
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "leaky_relu launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

cpp_source = "torch::Tensor leaky_relu(torch::Tensor x, double negative_slope);"

leaky_relu_ext = load_inline(
    name="leaky_relu_vec4",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["leaky_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu_ext.leaky_relu(x, self.negative_slope)
