// GPU discovery for `brigade info`, with C linkage.
#include <cuda.h> /* the driver's types only: its functions are reached through the runtime */
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

/* A driver function by name, through the runtime, so that nothing links
 * libcuda (absent where there is no GPU). NULL where it cannot be had. */
static void *driver_symbol(const char *name)
{
    void *fn = NULL;
#if CUDART_VERSION >= 12000
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
    cudaError_t err = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return NULL;
    }
#else
    (void)name; /* before CUDA 12: the callers fall back on what the runtime says */
#endif
    return fn;
}

typedef CUresult (*ctx_get_current_fn)(CUcontext *);
typedef CUresult (*loading_mode_fn)(CUmoduleLoadingMode *);

extern "C" int brg_cuda_thread_gpu(void)
{
    static const ctx_get_current_fn get_current = (ctx_get_current_fn)driver_symbol("cuCtxGetCurrent");
    CUcontext ctx = NULL;
    /* A thread without a context: cudaGetDevice would answer 0, and setting
     * that back would make GPU 0's context (since CUDA 12 cudaSetDevice
     * does), hundreds of MiB of a GPU this rank may not use. Unknown (no
     * entry point): as cudaGetDevice says. */
    if (get_current && (get_current(&ctx) != CUDA_SUCCESS || !ctx)) return -1;
    int gpu = -1;
    if (cudaGetDevice(&gpu) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return gpu;
}

extern "C" int brg_cuda_lazy_loading(void)
{
    static const loading_mode_fn get_mode = (loading_mode_fn)driver_symbol("cuModuleGetLoadingMode");
    CUmoduleLoadingMode mode;
    if (!get_mode || get_mode(&mode) != CUDA_SUCCESS) return -1;
    return mode == CU_MODULE_LAZY_LOADING;
}

extern "C" int brg_cuda_mem_info(int ordinal, size_t *free_bytes, size_t *total)
{
    *free_bytes = *total = 0;
    const int current = brg_cuda_thread_gpu();
    cudaError_t err = cudaSetDevice(ordinal);
    if (err == cudaSuccess) err = cudaMemGetInfo(free_bytes, total);
    /* The caller's GPU stays current; no failure is left as the thread's
     * last error for a later launch's check to take for its own. */
    if (current >= 0 && cudaSetDevice(current) != cudaSuccess) cudaGetLastError();
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
