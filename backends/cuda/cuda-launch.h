/* brigade: launchers of the CUDA backend's own kernels, C linkage (private).
 *
 * Defined in ops_kernels.cu, called by the kernels in ops.c, conv.c and
 * linear.c.
 * Each launches asynchronously on the given stream and returns the launch's
 * cudaError_t (cudaSuccess when there is nothing to do). Pointers are device
 * memory; every tensor is contiguous (brg_op_validate checked it). Where a
 * kernel takes `acc`, 1 adds into the output instead of overwriting it.
 *
 * The arithmetic follows the CPU kernels (backends/cpu) step for step,
 * including which sums are taken in double, so the two backends agree to a
 * few float ulps.
 */
#ifndef BRIGADE_CUDA_LAUNCH_H
#define BRIGADE_CUDA_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "conv-gemm.h"   /* brg_conv_pack */
#include "cuda-ops.h"    /* the BatchNorm workspace layout */
#include "pool-window.h" /* brg_cuda_pool_geom */

#ifdef __cplusplus
extern "C" {
#endif

/* Errors found on the device (a label out of range), in device memory the
 * exec owns. The first kernel to find one sets `bad` and records where;
 * later ones leave it. */
typedef struct brg_cuda_flags {
    int bad;     /* 0: no error */
    int kind;    /* brg_op_kind of the op that found it */
    int row;     /* first bad row seen (sample x pixels + pixel) */
    int label;   /* its label */
    int classes; /* K */
    int pixels;  /* labels per sample: 1 for rows of logits */
    int ignore;  /* the op's ignore label */
} brg_cuda_flags;

/* Elementwise ops over n floats. */
cudaError_t brg_cuda_relu_forward(cudaStream_t s, const float *x, float *y, int64_t n);
cudaError_t brg_cuda_relu_backward(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n, int acc);
/* dst = src * scale where brg_dropout_keep_inline(seed, offset + i, rate), else 0. */
cudaError_t brg_cuda_dropout(cudaStream_t s, const float *src, float *dst, int64_t n, uint64_t seed, uint64_t offset,
                             float rate, float scale, int acc);
cudaError_t brg_cuda_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n);
/* dst = src (acc 0) or dst += src (acc 1). */
cudaError_t brg_cuda_copy_or_add(cudaStream_t s, float *dst, const float *src, int64_t n, int acc);
/* For every batch index b < batch: dst[b * dst_stride + i] (+)= src[b * src_stride + i], i < block.
 * Concatenation along channels and its backward. */
cudaError_t brg_cuda_copy_blocks(cudaStream_t s, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                                 int64_t block, int64_t batch, int acc);

/* y[b, c, i] += bias[c] over y[batch, channels, plane]. */
cudaError_t brg_cuda_bias_add(cudaStream_t s, float *y, const float *bias, int64_t batch, int64_t channels,
                              int64_t plane);
/* db[c] (+)= sum over b, i of dy[b, c, i], summed in double. */
cudaError_t brg_cuda_bias_grad(cudaStream_t s, const float *dy, float *db, int64_t batch, int64_t channels,
                               int64_t plane, int acc);

/* Batch normalization over x[batch, channels, plane]; gamma and beta may be
 * NULL. Training forward and backward sum each channel in `splits` chunks
 * (brg_cuda_bn_splits) into workspace laid out as cuda-ops.h says. */
cudaError_t brg_cuda_bn_forward_train(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
                                      float *running_mean, float *running_var, float *saved_mean,
                                      float *saved_invstd, int64_t batch, int64_t channels, int64_t plane,
                                      double eps, double momentum, int splits, void *workspace);
cudaError_t brg_cuda_bn_forward_infer(cudaStream_t s, const float *x, const float *gamma, const float *beta,
                                      const float *running_mean, const float *running_var, const float *mean_lo,
                                      float *y, int64_t batch, int64_t channels, int64_t plane, double eps);
/* dgamma and dbeta may be NULL; dx may alias dy. */
cudaError_t brg_cuda_bn_backward(cudaStream_t s, const float *x, const float *dy, const float *gamma,
                                 const float *saved_mean, float *dx, float *dgamma, float *dbeta, int64_t batch,
                                 int64_t channels, int64_t plane, double eps, int acc, int splits, void *workspace);

/* Synchronized BatchNorm (brigade/ops.h): BATCHNORM_STATS,
 * BATCHNORM_BACKWARD_REDUCE (dgamma, dbeta may be NULL) and
 * BATCHNORM_BACKWARD_ELEMT (gamma may be NULL; dx may alias dy); mean_lo
 * (the mean's low part) may be NULL everywhere, as in forward_infer. */
cudaError_t brg_cuda_bn_stats(cudaStream_t s, const float *x, float *mean, float *var, float *mean_lo,
                              int64_t batch, int64_t channels, int64_t plane);
cudaError_t brg_cuda_bn_backward_reduce(cudaStream_t s, const float *x, const float *dy, const float *mean,
                                        const float *invstd, const float *mean_lo, float *sum_dy,
                                        float *sum_dy_xhat, float *dgamma, float *dbeta, int64_t batch,
                                        int64_t channels, int64_t plane, int acc);
cudaError_t brg_cuda_bn_backward_elemt(cudaStream_t s, const float *x, const float *dy, const float *gamma,
                                       const float *mean, const float *invstd, const float *sum_dy,
                                       const float *sum_dy_xhat, const float *mean_lo, float *dx, int64_t batch,
                                       int64_t channels, int64_t plane, int64_t count, int acc);

/* Windowed pools; the max pool backward recomputes the argmax from x where
 * an element equals its window's maximum y (the forward's output). */
cudaError_t brg_cuda_maxpool_forward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, float *y);
/* A 1x1 convolution's tensor packed channel-major for its GEMM (conv-gemm.h). */
cudaError_t brg_cuda_conv_pack(cudaStream_t s, const brg_conv_pack *g, const float *src, float *dst);
cudaError_t brg_cuda_maxpool_backward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, const float *y,
                                      const float *dy, float *dx, int acc);
cudaError_t brg_cuda_avgpool_forward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *x, float *y);
cudaError_t brg_cuda_avgpool_backward(cudaStream_t s, const brg_cuda_pool_geom *g, const float *dy, float *dx,
                                      int acc);
cudaError_t brg_cuda_global_avgpool_forward(cudaStream_t s, const float *x, float *y, int64_t planes, int64_t hw);
cudaError_t brg_cuda_global_avgpool_backward(cudaStream_t s, const float *dy, float *dx, int64_t planes, int64_t hw,
                                             int acc);

/* Nearest-neighbour upsampling of planes of h x w by factor f. */
cudaError_t brg_cuda_upsample_forward(cudaStream_t s, const float *x, float *y, int64_t planes, int64_t h, int64_t w,
                                      int f);
cudaError_t brg_cuda_upsample_backward(cudaStream_t s, const float *dy, float *dx, int64_t planes, int64_t h,
                                       int64_t w, int f, int acc);

/* Softmax cross-entropy over logits [n, k, px] (px = H*W per pixel, 1 for
 * rows [n, k]); a label equal to ignore counts nowhere when ignore is not
 * a class. The forward needs scratch doubles: n for rows (per-row losses),
 * 2 x brg_cuda_xent_pixel_blocks(n * px) per pixel (each block's sums),
 * summed in a fixed order so the loss is deterministic. Any other label
 * outside [0, k) is recorded in flags (kind names the op) and its row is
 * left unwritten. brg_cuda_xent_pixel_blocks: workspace.c. */
int brg_cuda_xent_pixel_blocks(int64_t rows);
cudaError_t brg_cuda_xent_forward(cudaStream_t s, const float *logits, const int32_t *labels, float *loss,
                                  float *probs, int64_t n, int64_t k, int64_t px, int ignore, double *scratch,
                                  brg_cuda_flags *flags, int kind);
cudaError_t brg_cuda_xent_backward(cudaStream_t s, const float *probs, const int32_t *labels, float *dlogits,
                                   int64_t n, int64_t k, int64_t px, float scale, int acc, int ignore,
                                   brg_cuda_flags *flags, int kind);

/* count (+)= rows of scores [n, k, px] (each pixel's k values px apart;
 * px 1 for [n, k]) whose first maximum (strict >, NaN never winning, a row
 * starting with NaN at class 0) is at the label; acc 0 zeroes count first
 * (on the stream). */
cudaError_t brg_cuda_count_correct(cudaStream_t s, const float *scores, const int32_t *labels, int32_t *count,
                                   int64_t n, int64_t k, int64_t px, int acc);
/* flag = tag (atomically, only while flag is 0) if any of x[0..n) is NaN
 * or infinite. */
cudaError_t brg_cuda_check_finite(cudaStream_t s, const float *x, int64_t n, int32_t *flag, int32_t tag);

/* Optimizer updates over n parameters; velocity may be NULL. */
cudaError_t brg_cuda_sgd(cudaStream_t s, const float *grad, float *param, float *velocity, int64_t n, float lr,
                         float momentum, float weight_decay);
/* step = lr / (1 - beta1^t), inv_sqrt_c2 = 1 / sqrt(1 - beta2^t), computed by the caller in double. */
cudaError_t brg_cuda_adam(cudaStream_t s, const float *grad, float *param, float *m, float *v, int64_t n, float beta1,
                          float beta2, float eps, float weight_decay, float step, float inv_sqrt_c2);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CUDA_LAUNCH_H */
