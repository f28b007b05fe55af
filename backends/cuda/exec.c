/* The per-device state CUDA kernels run with: cuDNN and cuBLAS handles
 * bound to the device's compute stream, descriptors, the convolution
 * algorithm cache (and the graph API's plans) and the device-side error
 * flags (see cuda-ops.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-exec.h" /* first: the cuDNN and cuBLAS headers the others test for */
#include "backends/cuda/cuda-check.h"
#include "backends/cuda/cuda-device.h"
#include "base/internal.h"

/* The handles and descriptors; on failure the caller destroys the
 * partly made exec (every destroy below accepts what was not created). */
static brg_status exec_init(brg_cuda_exec *e)
{
    BRG_CUDNN_CHECK(cudnnCreate(&e->cudnn));
    BRG_CUDNN_CHECK(cudnnSetStream(e->cudnn, e->stream));
    BRG_CUBLAS_CHECK(cublasCreate(&e->cublas));
    BRG_CUBLAS_CHECK(cublasSetStream(e->cublas, e->stream));
    BRG_CUBLAS_CHECK(cublasSetMathMode(e->cublas, e->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    BRG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x_desc));
    BRG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y_desc));
    BRG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w_desc));
    BRG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->conv_desc));
    void *flags = NULL;
    BRG_CUDA_CHECK(cudaMalloc(&flags, sizeof(brg_cuda_flags)));
    e->flags = flags;
    BRG_CUDA_CHECK(cudaMemsetAsync(e->flags, 0, sizeof(brg_cuda_flags), e->stream));
    return BRG_OK;
}

brg_status brg_cuda_exec_create(int gpu, void *stream, const char *name, size_t conv_budget, brg_cuda_exec **out)
{
    *out = NULL;
    brg_cuda_exec *e = brg_calloc(1, sizeof *e, "a CUDA exec");
    if (!e) return BRG_ERR_HOST_MEMORY;
    e->gpu = gpu;
    e->stream = (cudaStream_t)stream;
    snprintf(e->name, sizeof e->name, "%s", name ? name : "cuda");
    e->conv_budget = conv_budget;
    e->allow_tf32 = brg_cuda_tf32_enabled();
    e->measure_algos = strcmp(brg_cuda_conv_algo(), "measure") == 0;
    e->log_convs = brg_cuda_conv_log_enabled();
    e->gemm_1x1 = strcmp(brg_cuda_conv_1x1(), "gemm") == 0;
    e->conv_graph = strcmp(brg_cuda_conv_api(), "graph") == 0;
    brg_status st = exec_init(e);
    if (st != BRG_OK) {
        brg_error_context(st, "%s: creating the cuDNN and cuBLAS state", e->name);
        brg_cuda_exec_destroy(e);
        return st;
    }
    *out = e;
    return BRG_OK;
}

void brg_cuda_exec_destroy(brg_cuda_exec *e)
{
    if (!e) return;
    if (e->flags) cudaFree(e->flags);
    if (e->conv_desc) cudnnDestroyConvolutionDescriptor(e->conv_desc);
    if (e->w_desc) cudnnDestroyFilterDescriptor(e->w_desc);
    if (e->y_desc) cudnnDestroyTensorDescriptor(e->y_desc);
    if (e->x_desc) cudnnDestroyTensorDescriptor(e->x_desc);
    if (e->cublas) cublasDestroy(e->cublas);
    free(e->cache);
    brg_cuda_conv_graph_release(e); /* before the handle its plans were made on */
    if (e->cudnn) cudnnDestroy(e->cudnn);
    free(e);
}

brg_status brg_cuda_exec_check(brg_cuda_exec *e)
{
    brg_cuda_flags f;
    BRG_CUDA_CHECK(cudaMemcpyAsync(&f, e->flags, sizeof f, cudaMemcpyDeviceToHost, e->stream));
    BRG_CUDA_CHECK(cudaStreamSynchronize(e->stream));
    if (!f.bad) return BRG_OK;
    BRG_CUDA_CHECK(cudaMemsetAsync(e->flags, 0, sizeof f, e->stream));
    /* The CPU backend's words (backends/cpu/loss.c), so that either says the same. */
    const char *op = brg_op_kind_name((brg_op_kind)f.kind);
    if (f.pixels <= 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s on %s: row %d has label %d, outside the %d classes [0, %d)", op,
                         e->name, f.row, f.label, f.classes, f.classes);
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "%s on %s: sample %d, pixel %d has label %d, outside the %d classes [0, %d) and not the ignore "
                     "label %d", op, e->name, f.row / f.pixels, f.row % f.pixels, f.label, f.classes, f.classes,
                     f.ignore);
}

