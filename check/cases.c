/* The kernel check harness's cases: family names, tolerances, the
 * defaults of a case, its label, random cases and the default set. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check/check-impl.h"

/* ---- families, tolerances ---- */

static const char *const family_names[BRG_CHECK_FAMILY_COUNT] = {
    [BRG_CHECK_CONV2D] = "conv2d",
    [BRG_CHECK_LINEAR] = "linear",
    [BRG_CHECK_BATCHNORM_TRAIN] = "batchnorm_train",
    [BRG_CHECK_BATCHNORM_INFER] = "batchnorm_infer",
    [BRG_CHECK_BATCHNORM_SYNC] = "batchnorm_sync",
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
    [BRG_CHECK_COUNT_CORRECT] = "count_correct",
    [BRG_CHECK_CHECK_FINITE] = "check_finite",
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
 * when the step is small: 1e-4. count_correct and check_finite are exact:
 * their integer results are compared by absolute difference, which any
 * wrong result makes at least 1. */
static const struct {
    double fwd, bwd, acc;
} tolerances[BRG_CHECK_FAMILY_COUNT] = {
    [BRG_CHECK_CONV2D] = {1e-4, 1e-3, 1e-5},
    [BRG_CHECK_LINEAR] = {1e-4, 1e-3, 1e-5},
    [BRG_CHECK_BATCHNORM_TRAIN] = {1e-5, 1e-3, 1e-5},
    [BRG_CHECK_BATCHNORM_INFER] = {1e-5, 1e-3, 1e-5},
    [BRG_CHECK_BATCHNORM_SYNC] = {1e-5, 1e-3, 1e-5},
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
    [BRG_CHECK_COUNT_CORRECT] = {1e-6, 1e-6, 1e-6},
    [BRG_CHECK_CHECK_FINITE] = {1e-6, 1e-6, 1e-6},
};

void brg_check_tolerances(brg_check_family family, double *forward, double *backward, double *accumulate)
{
    int ok = (int)family >= 0 && family < BRG_CHECK_FAMILY_COUNT;
    if (forward) *forward = ok ? tolerances[family].fwd : 0.0;
    if (backward) *backward = ok ? tolerances[family].bwd : 0.0;
    if (accumulate) *accumulate = ok ? tolerances[family].acc : 0.0;
}

/* ---- case normalisation and labels ---- */

static int family_is_4d(brg_check_family f)
{
    switch (f) {
    case BRG_CHECK_CONV2D:
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_INFER:
    case BRG_CHECK_BATCHNORM_SYNC:
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
void brg_check_normalize_case(const brg_check_case *in, brg_check_case *out)
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
    case BRG_CHECK_BATCHNORM_SYNC:
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
    case BRG_CHECK_CHECK_FINITE:
        if (out->tag == 0) out->tag = 7;
        break;
    default: break;
    }
}

int64_t brg_check_case_numel(const brg_check_case *c)
{
    int64_t n = 1;
    for (int d = 0; d < c->ndim; d++) n *= c->x_shape[d];
    return n;
}

/* BRG_OK if the normalised case can run; otherwise a message saying why. */
brg_status brg_check_validate_case(const brg_check_case *c)
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
    if (brg_check_case_numel(c) > CK_MAX_NUMEL)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x has more than %lld elements", fam,
                         (long long)CK_MAX_NUMEL);
    if (family_is_4d(c->family) && c->ndim != 4)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x must be [N,C,H,W]", fam);
    if (c->family == BRG_CHECK_LINEAR && c->ndim < 2)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: x must have a batch and a feature dimension",
                         fam);
    if (c->family == BRG_CHECK_SOFTMAX_XENT && ((c->ndim != 2 && c->ndim != 4) || c->x_shape[1] > INT32_MAX))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: logits must be [N,K] or [N,K,H,W]", fam);
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
    if (c->family == BRG_CHECK_BATCHNORM_TRAIN || c->family == BRG_CHECK_BATCHNORM_INFER ||
        c->family == BRG_CHECK_BATCHNORM_SYNC) {
        if (!(c->epsilon > 0.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: epsilon must be positive", fam);
        if (!(c->momentum >= 0.0f && c->momentum <= 1.0f))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: momentum must be in [0, 1]", fam);
        if (c->family != BRG_CHECK_BATCHNORM_INFER && c->x_shape[0] * c->x_shape[2] * c->x_shape[3] < 2)
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
    if (c->family == BRG_CHECK_COUNT_CORRECT) {
        if ((c->ndim != 2 && c->ndim != 4) || c->x_shape[1] > INT32_MAX)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: scores must be [N,K] or [N,K,H,W]", fam);
        if (c->label_mode < 0 || c->label_mode > 2 || c->nonfinite < 0 || c->nonfinite > 1)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "check case %s: label_mode must be 0..2 and nonfinite 0 or 1",
                             fam);
    }
    if (c->family == BRG_CHECK_CHECK_FINITE &&
        (c->nonfinite < 0 || c->nonfinite > 3 || c->tag <= 0 || c->preset < 0))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "check case %s: nonfinite must be 0..3, tag positive and preset non-negative", fam);
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
    brg_check_normalize_case(in, &cs);
    const brg_check_case *c = &cs;
    size_t len = 0;
    appendf(buf, size, &len, "%s x[", brg_check_family_name(c->family));
    for (int d = 0; d < c->ndim && d < 4; d++)
        appendf(buf, size, &len, "%s%lld", d ? "," : "", (long long)c->x_shape[d]);
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
    case BRG_CHECK_BATCHNORM_SYNC:
        appendf(buf, size, &len, " %s eps%g", c->gamma && c->beta ? "gamma+beta"
                                              : c->gamma          ? "gamma"
                                              : c->beta           ? "beta"
                                                                  : "noaffine",
                (double)c->epsilon);
        if (c->family == BRG_CHECK_BATCHNORM_TRAIN) appendf(buf, size, &len, " m%g", (double)c->momentum);
        if (c->far) appendf(buf, size, &len, " far");
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
    case BRG_CHECK_SOFTMAX_XENT:
        if (c->ignore_label) appendf(buf, size, &len, " ignore%d", (int)c->ignore_label);
        break;
    case BRG_CHECK_COUNT_CORRECT:
        if (c->ties) appendf(buf, size, &len, " ties");
        if (c->nonfinite) appendf(buf, size, &len, " nonfinite");
        appendf(buf, size, &len, " labels-%s", c->label_mode == 1 ? "all" : c->label_mode == 2 ? "none" : "mixed");
        break;
    case BRG_CHECK_CHECK_FINITE: {
        static const char *const where[4] = {"finite", "bad@first", "bad@middle", "bad@last"};
        appendf(buf, size, &len, " %s tag%d", c->nonfinite >= 0 && c->nonfinite <= 3 ? where[c->nonfinite] : "bad@?",
                (int)c->tag);
        if (c->preset) appendf(buf, size, &len, " preset%d", (int)c->preset);
        break;
    }
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
    case BRG_CHECK_BATCHNORM_SYNC:
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
    case BRG_CHECK_COUNT_CORRECT:
        c->ndim = rng_int(&r, 0, 2) == 0 ? 4 : 2;
        c->x_shape[0] = rng_int(&r, 1, 16);
        c->x_shape[1] = rng_int(&r, 1, 12);
        if (c->ndim == 4) {
            c->x_shape[0] = rng_int(&r, 1, 3);
            c->x_shape[2] = rng_int(&r, 1, 5);
            c->x_shape[3] = rng_int(&r, 1, 5);
        }
        c->ties = rng_int(&r, 0, 2) == 0;
        c->nonfinite = rng_int(&r, 0, 2) == 0;
        c->label_mode = (int)rng_int(&r, 0, 2);
        break;
    case BRG_CHECK_CHECK_FINITE:
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
        if (family == BRG_CHECK_CHECK_FINITE) {
            c->nonfinite = (int)rng_int(&r, 0, 3);
            c->tag = (int32_t)rng_int(&r, 1, 1000);
            c->preset = rng_int(&r, 0, 3) == 0 ? (int32_t)rng_int(&r, 1, 5) : 0;
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
        c->ndim = rng_int(&r, 0, 1) ? 4 : 2;
        c->x_shape[0] = rng_int(&r, 1, 8);
        c->x_shape[1] = rng_int(&r, 2, 12);
        if (c->ndim == 4) {
            c->x_shape[0] = rng_int(&r, 1, 3);
            c->x_shape[2] = rng_int(&r, 1, 5);
            c->x_shape[3] = rng_int(&r, 1, 5);
        }
        c->ignore_label = rng_int(&r, 0, 1) ? 255 : rng_int(&r, 0, 1) ? -1 : 0;
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
    brg_check_normalize_case(c, &norm);
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
    /* channels in whole blocks of 8 and 16, where devices keep blocked tensors: a strided 3x3, and a
     * 1x1 on 2x2 images (a shape oneDNN runs only as a GEMM) */
    {.family = BRG_CHECK_CONV2D, X4(3, 8, 9, 9), .out_features = 16, WIN(3, 3, 2, 2, 1, 1), .bias = 0},
    {.family = BRG_CHECK_CONV2D, X4(2, 32, 2, 2), .out_features = 16, WIN(1, 1, 1, 1, 0, 0), .bias = 1},
    {.family = BRG_CHECK_CONV2D, X4(2, 16, 2, 2), .out_features = 8, WIN(3, 3, 1, 1, 1, 1), .bias = 0},
    /* one input channel (grey images) into whole blocks: oneDNN's weight gradient in nhwc */
    {.family = BRG_CHECK_CONV2D, X4(3, 1, 9, 7), .out_features = 16, WIN(3, 3, 1, 1, 1, 1), .bias = 1},
    /* a strided 1x1 that widens, as ResNet's downsampling shortcuts (the CUDA backend's GEMM packs
     * every other row and column for its filter gradient) */
    {.family = BRG_CHECK_CONV2D, X4(2, 6, 9, 8), .out_features = 10, WIN(1, 1, 2, 2, 0, 0), .bias = 0},
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
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(4, 3, 5, 5), .gamma = 1, .beta = 1, .epsilon = 1e-5f, .momentum = 0.1f,
     .far = 1},
    {.family = BRG_CHECK_BATCHNORM_INFER, X4(2, 3, 4, 4), .gamma = 1, .beta = 1, .epsilon = 1e-3f},
    {.family = BRG_CHECK_BATCHNORM_SYNC, X4(4, 3, 5, 5), .gamma = 1, .beta = 1, .epsilon = 1e-3f},
    {.family = BRG_CHECK_BATCHNORM_SYNC, X4(2, 4, 3, 3), .epsilon = 1e-5f},
    {.family = BRG_CHECK_BATCHNORM_SYNC, X4(8, 5, 1, 1), .gamma = 1, .epsilon = 1e-3f},
    {.family = BRG_CHECK_BATCHNORM_SYNC, X4(4, 3, 5, 5), .gamma = 1, .beta = 1, .epsilon = 1e-5f, .far = 1},
    {.family = BRG_CHECK_BATCHNORM_SYNC, X4(1, 2, 3, 4), .beta = 1, .epsilon = 0.1f},
    {.family = BRG_CHECK_BATCHNORM_SYNC, X4(8, 16, 6, 6), .gamma = 1, .beta = 1, .epsilon = 1e-5f},
    {.family = BRG_CHECK_BATCHNORM_INFER, X4(3, 2, 5, 5), .epsilon = 1e-5f},
    {.family = BRG_CHECK_BATCHNORM_INFER, X4(2, 16, 3, 5), .gamma = 1, .beta = 1, .epsilon = 1e-5f},
    {.family = BRG_CHECK_BATCHNORM_TRAIN, X4(3, 32, 3, 3), .gamma = 1, .epsilon = 1e-5f, .momentum = 0.1f, .far = 1},
    /* relu. */
    {.family = BRG_CHECK_RELU, X4(2, 3, 5, 5)},
    {.family = BRG_CHECK_RELU, X2(3, 7), .inplace = 1},
    {.family = BRG_CHECK_RELU, X4(2, 16, 3, 3), .inplace = 1},
    /* max pool: 2x2/2, overlapping 3x3/2 with padding, ties (and padding that must not win),
     * asymmetric windows, the 3x3/2 reduction of an odd input. */
    {.family = BRG_CHECK_MAXPOOL, X4(2, 3, 8, 8), WIN(2, 2, 2, 2, 0, 0)},
    {.family = BRG_CHECK_MAXPOOL, X4(2, 2, 7, 7), WIN(3, 3, 2, 2, 1, 1)},
    {.family = BRG_CHECK_MAXPOOL, X4(1, 3, 6, 6), WIN(3, 3, 1, 1, 1, 1), .ties = 1},
    {.family = BRG_CHECK_MAXPOOL, X4(2, 2, 5, 7), WIN(1, 3, 1, 1, 0, 1)},
    {.family = BRG_CHECK_MAXPOOL, X4(1, 2, 9, 9), WIN(3, 3, 2, 2, 0, 0)},
    /* whole blocks of channels: the 2x2 backward's path with a ragged edge, and the general one */
    {.family = BRG_CHECK_MAXPOOL, X4(2, 8, 9, 8), WIN(2, 2, 2, 2, 0, 0)},
    {.family = BRG_CHECK_MAXPOOL, X4(1, 16, 7, 7), WIN(3, 3, 2, 2, 1, 1), .ties = 1},
    /* average pool: both padding conventions. */
    {.family = BRG_CHECK_AVGPOOL, X4(2, 3, 6, 6), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 0},
    {.family = BRG_CHECK_AVGPOOL, X4(2, 3, 6, 6), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 1},
    {.family = BRG_CHECK_AVGPOOL, X4(2, 2, 8, 8), WIN(2, 2, 2, 2, 0, 0)},
    {.family = BRG_CHECK_AVGPOOL, X4(1, 2, 7, 9), WIN(3, 3, 2, 2, 1, 1), .count_include_pad = 0},
    {.family = BRG_CHECK_AVGPOOL, X4(2, 2, 5, 6), WIN(2, 3, 1, 2, 1, 1), .count_include_pad = 1},
    /* whole blocks of channels: Inception's "same" 3x3 (the box path) both ways, and a strided one */
    {.family = BRG_CHECK_AVGPOOL, X4(2, 8, 6, 5), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 0},
    {.family = BRG_CHECK_AVGPOOL, X4(1, 16, 5, 5), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 1},
    {.family = BRG_CHECK_AVGPOOL, X4(1, 8, 7, 9), WIN(3, 3, 2, 2, 1, 1), .count_include_pad = 0},
    /* rows of blocked pixels too wide for the box path's buffers: channel by channel */
    {.family = BRG_CHECK_AVGPOOL, X4(1, 8, 2, 260), WIN(3, 3, 1, 1, 1, 1), .count_include_pad = 0},
    /* global average pool. */
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(2, 3, 7, 7)},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(1, 4, 1, 1)},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(3, 2, 3, 5)},
    {.family = BRG_CHECK_GLOBAL_AVGPOOL, X4(2, 16, 5, 5)},
    /* concat: an Inception-style join of four branches, three parts, one part, parts in whole blocks. */
    {.family = BRG_CHECK_CONCAT, X4(2, 0, 5, 5), .n_parts = 4, .part_channels = {2, 3, 1, 2}},
    {.family = BRG_CHECK_CONCAT, X4(1, 0, 4, 3), .n_parts = 3, .part_channels = {3, 5, 2}},
    {.family = BRG_CHECK_CONCAT, X4(2, 0, 3, 3), .n_parts = 1, .part_channels = {4}},
    {.family = BRG_CHECK_CONCAT, X4(2, 0, 3, 4), .n_parts = 3, .part_channels = {8, 16, 8}},
    /* parts in whole blocks of 16 too (AVX-512 machines keep blocks of 16, where 8 is a part block) */
    {.family = BRG_CHECK_CONCAT, X4(2, 0, 3, 3), .n_parts = 2, .part_channels = {16, 32}},
    /* add: both gradients, and each one unused. */
    {.family = BRG_CHECK_ADD, X4(2, 3, 4, 4)},
    {.family = BRG_CHECK_ADD, X2(5, 6), .omit_grad = 1},
    {.family = BRG_CHECK_ADD, X4(1, 2, 3, 3), .omit_grad = 2},
    {.family = BRG_CHECK_ADD, X4(2, 16, 3, 3), .omit_grad = 1},
    /* dropout. */
    {.family = BRG_CHECK_DROPOUT, X4(2, 3, 5, 5), .rate = 0.5f},
    {.family = BRG_CHECK_DROPOUT, X2(4, 9), .rate = 0.0f},
    {.family = BRG_CHECK_DROPOUT, .ndim = 3, .x_shape = {3, 5, 7}, .rate = 0.2f, .dropout_offset = 12345},
    /* softmax cross-entropy. */
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(4, 10)},
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(1, 3)},
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(8, 5)},
    /* Per pixel, with void labels (255, -1) and an ignore label that is a
     * class (it ignores nothing). */
    {.family = BRG_CHECK_SOFTMAX_XENT, X4(2, 3, 4, 5), .ignore_label = 255},
    {.family = BRG_CHECK_SOFTMAX_XENT, X4(1, 4, 3, 3), .ignore_label = -1},
    {.family = BRG_CHECK_SOFTMAX_XENT, X4(2, 21, 2, 3)},
    {.family = BRG_CHECK_SOFTMAX_XENT, X4(2, 3, 2, 2), .ignore_label = 1},
    {.family = BRG_CHECK_SOFTMAX_XENT, X2(6, 5), .ignore_label = 255},
    /* upsampling: the U-Net decoder's 2x, and 3x. */
    {.family = BRG_CHECK_UPSAMPLE, X4(2, 3, 4, 5), .factor = 2},
    {.family = BRG_CHECK_UPSAMPLE, X4(1, 2, 3, 3), .factor = 3},
    /* optimizer steps: plain, with momentum and weight decay; Adam's first and a later step. */
    {.family = BRG_CHECK_SGD, X2(8, 9), .lr = 0.1f},
    {.family = BRG_CHECK_SGD, X4(4, 3, 3, 3), .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f, .velocity = 1},
    {.family = BRG_CHECK_ADAM, X2(8, 9), .lr = 0.01f, .step = 1},
    {.family = BRG_CHECK_ADAM, X4(4, 3, 3, 3), .lr = 0.1f, .weight_decay = 0.01f, .step = 100},
    /* correct predictions: mixed labels, ties, NaN and infinities, one class, no label right, every
     * label right, and rows and classes beyond one GPU block's threads. */
    {.family = BRG_CHECK_COUNT_CORRECT, X2(8, 10)},
    {.family = BRG_CHECK_COUNT_CORRECT, X2(16, 5), .ties = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, X2(12, 7), .nonfinite = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, X2(5, 1), .label_mode = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, X2(6, 9), .ties = 1, .label_mode = 2},
    {.family = BRG_CHECK_COUNT_CORRECT, X2(9, 4), .ties = 1, .nonfinite = 1, .label_mode = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, X2(300, 1000), .ties = 1, .nonfinite = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, X4(3, 4, 5, 6)},
    {.family = BRG_CHECK_COUNT_CORRECT, X4(2, 5, 3, 3), .ties = 1, .nonfinite = 1},
    {.family = BRG_CHECK_COUNT_CORRECT, X4(2, 3, 16, 16), .ties = 1, .label_mode = 1},
    /* the finite check: finite, a bad value first, in the middle, last (past a CPU block and a GPU
     * grid), a flag already set that must keep its tag, one element. */
    {.family = BRG_CHECK_CHECK_FINITE, X4(2, 3, 5, 5)},
    {.family = BRG_CHECK_CHECK_FINITE, X4(2, 16, 3, 3), .nonfinite = 2, .tag = 7},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {10000}, .nonfinite = 1, .tag = 3},
    {.family = BRG_CHECK_CHECK_FINITE, X2(7, 9), .nonfinite = 2, .tag = 12},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {8193}, .nonfinite = 3},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {1 << 20}, .nonfinite = 3, .tag = 2},
    {.family = BRG_CHECK_CHECK_FINITE, X2(3, 3), .nonfinite = 2, .tag = 4, .preset = 5},
    {.family = BRG_CHECK_CHECK_FINITE, X2(3, 3), .tag = 4, .preset = 5},
    {.family = BRG_CHECK_CHECK_FINITE, .ndim = 1, .x_shape = {1}, .nonfinite = 1},
};

int brg_check_default_cases(const brg_check_case **cases)
{
    if (cases) *cases = default_cases;
    return (int)(sizeof default_cases / sizeof default_cases[0]);
}

