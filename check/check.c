/* The kernel correctness harness (see brigade/check.h).
 *
 * One run of a case goes: draw inputs on the host from the seed, copy them
 * into guarded device tensors, run the forward kind through brg_device_run,
 * copy the outputs back and compare them with the double reference
 * (kernels/ref); then run each backward kind with a random dy and compare
 * every gradient with central finite differences of the double reference;
 * then run each backward again with accumulate = 1 over a random prefill.
 *
 * Everything goes through the public device API, so a GPU backend is
 * checked by the same code. All state of a run lives in one `ck` context
 * that owns every host and device allocation, so every path out of a run
 * frees everything with one cleanup.
 *
 * Guarding: every device tensor (and workspace) sits between two bands of
 * GUARD NaNs whose payload names the tensor, so a write outside a tensor
 * shows up as a changed band; outputs are filled with another NaN (POISON)
 * before a non-accumulating run, so an element a kernel forgets to write
 * reads back as NaN (an infinite error). Inputs whose host copy is known are
 * compared bit for bit after each op, so a kernel that scribbles on an input
 * is caught.
 *
 * Errors are normwise relative errors, measured against the magnitude of
 * the terms a value was computed from where a result can cancel (see
 * rel_error and ck_abs_mode), so float32 rounding in a sum that happens to
 * come out near zero is not mistaken for a wrong kernel.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/ref/ref-kernels.h"
#include "brigade/check.h"
#include "brigade/ops.h"
#include "core/rng.h"
#include "core/internal.h"

#define GUARD 64                  /* floats on each side: 256 bytes, keeps data aligned */
#define POISON_CHUNK 4096         /* floats of POISON written per copy */
#define POISON 0x7fc0dea1u        /* a quiet NaN with a recognisable payload: unwritten outputs */
#define WORKSPACE_ID 0x3fff       /* guard id of the workspace block */
#define FD_DEFAULT 64             /* finite differences per gradient tensor */
#define FD_STEP 1e-4              /* step of the central differences: inputs are O(1), and max-pool
                                   * inputs are 0.01 apart, so no step crosses a kink */
#define ERR_FLOOR 1e-6            /* smallest denominator of a relative error */
#define CK_MAX_TENSORS 48
#define CK_MAX_NUMEL ((int64_t)1 << 22)

/* ---- families, tolerances ---- */

static const char *const family_names[BRG_CHECK_FAMILY_COUNT] = {
    [BRG_CHECK_CONV2D] = "conv2d",
    [BRG_CHECK_LINEAR] = "linear",
    [BRG_CHECK_BATCHNORM_TRAIN] = "batchnorm_train",
    [BRG_CHECK_BATCHNORM_INFER] = "batchnorm_infer",
    [BRG_CHECK_RELU] = "relu",
    [BRG_CHECK_MAXPOOL] = "maxpool",
    [BRG_CHECK_AVGPOOL] = "avgpool",
    [BRG_CHECK_GLOBAL_AVGPOOL] = "global_avgpool",
    [BRG_CHECK_CONCAT] = "concat",
    [BRG_CHECK_ADD] = "add",
    [BRG_CHECK_DROPOUT] = "dropout",
    [BRG_CHECK_SOFTMAX_XENT] = "softmax_xent",
    [BRG_CHECK_UPSAMPLE] = "upsample",
    [BRG_CHECK_SGD] = "sgd",
    [BRG_CHECK_ADAM] = "adam",
};

const char *brg_check_family_name(brg_check_family family)
{
    if ((int)family < 0 || family >= BRG_CHECK_FAMILY_COUNT) return "unknown";
    return family_names[family];
}

brg_status brg_check_family_parse(const char *name, brg_check_family *family)
{
    for (int f = 0; f < BRG_CHECK_FAMILY_COUNT; f++)
        if (name && strcmp(name, family_names[f]) == 0) {
            *family = (brg_check_family)f;
            return BRG_OK;
        }
    char known[256] = "";
    for (int f = 0; f < BRG_CHECK_FAMILY_COUNT; f++) {
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s", f ? ", " : "", family_names[f]);
    }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown kernel family '%s' (known: %s)", name ? name : "(null)",
                     known);
}

/* Relative errors allowed, float32 kernels against double references.
 * Forward: exact ops (copies, max, a single add or multiply) get 1e-6, only
 * to forgive a last-bit rounding; short sums (pools) 1e-5; long dot products
 * and reductions (conv, linear, batch norm, softmax) 1e-4, about 100x the
 * float32 rounding of a few hundred terms. Backward against finite
 * differences: the differences themselves are good to ~1e-9 in double, so
 * the tolerance is the kernel's float error with a margin: 1e-3 for
 * reductions through the batch statistics or long sums, less for the
 * rest. Accumulate: prefill + gradient differs from the kernel's own
 * non-accumulating result only by the order of float additions. The
 * optimizer steps are measured against the size of the step, which the
 * float32 rounding of the parameter itself (about 3e-8 of it) eats into
 * when the step is small: 1e-4. */
static const struct {
    double fwd, bwd, acc;
} tolerances[BRG_CHECK_FAMILY_COUNT] = {
    [BRG_CHECK_CONV2D] = {1e-4, 1e-3, 1e-5},
    [BRG_CHECK_LINEAR] = {1e-4, 1e-3, 1e-5},
    [BRG_CHECK_BATCHNORM_TRAIN] = {1e-5, 1e-3, 1e-5},
    [BRG_CHECK_BATCHNORM_INFER] = {1e-5, 1e-3, 1e-5},
    [BRG_CHECK_RELU] = {1e-6, 1e-5, 1e-5},
    [BRG_CHECK_MAXPOOL] = {1e-6, 1e-5, 1e-5},
    [BRG_CHECK_AVGPOOL] = {1e-5, 1e-4, 1e-5},
    [BRG_CHECK_GLOBAL_AVGPOOL] = {1e-5, 1e-4, 1e-5},
    [BRG_CHECK_CONCAT] = {1e-6, 1e-5, 1e-5},
    [BRG_CHECK_ADD] = {1e-6, 1e-5, 1e-5},
    [BRG_CHECK_DROPOUT] = {1e-6, 1e-5, 1e-5},
    [BRG_CHECK_SOFTMAX_XENT] = {1e-5, 1e-4, 1e-5},
    [BRG_CHECK_UPSAMPLE] = {1e-6, 1e-4, 1e-5},
    [BRG_CHECK_SGD] = {1e-4, 1e-3, 1e-5},
    [BRG_CHECK_ADAM] = {1e-4, 1e-3, 1e-5},
};

void brg_check_tolerances(brg_check_family family, double *forward, double *backward, double *accumulate)
{
    int ok = (int)family >= 0 && family < BRG_CHECK_FAMILY_COUNT;
    if (forward) *forward = ok ? tolerances[family].fwd : 0.0;
    if (backward) *backward = ok ? tolerances[family].bwd : 0.0;
    if (accumulate) *accumulate = ok ? tolerances[family].acc : 0.0;
}

/* ---- random numbers: splitmix64 over a counter ---- */

typedef struct ck_rng {
    uint64_t s;
} ck_rng;

static uint64_t rng_next(ck_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return brg_splitmix64(r->s);
}

/* Uniform in [0, 1). */
static double rng_unit(ck_rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* Uniform integer in [lo, hi]. */
static int64_t rng_int(ck_rng *r, int64_t lo, int64_t hi)
{
    if (hi <= lo) return lo;
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* ---- case normalisation and labels ---- */

static int family_is_4d(brg_check_family f)
{
    switch (f) {
    case BRG_CHECK_CONV2D:
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_INFER:
    case BRG_CHECK_MAXPOOL:
    case BRG_CHECK_AVGPOOL:
    case BRG_CHECK_GLOBAL_AVGPOOL:
    case BRG_CHECK_CONCAT:
    case BRG_CHECK_UPSAMPLE: return 1;
    default: return 0;
    }
}

static int family_has_window(brg_check_family f)
{
    return f == BRG_CHECK_CONV2D || f == BRG_CHECK_MAXPOOL || f == BRG_CHECK_AVGPOOL;
}

/* Fill in the defaults of a case (see brigade/check.h) into *out. */
static void normalize_case(const brg_check_case *in, brg_check_case *out)
{
    *out = *in;
    if (out->ndim == 0) {
        int n = 0;
        while (n < 4 && out->x_shape[n] > 0) n++;
        out->ndim = n;
    }
    if (out->family == BRG_CHECK_CONCAT && out->ndim == 1 && out->n_parts > 0) out->ndim = 4; /* x[N,0,H,W] */
    if (out->family == BRG_CHECK_CONCAT && out->n_parts >= 1 && out->n_parts <= BRG_CHECK_MAX_PARTS) {
        int64_t total = 0;
        for (int p = 0; p < out->n_parts; p++) total += out->part_channels[p];
        out->x_shape[1] = total;
    }
    for (int d = out->ndim; d < 4; d++) out->x_shape[d] = 0;
    if (out->stride_h == 0) out->stride_h = 1;
    if (out->stride_w == 0) out->stride_w = 1;
    switch (out->family) {
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_INFER:
        if (out->epsilon == 0.0f) out->epsilon = 1e-3f;
        if (out->momentum == 0.0f) out->momentum = 0.1f;
        break;
    case BRG_CHECK_UPSAMPLE:
        if (out->factor == 0) out->factor = 2;
        break;
    case BRG_CHECK_SGD:
        if (out->lr == 0.0f) out->lr = 0.1f;
        break;
    case BRG_CHECK_ADAM:
        if (out->lr == 0.0f) out->lr = 0.01f;
        if (out->beta1 == 0.0f) out->beta1 = 0.9f;
        if (out->beta2 == 0.0f) out->beta2 = 0.999f;
        if (out->epsilon == 0.0f) out->epsilon = 1e-8f;
        if (out->step == 0) out->step = 1;
        break;
    default: break;
    }
}

static int64_t case_numel(const brg_check_case *c)
{
    int64_t n = 1;
    for (int d = 0; d < c->ndim; d++) n *= c->x_shape[d];
    return n;
}

/* BRG_OK if the normalised case can run; otherwise a message saying why. */
static brg_status validate_case(const brg_check_case *c)
{
    if ((int)c->family < 0 || c->family >= BRG_CHECK_FAMILY_COUNT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case: unknown family %d", (int)c->family);
    const char *fam = brg_check_family_name(c->family);
    if (c->ndim < 1 || c->ndim > 4)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x has %d dimensions", fam, c->ndim);
    for (int d = 0; d < c->ndim; d++)
        if (c->x_shape[d] < 1 || c->x_shape[d] > CK_MAX_NUMEL)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: dimension %d of x is %lld", fam, d,
                             (long long)c->x_shape[d]);
    if (case_numel(c) > CK_MAX_NUMEL)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x has more than %lld elements", fam,
                         (long long)CK_MAX_NUMEL);
    if (family_is_4d(c->family) && c->ndim != 4)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x must be [N,C,H,W]", fam);
    if (c->family == BRG_CHECK_LINEAR && c->ndim < 2)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x must have a batch and a feature dimension",
                         fam);
    if (c->family == BRG_CHECK_SOFTMAX_XENT && (c->ndim != 2 || c->x_shape[1] > INT32_MAX))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: logits must be [N,K]", fam);
    if ((c->family == BRG_CHECK_CONV2D || c->family == BRG_CHECK_LINEAR) &&
        (c->out_features < 1 || c->out_features > 4096))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: out_features %lld must be in 1..4096", fam,
                         (long long)c->out_features);
    if (family_has_window(c->family)) {
        brg_ref_window g;
        if (c->kernel_h > 64 || c->kernel_w > 64 ||
            !brg_ref_window_init(&g, c->x_shape[0], c->x_shape[1], c->x_shape[2], c->x_shape[3], c->kernel_h,
                                 c->kernel_w, c->stride_h, c->stride_w, c->pad_h, c->pad_w))
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "check case %s: a %dx%d window with stride %dx%d and padding %dx%d does not fit x",
                             fam, c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h, c->pad_w);
        if (c->family != BRG_CHECK_CONV2D && (2 * c->pad_h > c->kernel_h || 2 * c->pad_w > c->kernel_w))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: padding %dx%d exceeds half the %dx%d window",
                             fam, c->pad_h, c->pad_w, c->kernel_h, c->kernel_w);
    }
    if (c->family == BRG_CHECK_BATCHNORM_TRAIN || c->family == BRG_CHECK_BATCHNORM_INFER) {
        if (!(c->epsilon > 0.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: epsilon must be positive", fam);
        if (!(c->momentum >= 0.0f && c->momentum <= 1.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: momentum must be in [0, 1]", fam);
        if (c->family == BRG_CHECK_BATCHNORM_TRAIN && c->x_shape[0] * c->x_shape[2] * c->x_shape[3] < 2)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: training needs two values per channel", fam);
    }
    if (c->family == BRG_CHECK_CONCAT) {
        if (c->n_parts < 1 || c->n_parts > BRG_CHECK_MAX_PARTS)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: %d parts (1..%d)", fam, c->n_parts,
                             BRG_CHECK_MAX_PARTS);
        for (int p = 0; p < c->n_parts; p++)
            if (c->part_channels[p] < 1)
                return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: part %d has %lld channels", fam, p,
                                 (long long)c->part_channels[p]);
    }
    if (c->family == BRG_CHECK_DROPOUT && !(c->rate >= 0.0f && c->rate < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: rate %g must be in [0, 1)", fam, (double)c->rate);
    if (c->family == BRG_CHECK_UPSAMPLE && (c->factor < 1 || c->factor > 16))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: factor %d must be in 1..16", fam, c->factor);
    if (c->family == BRG_CHECK_SGD || c->family == BRG_CHECK_ADAM) {
        if (!(c->lr > 0.0f) || !(c->weight_decay >= 0.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: lr must be positive, weight_decay non-negative",
                             fam);
        if (c->family == BRG_CHECK_SGD && !(c->momentum >= 0.0f && c->momentum < 1.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: momentum must be in [0, 1)", fam);
        if (c->family == BRG_CHECK_SGD && c->momentum > 0.0f && !c->velocity)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: momentum needs a velocity", fam);
        if (c->family == BRG_CHECK_ADAM && (!(c->beta1 > 0.0f && c->beta1 < 1.0f) ||
                                            !(c->beta2 > 0.0f && c->beta2 < 1.0f) || !(c->epsilon > 0.0f) ||
                                            c->step < 1))
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "check case %s: betas must be in (0, 1), epsilon positive, step at least 1", fam);
    }
    if (c->family == BRG_CHECK_ADD && (c->omit_grad < 0 || c->omit_grad > 2))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: omit_grad must be 0, 1 or 2", fam);
    return BRG_OK;
}

/* snprintf that appends at *len and never overruns. */
static void appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) BRG_PRINTF(4, 5);
static void appendf(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    if (*len >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
    if (*len >= size) *len = size - 1;
}

char *brg_check_case_label(const brg_check_case *in, char *buf, size_t size)
{
    if (!buf || size == 0) return buf;
    buf[0] = '\0';
    if (!in) return buf;
    brg_check_case cs;
    normalize_case(in, &cs);
    const brg_check_case *c = &cs;
    size_t len = 0;
    appendf(buf, size, &len, "%s x[", brg_check_family_name(c->family));
    for (int d = 0; d < c->ndim && d < 4; d++) appendf(buf, size, &len, "%s%lld", d ? "," : "", (long long)c->x_shape[d]);
    appendf(buf, size, &len, "]");
    switch (c->family) {
    case BRG_CHECK_CONV2D:
        appendf(buf, size, &len, " k%lld %dx%d s%dx%d p%dx%d %s", (long long)c->out_features, c->kernel_h,
                c->kernel_w, c->stride_h, c->stride_w, c->pad_h, c->pad_w, c->bias ? "bias" : "nobias");
        break;
    case BRG_CHECK_LINEAR:
        appendf(buf, size, &len, " o%lld %s", (long long)c->out_features, c->bias ? "bias" : "nobias");
        break;
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_INFER:
        appendf(buf, size, &len, " %s eps%g", c->gamma && c->beta ? "gamma+beta"
                                              : c->gamma          ? "gamma"
                                              : c->beta           ? "beta"
                                                                  : "noaffine",
                (double)c->epsilon);
        if (c->family == BRG_CHECK_BATCHNORM_TRAIN) appendf(buf, size, &len, " m%g", (double)c->momentum);
        break;
    case BRG_CHECK_RELU:
        if (c->inplace) appendf(buf, size, &len, " inplace");
        break;
    case BRG_CHECK_MAXPOOL:
    case BRG_CHECK_AVGPOOL:
        appendf(buf, size, &len, " %dx%d s%dx%d p%dx%d", c->kernel_h, c->kernel_w, c->stride_h, c->stride_w,
                c->pad_h, c->pad_w);
        if (c->family == BRG_CHECK_AVGPOOL) appendf(buf, size, &len, " %s", c->count_include_pad ? "incl" : "excl");
        if (c->family == BRG_CHECK_MAXPOOL && c->ties) appendf(buf, size, &len, " ties");
        break;
    case BRG_CHECK_CONCAT:
        appendf(buf, size, &len, " parts ");
        for (int p = 0; p < c->n_parts && p < BRG_CHECK_MAX_PARTS; p++)
            appendf(buf, size, &len, "%s%lld", p ? "+" : "", (long long)c->part_channels[p]);
        break;
    case BRG_CHECK_ADD:
        if (c->omit_grad == 1) appendf(buf, size, &len, " no-da");
        if (c->omit_grad == 2) appendf(buf, size, &len, " no-db");
        break;
    case BRG_CHECK_DROPOUT:
        appendf(buf, size, &len, " r%g off%llu", (double)c->rate, (unsigned long long)c->dropout_offset);
        break;
    case BRG_CHECK_UPSAMPLE: appendf(buf, size, &len, " f%d", c->factor); break;
    case BRG_CHECK_SGD:
        appendf(buf, size, &len, " lr%g", (double)c->lr);
        if (c->velocity) appendf(buf, size, &len, " m%g", (double)c->momentum);
        if (c->weight_decay > 0.0f) appendf(buf, size, &len, " wd%g", (double)c->weight_decay);
        break;
    case BRG_CHECK_ADAM:
        appendf(buf, size, &len, " lr%g b%g/%g eps%g", (double)c->lr, (double)c->beta1, (double)c->beta2,
                (double)c->epsilon);
        if (c->weight_decay > 0.0f) appendf(buf, size, &len, " wd%g", (double)c->weight_decay);
        appendf(buf, size, &len, " t%lld", (long long)c->step);
        break;
    default: break;
    }
    return buf;
}

/* ---- random cases ---- */

/* An input extent that makes a window of size k with padding pad and
 * stride s fit, with a few extra output positions. */
static int64_t fitting_extent(ck_rng *r, int k, int pad, int s, int max_out)
{
    int64_t min = k - 2 * pad;
    if (min < 1) min = 1;
    return min + rng_int(r, 0, (int64_t)s * (max_out - 1));
}

brg_status brg_check_random_case(brg_check_family family, uint64_t seed, brg_check_case *c)
{
    static const int kernels[][2] = {{1, 1}, {3, 3}, {5, 5}, {1, 3}, {3, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 5}};
    static const int pool_kernels[][2] = {{2, 2}, {3, 3}, {1, 3}, {3, 1}, {2, 3}, {1, 1}, {5, 5}, {3, 2}};
    static const float rates[] = {0.0f, 0.1f, 0.25f, 0.5f, 0.75f, 0.9f};
    static const float momenta[] = {0.1f, 0.01f, 0.5f, 1.0f};
    static const float epsilons[] = {1e-5f, 1e-3f, 0.1f};
    memset(c, 0, sizeof *c);
    if ((int)family < 0 || family >= BRG_CHECK_FAMILY_COUNT)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown kernel family %d", (int)family);
    ck_rng r = {seed ^ (0x5bd1e995ULL * (uint64_t)(family + 1))};
    c->family = family;
    switch (family) {
    case BRG_CHECK_CONV2D: {
        int i = (int)rng_int(&r, 0, sizeof kernels / sizeof kernels[0] - 1);
        c->kernel_h = kernels[i][0];
        c->kernel_w = kernels[i][1];
        c->stride_h = rng_int(&r, 0, 2) ? 1 : (int)rng_int(&r, 2, 3);
        c->stride_w = rng_int(&r, 0, 2) ? c->stride_h : (int)rng_int(&r, 1, 3);
        /* Mostly "same"-like padding, sometimes none, sometimes up to k - 1. */
        int mode = (int)rng_int(&r, 0, 4);
        c->pad_h = mode == 0 ? 0 : mode == 4 ? (int)rng_int(&r, 0, c->kernel_h - 1) : c->kernel_h / 2;
        c->pad_w = mode == 0 ? 0 : mode == 4 ? (int)rng_int(&r, 0, c->kernel_w - 1) : c->kernel_w / 2;
        c->ndim = 4;
        c->x_shape[0] = rng_int(&r, 1, 3);
        c->x_shape[1] = rng_int(&r, 1, 5);
        c->x_shape[2] = fitting_extent(&r, c->kernel_h, c->pad_h, c->stride_h, 7);
        c->x_shape[3] = fitting_extent(&r, c->kernel_w, c->pad_w, c->stride_w, 7);
        c->out_features = rng_int(&r, 1, 6);
        c->bias = (int)rng_int(&r, 0, 1);
        break;
    }
    case BRG_CHECK_LINEAR:
        c->x_shape[0] = rng_int(&r, 1, 5);
        if (rng_int(&r, 0, 1)) {
            c->ndim = 2;
            c->x_shape[1] = rng_int(&r, 1, 40);
        } else {
            c->ndim = 4;
            c->x_shape[1] = rng_int(&r, 1, 4);
            c->x_shape[2] = rng_int(&r, 1, 4);
            c->x_shape[3] = rng_int(&r, 1, 4);
        }
        c->out_features = rng_int(&r, 1, 12);
        c->bias = (int)rng_int(&r, 0, 1);
        break;
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_INFER:
        c->ndim = 4;
        c->x_shape[0] = rng_int(&r, 1, 4);
        c->x_shape[1] = rng_int(&r, 1, 6);
        c->x_shape[2] = rng_int(&r, 1, 6);
        c->x_shape[3] = rng_int(&r, 1, 6);
        if (c->x_shape[0] * c->x_shape[2] * c->x_shape[3] < 2) c->x_shape[0] = 2;
        c->gamma = (int)rng_int(&r, 0, 3) != 0;
        c->beta = (int)rng_int(&r, 0, 3) != 0;
        c->epsilon = epsilons[rng_int(&r, 0, 2)];
        c->momentum = momenta[rng_int(&r, 0, 3)];
        break;
    case BRG_CHECK_RELU:
    case BRG_CHECK_ADD:
    case BRG_CHECK_DROPOUT: {
        c->ndim = (int)rng_int(&r, 1, 4);
        static const int64_t max_dim[5] = {0, 300, 20, 8, 6};
        for (int d = 0; d < c->ndim; d++) c->x_shape[d] = rng_int(&r, 1, max_dim[c->ndim]);
        if (family == BRG_CHECK_RELU) c->inplace = (int)rng_int(&r, 0, 1);
        if (family == BRG_CHECK_ADD) c->omit_grad = rng_int(&r, 0, 2) == 2 ? (int)rng_int(&r, 1, 2) : 0;
        if (family == BRG_CHECK_DROPOUT) {
            c->rate = rates[rng_int(&r, 0, sizeof rates / sizeof rates[0] - 1)];
            c->dropout_offset = (uint64_t)rng_int(&r, 0, 100000);
        }
        break;
    }
    case BRG_CHECK_MAXPOOL:
    case BRG_CHECK_AVGPOOL: {
        int i = (int)rng_int(&r, 0, sizeof pool_kernels / sizeof pool_kernels[0] - 1);
        c->kernel_h = pool_kernels[i][0];
        c->kernel_w = pool_kernels[i][1];
        c->stride_h = (int)rng_int(&r, 1, 3);
        c->stride_w = rng_int(&r, 0, 1) ? c->stride_h : (int)rng_int(&r, 1, 3);
        c->pad_h = (int)rng_int(&r, 0, c->kernel_h / 2);
        c->pad_w = (int)rng_int(&r, 0, c->kernel_w / 2);
        c->ndim = 4;
        c->x_shape[0] = rng_int(&r, 1, 3);
        c->x_shape[1] = rng_int(&r, 1, 4);
        c->x_shape[2] = fitting_extent(&r, c->kernel_h, c->pad_h, c->stride_h, 6);
        c->x_shape[3] = fitting_extent(&r, c->kernel_w, c->pad_w, c->stride_w, 6);
        if (family == BRG_CHECK_AVGPOOL) c->count_include_pad = (int)rng_int(&r, 0, 1);
        if (family == BRG_CHECK_MAXPOOL) c->ties = rng_int(&r, 0, 3) == 0;
        break;
    }
    case BRG_CHECK_GLOBAL_AVGPOOL:
        c->ndim = 4;
        c->x_shape[0] = rng_int(&r, 1, 3);
        c->x_shape[1] = rng_int(&r, 1, 6);
        c->x_shape[2] = rng_int(&r, 1, 8);
        c->x_shape[3] = rng_int(&r, 1, 8);
        break;
    case BRG_CHECK_CONCAT:
        c->ndim = 4;
        c->n_parts = (int)rng_int(&r, 1, 5);
        for (int p = 0; p < c->n_parts; p++) c->part_channels[p] = rng_int(&r, 1, 4);
        c->x_shape[0] = rng_int(&r, 1, 3);
        c->x_shape[2] = rng_int(&r, 1, 6);
        c->x_shape[3] = rng_int(&r, 1, 6);
        break;
    case BRG_CHECK_SOFTMAX_XENT:
        c->ndim = 2;
        c->x_shape[0] = rng_int(&r, 1, 8);
        c->x_shape[1] = rng_int(&r, 2, 12);
        break;
    case BRG_CHECK_UPSAMPLE:
        c->ndim = 4;
        c->factor = (int)rng_int(&r, 1, 3);
        c->x_shape[0] = rng_int(&r, 1, 3);
        c->x_shape[1] = rng_int(&r, 1, 4);
        c->x_shape[2] = rng_int(&r, 1, 6);
        c->x_shape[3] = rng_int(&r, 1, 6);
        break;
    case BRG_CHECK_SGD:
    case BRG_CHECK_ADAM: {
        static const float lrs[] = {0.01f, 0.1f, 0.5f};
        static const float decays[] = {0.0f, 0.0f, 1e-4f, 0.01f};
        static const int64_t steps[] = {1, 2, 10, 1000};
        c->ndim = (int)rng_int(&r, 1, 4);
        static const int64_t max_dim[5] = {0, 300, 20, 8, 6};
        for (int d = 0; d < c->ndim; d++) c->x_shape[d] = rng_int(&r, 1, max_dim[c->ndim]);
        c->lr = lrs[rng_int(&r, 0, 2)];
        c->weight_decay = decays[rng_int(&r, 0, 3)];
        if (family == BRG_CHECK_SGD) {
            c->velocity = (int)rng_int(&r, 0, 2) != 0;
            c->momentum = c->velocity && rng_int(&r, 0, 3) ? (float)(0.5 + 0.1 * (double)rng_int(&r, 0, 4)) : 0.0f;
        } else {
            c->beta1 = rng_int(&r, 0, 1) ? 0.9f : 0.5f;
            c->beta2 = rng_int(&r, 0, 1) ? 0.999f : 0.9f;
            c->epsilon = rng_int(&r, 0, 1) ? 1e-8f : 1e-3f;
            c->step = steps[rng_int(&r, 0, 3)];
        }
        break;
    }
    default: break;
    }
    brg_check_case norm;
    normalize_case(c, &norm);
    *c = norm;
    return BRG_OK;
}

/* ---- default cases ---- */

#define X4(a, b, c_, d) .ndim = 4, .x_shape = {a, b, c_, d}
#define X2(a, b) .ndim = 2, .x_shape = {a, b}
#define WIN(kh, kw, sh, sw, ph, pw)                                                                \
    .kernel_h = kh, .kernel_w = kw, .stride_h = sh, .stride_w = sw, .pad_h = ph, .pad_w = pw

static const brg_check_case default_cases[] = {
    /* conv2d: pointwise, 3x3 same, strided, the Inception factorised 1x7 / 7x1, 5x5, batch 1 and 3,
     * non-square inputs, no bias, stride 3. */
    {.family = BRG_CHECK_CONV2D, X4(2, 4, 6, 6), .out_features = 8, WIN(1, 1, 1, 1, 0, 0), .bias = 1},
    {.family = BRG_CHECK_CONV2D, X4(1, 3, 7, 7), .out_features = 5, WIN(3, 3, 1, 1, 1, 1), .bias = 1},
    {.family = BRG_CHECK_CONV2D, X4(3, 2, 9, 9), .out_features = 4, WIN(3, 3, 2, 2, 0, 0), .bias = 0},
    {.family = BRG_CHECK_CONV2D, X4(2, 3, 9, 9), .out_features = 4, WIN(1, 7, 1, 2, 0, 3), .bias = 1},
    {.family = BRG_CHECK_CONV2D, X4(2, 3, 9, 5), .out_features = 3, WIN(7, 1, 1, 1, 3, 0), .bias = 1},
    {.family = BRG_CHECK_CONV2D, X4(2, 3, 8, 6), .out_features = 3, WIN(5, 5, 1, 1, 2, 2), .bias = 0},
    {.family = BRG_CHECK_CONV2D, X4(1, 2, 10, 11), .out_features = 3, WIN(3, 3, 3, 3, 1, 1), .bias = 1},
    {.family = BRG_CHECK_CONV2D, X4(2, 3, 7, 9), .out_features = 2, WIN(3, 2, 2, 1, 0, 1), .bias = 0},
    /* a medium one, so blocked and threaded paths of a backend run too */
    {.family = BRG_CHECK_CONV2D, X4(2, 16, 8, 8), .out_features = 24, WIN(3, 3, 1, 1, 1, 1), .bias = 1},
    /* linear: plain, flattened NCHW input, a single unit. */
    {.family = BRG_CHECK_LINEAR, X2(4, 20), .out_features = 7, .bias = 1},
    {.family = BRG_CHECK_LINEAR, X4(2, 3, 2, 2), .out_features = 5, .bias = 0},
    {.family = BRG_CHECK_LINEAR, X2(3, 1), .out_features = 1, .bias = 1},
    {.family = BRG_CHECK_LINEAR, X2(16, 200), .out_features = 48, .bias = 1},
    /* batch norm. */
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(4, 3, 5, 5), .gamma = 1, .beta = 1, .epsilon = 1e-3f, .momentum = 0.1f},
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(2, 4, 3, 3), .epsilon = 1e-5f, .momentum = 0.01f},
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(8, 5, 1, 1), .gamma = 1, .epsilon = 1e-3f, .momentum = 1.0f},
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(1, 2, 3, 4), .beta = 1, .epsilon = 0.1f, .momentum = 0.5f},
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(8, 16, 6, 6), .gamma = 1, .beta = 1, .epsilon = 1e-5f, .momentum = 0.1f},
    {.family = BRG_CHECK_BATCHNORM_INFER, X4(2, 3, 4, 4), .gamma = 1, .beta = 1, .epsilon = 1e-3f},
    {.family = BRG_CHECK_BATCHNORM_INFER, X4(3, 2, 5, 5), .epsilon = 1e-5f},
    /* relu. */
    {.family = BRG_CHECK_RELU, X4(2, 3, 5, 5)},
    {.family = BRG_CHECK_RELU, X2(3, 7), .inplace = 1},
    /* max pool: 2x2/2, overlapping 3x3/2 with padding, ties (and padding that must not win),
     * asymmetric windows, the 3x3/2 reduction of an odd input. */
    {.family = BRG_CHECK_MAXPOOL, X4(2, 3, 8, 8), WIN(2, 2, 2, 2, 0, 0)},
    {.family = BRG_CHECK_MAXPOOL, X4(2, 2, 7, 7), WIN(3, 3, 2, 2, 1, 1)},
    {.family = BRG_CHECK_MAXPOOL, X4(1, 3, 6, 6), WIN(3, 3, 1, 1, 1, 1), .ties = 1},
    {.family = BRG_CHECK_MAXPOOL, X4(2, 2, 5, 7), WIN(1, 3, 1, 1, 0, 1)},
    {.family = BRG_CHECK_MAXPOOL, X4(1, 2, 9, 9), WIN(3, 3, 2, 2, 0, 0)},
    /* average pool: both padding conventions. */
    {.family = BRG_CHECK_AVGPOOL, X4(2, 3, 6, 6), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 0},
    {.family = BRG_CHECK_AVGPOOL, X4(2, 3, 6, 6), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 1},
    {.family = BRG_CHECK_AVGPOOL, X4(2, 2, 8, 8), WIN(2, 2, 2, 2, 0, 0)},
    {.family = BRG_CHECK_AVGPOOL, X4(1, 2, 7, 9), WIN(3, 3, 2, 2, 1, 1), .count_include_pad = 0},
    {.family = BRG_CHECK_AVGPOOL, X4(2, 2, 5, 6), WIN(2, 3, 1, 2, 1, 1), .count_include_pad = 1},
    /* global average pool. */
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(2, 3, 7, 7)},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(1, 4, 1, 1)},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(3, 2, 3, 5)},
    /* concat: an Inception-style join of four branches, three parts, one part. */
    {.family = BRG_CHECK_CONCAT, X4(2, 0, 5, 5), .n_parts = 4, .part_channels = {2, 3, 1, 2}},
    {.family = BRG_CHECK_CONCAT, X4(1, 0, 4, 3), .n_parts = 3, .part_channels = {3, 5, 2}},
    {.family = BRG_CHECK_CONCAT, X4(2, 0, 3, 3), .n_parts = 1, .part_channels = {4}},
    /* add: both gradients, and each one unused. */
    {.family = BRG_CHECK_ADD, X4(2, 3, 4, 4)},
    {.family = BRG_CHECK_ADD, X2(5, 6), .omit_grad = 1},
    {.family = BRG_CHECK_ADD, X4(1, 2, 3, 3), .omit_grad = 2},
    /* dropout. */
    {.family = BRG_CHECK_DROPOUT, X4(2, 3, 5, 5), .rate = 0.5f},
    {.family = BRG_CHECK_DROPOUT, X2(4, 9), .rate = 0.0f},
    {.family = BRG_CHECK_DROPOUT, .ndim = 3, .x_shape = {3, 5, 7}, .rate = 0.2f, .dropout_offset = 12345},
    /* softmax cross-entropy. */
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(4, 10)},
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(1, 3)},
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(8, 5)},
    /* upsampling: the U-Net decoder's 2x, and 3x. */
    {.family = BRG_CHECK_UPSAMPLE, X4(2, 3, 4, 5), .factor = 2},
    {.family = BRG_CHECK_UPSAMPLE, X4(1, 2, 3, 3), .factor = 3},
    /* optimizer steps: plain, with momentum and weight decay; Adam's first and a later step. */
    {.family = BRG_CHECK_SGD, X2(8, 9), .lr = 0.1f},
    {.family = BRG_CHECK_SGD, X4(4, 3, 3, 3), .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f, .velocity = 1},
    {.family = BRG_CHECK_ADAM, X2(8, 9), .lr = 0.01f, .step = 1},
    {.family = BRG_CHECK_ADAM, X4(4, 3, 3, 3), .lr = 0.1f, .weight_decay = 0.01f, .step = 100},
};

int brg_check_default_cases(const brg_check_case **cases)
{
    if (cases) *cases = default_cases;
    return (int)(sizeof default_cases / sizeof default_cases[0]);
}

/* ---- the run context ---- */

typedef struct ck_tensor {
    char name[32];
    brg_dtype dtype;
    int ndim;
    int64_t shape[4];
    int64_t numel;
    void *host;       /* numel elements: what the device tensor holds when mirrored */
    double *ref;      /* float tensors: the values as doubles (inputs; perturbed by FD) */
    double *absref;   /* |ref|, swapped in for the magnitude model (see ck_abs_mode) */
    int mirrored;     /* 1 if host equals the device contents */
    void *mem;        /* device block: guard, data, guard */
    brg_tensor t;     /* the view on the data */
} ck_tensor;

typedef struct ck {
    brg_device *dev;
    brg_check_case c;
    brg_check_options opt;
    brg_check_result *res;
    ck_rng rng;
    ck_tensor *tens[CK_MAX_TENSORS];
    int n_tens;
    void **host;         /* every host allocation of the run, freed at its end */
    size_t n_host, cap_host;
    brg_status st;       /* first call that failed to run */
    double worst_ratio;  /* worst error / tolerance seen */
    int worst_locked;    /* res->worst names a non-numeric failure (guard, input, leak) */
    int injected[3];
    float *poison;       /* POISON_CHUNK floats of POISON */

    /* The reference model: the inputs of the forward, the dy of the loss,
     * the scratch output. */
    brg_ref_window g;
    ck_tensor *x, *w, *b, *gamma, *beta, *rmean, *rvar, *a2, *parts[BRG_CHECK_MAX_PARTS];
    int32_t *labels;
    ck_tensor *dy;
    double *yref;       /* reference output of the current inputs */
    double *yabs;       /* the magnitude model's output (see ck_abs_mode) */
    int64_t ny;
    double *stats[3];   /* batch norm: mean, biased var, invstd */
    uint64_t dropout_seed;
} ck;

enum { WHICH_FWD = 0, WHICH_BWD = 1, WHICH_ACC = 2 };

static int ck_ok(const ck *k) { return k->st == BRG_OK; }

static void ck_fail(ck *k, const char *fmt, ...) BRG_PRINTF(2, 3);

/* A host allocation owned by the run. NULL (and k->st set) on failure. */
static void *ck_host(ck *k, size_t count, size_t size)
{
    if (!ck_ok(k)) return NULL;
    if (k->n_host == k->cap_host) {
        size_t cap = k->cap_host ? 2 * k->cap_host : 64;
        void **grown = realloc(k->host, cap * sizeof *grown);
        if (!grown) {
            k->st = brg_error(BRG_ERR_HOST_MEMORY, "check: cannot grow the list of host buffers");
            ck_fail(k, "%s", brg_last_error());
            return NULL;
        }
        k->host = grown;
        k->cap_host = cap;
    }
    void *p = brg_calloc(count, size, "a kernel check buffer");
    if (!p) {
        k->st = BRG_ERR_HOST_MEMORY;
        ck_fail(k, "%s", brg_last_error());
        return NULL;
    }
    k->host[k->n_host++] = p;
    return p;
}

/* Record the first failure message of the case. */
static void ck_fail(ck *k, const char *fmt, ...)
{
    k->res->passed = 0;
    if (k->res->message[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->res->message, sizeof k->res->message, fmt, ap);
    va_end(ap);
}

/* Name the culprit of the first non-numeric failure in res->worst. */
static void ck_blame(ck *k, const char *fmt, ...) BRG_PRINTF(2, 3);
static void ck_blame(ck *k, const char *fmt, ...)
{
    if (k->worst_locked) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->res->worst, sizeof k->res->worst, fmt, ap);
    va_end(ap);
    k->worst_locked = 1;
}

/* A call failed: keep its status and message. */
static void ck_call_failed(ck *k, brg_status st, const char *what)
{
    if (!ck_ok(k)) return;
    k->st = st;
    const char *msg = brg_last_error();
    if (strstr(msg, what))
        ck_fail(k, "%s", msg);
    else
        ck_fail(k, "%s: %s", what, msg[0] ? msg : brg_status_string(st));
}

/* The guard band of block id on one side: quiet NaNs whose payload encodes
 * the block, the side and the position, so a kernel that copies one guard
 * band into another (a read and a write both one past the end) still
 * changes the band it writes. Distinct from POISON (bit 21 set). */
static void guard_band(float *band, int id, int side)
{
    for (uint32_t i = 0; i < GUARD; i++) {
        uint32_t bits = 0x7fe00000u | ((uint32_t)(id & 0x3fff) << 7) | ((uint32_t)side << 6) | i;
        memcpy(&band[i], &bits, sizeof bits);
    }
}

/* Write count floats of pattern (len of them, repeated) to dst on the device. */
static void ck_write_pattern(ck *k, float *dst, int64_t count, const float *pattern, int64_t len)
{
    for (int64_t done = 0; done < count && ck_ok(k); done += len) {
        int64_t n = count - done < len ? count - done : len;
        brg_status st = brg_device_copy_in(k->dev, dst + done, pattern, (size_t)n * sizeof(float));
        if (st != BRG_OK) ck_call_failed(k, st, "copying into the device");
    }
}

/* Lay out a guarded block of count data floats: guard, poisoned data, guard. */
static void ck_guard_block(ck *k, float *block, int64_t count, int id)
{
    float band[GUARD];
    guard_band(band, id, 0);
    ck_write_pattern(k, block, GUARD, band, GUARD);
    ck_write_pattern(k, block + GUARD, count, k->poison, POISON_CHUNK);
    guard_band(band, id, 1);
    ck_write_pattern(k, block + GUARD + count, GUARD, band, GUARD);
}

/* 1 if both guard bands of the block are intact; 0 if not (or a copy failed). */
static int ck_guard_intact(ck *k, const float *block, int64_t count, int id, int *side_out)
{
    float band[GUARD], want[GUARD];
    for (int side = 0; side < 2; side++) {
        brg_status st = brg_device_copy_out(k->dev, band, side ? block + GUARD + count : block, sizeof band);
        if (st != BRG_OK) {
            ck_call_failed(k, st, "copying from the device");
            return 0;
        }
        guard_band(want, id, side);
        if (memcmp(band, want, sizeof band) != 0) {
            *side_out = side;
            return 0;
        }
    }
    return 1;
}

/* A device tensor with guard bands, poisoned, and its host mirror. */
static ck_tensor *ck_tensor_new(ck *k, const char *name, brg_dtype dtype, int ndim, const int64_t *shape)
{
    if (!ck_ok(k)) return NULL;
    if (k->n_tens == CK_MAX_TENSORS) {
        k->st = brg_error(BRG_ERR_INTERNAL, "check: too many tensors");
        return NULL;
    }
    ck_tensor *t = ck_host(k, 1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= shape[d];
    }
    t->host = ck_host(k, (size_t)t->numel, 4);
    if (dtype == BRG_F32) t->ref = ck_host(k, (size_t)t->numel, sizeof(double));
    if (!ck_ok(k)) return NULL;
    char tag[64];
    snprintf(tag, sizeof tag, "check %s", name);
    brg_status st = brg_device_alloc(k->dev, (size_t)(t->numel + 2 * GUARD) * 4, tag, &t->mem);
    if (st != BRG_OK) {
        ck_call_failed(k, st, "allocating a check tensor");
        return NULL;
    }
    k->tens[k->n_tens++] = t;
    brg_tensor_init(&t->t, (float *)t->mem + GUARD, dtype, ndim, shape, k->dev);
    ck_guard_block(k, t->mem, t->numel, k->n_tens);
    return ck_ok(k) ? t : NULL;
}

static void ck_upload(ck *k, ck_tensor *t)
{
    if (!ck_ok(k) || !t) return;
    brg_status st = brg_device_copy_in(k->dev, t->t.data, t->host, (size_t)t->numel * 4);
    if (st != BRG_OK) ck_call_failed(k, st, "copying into the device");
    t->mirrored = 1;
}

static void ck_download(ck *k, ck_tensor *t)
{
    if (!ck_ok(k) || !t) return;
    brg_status st = brg_device_copy_out(k->dev, t->host, t->t.data, (size_t)t->numel * 4);
    if (st != BRG_OK) ck_call_failed(k, st, "copying from the device");
    t->mirrored = 1;
}

static void ck_poison(ck *k, ck_tensor *t)
{
    if (!t) return;
    ck_write_pattern(k, t->t.data, t->numel, k->poison, POISON_CHUNK);
    t->mirrored = 0;
}

enum fill_kind {
    FILL_SIGNED,   /* +-[0.1, 1]: away from zero, so ReLU kinks are out of FD reach */
    FILL_UNIFORM,  /* [-1, 1] */
    FILL_DISTINCT, /* a shuffled grid with spacing 0.01: max pool windows have one clear winner */
    FILL_TIES,     /* negative values from a set of three: ties everywhere, padding must not win */
    FILL_SHIFTED,  /* 0.3 + [-1, 1]: batch norm input with a non-zero mean */
    FILL_POSITIVE, /* [0.5, 1.5]: variances */
    FILL_LOGITS,   /* [-3, 3] */
};

/* Draw the host values of a float tensor, set its double copy, upload. */
static void ck_fill(ck *k, ck_tensor *t, enum fill_kind kind)
{
    if (!ck_ok(k) || !t) return;
    float *h = t->host;
    ck_rng *r = &k->rng;
    if (kind == FILL_DISTINCT) {
        int64_t *perm = ck_host(k, (size_t)t->numel, sizeof *perm);
        if (!perm) return;
        for (int64_t i = 0; i < t->numel; i++) perm[i] = i;
        for (int64_t i = t->numel - 1; i > 0; i--) {
            int64_t j = rng_int(r, 0, i), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        for (int64_t i = 0; i < t->numel; i++) h[i] = (float)((double)(perm[i] - t->numel / 2) * 0.01 + 0.005);
    } else {
        static const float tie_values[3] = {-0.25f, -0.5f, -1.0f};
        for (int64_t i = 0; i < t->numel; i++) {
            double u = rng_unit(r);
            double v;
            switch (kind) {
            case FILL_SIGNED: v = (rng_next(r) & 1 ? -1.0 : 1.0) * (0.1 + 0.9 * u); break;
            case FILL_UNIFORM: v = 2.0 * u - 1.0; break;
            case FILL_TIES: v = tie_values[rng_int(r, 0, 2)]; break;
            case FILL_SHIFTED: v = 0.3 + 2.0 * u - 1.0; break;
            case FILL_POSITIVE: v = 0.5 + u; break;
            default: v = 6.0 * u - 3.0; break;
            }
            h[i] = (float)v;
        }
    }
    for (int64_t i = 0; i < t->numel; i++) t->ref[i] = h[i];
    ck_upload(k, t);
}

/* A float input tensor filled with kind; NULL if absent or on failure. */
static ck_tensor *ck_input(ck *k, const char *name, int ndim, const int64_t *shape, enum fill_kind kind)
{
    ck_tensor *t = ck_tensor_new(k, name, BRG_F32, ndim, shape);
    ck_fill(k, t, kind);
    return t;
}

static ck_tensor *ck_vector(ck *k, const char *name, int64_t n, enum fill_kind kind)
{
    return ck_input(k, name, 1, &n, kind);
}

static ck_tensor *ck_output(ck *k, const char *name, int ndim, const int64_t *shape)
{
    return ck_tensor_new(k, name, BRG_F32, ndim, shape);
}

static ck_tensor *ck_find(ck *k, const brg_tensor *t)
{
    for (int i = 0; i < k->n_tens; i++)
        if (&k->tens[i]->t == t) return k->tens[i];
    return NULL;
}

/* Check that every tensor's guard bands are intact. */
static void ck_check_guards(ck *k, const char *opname)
{
    for (int i = 0; i < k->n_tens && ck_ok(k); i++) {
        ck_tensor *t = k->tens[i];
        int side = 0;
        if (!ck_guard_intact(k, t->mem, t->numel, i + 1, &side) && ck_ok(k)) {
            ck_fail(k, "%s wrote outside tensor '%s' (the guard band %s it changed)", opname, t->name,
                    side ? "after" : "before");
            ck_blame(k, "%s guard", t->name);
        }
    }
}

/* Check that the op's inputs (those with a known host copy and not also an
 * output) still hold what they held before. */
static void ck_check_inputs(ck *k, const brg_op *op, const char *opname)
{
    for (int i = 0; i < op->n_in && ck_ok(k); i++) {
        ck_tensor *t = ck_find(k, op->in[i]);
        if (!t || !t->mirrored) continue;
        int aliased = 0;
        for (int j = 0; j < op->n_out; j++)
            if (op->out[j] && op->out[j]->data == t->t.data) aliased = 1;
        if (aliased) continue;
        void *now = malloc((size_t)t->numel * 4);
        if (!now) {
            k->st = brg_error(BRG_ERR_HOST_MEMORY, "check: cannot allocate %lld bytes", (long long)t->numel * 4);
            ck_fail(k, "%s", brg_last_error());
            return;
        }
        brg_status st = brg_device_copy_out(k->dev, now, t->t.data, (size_t)t->numel * 4);
        if (st != BRG_OK)
            ck_call_failed(k, st, "copying from the device");
        else if (memcmp(now, t->host, (size_t)t->numel * 4) != 0) {
            ck_fail(k, "%s modified its input '%s'", opname, t->name);
            ck_blame(k, "%s", t->name);
        }
        free(now);
    }
}

/* Run op on the device, then check guards and inputs. With explicit_ws the
 * workspace the device asks for is allocated here, guarded and poisoned
 * (which also checks that the size it declares is enough); otherwise the
 * device takes it from its arena itself. The op's outputs are no longer
 * mirrored afterwards. */
static void ck_run(ck *k, brg_op *op, int explicit_ws)
{
    if (!ck_ok(k)) return;
    const char *opname = brg_op_kind_name(op->kind);
    void *ws = NULL;
    int64_t ws_floats = 0;
    if (explicit_ws) {
        size_t bytes = 0;
        brg_status st = brg_device_workspace_bytes(k->dev, op, &bytes);
        if (st != BRG_OK) {
            ck_call_failed(k, st, opname);
            return;
        }
        if (bytes > 0) {
            ws_floats = (int64_t)((bytes + 3) / 4);
            st = brg_device_alloc(k->dev, (size_t)(ws_floats + 2 * GUARD) * 4, "check workspace", &ws);
            if (st != BRG_OK) {
                ck_call_failed(k, st, "allocating a check workspace");
                return;
            }
            ck_guard_block(k, ws, ws_floats, WORKSPACE_ID);
            op->workspace = (float *)ws + GUARD;
            op->workspace_bytes = bytes;
        }
    }
    if (ck_ok(k)) {
        brg_status st = brg_device_run(k->dev, op);
        if (st == BRG_OK) st = brg_device_synchronize(k->dev);
        if (st != BRG_OK) ck_call_failed(k, st, opname);
    }
    for (int j = 0; j < op->n_out; j++) {
        ck_tensor *t = op->out[j] ? ck_find(k, op->out[j]) : NULL;
        if (t) t->mirrored = 0;
    }
    ck_check_guards(k, opname);
    ck_check_inputs(k, op, opname);
    if (ws) {
        int side = 0;
        if (ck_ok(k) && !ck_guard_intact(k, ws, ws_floats, WORKSPACE_ID, &side) && ck_ok(k)) {
            ck_fail(k, "%s wrote outside the %zu bytes of workspace it asked for", opname, op->workspace_bytes);
            ck_blame(k, "workspace guard");
        }
        brg_device_free(k->dev, ws);
        op->workspace = NULL;
        op->workspace_bytes = 0;
    }
}

/* ---- comparisons ---- */

/* Relative error of got against want at the given indices (all if idx is
 * NULL): max |got - want| / max(max |want|, scale, ERR_FLOOR). scale is the
 * magnitude of the terms the values were computed from (0 if not known):
 * float rounding is relative to it, not to a result that cancelled to
 * nearly nothing. Infinite if got has a NaN or an infinity. */
static double rel_error(const float *got, const double *want, const int64_t *idx, int64_t n, double scale)
{
    double maxdiff = 0.0, maxref = 0.0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = idx ? idx[i] : i;
        double g = got[j];
        if (!isfinite(g)) return INFINITY;
        double d = fabs(g - want[j]);
        if (d > maxdiff) maxdiff = d;
        if (fabs(want[j]) > maxref) maxref = fabs(want[j]);
    }
    if (scale > maxref) maxref = scale;
    return maxdiff / (maxref > ERR_FLOOR ? maxref : ERR_FLOOR);
}

/* Fault injection (brg_check_options): move element 0 of got once per kind. */
static void ck_inject(ck *k, int which, float *got, const double *want, int64_t n)
{
    double amount = which == WHICH_FWD ? k->opt.inject_forward
                    : which == WHICH_BWD ? k->opt.inject_backward
                                         : k->opt.inject_accumulate;
    if (!(amount > 0.0) || k->injected[which] || n < 1) return;
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    got[0] = (float)(got[0] + amount * (scale > 1.0 ? scale : 1.0));
    k->injected[which] = 1;
}

/* Fold one tensor's error into the result. */
static void ck_record(ck *k, int which, const char *name, double err)
{
    brg_check_result *res = k->res;
    double tol = which == WHICH_FWD ? res->forward_tol : which == WHICH_BWD ? res->backward_tol : res->accumulate_tol;
    double *slot = which == WHICH_FWD ? &res->forward_error
                   : which == WHICH_BWD ? &res->backward_error
                                        : &res->accumulate_error;
    if (!(err <= *slot)) *slot = err;
    static const char *const suffix[3] = {"", "", " (accumulate)"};
    double ratio = tol > 0 ? err / tol : err;
    if (!(ratio <= k->worst_ratio) && !k->worst_locked) {
        k->worst_ratio = ratio;
        snprintf(res->worst, sizeof res->worst, "%s%s", name, suffix[which]);
    }
    if (!(err <= tol)) {
        static const char *const against[3] = {"the reference", "finite differences",
                                                "prefill + gradient"};
        if (isinf(err) || isnan(err))
            ck_fail(k, "'%s'%s has NaN or infinite elements (outputs are NaN-poisoned before a run: unwritten?)",
                    name, suffix[which]);
        else
            ck_fail(k, "'%s'%s differs from %s by %.3g (tolerance %.3g)", name, suffix[which], against[which], err,
                    tol);
    }
}

/* Download an output and compare it with want (scale: see rel_error). */
static void ck_compare(ck *k, int which, ck_tensor *t, const double *want, double scale)
{
    ck_download(k, t);
    if (!ck_ok(k)) return;
    ck_inject(k, which, t->host, want, t->numel);
    ck_record(k, which, t->name, rel_error(t->host, want, NULL, t->numel, scale));
}

/* ---- the reference model ---- */

/* Evaluate the reference forward at the current double inputs into
 * k->yref; returns the loss for softmax_xent, 0 otherwise. */
static double ref_eval(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t hw = c->ndim == 4 ? s[2] * s[3] : 1;
    switch (c->family) {
    case BRG_CHECK_CONV2D:
        brg_ref_conv2d_forward(&k->g, c->out_features, k->x->ref, k->w->ref, k->b ? k->b->ref : NULL, k->yref);
        return 0.0;
    case BRG_CHECK_LINEAR:
        brg_ref_linear_forward(s[0], k->x->numel / s[0], c->out_features, k->x->ref, k->w->ref,
                               k->b ? k->b->ref : NULL, k->yref);
        return 0.0;
    case BRG_CHECK_BATCHNORM_TRAIN:
        brg_ref_batchnorm_train(s[0], s[1], hw, k->x->ref, k->gamma ? k->gamma->ref : NULL,
                                k->beta ? k->beta->ref : NULL, (double)c->epsilon, k->yref, k->stats[0], k->stats[1],
                                k->stats[2]);
        return 0.0;
    case BRG_CHECK_BATCHNORM_INFER:
        brg_ref_batchnorm_infer(s[0], s[1], hw, k->x->ref, k->gamma ? k->gamma->ref : NULL,
                                k->beta ? k->beta->ref : NULL, k->rmean->ref, k->rvar->ref, (double)c->epsilon,
                                k->yref);
        return 0.0;
    case BRG_CHECK_RELU: brg_ref_relu_forward(k->x->numel, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_MAXPOOL: brg_ref_maxpool_forward(&k->g, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_AVGPOOL: brg_ref_avgpool_forward(&k->g, c->count_include_pad, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_GLOBAL_AVGPOOL: brg_ref_global_avgpool_forward(s[0], s[1], hw, k->x->ref, k->yref); return 0.0;
    case BRG_CHECK_CONCAT: {
        const double *xs[BRG_CHECK_MAX_PARTS];
        for (int p = 0; p < c->n_parts; p++) xs[p] = k->parts[p]->ref;
        brg_ref_concat_forward(s[0], hw, c->n_parts, c->part_channels, xs, k->yref);
        return 0.0;
    }
    case BRG_CHECK_ADD: brg_ref_add_forward(k->x->numel, k->x->ref, k->a2->ref, k->yref); return 0.0;
    case BRG_CHECK_DROPOUT:
        brg_ref_dropout_forward(k->x->numel, c->rate, k->dropout_seed, c->dropout_offset, k->x->ref, k->yref);
        return 0.0;
    case BRG_CHECK_SOFTMAX_XENT: return brg_ref_softmax_xent_forward(s[0], s[1], k->x->ref, k->labels, k->yref);
    case BRG_CHECK_UPSAMPLE:
        brg_ref_upsample_forward(s[0], s[1], s[2], s[3], c->factor, k->x->ref, k->yref);
        return 0.0;
    default: return 0.0;
    }
}

/* The scalar whose gradient the backward ops compute: sum(dy * y), or the
 * mean loss itself. */
static double ref_loss(ck *k)
{
    double v = ref_eval(k);
    if (k->c.family == BRG_CHECK_SOFTMAX_XENT) return v;
    double acc = 0.0;
    for (int64_t i = 0; i < k->ny; i++) acc += k->dy->ref[i] * k->yref[i];
    return acc;
}

/* The magnitude model: every float tensor's values replaced by their
 * absolute values (dy included), the output going to k->yabs. For the
 * families whose outputs and gradients are sums of products (conv, linear,
 * the average pools, upsampling), the model's outputs, and its gradients by finite
 * differences, are the sums of the magnitudes of the terms: the scale float
 * rounding error is proportional to. on = 1 enters it, 0 leaves it. */
static void ck_abs_mode(ck *k, int on)
{
    for (int i = 0; i < k->n_tens; i++) {
        ck_tensor *t = k->tens[i];
        if (!t->ref) continue;
        if (on) {
            if (!t->absref) t->absref = ck_host(k, (size_t)t->numel, sizeof(double));
            if (!t->absref) return;
            for (int64_t e = 0; e < t->numel; e++) t->absref[e] = fabs(t->ref[e]);
        }
        double *tmp = t->ref;
        t->ref = t->absref;
        t->absref = tmp;
    }
    double *tmp = k->yref;
    k->yref = k->yabs;
    k->yabs = tmp;
}

static int family_sums(brg_check_family f)
{
    return f == BRG_CHECK_CONV2D || f == BRG_CHECK_LINEAR || f == BRG_CHECK_AVGPOOL || f == BRG_CHECK_GLOBAL_AVGPOOL ||
           f == BRG_CHECK_UPSAMPLE;
}

/* The largest output of the magnitude model (0 for families without sums). */
static double ck_forward_scale(ck *k)
{
    if (!family_sums(k->c.family) || !ck_ok(k) || !k->yabs) return 0.0;
    ck_abs_mode(k, 1);
    if (!ck_ok(k)) return 0.0;
    ref_eval(k);
    ck_abs_mode(k, 0);
    double m = 0.0;
    for (int64_t i = 0; i < k->ny; i++)
        if (k->yabs[i] > m) m = k->yabs[i];
    return m;
}

/* Run a forward op whose output is y and compare y with the reference at
 * the current inputs, measured against the magnitude model where the family
 * has one (ck_forward_scale). */
static void ck_forward(ck *k, brg_op *op, ck_tensor *y)
{
    ck_run(k, op, 1);
    ref_eval(k);
    double scale = ck_forward_scale(k);
    ck_compare(k, WHICH_FWD, y, k->yref, scale);
}

/* Central difference of ref_loss with respect to element j of param
 * (divided by the step actually taken, xp - xm, in double). */
static double fd_at(ck *k, ck_tensor *param, int64_t j)
{
    double x0 = param->ref[j];
    double xp = x0 + FD_STEP, xm = x0 - FD_STEP;
    param->ref[j] = xp;
    double lp = ref_loss(k);
    param->ref[j] = xm;
    double lm = ref_loss(k);
    param->ref[j] = x0;
    return (lp - lm) / (xp - xm);
}

/* Compare the downloaded gradient grad with central differences of
 * ref_loss with respect to param, at up to fd_max elements. scale is a
 * magnitude known to the caller (0 if none); for the families with sums the
 * magnitude model's gradient at the same elements is used as well. */
static void ck_fd(ck *k, ck_tensor *grad, ck_tensor *param, double scale)
{
    if (!ck_ok(k)) return;
    int64_t n = param->numel;
    int64_t m = k->opt.fd_max_elements == 0 ? FD_DEFAULT : k->opt.fd_max_elements < 0 ? n : k->opt.fd_max_elements;
    if (m > n) m = n;
    if (m < 2 && n >= 2) m = 2;
    int64_t *idx = ck_host(k, (size_t)n, sizeof *idx);
    double *fd = ck_host(k, (size_t)n, sizeof *fd);
    if (!ck_ok(k)) return;
    /* The first and last element always (edges are where index bugs live),
     * the rest a random choice without repetition. */
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (m < n) {
        idx[1] = n - 1;
        idx[n - 1] = 1;
        for (int64_t i = 2; i < m; i++) {
            int64_t j = rng_int(&k->rng, i, n - 1);
            int64_t tmp = idx[i];
            idx[i] = idx[j];
            idx[j] = tmp;
        }
    }
    for (int64_t i = 0; i < m; i++) {
        fd[idx[i]] = fd_at(k, param, idx[i]);
        k->res->fd_points++;
    }
    if (family_sums(k->c.family) && k->yabs) {
        ck_abs_mode(k, 1);
        for (int64_t i = 0; i < m && ck_ok(k); i++) {
            double g = fabs(fd_at(k, param, idx[i]));
            if (g > scale) scale = g;
            k->res->fd_points++;
        }
        ck_abs_mode(k, 0);
    }
    ck_inject(k, WHICH_BWD, grad->host, fd, 1);
    ck_record(k, WHICH_BWD, grad->name, rel_error(grad->host, fd, idx, m, scale));
}

/* Run a backward op whose outputs are grads[0..n) (NULL entries are absent
 * outputs), compare each with finite differences with respect to
 * params[i] (or, where want[i] is given, with that exact gradient), then
 * run it again with accumulate = 1 over a random prefill. scales[i] (or
 * NULL) are magnitudes of the gradients' terms known to the caller. */
static void ck_backward(ck *k, brg_op *op, ck_tensor **grads, ck_tensor **params, double **want,
                        const double *scales, int n)
{
    for (int i = 0; i < n; i++) ck_poison(k, grads[i]);
    ck_run(k, op, 1);
    for (int i = 0; i < n && ck_ok(k); i++) {
        if (!grads[i]) continue;
        ck_download(k, grads[i]);
        if (!ck_ok(k)) return;
        if (want && want[i]) {
            ck_inject(k, WHICH_BWD, grads[i]->host, want[i], grads[i]->numel);
            ck_record(k, WHICH_BWD, grads[i]->name,
                      rel_error(grads[i]->host, want[i], NULL, grads[i]->numel, scales ? scales[i] : 0.0));
        } else {
            ck_fd(k, grads[i], params[i], scales ? scales[i] : 0.0);
        }
    }
    /* accumulate: out = prefill + gradient, each measured against the
     * larger of the two terms */
    double *expect[BRG_OP_MAX_TENSORS] = {0};
    double acc_scale[BRG_OP_MAX_TENSORS] = {0};
    for (int i = 0; i < n && ck_ok(k); i++) {
        ck_tensor *g = grads[i];
        if (!g) continue;
        expect[i] = ck_host(k, (size_t)g->numel, sizeof(double));
        if (!expect[i]) return;
        float *gh = g->host;
        for (int64_t e = 0; e < g->numel; e++) {
            float pre = (float)(2.0 * rng_unit(&k->rng) - 1.0);
            expect[i][e] = (double)pre + (double)gh[e];
            double mag = fabs((double)pre) > fabs((double)gh[e]) ? fabs((double)pre) : fabs((double)gh[e]);
            if (mag > acc_scale[i]) acc_scale[i] = mag;
            gh[e] = pre;
        }
        ck_upload(k, g);
    }
    brg_op acc = *op;
    acc.accumulate = 1;
    ck_run(k, &acc, 0);
    for (int i = 0; i < n && ck_ok(k); i++) {
        if (!grads[i]) continue;
        ck_download(k, grads[i]);
        if (!ck_ok(k)) return;
        ck_inject(k, WHICH_ACC, grads[i]->host, expect[i], grads[i]->numel);
        ck_record(k, WHICH_ACC, grads[i]->name,
                  rel_error(grads[i]->host, expect[i], NULL, grads[i]->numel, acc_scale[i]));
    }
}

static void op_set(brg_op *op, brg_op_kind kind, int n_in, const ck_tensor *const *in, int n_out,
                   const ck_tensor *const *out)
{
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->n_in = n_in;
    op->n_out = n_out;
    for (int i = 0; i < n_in; i++) op->in[i] = in[i] ? &in[i]->t : NULL;
    for (int i = 0; i < n_out; i++) op->out[i] = out[i] ? &out[i]->t : NULL;
}

/* Compact tensor lists that drop trailing absent optional tensors. */
static int trim(const ck_tensor *const *list, int n)
{
    while (n > 0 && !list[n - 1]) n--;
    return n;
}

/* Allocate the reference output and the dy of the loss (shape of the
 * forward output); dy is drawn only when the family has a backward. */
static void ck_model_output(ck *k, int ndim, const int64_t *shape, int with_dy)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    k->ny = n;
    k->yref = ck_host(k, (size_t)n, sizeof(double));
    if (family_sums(k->c.family)) k->yabs = ck_host(k, (size_t)n, sizeof(double));
    if (with_dy) k->dy = ck_input(k, "dy", ndim, shape, FILL_UNIFORM);
}

/* Check the backward op of the given kind whose one output is dx, the
 * gradient with respect to k->x, against finite differences. It reads
 * in[0..n_in) and takes the parameters of the forward op fwd. */
static void ck_backward_dx(ck *k, const brg_op *fwd, brg_op_kind kind, const ck_tensor *const *in, int n_in)
{
    ck_tensor *dx = ck_output(k, "dx", k->x->ndim, k->x->shape);
    const ck_tensor *out[1] = {dx};
    brg_op op;
    op_set(&op, kind, n_in, in, 1, out);
    op.p = fwd->p;
    ck_tensor *g[1] = {dx}, *p[1] = {k->x};
    ck_backward(k, &op, g, p, NULL, NULL, 1);
}

/* ---- families ---- */

static void run_conv(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    brg_ref_window_init(&k->g, s[0], s[1], s[2], s[3], c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h,
                        c->pad_w);
    const int64_t ws[4] = {c->out_features, s[1], c->kernel_h, c->kernel_w};
    const int64_t ys[4] = {s[0], c->out_features, k->g.p, k->g.q};
    k->x = ck_input(k, "x", 4, s, FILL_SIGNED);
    k->w = ck_input(k, "w", 4, ws, FILL_SIGNED);
    k->b = c->bias ? ck_vector(k, "b", c->out_features, FILL_SIGNED) : NULL;
    ck_tensor *y = ck_output(k, "y", 4, ys);
    ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    brg_conv2d_params cp = {c->stride_h, c->stride_w, c->pad_h, c->pad_w};
    {
        const ck_tensor *in[3] = {k->x, k->w, k->b}, *out[1] = {y};
        op_set(&op, BRG_OP_CONV2D_FORWARD, trim(in, 3), in, 1, out);
        op.p.conv = cp;
        ck_forward(k, &op, y);
    }
    {
        const ck_tensor *in[2] = {k->dy, k->w};
        ck_backward_dx(k, &op, BRG_OP_CONV2D_BACKWARD_DATA, in, 2);
    }
    {
        ck_tensor *dw = ck_output(k, "dw", 4, ws);
        ck_tensor *db = c->bias ? ck_output(k, "db", 1, &c->out_features) : NULL;
        const ck_tensor *in[2] = {k->x, k->dy}, *out[2] = {dw, db};
        op_set(&op, BRG_OP_CONV2D_BACKWARD_FILTER, 2, in, trim(out, 2), out);
        op.p.conv = cp;
        ck_tensor *g[2] = {dw, db}, *p[2] = {k->w, k->b};
        ck_backward(k, &op, g, p, NULL, NULL, 2);
    }
}

static void run_linear(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t n = s[0], in_features = case_numel(c) / n, o = c->out_features;
    const int64_t ws[2] = {o, in_features}, ys[2] = {n, o};
    k->x = ck_input(k, "x", c->ndim, s, FILL_SIGNED);
    k->w = ck_input(k, "w", 2, ws, FILL_SIGNED);
    k->b = c->bias ? ck_vector(k, "b", o, FILL_SIGNED) : NULL;
    ck_tensor *y = ck_output(k, "y", 2, ys);
    ck_model_output(k, 2, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    {
        const ck_tensor *in[3] = {k->x, k->w, k->b}, *out[1] = {y};
        op_set(&op, BRG_OP_LINEAR_FORWARD, trim(in, 3), in, 1, out);
        ck_forward(k, &op, y);
    }
    {
        const ck_tensor *in[2] = {k->dy, k->w};
        ck_backward_dx(k, &op, BRG_OP_LINEAR_BACKWARD_DATA, in, 2);
    }
    {
        ck_tensor *dw = ck_output(k, "dw", 2, ws);
        ck_tensor *db = c->bias ? ck_output(k, "db", 1, &o) : NULL;
        const ck_tensor *in[2] = {k->x, k->dy}, *out[2] = {dw, db};
        op_set(&op, BRG_OP_LINEAR_BACKWARD_WEIGHT, 2, in, trim(out, 2), out);
        ck_tensor *g[2] = {dw, db}, *p[2] = {k->w, k->b};
        ck_backward(k, &op, g, p, NULL, NULL, 2);
    }
}

static void run_batchnorm(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t ch = s[1];
    int train = c->family == BRG_CHECK_BATCHNORM_TRAIN;
    k->x = ck_input(k, "x", 4, s, FILL_SHIFTED);
    k->gamma = c->gamma ? ck_vector(k, "gamma", ch, FILL_SIGNED) : NULL;
    k->beta = c->beta ? ck_vector(k, "beta", ch, FILL_SIGNED) : NULL;
    k->rmean = ck_vector(k, "running_mean", ch, FILL_UNIFORM);
    k->rvar = ck_vector(k, "running_var", ch, FILL_POSITIVE);
    ck_tensor *y = ck_output(k, "y", 4, s);
    ck_model_output(k, 4, s, train);
    for (int i = 0; i < 3; i++) k->stats[i] = ck_host(k, (size_t)ch, sizeof(double));
    if (!ck_ok(k)) return;
    brg_batchnorm_params bp = {c->epsilon, c->momentum};
    brg_op op;
    if (!train) {
        const ck_tensor *in[5] = {k->x, k->gamma, k->beta, k->rmean, k->rvar}, *out[1] = {y};
        op_set(&op, BRG_OP_BATCHNORM_FORWARD_INFER, 5, in, 1, out);
        op.p.bn = bp;
        ck_forward(k, &op, y);
        return;
    }
    int64_t hw = s[2] * s[3];
    double bscale[3] = {0.0, 0.0, 0.0}; /* dx, dgamma, dbeta */
    ck_tensor *smean = ck_output(k, "saved_mean", 1, &ch);
    ck_tensor *sinv = ck_output(k, "saved_invstd", 1, &ch);
    if (!ck_ok(k)) return;
    {
        const ck_tensor *in[3] = {k->x, k->gamma, k->beta};
        const ck_tensor *out[5] = {y, k->rmean, k->rvar, smean, sinv};
        op_set(&op, BRG_OP_BATCHNORM_FORWARD_TRAIN, trim(in, 3), in, 5, out);
        /* Roles are positional: gamma absent and beta present keeps a NULL slot (trim stops at beta). */
        op.p.bn = bp;
        ck_forward(k, &op, y);
        double *rm = ck_host(k, (size_t)ch, sizeof(double)), *rv = ck_host(k, (size_t)ch, sizeof(double));
        if (!ck_ok(k)) return;
        memcpy(rm, k->rmean->ref, (size_t)ch * sizeof(double));
        memcpy(rv, k->rvar->ref, (size_t)ch * sizeof(double));
        brg_ref_batchnorm_running_update(ch, s[0] * s[2] * s[3], (double)c->momentum, k->stats[0], k->stats[1], rm,
                                         rv);
        /* A mean can cancel to nearly nothing: measure it against the mean
         * magnitude of the values (and of the old running mean). */
        double mean_abs = 0.0, rm_abs = 0.0;
        for (int64_t ci = 0; ci < ch; ci++) {
            double sum = 0.0;
            for (int64_t ni = 0; ni < s[0]; ni++)
                for (int64_t i = 0; i < hw; i++) sum += fabs(k->x->ref[(ni * ch + ci) * hw + i]);
            if (sum / (double)(s[0] * hw) > mean_abs) mean_abs = sum / (double)(s[0] * hw);
            if (fabs(k->rmean->ref[ci]) > rm_abs) rm_abs = fabs(k->rmean->ref[ci]);
        }
        double mom = (double)c->momentum;
        ck_compare(k, WHICH_FWD, k->rmean, rm, (1.0 - mom) * rm_abs + mom * mean_abs);
        ck_compare(k, WHICH_FWD, k->rvar, rv, 0.0);
        ck_compare(k, WHICH_FWD, smean, k->stats[0], mean_abs);
        ck_compare(k, WHICH_FWD, sinv, k->stats[2], 0.0);
        /* Magnitudes of the backward's terms per channel, for the same
         * reason: dbeta = sum dy, dgamma = sum dy xhat, and dx =
         * gamma invstd (dy - mean dy - xhat mean(dy xhat)). */
        for (int64_t ci = 0; ci < ch; ci++) {
            double sdy = 0.0, sdyx = 0.0, mdy = 0.0, mx = 0.0;
            for (int64_t ni = 0; ni < s[0]; ni++)
                for (int64_t i = 0; i < hw; i++) {
                    int64_t e = (ni * ch + ci) * hw + i;
                    double xhat = fabs((k->x->ref[e] - k->stats[0][ci]) * k->stats[2][ci]);
                    double dy = fabs(k->dy->ref[e]);
                    sdy += dy;
                    sdyx += dy * xhat;
                    if (dy > mdy) mdy = dy;
                    if (xhat > mx) mx = xhat;
                }
            double m = (double)(s[0] * hw);
            double gm = k->gamma ? fabs(k->gamma->ref[ci]) : 1.0;
            double dx = gm * k->stats[2][ci] * (mdy + sdy / m + mx * sdyx / m);
            if (dx > bscale[0]) bscale[0] = dx;
            if (sdyx > bscale[1]) bscale[1] = sdyx;
            if (sdy > bscale[2]) bscale[2] = sdy;
        }
    }
    {
        ck_tensor *dx = ck_output(k, "dx", 4, s);
        ck_tensor *dgamma = c->gamma ? ck_output(k, "dgamma", 1, &ch) : NULL;
        ck_tensor *dbeta = c->beta ? ck_output(k, "dbeta", 1, &ch) : NULL;
        /* The backward uses the device's own saved statistics, as training does. */
        const ck_tensor *in[5] = {k->x, k->dy, k->gamma, smean, sinv};
        const ck_tensor *out[3] = {dx, dgamma, dbeta};
        op_set(&op, BRG_OP_BATCHNORM_BACKWARD, 5, in, trim(out, 3), out);
        op.p.bn = bp;
        ck_tensor *g[3] = {dx, dgamma, dbeta}, *p[3] = {k->x, k->gamma, k->beta};
        ck_backward(k, &op, g, p, NULL, bscale, 3);
    }
}

static void run_relu(ck *k)
{
    const brg_check_case *c = &k->c;
    k->x = ck_input(k, "x", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *y = ck_output(k, "y", c->ndim, c->x_shape);
    ck_model_output(k, c->ndim, c->x_shape, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    op_set(&op, BRG_OP_RELU_FORWARD, 1, in, 1, out);
    ck_forward(k, &op, y);
    if (c->inplace) {
        ck_tensor *z = ck_output(k, "y (in place)", c->ndim, c->x_shape);
        if (!ck_ok(k)) return;
        memcpy(z->host, k->x->host, (size_t)z->numel * 4);
        ck_upload(k, z);
        const ck_tensor *zi[1] = {z};
        op_set(&op, BRG_OP_RELU_FORWARD, 1, zi, 1, zi);
        ck_run(k, &op, 1);
        ck_compare(k, WHICH_FWD, z, k->yref, 0.0);
    }
    const ck_tensor *bin[2] = {y, k->dy};
    ck_backward_dx(k, &op, BRG_OP_RELU_BACKWARD, bin, 2);
}

static void run_pool(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int maxpool = c->family == BRG_CHECK_MAXPOOL;
    brg_ref_window_init(&k->g, s[0], s[1], s[2], s[3], c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h,
                        c->pad_w);
    const int64_t ys[4] = {s[0], s[1], k->g.p, k->g.q};
    k->x = ck_input(k, "x", 4, s, !maxpool ? FILL_SIGNED : c->ties ? FILL_TIES : FILL_DISTINCT);
    ck_tensor *y = ck_output(k, "y", 4, ys);
    ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_pool_params pp = {c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h, c->pad_w,
                          c->count_include_pad};
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    op_set(&op, maxpool ? BRG_OP_MAXPOOL_FORWARD : BRG_OP_AVGPOOL_FORWARD, 1, in, 1, out);
    op.p.pool = pp;
    ck_forward(k, &op, y);
    ck_tensor *dx = ck_output(k, "dx", 4, s);
    if (!ck_ok(k)) return;
    ck_tensor *g[1] = {dx}, *p[1] = {k->x};
    if (maxpool) {
        const ck_tensor *bin[3] = {k->x, y, k->dy}, *bout[1] = {dx};
        op_set(&op, BRG_OP_MAXPOOL_BACKWARD, 3, bin, 1, bout);
        op.p.pool = pp;
        /* With ties the gradient is not differentiable: check the routing
         * rule of the contract against the reference instead. */
        double *want[1] = {NULL};
        if (c->ties) {
            want[0] = ck_host(k, (size_t)k->x->numel, sizeof(double));
            if (!ck_ok(k)) return;
            brg_ref_maxpool_backward(&k->g, k->x->ref, k->dy->ref, want[0]);
        }
        ck_backward(k, &op, g, p, want, NULL, 1);
    } else {
        const ck_tensor *bin[1] = {k->dy}, *bout[1] = {dx};
        op_set(&op, BRG_OP_AVGPOOL_BACKWARD, 1, bin, 1, bout);
        op.p.pool = pp;
        ck_backward(k, &op, g, p, NULL, NULL, 1);
    }
}

static void run_global_avgpool(ck *k)
{
    const int64_t *s = k->c.x_shape;
    const int64_t ys[4] = {s[0], s[1], 1, 1};
    k->x = ck_input(k, "x", 4, s, FILL_SIGNED);
    ck_tensor *y = ck_output(k, "y", 4, ys);
    ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    op_set(&op, BRG_OP_GLOBAL_AVGPOOL_FORWARD, 1, in, 1, out);
    ck_forward(k, &op, y);
    const ck_tensor *bin[1] = {k->dy};
    ck_backward_dx(k, &op, BRG_OP_GLOBAL_AVGPOOL_BACKWARD, bin, 1);
}

static void run_concat(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int np = c->n_parts;
    const ck_tensor *in[BRG_CHECK_MAX_PARTS], *bout[BRG_CHECK_MAX_PARTS];
    ck_tensor *g[BRG_CHECK_MAX_PARTS], *p[BRG_CHECK_MAX_PARTS];
    for (int i = 0; i < np; i++) {
        char name[16];
        const int64_t ps[4] = {s[0], c->part_channels[i], s[2], s[3]};
        snprintf(name, sizeof name, "x%d", i);
        k->parts[i] = ck_input(k, name, 4, ps, FILL_SIGNED);
        in[i] = p[i] = k->parts[i];
    }
    ck_tensor *y = ck_output(k, "y", 4, s);
    ck_model_output(k, 4, s, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *out[1] = {y};
    op_set(&op, BRG_OP_CONCAT_FORWARD, np, in, 1, out);
    ck_forward(k, &op, y);
    for (int i = 0; i < np; i++) {
        char name[16];
        snprintf(name, sizeof name, "dx%d", i);
        bout[i] = g[i] = ck_output(k, name, 4, k->parts[i] ? k->parts[i]->shape : s);
    }
    if (!ck_ok(k)) return;
    const ck_tensor *bin[1] = {k->dy};
    op_set(&op, BRG_OP_CONCAT_BACKWARD, 1, bin, np, bout);
    ck_backward(k, &op, g, p, NULL, NULL, np);
}

static void run_add(ck *k)
{
    const brg_check_case *c = &k->c;
    k->x = ck_input(k, "a", c->ndim, c->x_shape, FILL_SIGNED);
    k->a2 = ck_input(k, "b", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *y = ck_output(k, "y", c->ndim, c->x_shape);
    ck_model_output(k, c->ndim, c->x_shape, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[2] = {k->x, k->a2}, *out[1] = {y};
    op_set(&op, BRG_OP_ADD_FORWARD, 2, in, 1, out);
    ck_forward(k, &op, y);
    ck_tensor *da = c->omit_grad == 1 ? NULL : ck_output(k, "da", c->ndim, c->x_shape);
    ck_tensor *db = c->omit_grad == 2 ? NULL : ck_output(k, "db", c->ndim, c->x_shape);
    if (!ck_ok(k)) return;
    const ck_tensor *bin[1] = {k->dy}, *bout[2] = {da, db};
    op_set(&op, BRG_OP_ADD_BACKWARD, 1, bin, 2, bout);
    ck_tensor *g[2] = {da, db}, *p[2] = {k->x, k->a2};
    ck_backward(k, &op, g, p, NULL, NULL, 2);
}

static void run_dropout(ck *k)
{
    const brg_check_case *c = &k->c;
    k->dropout_seed = rng_next(&k->rng);
    k->x = ck_input(k, "x", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *y = ck_output(k, "y", c->ndim, c->x_shape);
    ck_model_output(k, c->ndim, c->x_shape, 1);
    if (!ck_ok(k)) return;
    brg_dropout_params dp = {c->rate, k->dropout_seed, c->dropout_offset};
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    op_set(&op, BRG_OP_DROPOUT_FORWARD, 1, in, 1, out);
    op.p.dropout = dp;
    ck_forward(k, &op, y);
    const ck_tensor *bin[1] = {k->dy};
    ck_backward_dx(k, &op, BRG_OP_DROPOUT_BACKWARD, bin, 1);
}

static void run_xent(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    const int64_t one = 1;
    k->x = ck_input(k, "logits", 2, s, FILL_LOGITS);
    ck_tensor *labels = ck_tensor_new(k, "labels", BRG_I32, 1, &s[0]);
    ck_tensor *loss = ck_output(k, "loss", 1, &one);
    ck_tensor *probs = ck_output(k, "probs", 2, s);
    ck_model_output(k, 2, s, 0);
    if (!ck_ok(k)) return;
    k->labels = labels->host;
    for (int64_t i = 0; i < s[0]; i++) k->labels[i] = (int32_t)rng_int(&k->rng, 0, s[1] - 1);
    ck_upload(k, labels);
    brg_op op;
    const ck_tensor *in[2] = {k->x, labels}, *out[2] = {loss, probs};
    op_set(&op, BRG_OP_SOFTMAX_XENT_FORWARD, 2, in, 2, out);
    ck_run(k, &op, 1);
    double l = ref_eval(k);
    /* The loss is lse - logit[label]: a confident row cancels it towards 0. */
    double lscale = 0.0;
    for (int64_t i = 0; i < k->x->numel; i++)
        if (fabs(k->x->ref[i]) > lscale) lscale = fabs(k->x->ref[i]);
    lscale += log((double)s[1]);
    ck_compare(k, WHICH_FWD, loss, &l, lscale);
    ck_compare(k, WHICH_FWD, probs, k->yref, 0.0);
    ck_tensor *dlogits = ck_output(k, "dlogits", 2, s);
    const ck_tensor *bin[2] = {probs, labels}, *bout[1] = {dlogits};
    op_set(&op, BRG_OP_SOFTMAX_XENT_BACKWARD, 2, bin, 1, bout);
    op.p.xent.grad_scale = (float)(1.0 / (double)s[0]);
    ck_tensor *g[1] = {dlogits}, *p[1] = {k->x};
    ck_backward(k, &op, g, p, NULL, NULL, 1);
}

static void run_upsample(ck *k)
{
    const int64_t *s = k->c.x_shape;
    int f = k->c.factor;
    const int64_t ys[4] = {s[0], s[1], s[2] * f, s[3] * f};
    k->x = ck_input(k, "x", 4, s, FILL_SIGNED);
    ck_tensor *y = ck_output(k, "y", 4, ys);
    ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    op_set(&op, BRG_OP_UPSAMPLE_FORWARD, 1, in, 1, out);
    op.p.upsample.factor = f;
    ck_forward(k, &op, y);
    const ck_tensor *bin[1] = {k->dy};
    ck_backward_dx(k, &op, BRG_OP_UPSAMPLE_BACKWARD, bin, 1);
}

/* One optimizer step. The updated parameter is compared against the
 * reference as an error relative to the largest step the reference took
 * (a parameter of 1 moved by 0.001 must be right to the step, not to the
 * parameter), beyond one ulp of the parameter that float32 storage costs
 * anyway; the state (velocity, m, v) against the magnitude of its terms. */
static void run_optim(ck *k)
{
    const brg_check_case *c = &k->c;
    int adam = c->family == BRG_CHECK_ADAM;
    int64_t n = case_numel(c);
    ck_tensor *grad = ck_input(k, "grad", c->ndim, c->x_shape, FILL_UNIFORM);
    ck_tensor *param = ck_input(k, "param", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *s1 = NULL, *s2 = NULL;
    if (adam) {
        s1 = ck_input(k, "m", c->ndim, c->x_shape, FILL_UNIFORM);
        s2 = ck_input(k, "v", c->ndim, c->x_shape, FILL_POSITIVE);
    } else if (c->velocity) {
        s1 = ck_input(k, "velocity", c->ndim, c->x_shape, FILL_UNIFORM);
    }
    double *want_p = ck_host(k, (size_t)n, sizeof(double));
    double *want_1 = s1 ? ck_host(k, (size_t)n, sizeof(double)) : NULL;
    double *want_2 = s2 ? ck_host(k, (size_t)n, sizeof(double)) : NULL;
    if (!ck_ok(k)) return;
    /* Smaller Adam state keeps the steps away from lr * sign(g) everywhere. */
    if (adam) {
        float *mh = s1->host, *vh = s2->host;
        for (int64_t i = 0; i < n; i++) {
            mh[i] *= 0.1f;
            vh[i] *= 0.01f;
            s1->ref[i] = mh[i];
            s2->ref[i] = vh[i];
        }
        ck_upload(k, s1);
        ck_upload(k, s2);
    }
    memcpy(want_p, param->ref, (size_t)n * sizeof(double));
    if (s1) memcpy(want_1, s1->ref, (size_t)n * sizeof(double));
    if (s2) memcpy(want_2, s2->ref, (size_t)n * sizeof(double));
    double state_scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(grad->ref[i]) + (double)c->weight_decay * fabs(param->ref[i]);
        double t = (s1 ? fabs(s1->ref[i]) : 0.0) + d;
        if (t > state_scale) state_scale = t;
    }
    if (adam)
        brg_ref_adam_update(n, (double)c->lr, (double)c->beta1, (double)c->beta2, (double)c->epsilon,
                            (double)c->weight_decay, c->step, grad->ref, want_p, want_1, want_2);
    else
        brg_ref_sgd_update(n, (double)c->lr, (double)c->momentum, (double)c->weight_decay, grad->ref, want_p,
                           want_1);
    brg_op op;
    const ck_tensor *in[1] = {grad}, *out[3] = {param, s1, s2};
    op_set(&op, adam ? BRG_OP_ADAM_UPDATE : BRG_OP_SGD_UPDATE, 1, in, adam ? 3 : trim(out, 2), out);
    op.p.optim.lr = c->lr;
    op.p.optim.momentum = c->momentum;
    op.p.optim.weight_decay = c->weight_decay;
    op.p.optim.beta1 = c->beta1;
    op.p.optim.beta2 = c->beta2;
    op.p.optim.epsilon = c->epsilon;
    op.p.optim.step = c->step;
    ck_run(k, &op, 1);
    /* The parameter: error over the largest step. */
    ck_download(k, param);
    if (!ck_ok(k)) return;
    double step = 0.0, diff = 0.0;
    ck_inject(k, WHICH_FWD, param->host, want_p, n);
    const float *got = param->host;
    for (int64_t i = 0; i < n; i++) {
        double st = fabs(want_p[i] - param->ref[i]);
        if (st > step) step = st;
        /* Storing the parameter in float32 costs up to half an ulp of it
         * whatever the step: one ulp of error is free. */
        float wf = (float)want_p[i];
        double ulp = fabs((double)nextafterf(wf, INFINITY) - (double)wf);
        double d = fabs((double)got[i] - want_p[i]) - ulp;
        if (d < 0.0) d = 0.0;
        if (!isfinite((double)got[i])) d = INFINITY;
        if (!(d <= diff)) diff = d;
    }
    ck_record(k, WHICH_FWD, "param", diff / (step > ERR_FLOOR * 1e-3 ? step : ERR_FLOOR * 1e-3));
    if (s1) ck_compare(k, WHICH_FWD, s1, want_1, state_scale);
    if (s2) ck_compare(k, WHICH_FWD, s2, want_2, 0.0); /* a sum of non-negative terms */
}

/* ---- entry points ---- */

brg_status brg_check_run_opts(brg_device *dev, const brg_check_case *c, uint64_t seed, const brg_check_options *opts,
                              brg_check_result *res)
{
    if (!res) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_check_run: result is NULL");
    memset(res, 0, sizeof *res);
    res->seed = seed;
    res->status = BRG_OK;
    if (!dev || !c) {
        res->status = brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_check_run: device or case is NULL");
        snprintf(res->message, sizeof res->message, "%s", brg_last_error());
        return res->status;
    }
    double t0 = brg_now_seconds();
    ck k;
    memset(&k, 0, sizeof k);
    k.dev = dev;
    normalize_case(c, &k.c);
    if (opts) k.opt = *opts;
    k.res = res;
    k.rng.s = seed * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL;
    res->family = k.c.family;
    brg_check_case_label(&k.c, res->label, sizeof res->label);
    brg_check_tolerances(k.c.family, &res->forward_tol, &res->backward_tol, &res->accumulate_tol);
    double scale = k.opt.tolerance_scale > 0 ? k.opt.tolerance_scale : 1.0;
    res->forward_tol *= scale;
    res->backward_tol *= scale;
    res->accumulate_tol *= scale;
    res->has_backward = k.c.family != BRG_CHECK_BATCHNORM_INFER && k.c.family != BRG_CHECK_SGD &&
                        k.c.family != BRG_CHECK_ADAM;
    res->passed = 1;

    brg_status st = validate_case(&k.c);
    if (st != BRG_OK) {
        res->passed = 0;
        res->status = st;
        snprintf(res->message, sizeof res->message, "%s", brg_last_error());
        return st;
    }
    size_t in_use = brg_device_in_use(dev);
    k.poison = ck_host(&k, POISON_CHUNK, sizeof(float));
    if (k.poison) {
        const uint32_t bits = POISON;
        for (int i = 0; i < POISON_CHUNK; i++) memcpy(&k.poison[i], &bits, sizeof bits);
        switch (k.c.family) {
        case BRG_CHECK_CONV2D: run_conv(&k); break;
        case BRG_CHECK_LINEAR: run_linear(&k); break;
        case BRG_CHECK_BATCHNORM_TRAIN:
        case BRG_CHECK_BATCHNORM_INFER: run_batchnorm(&k); break;
        case BRG_CHECK_RELU: run_relu(&k); break;
        case BRG_CHECK_MAXPOOL:
        case BRG_CHECK_AVGPOOL: run_pool(&k); break;
        case BRG_CHECK_GLOBAL_AVGPOOL: run_global_avgpool(&k); break;
        case BRG_CHECK_CONCAT: run_concat(&k); break;
        case BRG_CHECK_ADD: run_add(&k); break;
        case BRG_CHECK_DROPOUT: run_dropout(&k); break;
        case BRG_CHECK_SOFTMAX_XENT: run_xent(&k); break;
        case BRG_CHECK_UPSAMPLE: run_upsample(&k); break;
        case BRG_CHECK_SGD:
        case BRG_CHECK_ADAM: run_optim(&k); break;
        default: break;
        }
    }
    /* Keep the message of a failed call while the cleanup runs. */
    char saved[sizeof res->message];
    snprintf(saved, sizeof saved, "%s", brg_last_error());
    for (int i = k.n_tens - 1; i >= 0; i--) brg_device_free(dev, k.tens[i]->mem);
    for (size_t i = 0; i < k.n_host; i++) free(k.host[i]);
    free(k.host);
    if (k.st != BRG_OK) {
        res->passed = 0;
        res->status = k.st;
        if (!res->message[0]) snprintf(res->message, sizeof res->message, "%s", saved);
        brg_error(k.st, "%s", res->message);
    }
    size_t after = brg_device_in_use(dev);
    if (after != in_use) {
        char b[32];
        ck_fail(&k, "device memory leaked: %s %s in use after the case than before",
                brg_format_bytes(after > in_use ? after - in_use : in_use - after, b, sizeof b),
                after > in_use ? "more" : "less");
        ck_blame(&k, "arena");
    }
    res->seconds = brg_now_seconds() - t0;
    return k.st;
}

brg_status brg_check_run(brg_device *dev, const brg_check_case *c, uint64_t seed, brg_check_result *res)
{
    return brg_check_run_opts(dev, c, seed, NULL, res);
}
