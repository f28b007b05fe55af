/* brigade: 1x1 convolutions' gradients as one cuBLAS GEMM, the pieces that
 * compile for the host too (private).
 *
 * A 1x1 convolution without padding is a matrix product per sample:
 * y[n] (K x P) = w (K x C) . x[n] (C x P), P the output pixels (a strided
 * one reads every sh-th row and sw-th column of x). cuDNN's legacy
 * algorithms take 2-4 times a forward's time for its filter gradient on
 * NCHW data (an H200's profile, 2026-11-29: ResNet-50's 1x1 filter
 * gradients 22.3 ms of a 97 ms step, their forwards 8.7 ms), so with
 * BRG_CUDA_CONV_1X1=gemm (docs/cuda.md) the CUDA backend runs:
 *
 *   filter gradient   dw (+)= dy' . x'^T, one GEMM of K x C over N*P, where
 *                     x' (C x N*P) and dy' (K x N*P) are x's sampled pixels
 *                     and dy packed channel-major into the workspace
 *                     ((C + K) * N * P floats; brg_conv_gemm_workspace)
 *   data gradient     dx[n] (+)= w^T . dy[n], a strided batch of N GEMMs
 *   (stride 1 only)   straight on the tensors, no workspace
 *
 * The forward stays on cuDNN, which runs it near the GPU's FP32 rate. Both
 * the packing and the GEMMs' arguments are here as plain C, so that
 * tests/test_cuda_kernels runs them through a column-major reference GEMM
 * on the host, against the CPU's convolution, GPU or not.
 */
#ifndef BRIGADE_CONV_GEMM_H
#define BRIGADE_CONV_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "pool-window.h" /* BRG_HOST_DEVICE */

/* The packing of one tensor: planes (batch n, channels ch) of h x w read
 * at every sh-th row and sw-th column, p x q of them, into dst channel by
 * channel: dst[(c * n + b) * p * q + i] = src[b][c][(i / q) * sh][(i % q) * sw].
 * A plane, in or out, holds fewer than 2^31 elements (brg_conv_gemm_applies). */
typedef struct brg_conv_pack {
    int64_t n, ch;
    int h, w, p, q, sh, sw;
} brg_conv_pack;

/* Where element i of the packed plane of sample b, channel c comes from. */
BRG_HOST_DEVICE static inline int64_t brg_conv_pack_src(const brg_conv_pack *g, int64_t b, int64_t c, int i)
{
    const int row = i / g->q, col = i - row * g->q;
    return (b * g->ch + c) * (int64_t)g->h * g->w + (int64_t)row * g->sh * g->w + (int64_t)col * g->sw;
}

/* Where it goes. */
BRG_HOST_DEVICE static inline int64_t brg_conv_pack_dst(const brg_conv_pack *g, int64_t b, int64_t c, int i)
{
    return (c * g->n + b) * (int64_t)g->p * g->q + i;
}

/* One cuBLAS call, column-major as cuBLAS is: C (m x n) = alpha op(A) op(B)
 * + beta C for each of `batch` triples at the given element strides (a
 * plain GEMM when batch is 1). trans_*: 1 for CUBLAS_OP_T. */
typedef struct brg_gemm_args {
    int trans_a, trans_b;
    int m, n, k;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
    int batch;
} brg_gemm_args;

enum { BRG_CONV_GEMM_NONE = 0, BRG_CONV_GEMM_FILTER = 1, BRG_CONV_GEMM_DATA = 2 };

/* Which GEMM form a convolution gradient takes (BRG_CONV_GEMM_FILTER or
 * _DATA; filter is 1 for a filter gradient, 0 for a data gradient), or
 * BRG_CONV_GEMM_NONE where it does not apply: a 1x1 filter without
 * padding, any stride for the filter gradient, stride 1 for the data
 * gradient, and every count within cuBLAS's ints (N*P included). x is
 * [n, c, h, w], w [k, c, 1, 1], y [n, k, p, q]. */
static inline int brg_conv_gemm_applies(int filter, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int r,
                                        int s, int64_t p, int64_t q, int sh, int sw, int ph, int pw)
{
    if (r != 1 || s != 1 || ph != 0 || pw != 0 || sh < 1 || sw < 1) return BRG_CONV_GEMM_NONE;
    if (n <= 0 || c <= 0 || k <= 0 || p <= 0 || q <= 0) return BRG_CONV_GEMM_NONE;
    const int64_t most = 2147483647;
    if (h * w > most || p * q > most || n * p * q > most || c * k > most) return BRG_CONV_GEMM_NONE;
    if (filter) return BRG_CONV_GEMM_FILTER;
    return sh == 1 && sw == 1 && p == h && q == w ? BRG_CONV_GEMM_DATA : BRG_CONV_GEMM_NONE;
}

/* Where the packed dy starts in the workspace of a filter gradient, in
 * floats: after the packed x, rounded up to 256 bytes as the arena aligns
 * its blocks, so that cuBLAS reads both aligned. */
static inline size_t brg_conv_gemm_dy_offset(int64_t n, int64_t c, int64_t p, int64_t q)
{
    return ((size_t)(c * n * p * q) + 63) / 64 * 64;
}

/* Bytes of workspace the form needs: the packed x and dy of a filter
 * gradient; none for a data gradient. */
static inline size_t brg_conv_gemm_workspace(int form, int64_t n, int64_t c, int64_t k, int64_t p, int64_t q)
{
    if (form != BRG_CONV_GEMM_FILTER) return 0;
    return (brg_conv_gemm_dy_offset(n, c, p, q) + (size_t)(k * n * p * q)) * sizeof(float);
}

/* The call of a form. Row-major [R, C] is column-major [C, R]:
 *   filter: A = x' (C x N*P), B = dy' (K x N*P), C = dw (K x C):
 *           dw^T (C x K) = x'^T^T . dy'  ->  gemm(T, N, C, K, N*P, x', N*P, dy', N*P, dw, C)
 *   data:   A = dy[b] (K x P), B = w (K x C), C = dx[b] (C x P), per sample b:
 *           dx[b]^T (P x C) = dy[b]^T . w  ->  gemm(N, T, P, C, K, dy, P, w, C, dx, P),
 *           strides K*P, 0 and C*P over the batch. */
static inline brg_gemm_args brg_conv_gemm_args(int form, int64_t n, int64_t c, int64_t k, int64_t p, int64_t q)
{
    const int64_t plane = p * q;
    brg_gemm_args g = {0};
    if (form == BRG_CONV_GEMM_FILTER) {
        g.trans_a = 1, g.trans_b = 0;
        g.m = (int)c, g.n = (int)k, g.k = (int)(n * plane);
        g.lda = g.ldb = (int)(n * plane), g.ldc = (int)c;
        g.batch = 1;
    } else {
        g.trans_a = 0, g.trans_b = 1;
        g.m = (int)plane, g.n = (int)c, g.k = (int)k;
        g.lda = (int)plane, g.ldb = (int)c, g.ldc = (int)plane;
        g.stride_a = (long long)k * plane, g.stride_b = 0, g.stride_c = (long long)c * plane;
        g.batch = (int)n;
    }
    return g;
}

#endif /* BRIGADE_CONV_GEMM_H */
