/* brigade: the kernel correctness harness.
 *
 * Every backend's kernels are checked the same way, through the public
 * device API only (tensors allocated on the device, copies in and out,
 * brg_device_run), so the harness that checks the CPU kernels here checks a
 * GPU backend on a GPU device unchanged:
 *
 *   - forward ops against plain double-precision reference loops;
 *   - every gradient a backward op produces against central finite
 *     differences of L = sum(dy * f(inputs)) over the double reference
 *     (for the loss, L is the mean loss itself);
 *   - each backward again with accumulate = 1 into a random prefill: the
 *     result must be prefill + gradient;
 *   - batch norm's running and saved statistics against the reference;
 *   - on a device that keeps activations channel-blocked between layers
 *     (brg_device_channel_block), every op that takes blocked tensors
 *     again with them blocked: the same bits;
 *   - that no kernel writes outside its outputs (guard bands around every
 *     tensor and the workspace), modifies its inputs, leaves an output
 *     element unwritten (outputs are poisoned with NaN first), or leaks
 *     device memory.
 *
 * A case is one concrete configuration (family, shapes, kernel, stride,
 * padding, flags). brg_check_run draws fresh random inputs from a seed, runs
 * it and fills a brg_check_result. docs/kernels.md lists the tolerances and
 * the reasons for them. `brigade selfcheck` runs the default cases.
 */
#ifndef BRIGADE_CHECK_H
#define BRIGADE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/device.h"
#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What is checked: one op family with its forward and backward kinds. */
typedef enum brg_check_family {
    BRG_CHECK_CONV2D = 0,       /* conv2d_forward, _backward_data, _backward_filter */
    BRG_CHECK_LINEAR,           /* linear_forward, _backward_data, _backward_weight */
    BRG_CHECK_BATCHNORM_TRAIN,  /* batchnorm_forward_train, batchnorm_backward */
    BRG_CHECK_BATCHNORM_INFER,  /* batchnorm_forward_infer (no backward kind) */
    BRG_CHECK_BATCHNORM_SYNC,   /* synchronized BatchNorm on one replica: batchnorm_stats, then
                                 * batchnorm_forward_infer; batchnorm_backward_reduce, _elemt */
    BRG_CHECK_RELU,
    BRG_CHECK_MAXPOOL,
    BRG_CHECK_AVGPOOL,
    BRG_CHECK_GLOBAL_AVGPOOL,
    BRG_CHECK_CONCAT,
    BRG_CHECK_ADD,
    BRG_CHECK_DROPOUT,
    BRG_CHECK_SOFTMAX_XENT,
    BRG_CHECK_UPSAMPLE,         /* upsample_forward, upsample_backward */
    BRG_CHECK_SGD,              /* sgd_update (no backward kind) */
    BRG_CHECK_ADAM,             /* adam_update (no backward kind) */
    BRG_CHECK_COUNT_CORRECT,    /* count_correct, and again with accumulate (no backward kind) */
    BRG_CHECK_CHECK_FINITE,     /* check_finite (no backward kind) */
    BRG_CHECK_FAMILY_COUNT
} brg_check_family;

/* "conv2d", "batchnorm_train", ...; "unknown" outside the enum. */
BRG_API const char *brg_check_family_name(brg_check_family family);

/* The family named name (as brg_check_family_name writes it). Returns
 * BRG_ERR_INVALID_ARGUMENT, with the known names in the message, if none. */
BRG_API brg_status brg_check_family_parse(const char *name, brg_check_family *family);

#define BRG_CHECK_MAX_PARTS 8

/* One concrete case. Zero-initialise, set family and the fields it uses.
 * A zero means the default in: ndim (the number of leading non-zero
 * x_shape entries), stride_h and stride_w (1), factor (2); for batch norm
 * epsilon (1e-3) and momentum (0.1); for SGD lr (0.1); for Adam lr (0.01),
 * beta1 (0.9), beta2 (0.999), epsilon (1e-8) and step (1).
 *
 *   conv2d           x_shape [N,C,H,W], out_features K, kernel, stride, pad, bias
 *   linear           x_shape [N,I] (ndim 2) or [N,C,H,W] (flattened), out_features O, bias
 *   batchnorm_*      x_shape [N,C,H,W], gamma, beta, epsilon, momentum (train), far (train,
 *                    sync: data far from zero next to their spread)
 *   relu             x_shape (any ndim), inplace (forward with y aliasing x, also checked)
 *   maxpool          x_shape, kernel, stride, pad, ties (inputs with repeated values:
 *                    the gradient is checked against the reference's tie rule)
 *   avgpool          x_shape, kernel, stride, pad, count_include_pad
 *   global_avgpool   x_shape
 *   concat           x_shape [N,*,H,W] (channel entry ignored), n_parts, part_channels
 *   add              x_shape, omit_grad (1: no da tensor, 2: no db tensor)
 *   dropout          x_shape, rate, dropout_offset (the mask stream index of element 0)
 *   softmax_xent     x_shape [N,K] (ndim 2) or per pixel [N,K,H,W] (ndim 4); ignore_label
 *                    the op's (outside [0, K): about a quarter of the labels take it; inside:
 *                    it ignores nothing)
 *   upsample         x_shape [N,C,H,W], factor
 *   sgd              x_shape (the parameter), lr, momentum, weight_decay, velocity
 *                    (1: a velocity tensor is given; it is used when momentum > 0)
 *   adam             x_shape (the parameter), lr, beta1, beta2, epsilon, weight_decay, step
 *   count_correct    x_shape [N,K] or per pixel [N,K,H,W] (the scores), ties (scores from three values: argmax ties
 *                    everywhere), nonfinite (1: NaN and infinities planted in about half the
 *                    rows, at the first, middle or last class), label_mode (0: about half the
 *                    labels at the row's first maximum, the rest at other classes or outside
 *                    [0, K); 1: every label at it; 2: none)
 *   check_finite     x_shape (any ndim), nonfinite (where a NaN or an infinity, drawn from the
 *                    seed, is planted: 0 nowhere, 1 the first element, 2 the middle one, 3 the
 *                    last), tag (0 = 7), preset (the flag's value before the op: 0 clear,
 *                    otherwise a tag that must survive)
 *
 * count_correct and check_finite produce int32 results, compared exactly:
 * their error is the absolute difference, so any difference fails.
 *
 * The optimizer families check one update of a random parameter, gradient
 * and state against the reference step; the parameter's error is measured
 * against the size of the step, not of the parameter.
 */
typedef struct brg_check_case {
    brg_check_family family;
    int ndim;
    int64_t x_shape[4];
    int64_t out_features;
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int bias;
    int gamma, beta;
    float epsilon, momentum;
    int count_include_pad;
    int ties;
    int inplace;
    int omit_grad;
    int n_parts;
    int64_t part_channels[BRG_CHECK_MAX_PARTS];
    float rate;
    uint64_t dropout_offset;
    int factor;
    float lr, weight_decay, beta1, beta2;
    int64_t step;
    int velocity;
    int label_mode;
    int nonfinite;
    int32_t tag, preset;
    int32_t ignore_label;
    int far; /* batchnorm_train, batchnorm_sync: x about 1000, some 1700 times its spread */
} brg_check_case;

/* A short label, e.g. "conv2d x[2,3,9,9] k4 1x7 s1x2 p0x3 bias", into buf
 * (always NUL-terminated, truncated to size). Returns buf. */
BRG_API char *brg_check_case_label(const brg_check_case *c, char *buf, size_t size);

/* A random case of family drawn from seed: small shapes (finite differences
 * stay fast), odd sizes, asymmetric kernels (1x7, 7x1, 1x3, ...), strides 1
 * to 3, paddings, flags on and off. The same seed gives the same case, with
 * defaults filled in. Returns BRG_ERR_INVALID_ARGUMENT for an unknown
 * family. */
BRG_API brg_status brg_check_random_case(brg_check_family family, uint64_t seed, brg_check_case *c);

/* The fixed default cases covering the important configurations of every
 * family (what `brigade selfcheck` runs). Returns their number; *cases
 * points to static storage. */
BRG_API int brg_check_default_cases(const brg_check_case **cases);

/* Tolerances for a family: the relative errors allowed for the forward
 * outputs, the gradients against finite differences, and the accumulate
 * runs. A tensor's error is max |got - want| over the larger of max |want|
 * and the magnitude of the terms it was computed from (so a sum that
 * cancels to nearly nothing is judged against its terms; docs/kernels.md).
 * Unknown family: all zero. */
BRG_API void brg_check_tolerances(brg_check_family family, double *forward, double *backward,
                                  double *accumulate);

/* Knobs of a run; a zeroed struct (or NULL) gives the defaults. */
typedef struct brg_check_options {
    /* Finite differences per gradient tensor: 0 = 64; a negative value =
     * every element. Chosen at random with the first and last element
     * always included. */
    int fd_max_elements;
    /* Multiplies every tolerance; 0 = 1. */
    double tolerance_scale;
    /* Fault injection, to prove the harness can fail: when positive, the
     * first element of the device's first forward output / gradient /
     * accumulate result is moved by this much times the larger of 1 and the
     * reference's largest value, after it is copied out and before it is
     * compared. */
    double inject_forward;
    double inject_backward;
    double inject_accumulate;
    /* An extra oracle: when not NULL, a second device (the CPU beside a
     * GPU) runs every op of the case too, on copies of what the checked
     * device's op read, and each output is compared element by element
     * with the checked device's, at the tolerance of the op's part
     * (forward, backward, accumulate). For shapes too large for finite
     * differences to cover (few fd_max_elements), this checks every
     * element against an independent implementation. */
    brg_device *oracle;
} brg_check_options;

/* The outcome of one case. Errors are relative as for brg_check_tolerances;
 * a NaN or an infinity anywhere counts as an infinite error. */
typedef struct brg_check_result {
    char label[128];
    brg_check_family family;
    uint64_t seed;
    int passed;             /* 1 if everything below is within tolerance and no call failed */
    int has_backward;       /* 0 for batchnorm_infer, sgd, adam, count_correct, check_finite: no backward kind */
    double forward_error;   /* worst over the forward outputs */
    double backward_error;  /* worst over every gradient tensor */
    double accumulate_error;
    double forward_tol, backward_tol, accumulate_tol;
    double oracle_error;    /* worst error for its tolerance (a ratio) against options.oracle; 0 without */
    char worst[48];         /* tensor with the worst error for its tolerance, e.g. "dw", "running_var" */
    brg_status status;      /* BRG_OK, or why the case could not run (a kernel or device call failed) */
    char message[256];      /* why it failed: the call's message, a guard band, a leak; "" if passed */
    int fd_points;          /* finite-difference points evaluated */
    int blocked_twins;      /* ops run again with their image tensors channel-blocked, which gave the same
                             * bits (on devices with brg_device_channel_block > 0) */
    double seconds;         /* wall time of the case */
} brg_check_result;

/* Run one case on dev with inputs drawn from seed and fill *res. Returns
 * BRG_OK when the case ran to the end, whatever its verdict (res->passed);
 * otherwise the status of the call that failed (also in res->status and
 * res->message, and res->passed is 0): BRG_ERR_INVALID_ARGUMENT for a
 * malformed case, a device or kernel error, BRG_ERR_HOST_MEMORY. Frees all
 * it allocates on the device and the host on every path; device memory that
 * the run leaves allocated (brg_device_in_use not back to its starting
 * value) fails the case. Not thread-safe for one device. */
BRG_API brg_status brg_check_run(brg_device *dev, const brg_check_case *c, uint64_t seed, brg_check_result *res);

/* As brg_check_run, with options (NULL = defaults). */
BRG_API brg_status brg_check_run_opts(brg_device *dev, const brg_check_case *c, uint64_t seed,
                                      const brg_check_options *opts, brg_check_result *res);

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_CHECK_H */
