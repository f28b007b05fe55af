/* CPU kernels: batch normalization over the N, H and W of each channel.
 *
 * The loops go channel by channel: for channel c, sample n's values are one
 * contiguous block of H*W floats, so each pass over a channel streams N
 * blocks. Working one channel at a time keeps the statistics in scalars
 * (no per-channel scratch to allocate, so nothing here can fail) and the
 * channel's data warm in cache between its passes.
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

/* Geometry of x[N, C, H, W]: channel c of sample n starts at
 * n * sample + c * plane. */
typedef struct bn_shape {
    int64_t n, c, plane, sample;
} bn_shape;

static bn_shape bn_shape_of(const brg_tensor *x)
{
    bn_shape s = {x->shape[0], x->shape[1], x->shape[2] * x->shape[3], 0};
    s.sample = s.c * s.plane;
    return s;
}

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

/* y = (x - mean) * scale + shift over channel c, with the channel's scale
 * (gamma * invstd) and shift (beta) already folded. The mean comes as a
 * float pair mean_hi + mean_lo: subtracting the rounded mean first is exact
 * or nearly so for x near it, and mean_lo then removes the mean's own
 * rounding, so y keeps full float accuracy even when the data sit far from
 * zero (a mean 1000 times the spread otherwise costs ~10 bits). */
static void bn_normalize_channel(const bn_shape *s, int64_t c, const float *x, float *y, float mean_hi,
                                 float mean_lo, float scale, float shift)
{
    for (int64_t n = 0; n < s->n; n++) {
        const float *xb = x + n * s->sample + c * s->plane;
        float *yb = y + n * s->sample + c * s->plane;
        for (int64_t i = 0; i < s->plane; i++) yb[i] = ((xb[i] - mean_hi) - mean_lo) * scale + shift;
    }
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
    for (int64_t c = 0; c < s.c; c++) {
        double sum = 0.0;
        for (int64_t n = 0; n < s.n; n++) sum += block_sum(x + n * s.sample + c * s.plane, s.plane);
        const double mean = sum / m;
        double ssd = 0.0;
        for (int64_t n = 0; n < s.n; n++) ssd += block_ssd(x + n * s.sample + c * s.plane, s.plane, mean);
        const double var = ssd / m;
        const double invstd = 1.0 / sqrt(var + eps);
        const double g = gamma ? gamma[c] : 1.0;
        const float mean_hi = (float)mean;
        bn_normalize_channel(&s, c, x, y, mean_hi, (float)(mean - mean_hi), (float)(g * invstd),
                             beta ? beta[c] : 0.0f);

        saved_mean[c] = (float)mean;
        saved_invstd[c] = (float)invstd;
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean);
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * (ssd / (m - 1.0)));
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
    for (int64_t c = 0; c < s.c; c++) {
        double invstd = 1.0 / sqrt((double)running_var[c] + (double)op->p.bn.epsilon);
        double g = gamma ? gamma[c] : 1.0;
        bn_normalize_channel(&s, c, xt->data, op->out[0]->data, running_mean[c], mean_lo ? mean_lo[c] : 0.0f,
                             (float)(g * invstd),
                             beta ? beta[c] : 0.0f);
    }
    return BRG_OK;
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
    for (int64_t c = 0; c < s.c; c++) {
        const float shift = saved_mean[c];
        double sums[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t n = 0; n < s.n; n++)
            block_backward_sums(x + n * s.sample + c * s.plane, dy + n * s.sample + c * s.plane, s.plane, shift,
                                sums);
        /* Mean and biased variance from the shifted sums: mean_lo is the
         * (tiny) distance from the shift to the true mean. */
        const double mean_lo = sums[0] / m;
        const double var = sums[1] / m - mean_lo * mean_lo;
        const double invstd = 1.0 / sqrt((var > 0.0 ? var : 0.0) + eps);
        const double sum_dy = sums[2];
        const double sum_dy_xhat = (sums[3] - mean_lo * sum_dy) * invstd;
        if (dgamma) dgamma[c] = (float)(op->accumulate ? dgamma[c] + sum_dy_xhat : sum_dy_xhat);
        if (dbeta) dbeta[c] = (float)(op->accumulate ? dbeta[c] + sum_dy : sum_dy);

        const double k = (gamma ? gamma[c] : 1.0) * invstd;
        const double mean_dy = sum_dy / m;
        const double mean_dy_xhat = sum_dy_xhat / m;
        for (int64_t n = 0; n < s.n; n++) {
            const float *xb = x + n * s.sample + c * s.plane;
            const float *db = dy + n * s.sample + c * s.plane;
            float *dxb = dx + n * s.sample + c * s.plane;
            if (op->accumulate) {
                for (int64_t i = 0; i < s.plane; i++) {
                    double xhat = (((double)xb[i] - shift) - mean_lo) * invstd;
                    dxb[i] += (float)(k * (db[i] - mean_dy - xhat * mean_dy_xhat));
                }
            } else {
                for (int64_t i = 0; i < s.plane; i++) {
                    double xhat = (((double)xb[i] - shift) - mean_lo) * invstd;
                    dxb[i] = (float)(k * (db[i] - mean_dy - xhat * mean_dy_xhat));
                }
            }
        }
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
    for (int64_t c = 0; c < s.c; c++) {
        double sum = 0.0, ssd = 0.0;
        for (int64_t n = 0; n < s.n; n++) sum += block_sum(x + n * s.sample + c * s.plane, s.plane);
        const double mean = m > 0.0 ? sum / m : 0.0;
        for (int64_t n = 0; n < s.n; n++) ssd += block_ssd(x + n * s.sample + c * s.plane, s.plane, mean);
        mean_out[c] = (float)mean;
        if (lo_out) lo_out[c] = (float)(mean - (double)mean_out[c]);
        var_out[c] = (float)(m > 0.0 ? ssd / m : 0.0);
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
    for (int64_t c = 0; c < s.c; c++) {
        double sums[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t n = 0; n < s.n; n++)
            block_backward_sums(x + n * s.sample + c * s.plane, dy + n * s.sample + c * s.plane, s.plane, mean[c],
                                sums);
        const double lo = mean_lo ? mean_lo[c] : 0.0;
        const double sdy = sums[2], sdyx = (sums[3] - lo * sdy) * (double)invstd[c];
        sum_dy[c] = (float)sdy;
        sum_dy_xhat[c] = (float)sdyx;
        if (dgamma) dgamma[c] = (float)(op->accumulate ? dgamma[c] + sdyx : sdyx);
        if (dbeta) dbeta[c] = (float)(op->accumulate ? dbeta[c] + sdy : sdy);
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
    for (int64_t c = 0; c < s.c; c++) {
        const double inv = invstd[c], k = (gamma ? gamma[c] : 1.0) * inv;
        const double mean_dy = sum_dy[c] / count, mean_dy_xhat = sum_dy_xhat[c] / count;
        const float mu = mean[c];
        const double lo = mean_lo ? mean_lo[c] : 0.0;
        for (int64_t n = 0; n < s.n; n++) {
            const float *xb = x + n * s.sample + c * s.plane;
            const float *db = dy + n * s.sample + c * s.plane;
            float *dxb = dx + n * s.sample + c * s.plane;
            for (int64_t i = 0; i < s.plane; i++) {
                const double xhat = (((double)xb[i] - mu) - lo) * inv;
                const float g = (float)(k * (db[i] - mean_dy - xhat * mean_dy_xhat));
                dxb[i] = op->accumulate ? dxb[i] + g : g;
            }
        }
    }
    return BRG_OK;
}
