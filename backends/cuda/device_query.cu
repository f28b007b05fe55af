// GPU discovery for `brigade info`, with C linkage.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "cuda-kernels.h"

extern "C" int brg_cuda_device_count(int *count)
{
    *count = 0;
    cudaError_t err = cudaGetDeviceCount(count);
    if (err != cudaSuccess) {
        *count = 0;
        cudaGetLastError(); /* clear the sticky error so later calls start clean */
        return (int)err;
    }
    return 0;
}

extern "C" int brg_cuda_device_props_get(int ordinal, brg_cuda_device_props *props)
{
    memset(props, 0, sizeof *props);
    cudaDeviceProp p;
    cudaError_t err = cudaGetDeviceProperties(&p, ordinal);
    if (err != cudaSuccess) return (int)err;
    snprintf(props->name, sizeof props->name, "%s", p.name);
    props->total_memory = p.totalGlobalMem;
    props->compute_major = p.major;
    props->compute_minor = p.minor;
    props->multiprocessors = p.multiProcessorCount;
    err = cudaDeviceGetPCIBusId(props->pci_bus_id, (int)sizeof props->pci_bus_id, ordinal);
    if (err != cudaSuccess) props->pci_bus_id[0] = '\0';
    return 0;
}

extern "C" int brg_cuda_mem_info(int ordinal, size_t *free_bytes, size_t *total)
{
    *free_bytes = *total = 0;
    int current = 0;
    cudaError_t err = cudaGetDevice(&current);
    if (err == cudaSuccess) err = cudaSetDevice(ordinal);
    if (err == cudaSuccess) {
        err = cudaMemGetInfo(free_bytes, total);
        cudaSetDevice(current); /* the caller's GPU stays current */
    }
    if (err != cudaSuccess) cudaGetLastError();
    return (int)err;
}

extern "C" int brg_cuda_versions(int *driver, int *runtime)
{
    *driver = 0;
    *runtime = 0;
    cudaError_t e1 = cudaDriverGetVersion(driver);
    cudaError_t e2 = cudaRuntimeGetVersion(runtime);
    return e1 != cudaSuccess ? (int)e1 : (int)e2;
}

extern "C" const char *brg_cuda_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }

extern "C" int brg_cuda_malloc(void **ptr, size_t bytes) { return (int)cudaMalloc(ptr, bytes); }
extern "C" int brg_cuda_free(void *ptr) { return (int)cudaFree(ptr); }

extern "C" int brg_cuda_copy_to_device(void *dst, const void *src, size_t bytes)
{
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}

extern "C" int brg_cuda_copy_to_host(void *dst, const void *src, size_t bytes)
{
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
