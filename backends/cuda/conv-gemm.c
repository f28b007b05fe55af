/* The CUDA backend's 1x1 convolution gradients on cuBLAS, with
 * BRG_CUDA_CONV_1X1=gemm: which ones and why in conv-gemm.h; the packing
 * kernel in ops_kernels.cu. conv.c calls this first and runs cuDNN when it
 * did not apply. */
#include "config.h"

#include <stdio.h>

#include "backends/cuda/cuda-exec.h" /* first: the cuDNN and cuBLAS headers the others test for */
#include "backends/cuda/cuda-check.h"
#include "base/internal.h"

static cublasOperation_t op_of(int trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

brg_status brg_cuda_conv_gemm(brg_cuda_exec *e, const brg_op *op, const conv_key *key, size_t limit, int *ran)
{
    *ran = 0;
    if (!e->gemm_1x1 || op->kind == BRG_OP_CONV2D_FORWARD) return BRG_OK;
    const int form = brg_conv_gemm_applies(op->kind == BRG_OP_CONV2D_BACKWARD_FILTER, key->n, key->c, key->h, key->w,
                                           key->k, key->r, key->s, key->p, key->q, key->sh, key->sw, key->ph, key->pw);
    if (form == BRG_CONV_GEMM_NONE) return BRG_OK;
    const size_t need = brg_conv_gemm_workspace(form, key->n, key->c, key->k, key->p, key->q);
    if (need > limit || (need > 0 && !op->workspace)) return BRG_OK; /* cuDNN, in the space there is */
    const brg_gemm_args g = brg_conv_gemm_args(form, key->n, key->c, key->k, key->p, key->q);
    const float one = 1.0f, zero = 0.0f;
    const float *beta = op->accumulate ? &one : &zero;
    if (form == BRG_CONV_GEMM_FILTER) {
        float *xp = op->workspace, *dyp = xp + brg_conv_gemm_dy_offset(key->n, key->c, key->p, key->q);
        const brg_conv_pack px = {key->n, key->c, key->h, key->w, key->p, key->q, key->sh, key->sw};
        const brg_conv_pack pdy = {key->n, key->k, key->p, key->q, key->p, key->q, 1, 1};
        BRG_CUDA_CHECK(brg_cuda_conv_pack(e->stream, &px, fdata(op->in[0]), xp));
        BRG_CUDA_CHECK(brg_cuda_conv_pack(e->stream, &pdy, fdata(op->in[1]), dyp));
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, op_of(g.trans_a), op_of(g.trans_b), g.m, g.n, g.k, &one, xp, g.lda,
                                     dyp, g.ldb, beta, fdata(op->out[0]), g.ldc));
    } else {
        BRG_CUBLAS_CHECK(cublasSgemmStridedBatched(e->cublas, op_of(g.trans_a), op_of(g.trans_b), g.m, g.n, g.k, &one,
                                                   fdata(op->in[0]), g.lda, g.stride_a, fdata(op->in[1]), g.ldb,
                                                   g.stride_b, beta, fdata(op->out[0]), g.ldc, g.stride_c, g.batch));
    }
    if (e->log_convs && e->gemm_convs[BRG_CONV_GEMM_FILTER] + e->gemm_convs[BRG_CONV_GEMM_DATA] == 0) {
        char shape[96];
        fprintf(stderr, "brigade: %s: 1x1 convolution gradients by cuBLAS GEMM (BRG_CUDA_CONV_1X1=gemm), the first "
                "%s %s\n", e->name, brg_op_kind_name(op->kind), brg_cuda_conv_shape_text(key, shape, sizeof shape));
    }
    e->gemm_convs[form]++;
    *ran = 1;
    return BRG_OK;
}
