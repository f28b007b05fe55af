/* The CUDA backend's fully connected layers, on cuBLAS (FP32 unless
 * BRG_CUDA_TF32=1: see conv.c). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda-exec.h" /* first: the cuDNN and cuBLAS headers the others test for */
#include "backends/cuda/cuda-check.h"
#include "base/internal.h"

/* cuBLAS is column-major: a row-major [R, C] matrix is a column-major
 * [C, R] one, i.e. its transpose. So with x[N,I], w[O,I], y[N,O] row-major:
 *   y = x w^T    <=>  y^T[O,N]  = w^T^T . x^T  : gemm(T, N, O, N, I, w, I, x, I, y, O)
 *   dx = dy w    <=>  dx^T[I,N] = w^T . dy^T   : gemm(N, N, I, N, O, w, I, dy, O, dx, I)
 *   dw = dy^T x  <=>  dw^T[I,O] = x^T . dy     : gemm(N, T, I, O, N, x, I, dy, O, dw, I)
 * Leading dimensions are at least 1 as cuBLAS requires, even for empty
 * matrices. */
static int ld(int64_t v) { return v > 1 ? (int)v : 1; }

brg_status brg_cuda_op_linear(brg_device *dev, const brg_op *op)
{
    brg_cuda_exec *e = brg_cuda_exec_of(dev);
    const brg_tensor *w = op->kind == BRG_OP_LINEAR_BACKWARD_WEIGHT ? op->out[0] : op->in[1];
    const int64_t n = op->in[0]->shape[0], o = w->shape[0], in = w->shape[1];
    if (!fits_int(n) || !fits_int(o) || !fits_int(in))
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: a %lldx%lld by %lld layer exceeds cuBLAS's int range",
                         brg_op_kind_name(op->kind), (long long)n, (long long)in, (long long)o);
    const float one = 1.0f, zero = 0.0f;
    const float *beta = op->accumulate ? &one : &zero;
    switch (op->kind) {
    case BRG_OP_LINEAR_FORWARD: {
        float *y = fdata(op->out[0]);
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)o, (int)n, (int)in, &one,
                                     fdata(op->in[1]), ld(in), fdata(op->in[0]), ld(in), &zero, y, ld(o)));
        const brg_tensor *b = opt_in(op, 2);
        if (b) BRG_CUDA_CHECK(brg_cuda_bias_add(e->stream, y, fdata(b), n, o, 1));
        return BRG_OK;
    }
    case BRG_OP_LINEAR_BACKWARD_DATA:
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)in, (int)n, (int)o, &one,
                                     fdata(op->in[1]), ld(in), fdata(op->in[0]), ld(o), beta, fdata(op->out[0]),
                                     ld(in)));
        return BRG_OK;
    default: {
        const float *x = fdata(op->in[0]), *dy = fdata(op->in[1]);
        BRG_CUBLAS_CHECK(cublasSgemm(e->cublas, CUBLAS_OP_N, CUBLAS_OP_T, (int)in, (int)o, (int)n, &one, x, ld(in), dy,
                                     ld(o), beta, fdata(op->out[0]), ld(in)));
        const brg_tensor *db = opt_out(op, 1);
        if (db) BRG_CUDA_CHECK(brg_cuda_bias_grad(e->stream, dy, fdata(db), n, o, 1, op->accumulate));
        return BRG_OK;
    }
    }
}

