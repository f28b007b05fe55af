// Elementwise kernels, with C linkage. The first of the CUDA backend's own
// kernels; the optimizer updates and the gradient accumulation build on it.
#include <cuda_runtime.h>

#include "cuda-kernels.h"

__global__ static void axpy_kernel(float alpha, const float *x, float *y, size_t n)
{
    // Grid-stride loop: any n with a bounded grid.
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += alpha * x[i];
}

extern "C" int brg_cuda_axpy(float alpha, const float *x, float *y, size_t n)
{
    if (n == 0) return 0;
    const int threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    axpy_kernel<<<(unsigned)blocks, threads>>>(alpha, x, y, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
    return (int)cudaDeviceSynchronize();
}
