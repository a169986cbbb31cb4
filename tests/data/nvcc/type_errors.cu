#include <cuda_runtime.h>

__global__ void scale_kernel(const double* __restrict__ x, float* __restrict__ out, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * factor;
}

void launch_scale(const float* x, float* out, float factor, int n) {
    int* index = out;
    scale_kernel<<<(n + 255) / 256, 256>>>(x, out, factor, n);
}
