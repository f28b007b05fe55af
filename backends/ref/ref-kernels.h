/* brigade: reference kernels (private).
 *
 * Plain direct loops in double precision over contiguous host arrays. They
 * define what every backend's kernels must compute (see brigade/ops.h for
 * the contract) and are what check/check.c compares device results against;
 * backward kernels are checked against central finite differences of these
 * forwards, so only the forwards exist here (plus the max-pool gradient
 * routing, whose tie rule finite differences cannot see).
 *
 * Every function is slow on purpose: one obviously-correct loop nest, no
 * blocking, no reordering. None can fail; callers pass consistent sizes
 * (check/check.c validates the case first). Outputs never alias inputs.
 */
#ifndef BRIGADE_REF_KERNELS_H
#define BRIGADE_REF_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The geometry of a sliding window (convolution or pool) over NCHW input. */
typedef struct brg_ref_window {
    int64_t n, c, h, w;   /* input batch, channels, height, width */
    int64_t r, s;         /* window height and width */
    int stride_h, stride_w;
    int pad_h, pad_w;     /* zero padding on each side */
    int64_t p, q;         /* output height and width */
} brg_ref_window;

/* Fill g and compute the output extent. Returns 1 if the window fits the
 * padded input with positive strides, 0 otherwise (g->p, g->q are then 0). */
int brg_ref_window_init(brg_ref_window *g, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r, int64_t s,
                        int stride_h, int stride_w, int pad_h, int pad_w);

/* ref_conv.c: y[n,k,p,q] = b[k] + sum_{c,r,s} x[n,c,p*sh-ph+r,q*sw-pw+s] w[k,c,r,s],
 * out-of-range input positions counting as zero. x is [n,c,h,w] of g, w is
 * [k,c,r,s], b is [k] or NULL, y is [n,k,p,q]. */
void brg_ref_conv2d_forward(const brg_ref_window *g, int64_t k, const double *x, const double *w, const double *b,
                            double *y);

/* ref_linear.c: y[n,o] = b[o] + sum_i x[n,i] w[o,i]; b may be NULL. */
void brg_ref_linear_forward(int64_t n, int64_t in, int64_t out, const double *x, const double *w, const double *b,
                            double *y);

/* ref_batchnorm.c. x and y are [n,c,hw]; gamma and beta are [c] or NULL
 * (scale 1, shift 0).
 *
 * Training: normalise with the biased batch statistics of each channel.
 * mean, var (biased) and invstd = 1/sqrt(var + eps) receive the batch
 * statistics, [c] each. */
void brg_ref_batchnorm_train(int64_t n, int64_t c, int64_t hw, const double *x, const double *gamma,
                             const double *beta, double eps, double *y, double *mean, double *var, double *invstd);

/* The running averages after one training step: r = (1 - momentum) r +
 * momentum batch, with the unbiased variance var * m / (m - 1) where m is the
 * number of values per channel (m >= 2). Updates running_mean and running_var
 * in place. */
void brg_ref_batchnorm_running_update(int64_t c, int64_t m, double momentum, const double *mean,
                                      const double *var, double *running_mean, double *running_var);

/* Inference: normalise with the running statistics. */
void brg_ref_batchnorm_infer(int64_t n, int64_t c, int64_t hw, const double *x, const double *gamma,
                             const double *beta, const double *running_mean, const double *running_var, double eps,
                             double *y);

/* ref_pool.c. x is [n,c,h,w] of g, y is [n,c,p,q].
 *
 * Max pool: the largest real element of each window (padding never wins). */
void brg_ref_maxpool_forward(const brg_ref_window *g, const double *x, double *y);

/* The max pool gradient: each dy element goes to the first element of its
 * window, in row-major window order, that holds the window's maximum (the
 * tie rule of brigade/ops.h); dx is overwritten. */
void brg_ref_maxpool_backward(const brg_ref_window *g, const double *x, const double *dy, double *dx);

/* Average pool: the window sum divided by r*s (count_include_pad 1) or by
 * the number of real elements in the window (count_include_pad 0). */
void brg_ref_avgpool_forward(const brg_ref_window *g, int count_include_pad, const double *x, double *y);

/* Global average pool: x [n,c,hw] -> y [n,c]. */
void brg_ref_global_avgpool_forward(int64_t n, int64_t c, int64_t hw, const double *x, double *y);

/* Nearest-neighbour upsampling: x [n,c,h,w] -> y [n,c,h*factor,w*factor],
 * y[.., i, j] = x[.., i / factor, j / factor]. */
void brg_ref_upsample_forward(int64_t n, int64_t c, int64_t h, int64_t w, int factor, const double *x, double *y);

/* ref_elementwise.c */
void brg_ref_relu_forward(int64_t count, const double *x, double *y);

/* Concatenation along channels: part i is [n, channels[i], hw]. */
void brg_ref_concat_forward(int64_t n, int64_t hw, int parts, const int64_t *channels, const double *const *xs,
                            double *y);

void brg_ref_add_forward(int64_t count, const double *a, const double *b, double *y);

/* Inverted dropout: y[i] = x[i] / (1 - rate) if brg_dropout_keep(seed,
 * offset + i, rate), else 0. */
void brg_ref_dropout_forward(int64_t count, float rate, uint64_t seed, uint64_t offset, const double *x, double *y);

/* Optimizer steps over count elements (PyTorch's conventions, see
 * brigade/ops.h), updating param and the state in place. SGD: g = grad +
 * weight_decay param; with velocity (non-NULL) and momentum > 0, v =
 * momentum v + g and param -= lr v, otherwise param -= lr g (velocity
 * untouched). Adam at step t >= 1: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2)
 * g^2, param -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). */
void brg_ref_sgd_update(int64_t count, double lr, double momentum, double weight_decay, const double *grad,
                        double *param, double *velocity);
void brg_ref_adam_update(int64_t count, double lr, double beta1, double beta2, double eps, double weight_decay,
                         int64_t step, const double *grad, double *param, double *m, double *v);

/* ref_loss.c: softmax over the k classes of logits [n, k, pixels] (NCHW,
 * pixels = H*W, 1 for rows [n, k]) at every pixel into probs (may be
 * NULL), and the mean over the counted labels [n, pixels] of -log
 * probs[label]: a label equal to ignore_label counts nowhere when
 * ignore_label is outside [0, k) (0 when none counts). Other labels must
 * be in [0, k). */
double brg_ref_softmax_xent_forward(int64_t n, int64_t k, int64_t pixels, const double *logits, const int32_t *labels,
                                    int32_t ignore_label, double *probs);

/* ref_reduce.c: the number of rows of scores [n, k, pixels] (the k values
 * of one pixel, pixels = 1 for [n, k]) whose first maximum (a scan from
 * class 0 moving on a strictly greater value: a NaN never wins) is at the
 * row's label; labels outside [0, k) never match. */
int64_t brg_ref_count_correct(int64_t n, int64_t k, int64_t pixels, const double *scores, const int32_t *labels);

/* 1 if every one of count values is finite, 0 if any is NaN or infinite. */
int brg_ref_all_finite(int64_t count, const double *x);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_REF_KERNELS_H */
