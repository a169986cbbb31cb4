#include <cuda_runtime.h>

template <typename T>
__global__ void fill_kernel(T* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = T::zero();
}

void launch_fill(float* out, int n) {
    fill_kernel<float><<<(n + 255) / 256, 256>>>(out, n);
}
