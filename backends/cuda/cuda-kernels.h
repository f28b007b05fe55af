/* brigade: CUDA kernels and device queries, C linkage (private).
 *
 * Compiled by nvcc from .cu files; callable from the C library. Every
 * function returns 0 on success or the cudaError_t value as an int, and never
 * exits; the caller maps it to a brg_status with the failing call. */
#ifndef BRIGADE_CUDA_KERNELS_H
#define BRIGADE_CUDA_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_cuda_device_props {
    char name[128];
    size_t total_memory;
    char pci_bus_id[32];
    int compute_major, compute_minor;
    int multiprocessors;
} brg_cuda_device_props;

/* Number of visible GPUs in *count (0 when there is no driver or no GPU; the
 * return value then says why). */
int brg_cuda_device_count(int *count);

/* Properties of GPU ordinal. */
int brg_cuda_device_props_get(int ordinal, brg_cuda_device_props *props);

/* The GPU whose context is current on the calling thread, or -1 where the
 * thread has none (it has not used CUDA yet). */
int brg_cuda_thread_gpu(void);

/* 1 when CUDA loads kernels lazily, at their first launch (the default
 * since CUDA 12.2), 0 when it loaded them up front (CUDA_MODULE_LOADING=
 * EAGER when CUDA started), -1 when the driver cannot say. */
int brg_cuda_lazy_loading(void);

/* cudaMemGetInfo of GPU ordinal (the caller's current GPU is kept). */
int brg_cuda_mem_info(int ordinal, size_t *free_bytes, size_t *total);

/* Version numbers of the CUDA driver and runtime, e.g. 13000 (0 if unknown). */
int brg_cuda_versions(int *driver, int *runtime);

/* Human-readable text of a CUDA error code. */
const char *brg_cuda_error_string(int code);

/* y[i] = alpha * x[i] + y[i] for n floats in device memory, on the default
 * stream; synchronous. */
int brg_cuda_axpy(float alpha, const float *x, float *y, size_t n);

/* Device memory helpers for tests and the info command. */
int brg_cuda_malloc(void **ptr, size_t bytes);
int brg_cuda_free(void *ptr);
int brg_cuda_copy_to_device(void *dst, const void *src, size_t bytes);
int brg_cuda_copy_to_host(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CUDA_KERNELS_H */
