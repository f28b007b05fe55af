/* brigade: ops, the unit of work a device runs.
 *
 * An op is a kind, its parameters and its tensors. Every backend implements
 * every kind with the same meaning, so a stage's action list runs unchanged
 * on the CPU or a GPU. Forward and backward are separate kinds.
 *
 * Tensor roles per kind (in[] / out[]; "opt" may be NULL). Activations are
 * NCHW float32. All tensors of one op live on the device that runs it.
 *
 *   CONV2D_FORWARD            in {x[N,C,H,W], w[K,C,R,S], b[K] opt}   out {y[N,K,P,Q]}
 *   CONV2D_BACKWARD_DATA      in {dy, w}                              out {dx}
 *   CONV2D_BACKWARD_FILTER    in {x, dy}                              out {dw, db opt}
 *   BATCHNORM_FORWARD_TRAIN   in {x, gamma opt, beta opt}             out {y, running_mean, running_var,
 *                                                                          saved_mean, saved_invstd}
 *       running_* are read and updated in place: r = (1 - momentum) r + momentum batch,
 *       with the unbiased batch variance; saved_* are the biased batch mean and
 *       1/sqrt(var + eps), kept for the backward (which may recompute the
 *       statistics from x in higher precision instead of trusting them).
 *   BATCHNORM_FORWARD_INFER   in {x, gamma opt, beta opt, running_mean, running_var, mean_lo opt}
 *                                                                     out {y}
 *       mean_lo, when given, is the mean's low part: the mean is
 *       running_mean + mean_lo, a double held as two floats, so that y keeps
 *       full float precision when the data sit far from zero.
 *   BATCHNORM_BACKWARD        in {x, dy, gamma opt, saved_mean, saved_invstd}
 *                                                                     out {dx, dgamma opt, dbeta opt}
 *       (training-mode backward: gradients through the batch statistics;
 *       dx may alias dy.)
 *       gamma absent means scale 1 (Keras "scale=False"); beta absent means shift 0.
 *   BATCHNORM_STATS           in {x}                          out {mean[C], var[C], mean_lo[C] opt}
 *       the per-channel mean and biased variance of x; mean_lo, when asked
 *       for, is what the float mean leaves out (mean + mean_lo is the mean
 *       to double precision). Synchronized BatchNorm runs a train forward
 *       as STATS on each replica's x, the statistics merged over the
 *       replicas on the host, and BATCHNORM_FORWARD_INFER with the merged
 *       mean (as two floats) and variance.
 *   BATCHNORM_BACKWARD_REDUCE in {x, dy, mean, invstd, mean_lo opt}   out {sum_dy[C], sum_dy_xhat[C],
 *                                                                          dgamma opt, dbeta opt}
 *       per channel, over this x: sum_dy = sum(dy), sum_dy_xhat =
 *       sum(dy * xhat) with xhat = (x - (mean + mean_lo)) * invstd. dgamma
 *       gets sum_dy_xhat and dbeta sum_dy (added with accumulate; the two
 *       sums are always overwritten).
 *   BATCHNORM_BACKWARD_ELEMT  in {x, dy, gamma opt, mean, invstd, sum_dy, sum_dy_xhat, mean_lo opt}
 *                                                                     out {dx}
 *       dx = gamma * invstd * (dy - sum_dy / count - xhat * sum_dy_xhat / count)
 *       with count = p.bn.count, the values per channel of the whole
 *       synchronized batch (the sums being over every replica's x; at least
 *       this x's N*H*W). Without accumulate, dx may alias dy. On one replica (the sums and the
 *       statistics this x's own, count its N*H*W) STATS, FORWARD_INFER,
 *       REDUCE and ELEMT compute what FORWARD_TRAIN and BACKWARD do.
 *   RELU_FORWARD              in {x}                                  out {y}   (y may alias x;
 *                                                                              NaN passes through)
 *   RELU_BACKWARD             in {y, dy}                              out {dx}  (uses the output)
 *   MAXPOOL_FORWARD           in {x}                                  out {y}
 *   MAXPOOL_BACKWARD          in {x, y, dy}                           out {dx}
 *       padding never wins a max; ties go to the first element in window order.
 *       A backend may ignore y and recompute the argmax from x.
 *   AVGPOOL_FORWARD           in {x}                                  out {y}
 *   AVGPOOL_BACKWARD          in {dy}                                 out {dx}
 *       count_include_pad = 0 divides by the number of real (unpadded)
 *       elements in the window (Keras / TensorFlow "same"); 1 divides by R*S
 *       (PyTorch's default).
 *   GLOBAL_AVGPOOL_FORWARD    in {x[N,C,H,W]}                         out {y[N,C,1,1]}
 *   GLOBAL_AVGPOOL_BACKWARD   in {dy[N,C,1,1]}                        out {dx[N,C,H,W]}
 *   CONCAT_FORWARD            in {x0, ..., xk-1}                      out {y}   along channels
 *   CONCAT_BACKWARD           in {dy}                                 out {dx0, ..., dxk-1}
 *   ADD_FORWARD               in {a, b}                               out {y}   (same shapes)
 *   ADD_BACKWARD              in {dy}                                 out {da, db}
 *   LINEAR_FORWARD            in {x[N,I] or [N,I,1,1]... , w[O,I], b[O] opt}   out {y[N,O]}
 *       x may have any shape whose first dim is N and whose other dims
 *       multiply to I (a flatten is free in NCHW).
 *   LINEAR_BACKWARD_DATA      in {dy, w}                              out {dx}
 *   LINEAR_BACKWARD_WEIGHT    in {x, dy}                              out {dw, db opt}
 *   DROPOUT_FORWARD           in {x}                                  out {y}
 *   DROPOUT_BACKWARD          in {dy}                                 out {dx}
 *       inverted dropout: kept elements scaled by 1/(1 - rate). Element i of
 *       the tensor is dropped iff brg_dropout_keep(seed, offset + i, rate) is 0,
 *       so the backward needs no stored mask and every backend drops the same
 *       elements.
 *   SOFTMAX_XENT_FORWARD      in {logits[N,K], labels[N] int32}       out {loss[1], probs[N,K]}
 *                          or in {logits[N,K,H,W], labels[N,H,W]}     out {loss[1], probs[N,K,H,W]}
 *       loss = mean over the counted labels of -log softmax(logits)[label];
 *       with logits [N,K,H,W] the softmax runs over K at every pixel and
 *       each pixel has its label (a per-pixel loss, as for segmentation).
 *       A label equal to p.xent.ignore_label counts nowhere (no loss, a zero
 *       gradient, not in the mean) when ignore_label is outside [0, K); an
 *       ignore_label inside [0, K), such as the 0 of a zeroed op, ignores
 *       nothing. No counted label: loss 0. Any other label outside [0, K)
 *       is an error.
 *   SOFTMAX_XENT_BACKWARD     in {probs, labels}                      out {dlogits}
 *       dlogits = (probs - onehot(labels)) * grad_scale at every counted
 *       label, 0 at an ignored one; grad_scale 1/(counted labels) gives the
 *       gradient of the mean loss (1/N without ignored labels). Shapes and
 *       labels as the forward's.
 *   UPSAMPLE_FORWARD          in {x[N,C,H,W]}                         out {y[N,C,H*f,W*f]}
 *   UPSAMPLE_BACKWARD         in {dy[N,C,H*f,W*f]}                    out {dx[N,C,H,W]}
 *       nearest neighbour by the integer factor f (p.upsample.factor); the
 *       backward sums each f x f patch.
 *   SGD_UPDATE                in {grad}                               out {param, velocity opt}
 *       g = grad + weight_decay * param; with momentum > 0: v = momentum v + g,
 *       param -= lr v (PyTorch's SGD); with momentum 0: param -= lr g and the
 *       velocity, if given, is left untouched.
 *   ADAM_UPDATE               in {grad}                               out {param, m, v}
 *       g = grad + weight_decay * param; m = b1 m + (1 - b1) g;
 *       v = b2 v + (1 - b2) g^2; param -= lr (m / (1 - b1^t)) /
 *       (sqrt(v / (1 - b2^t)) + eps), t = p.optim.step >= 1 (PyTorch's Adam).
 *       Optimizer tensors all have the parameter's shape.
 *   COUNT_CORRECT             in {scores[N,K], labels[N] int32}       out {count[1] int32}
 *                          or in {scores[N,K,H,W], labels[N,H,W]}
 *       count = the number of rows (pixels: the argmax over K at each
 *       pixel) whose argmax equals the label. The
 *       argmax is the FIRST maximum: a scan from class 0 that moves only on
 *       a strictly greater value (so a NaN never wins, and a row starting
 *       with NaN has argmax 0). A label outside [0, K) is simply not
 *       correct (no error: the loss reports bad labels). scores are
 *       probabilities or logits. With accumulate the count is added to
 *       count[0] (a step's total over its micro-batches on the device).
 *       The training loss uses it so that only the loss and this count,
 *       8 bytes, come back to the host per micro-batch.
 *   CHECK_FINITE              in {x (any shape) float32}              out {flag[1] int32}
 *       if flag[0] == 0 and some element of x is NaN or infinite, flag[0] =
 *       p.finite.tag (> 0); otherwise flag[0] is left as it is. Several
 *       checks into one flag in stream order keep the first failure's tag.
 *       Intended use (the executor, exec/): zero a per-device flag at the
 *       start of a step, run CHECK_FINITE on every message tensor before it
 *       is sent, with a tag naming the message (e.g. its index in the
 *       step's message list, + 1), and read the flag once at the end of the
 *       step: 0 means every message was finite, otherwise the tag says which
 *       one was first to carry a NaN or an infinity. The check runs on the
 *       device's compute stream (a reduction; no host copy of x).
 *
 * Channel-blocked tensors (brigade/tensor.h): the convolutions take each
 * image tensor (x, y, dx, dy) plain or blocked, the filter plain; the
 * BatchNorm kinds, ReLU, the max and average pools, ADD and CONCAT take
 * their 4-D tensors all plain or all blocked alike (CONCAT's parts then have channels that are multiples
 * of the block, so each part of a sample is still one run of memory);
 * GLOBAL_AVGPOOL takes x or dx blocked with the [N, C, 1, 1] side plain;
 * CHECK_FINITE takes any. Every other kind takes plain tensors only. The
 * results are the same values in the other layout, bit for bit on the CPU.
 * Backends that cannot read a blocked tensor report a block of 0
 * (brg_device_channel_block) and are never given one.
 *
 * accumulate: for *_BACKWARD* kinds, and COUNT_CORRECT; when 1, results
 * are added into the output tensors instead of overwriting them (micro-batch
 * gradient accumulation, tensors consumed by several layers). Other kinds
 * reject it.
 */
#ifndef BRIGADE_OPS_H
#define BRIGADE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brg_op_kind {
    BRG_OP_CONV2D_FORWARD = 0,
    BRG_OP_CONV2D_BACKWARD_DATA,
    BRG_OP_CONV2D_BACKWARD_FILTER,
    BRG_OP_BATCHNORM_FORWARD_TRAIN,
    BRG_OP_BATCHNORM_FORWARD_INFER,
    BRG_OP_BATCHNORM_BACKWARD,
    BRG_OP_BATCHNORM_STATS,
    BRG_OP_BATCHNORM_BACKWARD_REDUCE,
    BRG_OP_BATCHNORM_BACKWARD_ELEMT,
    BRG_OP_RELU_FORWARD,
    BRG_OP_RELU_BACKWARD,
    BRG_OP_MAXPOOL_FORWARD,
    BRG_OP_MAXPOOL_BACKWARD,
    BRG_OP_AVGPOOL_FORWARD,
    BRG_OP_AVGPOOL_BACKWARD,
    BRG_OP_GLOBAL_AVGPOOL_FORWARD,
    BRG_OP_GLOBAL_AVGPOOL_BACKWARD,
    BRG_OP_CONCAT_FORWARD,
    BRG_OP_CONCAT_BACKWARD,
    BRG_OP_ADD_FORWARD,
    BRG_OP_ADD_BACKWARD,
    BRG_OP_LINEAR_FORWARD,
    BRG_OP_LINEAR_BACKWARD_DATA,
    BRG_OP_LINEAR_BACKWARD_WEIGHT,
    BRG_OP_DROPOUT_FORWARD,
    BRG_OP_DROPOUT_BACKWARD,
    BRG_OP_SOFTMAX_XENT_FORWARD,
    BRG_OP_SOFTMAX_XENT_BACKWARD,
    BRG_OP_UPSAMPLE_FORWARD,
    BRG_OP_UPSAMPLE_BACKWARD,
    BRG_OP_SGD_UPDATE,
    BRG_OP_ADAM_UPDATE,
    BRG_OP_COUNT_CORRECT,
    BRG_OP_CHECK_FINITE,
    BRG_OP_KIND_COUNT
} brg_op_kind;

#define BRG_OP_MAX_TENSORS 16

typedef struct brg_conv2d_params {
    int stride_h, stride_w;
    int pad_h, pad_w; /* zero padding on each side */
} brg_conv2d_params;

typedef struct brg_pool_params {
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int count_include_pad; /* average pool only, see above */
} brg_pool_params;

typedef struct brg_batchnorm_params {
    float epsilon;  /* added to the variance, e.g. 1e-3 (Keras) or 1e-5 (PyTorch) */
    float momentum; /* weight of the new batch in the running averages, e.g. 0.1 */
    int64_t count;  /* BATCHNORM_BACKWARD_ELEMT: values per channel of the synchronized batch */
} brg_batchnorm_params;

typedef struct brg_dropout_params {
    float rate;      /* probability of dropping, in [0, 1) */
    uint64_t seed;   /* per layer and step */
    uint64_t offset; /* element index of in[0][0] in the mask stream */
} brg_dropout_params;

typedef struct brg_xent_params {
    float grad_scale;     /* multiplier of the backward, usually 1/(counted labels) */
    int32_t ignore_label; /* counts nowhere when outside [0, K); inside (e.g. 0) ignores nothing */
} brg_xent_params;

typedef struct brg_upsample_params {
    int factor; /* >= 1 */
} brg_upsample_params;

typedef struct brg_check_finite_params {
    int32_t tag; /* > 0: what the flag is set to on a NaN or an infinity */
} brg_check_finite_params;

typedef struct brg_optim_params {
    float lr;
    float momentum;     /* SGD */
    float weight_decay; /* L2, added to the gradient */
    float beta1, beta2, epsilon; /* Adam */
    int64_t step;       /* Adam: 1 for the first update */
} brg_optim_params;

struct brg_op {
    brg_op_kind kind;
    union {
        brg_conv2d_params conv;
        brg_pool_params pool;
        brg_batchnorm_params bn;
        brg_dropout_params dropout;
        brg_xent_params xent;
        brg_upsample_params upsample;
        brg_optim_params optim;
        brg_check_finite_params finite;
    } p;
    int n_in, n_out;
    const brg_tensor *in[BRG_OP_MAX_TENSORS];
    const brg_tensor *out[BRG_OP_MAX_TENSORS];
    int accumulate;        /* backward kinds, COUNT_CORRECT: add into out[] instead of overwriting */
    void *workspace;       /* optional scratch on the device, see brg_device_run */
    size_t workspace_bytes;
};

/* Name of an op kind ("conv2d_forward"). */
BRG_API const char *brg_op_kind_name(brg_op_kind kind);

/* Check that an op's tensors have the counts, dtypes and shapes its kind
 * needs, without running it. Returns BRG_ERR_SHAPE or
 * BRG_ERR_INVALID_ARGUMENT with a message naming the op and the tensor.
 * Every backend calls this before running. */
BRG_API brg_status brg_op_validate(const brg_op *op);

/* Whether some tensor of an op of this kind may be channel-blocked (above). */
BRG_API int brg_op_takes_blocked(brg_op_kind kind);

/* Whether in[index] (or out[index] when is_output) of op may be blocked by
 * its role: not a convolution's filter, not a global pool's [N, C, 1, 1]
 * side, nothing of a kind that takes none (shapes are not looked at). */
BRG_API int brg_op_may_block(const brg_op *op, int is_output, int index);

/* Whether the kind takes its 4-D tensors in one layout, all blocked alike
 * or all plain (BatchNorm, ReLU, the pools, concat, add), rather than each
 * as it comes (convolutions, global pooling, check_finite). */
BRG_API int brg_op_blocks_in_one_layout(brg_op_kind kind);

/* Output spatial extent of a convolution or pool along one axis:
 * (in + 2 pad - kernel) / stride + 1, or -1 if the window does not fit. */
BRG_API int64_t brg_conv_out_extent(int64_t in, int kernel, int stride, int pad);

/* The dropout mask: 1 if element `index` of the stream `seed` is kept at the
 * given rate, 0 if dropped. A counter-based hash, identical on every backend. */
BRG_API int brg_dropout_keep(uint64_t seed, uint64_t index, float rate);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_OPS_H */
