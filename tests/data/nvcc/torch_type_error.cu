#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>
#line 1 "kernel.cu"

#include <torch/extension.h>

__global__ void scale_kernel(const double* __restrict__ x, float* __restrict__ out, float factor, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * factor;
}

torch::Tensor scale(torch::Tensor x, double factor) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    scale_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), factor, n);
    return out;
}
