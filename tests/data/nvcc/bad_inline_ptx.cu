#include <cuda_runtime.h>

__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (i < n) asm volatile("mov.f33 %0, %1;" : "=f"(v) : "f"(x[i]));
    if (i < n) out[i] = v;
}
