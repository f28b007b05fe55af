/* CPU kernels: batch normalization over the N, H and W of each channel.
 *
 * The loops go channel by channel: for channel c, sample n's values are one
 * contiguous block of H*W floats, so each pass over a channel streams N
 * blocks. Working one channel at a time keeps the statistics in scalars
 * (no per-channel scratch to allocate, so nothing here can fail) and the
 * channel's data warm in cache between its passes.
 *
 * A channel-blocked tensor (brigade/tensor.h) is walked a group of `block`
 * channels at a time: position i of the group's plane in sample n holds its
 * channels side by side, so each helper below keeps one set of
 * accumulators per channel of the group and adds in the same order as for
 * one plain channel. The results are the same bits in either layout. Plain
 * tensors are groups of one channel and take the plain helpers.
 *
 * Statistics are summed in double: a channel holds N*H*W values (hundreds
 * of thousands for early layers), enough for a float sum to drift. The
 * forward's variance is two-pass (mean first, then squared deviations); the
 * backward's is one pass of sums shifted by the saved mean. Neither cancels
 * when the mean is large next to the spread. */
#include <math.h>
#include <stdint.h>

#include "cpu-kernels.h"

/* An optional input: NULL when absent or beyond n_in. */
static const brg_tensor *opt_in(const brg_op *op, int i) { return i < op->n_in ? op->in[i] : NULL; }
static const brg_tensor *opt_out(const brg_op *op, int i) { return i < op->n_out ? op->out[i] : NULL; }

/* The widest group. */
#define BN_MAX_GROUP BRG_MAX_BLOCK

/* Geometry of x[N, C, H, W] in groups of w channels (w = the block, or 1
 * for plain NCHW): group g of sample n starts at n * sample + g * w * plane,
 * and channel g * w + k of it at position i sits at offset i * w + k. */
typedef struct bn_shape {
    int64_t n, c, plane, sample;
    int w;          /* channels per group */
    int64_t groups; /* c / w */
} bn_shape;

static bn_shape bn_shape_of(const brg_tensor *x)
{
    bn_shape s = {x->shape[0], x->shape[1], x->shape[2] * x->shape[3], 0, x->block ? x->block : 1, 0};
    s.sample = s.c * s.plane;
    s.groups = s.c / s.w;
    return s;
}

/* Offset of group g of sample n. */
static int64_t group_at(const bn_shape *s, int64_t n, int64_t g) { return n * s->sample + g * s->w * s->plane; }

/* The reductions below keep BN_LANES independent double accumulators per
 * sum. One accumulator serializes every add on the previous one (and the
 * compiler may not reorder floating-point sums on its own); four let the
 * adds overlap, about twice as fast, and are no less accurate. */
#define BN_LANES 4

/* Sum of p[0..n). */
static double block_sum(const float *p, int64_t n)
{
    double a[BN_LANES] = {0.0};
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) a[k] += p[i + k];
    for (; i < n; i++) a[0] += p[i];
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* Sum of (p[i] - mean)^2 over p[0..n). */
static double block_ssd(const float *p, int64_t n, double mean)
{
    double a[BN_LANES] = {0.0};
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) {
            double d = (double)p[i + k] - mean;
            a[k] += d * d;
        }
    for (; i < n; i++) {
        double d = (double)p[i] - mean;
        a[0] += d * d;
    }
    return (a[0] + a[1]) + (a[2] + a[3]);
}

/* The backward's sums over one block, added into acc, with xc = x - shift:
 * acc[0] += sum xc, acc[1] += sum xc^2, acc[2] += sum dy,
 * acc[3] += sum dy * xc. All in double; xc itself is exact for float x
 * and a float shift. */
static void block_backward_sums(const float *x, const float *dy, int64_t n, float shift, double acc[4])
{
    double sxc[BN_LANES] = {0.0}, sxc2[BN_LANES] = {0.0}, sdy[BN_LANES] = {0.0}, sdyxc[BN_LANES] = {0.0};
    int64_t i = 0;
    for (; i + BN_LANES <= n; i += BN_LANES)
        for (int k = 0; k < BN_LANES; k++) {
            double xc = (double)x[i + k] - shift;
            sxc[k] += xc;
            sxc2[k] += xc * xc;
            sdy[k] += dy[i + k];
            sdyxc[k] += dy[i + k] * xc;
        }
    for (; i < n; i++) {
        double xc = (double)x[i] - shift;
        sxc[0] += xc;
        sxc2[0] += xc * xc;
        sdy[0] += dy[i];
        sdyxc[0] += dy[i] * xc;
    }
    acc[0] += (sxc[0] + sxc[1]) + (sxc[2] + sxc[3]);
    acc[1] += (sxc2[0] + sxc2[1]) + (sxc2[2] + sxc2[3]);
    acc[2] += (sdy[0] + sdy[1]) + (sdy[2] + sdy[3]);
    acc[3] += (sdyxc[0] + sdyxc[1]) + (sdyxc[2] + sdyxc[3]);
}

/* The group helpers below are written once for a width w and forced
 * inline into a dispatch on the block (BN_BY_WIDTH), so that the usual
 * blocks 8 and 16 get loops of a constant width, which the compiler
 * unrolls and vectorizes across the channels. */
#define BN_INLINE static inline __attribute__((always_inline))
#define BN_BY_WIDTH(w, call)                                                                                      \
    do {                                                                                                          \
        if ((w) == 8) call(8);                                                                                    \
        else if ((w) == 16) call(16);                                                                             \
        else call(w);                                                                                             \
    } while (0)

/* The same three sums over one group of w channels: each channel's lanes
 * take the positions block_sum's would, so its sum comes out the same. */
BN_INLINE void group_sum_w(const float *p, int64_t plane, const int w, double *out)
{
    double a[BN_LANES][BN_MAX_GROUP] = {{0.0}};
    int64_t i = 0;
    for (; i + BN_LANES <= plane; i += BN_LANES)
        for (int j = 0; j < BN_LANES; j++)
            for (int k = 0; k < w; k++) a[j][k] += p[(i + j) * w + k];
    for (; i < plane; i++)
        for (int k = 0; k < w; k++) a[0][k] += p[i * w + k];
    for (int k = 0; k < w; k++) out[k] += (a[0][k] + a[1][k]) + (a[2][k] + a[3][k]);
}

static void group_sum(const float *p, int64_t plane, int w, double *out)
{
    if (w == 1) {
        out[0] += block_sum(p, plane);
        return;
    }
#define BN_CALL(W) group_sum_w(p, plane, W, out)
    BN_BY_WIDTH(w, BN_CALL);
#undef BN_CALL
}

BN_INLINE void group_ssd_w(const float *p, int64_t plane, const int w, const double *mean, double *out)
{
    double a[BN_LANES][BN_MAX_GROUP] = {{0.0}};
    int64_t i = 0;
    for (; i + BN_LANES <= plane; i += BN_LANES)
        for (int j = 0; j < BN_LANES; j++)
            for (int k = 0; k < w; k++) {
                double d = (double)p[(i + j) * w + k] - mean[k];
                a[j][k] += d * d;
            }
    for (; i < plane; i++)
        for (int k = 0; k < w; k++) {
            double d = (double)p[i * w + k] - mean[k];
            a[0][k] += d * d;
        }
    for (int k = 0; k < w; k++) out[k] += (a[0][k] + a[1][k]) + (a[2][k] + a[3][k]);
}

static void group_ssd(const float *p, int64_t plane, int w, const double *mean, double *out)
{
    if (w == 1) {
        out[0] += block_ssd(p, plane, mean[0]);
        return;
    }
#define BN_CALL(W) group_ssd_w(p, plane, W, mean, out)
    BN_BY_WIDTH(w, BN_CALL);
#undef BN_CALL
}

/* The backward's four sums of a group, block_backward_sums's acc for each
 * channel k: v[0][k] sum xc, v[1][k] sum xc^2, v[2][k] sum dy, v[3][k]
 * sum dy * xc. */
typedef struct bn_sums {
    double v[4][BN_MAX_GROUP];
} bn_sums;

BN_INLINE void group_backward_sums_w(const float *x, const float *dy, int64_t plane, const int w, const float *shift,
                                     bn_sums *acc)
{
    double sxc[BN_LANES][BN_MAX_GROUP] = {{0.0}}, sxc2[BN_LANES][BN_MAX_GROUP] = {{0.0}};
    double sdy[BN_LANES][BN_MAX_GROUP] = {{0.0}}, sdyxc[BN_LANES][BN_MAX_GROUP] = {{0.0}};
    int64_t i = 0;
    for (; i + BN_LANES <= plane; i += BN_LANES)
        for (int j = 0; j < BN_LANES; j++)
            for (int k = 0; k < w; k++) {
                const int64_t at = (i + j) * w + k;
                double xc = (double)x[at] - shift[k];
                sxc[j][k] += xc;
                sxc2[j][k] += xc * xc;
                sdy[j][k] += dy[at];
                sdyxc[j][k] += dy[at] * xc;
            }
    for (; i < plane; i++)
        for (int k = 0; k < w; k++) {
            const int64_t at = i * w + k;
            double xc = (double)x[at] - shift[k];
            sxc[0][k] += xc;
            sxc2[0][k] += xc * xc;
            sdy[0][k] += dy[at];
            sdyxc[0][k] += dy[at] * xc;
        }
    for (int k = 0; k < w; k++) {
        acc->v[0][k] += (sxc[0][k] + sxc[1][k]) + (sxc[2][k] + sxc[3][k]);
        acc->v[1][k] += (sxc2[0][k] + sxc2[1][k]) + (sxc2[2][k] + sxc2[3][k]);
        acc->v[2][k] += (sdy[0][k] + sdy[1][k]) + (sdy[2][k] + sdy[3][k]);
        acc->v[3][k] += (sdyxc[0][k] + sdyxc[1][k]) + (sdyxc[2][k] + sdyxc[3][k]);
    }
}

static void group_backward_sums(const float *x, const float *dy, int64_t plane, int w, const float *shift,
                                bn_sums *acc)
{
    if (w == 1) {
        double one[4] = {acc->v[0][0], acc->v[1][0], acc->v[2][0], acc->v[3][0]};
        block_backward_sums(x, dy, plane, shift[0], one);
        for (int j = 0; j < 4; j++) acc->v[j][0] = one[j];
        return;
    }
#define BN_CALL(W) group_backward_sums_w(x, dy, plane, W, shift, acc)
    BN_BY_WIDTH(w, BN_CALL);
#undef BN_CALL
}

/* A group's normalization, channel k: y = ((x - mean_hi[k]) - mean_lo[k])
 * * scale[k] + shift[k], with scale = gamma * invstd and shift = beta
 * folded. The mean comes as a float pair mean_hi + mean_lo: subtracting the
 * rounded mean first is exact or nearly so for x near it, and mean_lo then
 * removes the mean's own rounding, so y keeps full float accuracy even when
 * the data sit far from zero (a mean 1000 times the spread otherwise costs
 * ~10 bits). */
typedef struct bn_affine {
    float mean_hi[BN_MAX_GROUP], mean_lo[BN_MAX_GROUP], scale[BN_MAX_GROUP], shift[BN_MAX_GROUP];
} bn_affine;

BN_INLINE void normalize_w(const float *xb, float *yb, int64_t plane, const int w, const bn_affine *f)
{
    for (int64_t i = 0; i < plane; i++)
        for (int k = 0; k < w; k++)
            yb[i * w + k] = ((xb[i * w + k] - f->mean_hi[k]) - f->mean_lo[k]) * f->scale[k] + f->shift[k];
}

/* y from x over group g of every sample. */
static void bn_normalize_group(const bn_shape *s, int64_t g, const float *x, float *y, const bn_affine *fp)
{
    const bn_affine local = *fp, *f = &local; /* a copy y cannot alias */
    const int w = s->w;
    for (int64_t n = 0; n < s->n; n++) {
        const float *xb = x + group_at(s, n, g);
        float *yb = y + group_at(s, n, g);
        if (w == 1) {
            const float mh = f->mean_hi[0], ml = f->mean_lo[0], sc = f->scale[0], sh = f->shift[0];
            for (int64_t i = 0; i < s->plane; i++) yb[i] = ((xb[i] - mh) - ml) * sc + sh;
            continue;
        }
#define BN_CALL(W) normalize_w(xb, yb, s->plane, W, f)
        BN_BY_WIDTH(w, BN_CALL);
#undef BN_CALL
    }
}

/* The per-channel sums of x (group_sum) and then of its squared
 * deviations from their means (group_ssd), over every sample of group g:
 * the two passes of the forward's statistics. */
static void group_mean_ssd(const bn_shape *s, int64_t g, const float *x, double m, double *mean, double *ssd)
{
    double sum[BN_MAX_GROUP] = {0.0};
    for (int64_t n = 0; n < s->n; n++) group_sum(x + group_at(s, n, g), s->plane, s->w, sum);
    for (int k = 0; k < s->w; k++) {
        mean[k] = m > 0.0 ? sum[k] / m : 0.0;
        ssd[k] = 0.0;
    }
    for (int64_t n = 0; n < s->n; n++) group_ssd(x + group_at(s, n, g), s->plane, s->w, mean, ssd);
}

/* Training forward: per-channel batch mean and biased variance, y from
 * them, saved_mean / saved_invstd for the backward, and the running
 * averages moved towards the batch with the unbiased variance (m / (m-1),
 * as PyTorch does; validation guarantees m = N*H*W >= 2). */
brg_status brg_cpu_batchnorm_forward_train(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const brg_tensor *gt = opt_in(op, 1), *bt = opt_in(op, 2);
    const float *x = xt->data;
    const float *gamma = gt ? gt->data : NULL;
    const float *beta = bt ? bt->data : NULL;
    float *y = op->out[0]->data;
    float *running_mean = op->out[1]->data;
    float *running_var = op->out[2]->data;
    float *saved_mean = op->out[3]->data;
    float *saved_invstd = op->out[4]->data;
    const double eps = op->p.bn.epsilon, momentum = op->p.bn.momentum;
    bn_shape s = bn_shape_of(xt);
    const double m = (double)(s.n * s.plane);

    const int threads = brg_cpu_kernel_threads(s.n * s.sample);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t g = 0; g < s.groups; g++) {
        double mean[BN_MAX_GROUP], ssd[BN_MAX_GROUP];
        bn_affine f;
        group_mean_ssd(&s, g, x, m, mean, ssd);
        for (int k = 0; k < s.w; k++) {
            const int64_t c = g * s.w + k;
            const double var = ssd[k] / m;
            const double invstd = 1.0 / sqrt(var + eps);
            const double gm = gamma ? gamma[c] : 1.0;
            const float mean_hi = (float)mean[k];
            f.mean_hi[k] = mean_hi;
            f.mean_lo[k] = (float)(mean[k] - mean_hi);
            f.scale[k] = (float)(gm * invstd);
            f.shift[k] = beta ? beta[c] : 0.0f;
            saved_mean[c] = (float)mean[k];
            saved_invstd[c] = (float)invstd;
            running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean[k]);
            running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * (ssd[k] / (m - 1.0)));
        }
        bn_normalize_group(&s, g, x, y, &f);
    }
    return BRG_OK;
}

/* Inference forward: y = (x - running_mean) / sqrt(running_var + eps) *
 * gamma + beta, the mean's low part subtracted too when given (as
 * synchronized BatchNorm gives its merged mean). Nothing is updated. */
brg_status brg_cpu_batchnorm_forward_infer(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const brg_tensor *gt = op->in[1], *bt = op->in[2];
    const float *gamma = gt ? gt->data : NULL;
    const float *beta = bt ? bt->data : NULL;
    const float *running_mean = op->in[3]->data;
    const float *running_var = op->in[4]->data;
    const brg_tensor *lt = opt_in(op, 5);
    const float *mean_lo = lt ? lt->data : NULL;
    bn_shape s = bn_shape_of(xt);
    const int threads = brg_cpu_kernel_threads(s.n * s.sample);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t g = 0; g < s.groups; g++) {
        bn_affine f;
        for (int k = 0; k < s.w; k++) {
            const int64_t c = g * s.w + k;
            double invstd = 1.0 / sqrt((double)running_var[c] + (double)op->p.bn.epsilon);
            double gm = gamma ? gamma[c] : 1.0;
            f.mean_hi[k] = running_mean[c];
            f.mean_lo[k] = mean_lo ? mean_lo[c] : 0.0f;
            f.scale[k] = (float)(gm * invstd);
            f.shift[k] = beta ? beta[c] : 0.0f;
        }
        bn_normalize_group(&s, g, xt->data, op->out[0]->data, &f);
    }
    return BRG_OK;
}

/* A group's backward coefficients, channel k: dx = k[k] * (dy - mean_dy[k]
 * - xhat * mean_dy_xhat[k]) with xhat = ((x - shift[k]) - mean_lo[k]) *
 * invstd[k], in double. */
typedef struct bn_grad {
    float shift[BN_MAX_GROUP];
    double mean_lo[BN_MAX_GROUP], invstd[BN_MAX_GROUP], k[BN_MAX_GROUP], mean_dy[BN_MAX_GROUP],
        mean_dy_xhat[BN_MAX_GROUP];
} bn_grad;

/* One dx element of channel c of the group. */
BN_INLINE float bn_dx(const bn_grad *q, int c, float x, float dy)
{
    const double xhat = (((double)x - q->shift[c]) - q->mean_lo[c]) * q->invstd[c];
    return (float)(q->k[c] * (dy - q->mean_dy[c] - xhat * q->mean_dy_xhat[c]));
}

BN_INLINE void bn_dx_w(const float *xb, const float *db, float *dxb, int64_t plane, const int w, const bn_grad *q,
                       int accumulate)
{
    if (accumulate) {
        for (int64_t i = 0; i < plane; i++)
            for (int k = 0; k < w; k++) dxb[i * w + k] += bn_dx(q, k, xb[i * w + k], db[i * w + k]);
    } else {
        for (int64_t i = 0; i < plane; i++)
            for (int k = 0; k < w; k++) dxb[i * w + k] = bn_dx(q, k, xb[i * w + k], db[i * w + k]);
    }
}

/* dx from x and dy over group g of every sample; added onto dx with
 * accumulate. dx may alias dy: each element of dy is read just before its
 * dx is written. Separate loops per case, so that each vectorizes. */
static void bn_dx_group(const bn_shape *s, int64_t g, const float *x, const float *dy, float *dx, const bn_grad *qp,
                        int accumulate)
{
    const bn_grad local = *qp, *q = &local; /* a copy dx cannot alias: the loops keep it in registers */
    for (int64_t n = 0; n < s->n; n++) {
        const int64_t at = group_at(s, n, g);
        if (s->w == 1) {
            bn_dx_w(x + at, dy + at, dx + at, s->plane, 1, q, accumulate);
            continue;
        }
#define BN_CALL(W) bn_dx_w(x + at, dy + at, dx + at, s->plane, W, q, accumulate)
        BN_BY_WIDTH(s->w, BN_CALL);
#undef BN_CALL
    }
}

/* Training-mode backward, through the batch statistics. With
 * xhat = (x - mean) * invstd and m = N*H*W per channel:
 *   dbeta  = sum(dy)
 *   dgamma = sum(dy * xhat)
 *   dx     = gamma * invstd * (dy - dbeta / m - xhat * dgamma / m)
 * which is invstd*gamma/m * (m*dy - sum(dy) - xhat*sum(dy*xhat)) with the
 * 1/m folded into the two sums. dgamma and dbeta are optional outputs (the
 * sums are needed for dx regardless); gamma absent means 1.
 *
 * The batch statistics are recomputed in double from x, in the same pass
 * that sums dy, shifted by saved_mean so that nothing cancels; saved_invstd
 * is not read. Float saved statistics are not enough: dx is a difference of
 * nearly equal terms when few values share a channel or the mean is large
 * next to the spread (with m = 2, dx is about eps/var times dy), and the
 * rounding of saved_mean and saved_invstd alone then costs up to a few
 * parts in 1000 of dx and dgamma. For the same reason the second pass works
 * in double. Both passes stream x and dy once each.
 *
 * Without accumulate, dx may alias dy: each element of dy is read in the
 * first pass, and again in the second just before its dx is written. */
brg_status brg_cpu_batchnorm_backward(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const float *x = xt->data;
    const float *dy = op->in[1]->data;
    const brg_tensor *gt = op->in[2];
    const float *gamma = gt ? gt->data : NULL;
    const float *saved_mean = op->in[3]->data;
    float *dx = op->out[0]->data;
    const brg_tensor *dgt = opt_out(op, 1), *dbt = opt_out(op, 2);
    float *dgamma = dgt ? dgt->data : NULL;
    float *dbeta = dbt ? dbt->data : NULL;
    const double eps = op->p.bn.epsilon;
    bn_shape s = bn_shape_of(xt);
    const double m = (double)(s.n * s.plane);

    const int threads = brg_cpu_kernel_threads(s.n * s.sample);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t g = 0; g < s.groups; g++) {
        float shift[BN_MAX_GROUP];
        bn_sums sums = {{{0.0}}};
        bn_grad q;
        for (int k = 0; k < s.w; k++) shift[k] = saved_mean[g * s.w + k];
        for (int64_t n = 0; n < s.n; n++)
            group_backward_sums(x + group_at(&s, n, g), dy + group_at(&s, n, g), s.plane, s.w, shift, &sums);
        for (int k = 0; k < s.w; k++) {
            const int64_t c = g * s.w + k;
            /* Mean and biased variance from the shifted sums: mean_lo is the
             * (tiny) distance from the shift to the true mean. */
            const double mean_lo = sums.v[0][k] / m;
            const double var = sums.v[1][k] / m - mean_lo * mean_lo;
            const double invstd = 1.0 / sqrt((var > 0.0 ? var : 0.0) + eps);
            const double sum_dy = sums.v[2][k];
            const double sum_dy_xhat = (sums.v[3][k] - mean_lo * sum_dy) * invstd;
            if (dgamma) dgamma[c] = (float)(op->accumulate ? dgamma[c] + sum_dy_xhat : sum_dy_xhat);
            if (dbeta) dbeta[c] = (float)(op->accumulate ? dbeta[c] + sum_dy : sum_dy);
            q.shift[k] = shift[k];
            q.mean_lo[k] = mean_lo;
            q.invstd[k] = invstd;
            q.k[k] = (gamma ? gamma[c] : 1.0) * invstd;
            q.mean_dy[k] = sum_dy / m;
            q.mean_dy_xhat[k] = sum_dy_xhat / m;
        }
        bn_dx_group(&s, g, x, dy, dx, &q, op->accumulate);
    }
    return BRG_OK;
}

/* ---- synchronized BatchNorm: the statistics and the backward's sums of
 * one replica, and the backward from every replica's sums ---- */

/* The per-channel mean and biased variance of x, two-pass as the training
 * forward's, and the mean's low part when asked for. */
brg_status brg_cpu_batchnorm_stats(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const float *x = xt->data;
    float *mean_out = op->out[0]->data, *var_out = op->out[1]->data;
    const brg_tensor *lt = opt_out(op, 2);
    float *lo_out = lt ? lt->data : NULL;
    bn_shape s = bn_shape_of(xt);
    const double m = (double)(s.n * s.plane);
    const int threads = brg_cpu_kernel_threads(s.n * s.sample);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t g = 0; g < s.groups; g++) {
        double mean[BN_MAX_GROUP], ssd[BN_MAX_GROUP];
        group_mean_ssd(&s, g, x, m, mean, ssd);
        for (int k = 0; k < s.w; k++) {
            const int64_t c = g * s.w + k;
            mean_out[c] = (float)mean[k];
            if (lo_out) lo_out[c] = (float)(mean[k] - (double)mean_out[c]);
            var_out[c] = (float)(m > 0.0 ? ssd[k] / m : 0.0);
        }
    }
    return BRG_OK;
}

/* sum(dy) and sum(dy * xhat) per channel, from block_backward_sums shifted
 * by the mean's float part: sum(dy * xhat) = invstd * (sum(dy * (x -
 * mean)) - mean_lo * sum(dy)), in double. */
brg_status brg_cpu_batchnorm_backward_reduce(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const float *x = xt->data, *dy = op->in[1]->data;
    const float *mean = op->in[2]->data, *invstd = op->in[3]->data;
    const brg_tensor *lt = opt_in(op, 4);
    const float *mean_lo = lt ? lt->data : NULL;
    float *sum_dy = op->out[0]->data, *sum_dy_xhat = op->out[1]->data;
    const brg_tensor *dgt = opt_out(op, 2), *dbt = opt_out(op, 3);
    float *dgamma = dgt ? dgt->data : NULL, *dbeta = dbt ? dbt->data : NULL;
    bn_shape s = bn_shape_of(xt);
    const int threads = brg_cpu_kernel_threads(s.n * s.sample);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t g = 0; g < s.groups; g++) {
        bn_sums sums = {{{0.0}}};
        for (int64_t n = 0; n < s.n; n++)
            group_backward_sums(x + group_at(&s, n, g), dy + group_at(&s, n, g), s.plane, s.w, mean + g * s.w, &sums);
        for (int k = 0; k < s.w; k++) {
            const int64_t c = g * s.w + k;
            const double lo = mean_lo ? mean_lo[c] : 0.0;
            const double sdy = sums.v[2][k], sdyx = (sums.v[3][k] - lo * sdy) * (double)invstd[c];
            sum_dy[c] = (float)sdy;
            sum_dy_xhat[c] = (float)sdyx;
            if (dgamma) dgamma[c] = (float)(op->accumulate ? dgamma[c] + sdyx : sdyx);
            if (dbeta) dbeta[c] = (float)(op->accumulate ? dbeta[c] + sdy : sdy);
        }
    }
    return BRG_OK;
}

/* dx from the synchronized batch's sums, in double per element as the
 * training backward's second pass. dx may alias dy: each element of dy is
 * read just before its dx is written. */
brg_status brg_cpu_batchnorm_backward_elemt(brg_device *dev BRG_UNUSED, const brg_op *op)
{
    const brg_tensor *xt = op->in[0];
    const float *x = xt->data, *dy = op->in[1]->data;
    const brg_tensor *gt = op->in[2];
    const float *gamma = gt ? gt->data : NULL;
    const float *mean = op->in[3]->data, *invstd = op->in[4]->data;
    const float *sum_dy = op->in[5]->data, *sum_dy_xhat = op->in[6]->data;
    const brg_tensor *lt = opt_in(op, 7);
    const float *mean_lo = lt ? lt->data : NULL;
    float *dx = op->out[0]->data;
    bn_shape s = bn_shape_of(xt);
    const double count = (double)op->p.bn.count;
    const int threads = brg_cpu_kernel_threads(s.n * s.sample);
    BRG_CPU_PARALLEL_FOR(threads)
    for (int64_t g = 0; g < s.groups; g++) {
        bn_grad q;
        for (int k = 0; k < s.w; k++) {
            const int64_t c = g * s.w + k;
            const double inv = invstd[c];
            q.shift[k] = mean[c];
            q.mean_lo[k] = mean_lo ? mean_lo[c] : 0.0;
            q.invstd[k] = inv;
            q.k[k] = (gamma ? gamma[c] : 1.0) * inv;
            q.mean_dy[k] = sum_dy[c] / count;
            q.mean_dy_xhat[k] = sum_dy_xhat[c] / count;
        }
        bn_dx_group(&s, g, x, dy, dx, &q, op->accumulate);
    }
    return BRG_OK;
}
