/* brigade: checking CUDA, cuDNN and cuBLAS calls (private).
 *
 * Every call into a GPU library goes through one of these macros, which
 * turn a failure into BRG_ERR_BACKEND with the failing call, the library's
 * own text for the error, the file and the line:
 *
 *     cudaMemcpyAsync(...) failed: an illegal memory access was encountered
 *     (cudaErrorIllegalAddress) at backends/cuda/device.c:123
 *
 * cudaErrorMemoryAllocation becomes BRG_ERR_OUT_OF_MEMORY instead (memory
 * outside our arenas ran out: the caller adds which device).
 *
 * Usable from C and from .cu files (C linkage). Include after the CUDA
 * headers the calls need; the cuDNN and cuBLAS macros exist only where
 * their headers were included first.
 */
#ifndef BRIGADE_CUDA_CHECK_H
#define BRIGADE_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Map a failed call to a status and set the message (defined in
 * backends/cuda/cuda_check.c). `what` is the call's text. */
brg_status brg_cuda_fail(const char *what, cudaError_t err, const char *file, int line);
#ifdef CUDNN_MAJOR
brg_status brg_cudnn_fail(const char *what, cudnnStatus_t st, const char *file, int line);
/* The same with cuDNN's message already read (cudnnGetLastErrorString
 * clears it when read, so whoever reads it first must pass it on). */
brg_status brg_cudnn_fail_detail(const char *what, cudnnStatus_t st, const char *detail, const char *file, int line);
#endif
#ifdef CUBLAS_VER_MAJOR
brg_status brg_cublas_fail(const char *what, cublasStatus_t st, const char *file, int line);
#endif

#ifdef __cplusplus
}
#endif

/* Return the mapped status from the enclosing function when call fails. */
#define BRG_CUDA_CHECK(call)                                                                       \
    do {                                                                                           \
        cudaError_t brg_cuda_err_ = (call);                                                        \
        if (brg_cuda_err_ != cudaSuccess) return brg_cuda_fail(#call, brg_cuda_err_, __FILE__, __LINE__); \
    } while (0)

#define BRG_CUDNN_CHECK(call)                                                                      \
    do {                                                                                           \
        cudnnStatus_t brg_cudnn_st_ = (call);                                                      \
        if (brg_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                                 \
            return brg_cudnn_fail(#call, brg_cudnn_st_, __FILE__, __LINE__);                       \
    } while (0)

#define BRG_CUBLAS_CHECK(call)                                                                     \
    do {                                                                                           \
        cublasStatus_t brg_cublas_st_ = (call);                                                    \
        if (brg_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                               \
            return brg_cublas_fail(#call, brg_cublas_st_, __FILE__, __LINE__);                     \
    } while (0)

/* The same, storing the status in ret and jumping to label (cleanup paths). */
#define BRG_CUDA_CHECK_GOTO(call, ret, label)                                                      \
    do {                                                                                           \
        cudaError_t brg_cuda_err_ = (call);                                                        \
        if (brg_cuda_err_ != cudaSuccess) {                                                        \
            (ret) = brg_cuda_fail(#call, brg_cuda_err_, __FILE__, __LINE__);                       \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif /* BRIGADE_CUDA_CHECK_H */
