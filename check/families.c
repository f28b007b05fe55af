/* The kernel check harness's op families: for each, the tensors of a case,
 * its forward against the reference, each backward against finite
 * differences, and accumulation (see check.c for how a run goes). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check/check-impl.h"

/* ---- families ---- */

static void run_conv(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    brg_ref_window_init(&k->g, s[0], s[1], s[2], s[3], c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h,
                        c->pad_w);
    const int64_t ws[4] = {c->out_features, s[1], c->kernel_h, c->kernel_w};
    const int64_t ys[4] = {s[0], c->out_features, k->g.p, k->g.q};
    k->x = brg_ck_input(k, "x", 4, s, FILL_SIGNED);
    k->w = brg_ck_input(k, "w", 4, ws, FILL_SIGNED);
    k->b = c->bias ? brg_ck_vector(k, "b", c->out_features, FILL_SIGNED) : NULL;
    ck_tensor *y = brg_ck_output(k, "y", 4, ys);
    brg_ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    brg_conv2d_params cp = {c->stride_h, c->stride_w, c->pad_h, c->pad_w};
    {
        const ck_tensor *in[3] = {k->x, k->w, k->b}, *out[1] = {y};
        brg_ck_op_set(&op, BRG_OP_CONV2D_FORWARD, trim(in, 3), in, 1, out);
        op.p.conv = cp;
        brg_ck_forward(k, &op, y);
    }
    {
        const ck_tensor *in[2] = {k->dy, k->w};
        brg_ck_backward_dx(k, &op, BRG_OP_CONV2D_BACKWARD_DATA, in, 2);
    }
    {
        ck_tensor *dw = brg_ck_output(k, "dw", 4, ws);
        ck_tensor *db = c->bias ? brg_ck_output(k, "db", 1, &c->out_features) : NULL;
        const ck_tensor *in[2] = {k->x, k->dy}, *out[2] = {dw, db};
        brg_ck_op_set(&op, BRG_OP_CONV2D_BACKWARD_FILTER, 2, in, trim(out, 2), out);
        op.p.conv = cp;
        ck_tensor *g[2] = {dw, db}, *p[2] = {k->w, k->b};
        brg_ck_backward(k, &op, g, p, NULL, NULL, 2);
    }
}

static void run_linear(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t n = s[0], in_features = brg_check_case_numel(c) / n, o = c->out_features;
    const int64_t ws[2] = {o, in_features}, ys[2] = {n, o};
    k->x = brg_ck_input(k, "x", c->ndim, s, FILL_SIGNED);
    k->w = brg_ck_input(k, "w", 2, ws, FILL_SIGNED);
    k->b = c->bias ? brg_ck_vector(k, "b", o, FILL_SIGNED) : NULL;
    ck_tensor *y = brg_ck_output(k, "y", 2, ys);
    brg_ck_model_output(k, 2, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    {
        const ck_tensor *in[3] = {k->x, k->w, k->b}, *out[1] = {y};
        brg_ck_op_set(&op, BRG_OP_LINEAR_FORWARD, trim(in, 3), in, 1, out);
        brg_ck_forward(k, &op, y);
    }
    {
        const ck_tensor *in[2] = {k->dy, k->w};
        brg_ck_backward_dx(k, &op, BRG_OP_LINEAR_BACKWARD_DATA, in, 2);
    }
    {
        ck_tensor *dw = brg_ck_output(k, "dw", 2, ws);
        ck_tensor *db = c->bias ? brg_ck_output(k, "db", 1, &o) : NULL;
        const ck_tensor *in[2] = {k->x, k->dy}, *out[2] = {dw, db};
        brg_ck_op_set(&op, BRG_OP_LINEAR_BACKWARD_WEIGHT, 2, in, trim(out, 2), out);
        ck_tensor *g[2] = {dw, db}, *p[2] = {k->w, k->b};
        brg_ck_backward(k, &op, g, p, NULL, NULL, 2);
    }
}

/* Magnitudes of a BatchNorm backward's terms per channel, from the
 * reference statistics in k->stats (a sum can cancel to nearly nothing, so
 * each is measured against the sum of its terms' sizes): dbeta = sum dy,
 * dgamma = sum dy xhat, and dx = gamma invstd (dy - mean dy - xhat
 * mean(dy xhat)). scale: dx, dgamma, dbeta. */
static void bn_backward_scales(ck *k, double scale[3])
{
    const int64_t *s = k->c.x_shape, ch = s[1], hw = s[2] * s[3];
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
        if (dx > scale[0]) scale[0] = dx;
        if (sdyx > scale[1]) scale[1] = sdyx;
        if (sdy > scale[2]) scale[2] = sdy;
    }
}

/* The largest mean magnitude of a channel's values: the scale a mean is
 * measured against. */
static double bn_mean_scale(ck *k)
{
    const int64_t *s = k->c.x_shape, ch = s[1], hw = s[2] * s[3];
    double most = 0.0;
    for (int64_t ci = 0; ci < ch; ci++) {
        double sum = 0.0;
        for (int64_t ni = 0; ni < s[0]; ni++)
            for (int64_t i = 0; i < hw; i++) sum += fabs(k->x->ref[(ni * ch + ci) * hw + i]);
        if (sum / (double)(s[0] * hw) > most) most = sum / (double)(s[0] * hw);
    }
    return most;
}

static void run_batchnorm(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t ch = s[1];
    int train = c->family == BRG_CHECK_BATCHNORM_TRAIN;
    k->x = brg_ck_input(k, "x", 4, s, c->far ? FILL_FAR : FILL_SHIFTED);
    k->gamma = c->gamma ? brg_ck_vector(k, "gamma", ch, FILL_SIGNED) : NULL;
    k->beta = c->beta ? brg_ck_vector(k, "beta", ch, FILL_SIGNED) : NULL;
    k->rmean = brg_ck_vector(k, "running_mean", ch, FILL_UNIFORM);
    k->rvar = brg_ck_vector(k, "running_var", ch, FILL_POSITIVE);
    ck_tensor *y = brg_ck_output(k, "y", 4, s);
    brg_ck_model_output(k, 4, s, train);
    for (int i = 0; i < 3; i++) k->stats[i] = brg_ck_host(k, (size_t)ch, sizeof(double));
    if (!ck_ok(k)) return;
    brg_batchnorm_params bp = {c->epsilon, c->momentum, 0};
    brg_op op;
    if (!train) {
        const ck_tensor *in[5] = {k->x, k->gamma, k->beta, k->rmean, k->rvar}, *out[1] = {y};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_FORWARD_INFER, 5, in, 1, out);
        op.p.bn = bp;
        brg_ck_forward(k, &op, y);
        return;
    }
    double bscale[3] = {0.0, 0.0, 0.0}; /* dx, dgamma, dbeta */
    ck_tensor *smean = brg_ck_output(k, "saved_mean", 1, &ch);
    ck_tensor *sinv = brg_ck_output(k, "saved_invstd", 1, &ch);
    if (!ck_ok(k)) return;
    {
        const ck_tensor *in[3] = {k->x, k->gamma, k->beta};
        const ck_tensor *out[5] = {y, k->rmean, k->rvar, smean, sinv};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_FORWARD_TRAIN, trim(in, 3), in, 5, out);
        /* Roles are positional: gamma absent and beta present keeps a NULL slot (trim stops at beta). */
        op.p.bn = bp;
        brg_ck_forward(k, &op, y);
        double *rm = brg_ck_host(k, (size_t)ch, sizeof(double)), *rv = brg_ck_host(k, (size_t)ch, sizeof(double));
        if (!ck_ok(k)) return;
        memcpy(rm, k->rmean->ref, (size_t)ch * sizeof(double));
        memcpy(rv, k->rvar->ref, (size_t)ch * sizeof(double));
        brg_ref_batchnorm_running_update(ch, s[0] * s[2] * s[3], (double)c->momentum, k->stats[0], k->stats[1], rm,
                                         rv);
        /* A mean can cancel to nearly nothing: measure it against the mean
         * magnitude of the values (and of the old running mean). */
        const double mean_abs = bn_mean_scale(k);
        double rm_abs = 0.0;
        for (int64_t ci = 0; ci < ch; ci++)
            if (fabs(k->rmean->ref[ci]) > rm_abs) rm_abs = fabs(k->rmean->ref[ci]);
        double mom = (double)c->momentum;
        brg_ck_compare(k, WHICH_FWD, k->rmean, rm, (1.0 - mom) * rm_abs + mom * mean_abs);
        brg_ck_compare(k, WHICH_FWD, k->rvar, rv, 0.0);
        brg_ck_compare(k, WHICH_FWD, smean, k->stats[0], mean_abs);
        brg_ck_compare(k, WHICH_FWD, sinv, k->stats[2], 0.0);
        bn_backward_scales(k, bscale);
    }
    {
        ck_tensor *dx = brg_ck_output(k, "dx", 4, s);
        ck_tensor *dgamma = c->gamma ? brg_ck_output(k, "dgamma", 1, &ch) : NULL;
        ck_tensor *dbeta = c->beta ? brg_ck_output(k, "dbeta", 1, &ch) : NULL;
        /* The backward uses the device's own saved statistics, as training does. */
        const ck_tensor *in[5] = {k->x, k->dy, k->gamma, smean, sinv};
        const ck_tensor *out[3] = {dx, dgamma, dbeta};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_BACKWARD, 5, in, trim(out, 3), out);
        op.p.bn = bp;
        ck_tensor *g[3] = {dx, dgamma, dbeta}, *p[3] = {k->x, k->gamma, k->beta};
        brg_ck_backward(k, &op, g, p, NULL, bscale, 3);
    }
}

/* Synchronized BatchNorm as one replica runs it: STATS, the statistics
 * turned into the saved mean and invstd on the host (as train/ does after
 * merging the replicas'), FORWARD_INFER with them; then REDUCE and ELEMT.
 * The mean goes everywhere as two floats (mean, mean_lo), so that data far
 * from zero keep full precision.
 * With one replica that is the training forward and backward, so the
 * reference is brg_ref_batchnorm_train's and the gradients are checked
 * against its finite differences. */
static void run_batchnorm_sync(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int64_t ch = s[1];
    k->x = brg_ck_input(k, "x", 4, s, c->far ? FILL_FAR : FILL_SHIFTED);
    k->gamma = c->gamma ? brg_ck_vector(k, "gamma", ch, FILL_SIGNED) : NULL;
    k->beta = c->beta ? brg_ck_vector(k, "beta", ch, FILL_SIGNED) : NULL;
    ck_tensor *y = brg_ck_output(k, "y", 4, s);
    ck_tensor *mean = brg_ck_output(k, "mean", 1, &ch), *var = brg_ck_output(k, "var", 1, &ch);
    ck_tensor *invstd = brg_ck_output(k, "invstd", 1, &ch), *mean_lo = brg_ck_output(k, "mean_lo", 1, &ch);
    ck_tensor *sum_dy = brg_ck_output(k, "sum_dy", 1, &ch), *sum_dy_xhat = brg_ck_output(k, "sum_dy_xhat", 1, &ch);
    brg_ck_model_output(k, 4, s, 1);
    for (int i = 0; i < 3; i++) k->stats[i] = brg_ck_host(k, (size_t)ch, sizeof(double));
    if (!ck_ok(k)) return;
    brg_op op;
    {
        const ck_tensor *in[1] = {k->x}, *out[3] = {mean, var, mean_lo};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_STATS, 1, in, 3, out);
        brg_ck_run(k, &op, 1);
        brg_ck_ref_eval(k);
        const double mean_abs = bn_mean_scale(k);
        brg_ck_compare(k, WHICH_FWD, mean, k->stats[0], mean_abs);
        brg_ck_compare(k, WHICH_FWD, var, k->stats[1], 0.0);
        /* The low part: what the float mean leaves out, measured against
         * the float's own spacing. */
        double *want_lo = brg_ck_host(k, (size_t)ch, sizeof(double));
        if (!ck_ok(k)) return;
        for (int64_t ci = 0; ci < ch; ci++) want_lo[ci] = k->stats[0][ci] - (double)((const float *)mean->host)[ci];
        brg_ck_compare(k, WHICH_FWD, mean_lo, want_lo, mean_abs * 0x1p-24);
    }
    if (!ck_ok(k)) return;
    {
        /* The device's statistics, as a replica's merge would give them. */
        const float *v = var->host;
        float *inv = invstd->host;
        for (int64_t ci = 0; ci < ch; ci++) inv[ci] = (float)(1.0 / sqrt((double)v[ci] + (double)c->epsilon));
        brg_ck_upload(k, invstd);
        const ck_tensor *in[6] = {k->x, k->gamma, k->beta, mean, var, mean_lo}, *out[1] = {y};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_FORWARD_INFER, 6, in, 1, out);
        op.p.bn.epsilon = c->epsilon;
        brg_ck_forward(k, &op, y);
    }
    double bscale[3] = {0.0, 0.0, 0.0};
    bn_backward_scales(k, bscale);
    {
        ck_tensor *dgamma = c->gamma ? brg_ck_output(k, "dgamma", 1, &ch) : NULL;
        ck_tensor *dbeta = c->beta ? brg_ck_output(k, "dbeta", 1, &ch) : NULL;
        if (!ck_ok(k)) return;
        const ck_tensor *in[5] = {k->x, k->dy, mean, invstd, mean_lo};
        const ck_tensor *out[4] = {sum_dy, sum_dy_xhat, dgamma, dbeta};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_BACKWARD_REDUCE, 5, in, trim(out, 4), out);
        ck_tensor *g[2] = {dgamma, dbeta}, *p[2] = {k->gamma, k->beta};
        brg_ck_backward(k, &op, g, p, NULL, bscale + 1, 2);
        /* The sums are dgamma's and dbeta's without the accumulation. */
        double *want_dy = brg_ck_host(k, (size_t)ch, sizeof(double));
        double *want_dyx = brg_ck_host(k, (size_t)ch, sizeof(double));
        if (!ck_ok(k)) return;
        const int64_t hw = s[2] * s[3];
        for (int64_t ci = 0; ci < ch; ci++) {
            want_dy[ci] = want_dyx[ci] = 0.0;
            for (int64_t ni = 0; ni < s[0]; ni++)
                for (int64_t i = 0; i < hw; i++) {
                    int64_t e = (ni * ch + ci) * hw + i;
                    want_dy[ci] += k->dy->ref[e];
                    want_dyx[ci] += k->dy->ref[e] * (k->x->ref[e] - k->stats[0][ci]) * k->stats[2][ci];
                }
        }
        brg_ck_compare(k, WHICH_BWD, sum_dy, want_dy, bscale[2]);
        brg_ck_compare(k, WHICH_BWD, sum_dy_xhat, want_dyx, bscale[1]);
    }
    {
        ck_tensor *dx = brg_ck_output(k, "dx", 4, s);
        if (!ck_ok(k)) return;
        const ck_tensor *in[8] = {k->x, k->dy, k->gamma, mean, invstd, sum_dy, sum_dy_xhat, mean_lo};
        const ck_tensor *out[1] = {dx};
        brg_ck_op_set(&op, BRG_OP_BATCHNORM_BACKWARD_ELEMT, 8, in, 1, out);
        op.p.bn.count = s[0] * s[2] * s[3];
        ck_tensor *g[1] = {dx}, *p[1] = {k->x};
        brg_ck_backward(k, &op, g, p, NULL, bscale, 1);
    }
}

static void run_relu(ck *k)
{
    const brg_check_case *c = &k->c;
    k->x = brg_ck_input(k, "x", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *y = brg_ck_output(k, "y", c->ndim, c->x_shape);
    brg_ck_model_output(k, c->ndim, c->x_shape, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    brg_ck_op_set(&op, BRG_OP_RELU_FORWARD, 1, in, 1, out);
    brg_ck_forward(k, &op, y);
    if (c->inplace) {
        ck_tensor *z = brg_ck_output(k, "y (in place)", c->ndim, c->x_shape);
        if (!ck_ok(k)) return;
        memcpy(z->host, k->x->host, (size_t)z->numel * 4);
        brg_ck_upload(k, z);
        const ck_tensor *zi[1] = {z};
        brg_ck_op_set(&op, BRG_OP_RELU_FORWARD, 1, zi, 1, zi);
        brg_ck_run(k, &op, 1);
        brg_ck_compare(k, WHICH_FWD, z, k->yref, 0.0);
    }
    const ck_tensor *bin[2] = {y, k->dy};
    brg_ck_backward_dx(k, &op, BRG_OP_RELU_BACKWARD, bin, 2);
}

static void run_pool(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    int maxpool = c->family == BRG_CHECK_MAXPOOL;
    brg_ref_window_init(&k->g, s[0], s[1], s[2], s[3], c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h,
                        c->pad_w);
    const int64_t ys[4] = {s[0], s[1], k->g.p, k->g.q};
    k->x = brg_ck_input(k, "x", 4, s, !maxpool ? FILL_SIGNED : c->ties ? FILL_TIES : FILL_DISTINCT);
    ck_tensor *y = brg_ck_output(k, "y", 4, ys);
    brg_ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_pool_params pp = {c->kernel_h, c->kernel_w, c->stride_h, c->stride_w, c->pad_h, c->pad_w,
                          c->count_include_pad};
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    brg_ck_op_set(&op, maxpool ? BRG_OP_MAXPOOL_FORWARD : BRG_OP_AVGPOOL_FORWARD, 1, in, 1, out);
    op.p.pool = pp;
    brg_ck_forward(k, &op, y);
    ck_tensor *dx = brg_ck_output(k, "dx", 4, s);
    if (!ck_ok(k)) return;
    ck_tensor *g[1] = {dx}, *p[1] = {k->x};
    if (maxpool) {
        const ck_tensor *bin[3] = {k->x, y, k->dy}, *bout[1] = {dx};
        brg_ck_op_set(&op, BRG_OP_MAXPOOL_BACKWARD, 3, bin, 1, bout);
        op.p.pool = pp;
        /* With ties the gradient is not differentiable: check the routing
         * rule of the contract against the reference instead. */
        double *want[1] = {NULL};
        if (c->ties) {
            want[0] = brg_ck_host(k, (size_t)k->x->numel, sizeof(double));
            if (!ck_ok(k)) return;
            brg_ref_maxpool_backward(&k->g, k->x->ref, k->dy->ref, want[0]);
        }
        brg_ck_backward(k, &op, g, p, want, NULL, 1);
    } else {
        const ck_tensor *bin[1] = {k->dy}, *bout[1] = {dx};
        brg_ck_op_set(&op, BRG_OP_AVGPOOL_BACKWARD, 1, bin, 1, bout);
        op.p.pool = pp;
        brg_ck_backward(k, &op, g, p, NULL, NULL, 1);
    }
}

static void run_global_avgpool(ck *k)
{
    const int64_t *s = k->c.x_shape;
    const int64_t ys[4] = {s[0], s[1], 1, 1};
    k->x = brg_ck_input(k, "x", 4, s, FILL_SIGNED);
    ck_tensor *y = brg_ck_output(k, "y", 4, ys);
    brg_ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    brg_ck_op_set(&op, BRG_OP_GLOBAL_AVGPOOL_FORWARD, 1, in, 1, out);
    brg_ck_forward(k, &op, y);
    const ck_tensor *bin[1] = {k->dy};
    brg_ck_backward_dx(k, &op, BRG_OP_GLOBAL_AVGPOOL_BACKWARD, bin, 1);
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
        k->parts[i] = brg_ck_input(k, name, 4, ps, FILL_SIGNED);
        in[i] = p[i] = k->parts[i];
    }
    ck_tensor *y = brg_ck_output(k, "y", 4, s);
    brg_ck_model_output(k, 4, s, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *out[1] = {y};
    brg_ck_op_set(&op, BRG_OP_CONCAT_FORWARD, np, in, 1, out);
    brg_ck_forward(k, &op, y);
    for (int i = 0; i < np; i++) {
        char name[16];
        snprintf(name, sizeof name, "dx%d", i);
        bout[i] = g[i] = brg_ck_output(k, name, 4, k->parts[i] ? k->parts[i]->shape : s);
    }
    if (!ck_ok(k)) return;
    const ck_tensor *bin[1] = {k->dy};
    brg_ck_op_set(&op, BRG_OP_CONCAT_BACKWARD, 1, bin, np, bout);
    brg_ck_backward(k, &op, g, p, NULL, NULL, np);
}

static void run_add(ck *k)
{
    const brg_check_case *c = &k->c;
    k->x = brg_ck_input(k, "a", c->ndim, c->x_shape, FILL_SIGNED);
    k->a2 = brg_ck_input(k, "b", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *y = brg_ck_output(k, "y", c->ndim, c->x_shape);
    brg_ck_model_output(k, c->ndim, c->x_shape, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[2] = {k->x, k->a2}, *out[1] = {y};
    brg_ck_op_set(&op, BRG_OP_ADD_FORWARD, 2, in, 1, out);
    brg_ck_forward(k, &op, y);
    ck_tensor *da = c->omit_grad == 1 ? NULL : brg_ck_output(k, "da", c->ndim, c->x_shape);
    ck_tensor *db = c->omit_grad == 2 ? NULL : brg_ck_output(k, "db", c->ndim, c->x_shape);
    if (!ck_ok(k)) return;
    const ck_tensor *bin[1] = {k->dy}, *bout[2] = {da, db};
    brg_ck_op_set(&op, BRG_OP_ADD_BACKWARD, 1, bin, 2, bout);
    ck_tensor *g[2] = {da, db}, *p[2] = {k->x, k->a2};
    brg_ck_backward(k, &op, g, p, NULL, NULL, 2);
}

static void run_dropout(ck *k)
{
    const brg_check_case *c = &k->c;
    k->dropout_seed = rng_next(&k->rng);
    k->x = brg_ck_input(k, "x", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *y = brg_ck_output(k, "y", c->ndim, c->x_shape);
    brg_ck_model_output(k, c->ndim, c->x_shape, 1);
    if (!ck_ok(k)) return;
    brg_dropout_params dp = {c->rate, k->dropout_seed, c->dropout_offset};
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    brg_ck_op_set(&op, BRG_OP_DROPOUT_FORWARD, 1, in, 1, out);
    op.p.dropout = dp;
    brg_ck_forward(k, &op, y);
    const ck_tensor *bin[1] = {k->dy};
    brg_ck_backward_dx(k, &op, BRG_OP_DROPOUT_BACKWARD, bin, 1);
}

/* The labels of a loss or a count: [N] for scores [N,K], [N,H,W] for
 * per-pixel scores [N,K,H,W]. */
static ck_tensor *labels_for(ck *k, int64_t *count)
{
    const int64_t *s = k->c.x_shape;
    const int64_t ls[3] = {s[0], s[2], s[3]};
    const int per_pixel = k->c.ndim == 4;
    *count = per_pixel ? s[0] * s[2] * s[3] : s[0];
    return brg_ck_tensor_new(k, "labels", BRG_I32, per_pixel ? 3 : 1, ls);
}

/* Element r of row-or-pixel order (sample r / px, pixel r % px) of class j
 * in scores [N, K, px]. */
static int64_t score_index(int64_t r, int64_t j, int64_t classes, int64_t px)
{
    return r / px * classes * px + j * px + r % px;
}

static void run_xent(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t *s = c->x_shape;
    const int64_t one = 1;
    const int32_t ignore = c->ignore_label;
    const int ignoring = ignore < 0 || ignore >= s[1];
    int64_t n_labels = 0;
    k->x = brg_ck_input(k, "logits", c->ndim, s, FILL_LOGITS);
    ck_tensor *labels = labels_for(k, &n_labels);
    ck_tensor *loss = brg_ck_output(k, "loss", 1, &one);
    ck_tensor *probs = brg_ck_output(k, "probs", c->ndim, s);
    brg_ck_model_output(k, c->ndim, s, 0);
    if (!ck_ok(k)) return;
    k->labels = labels->host;
    int64_t counted = 0;
    for (int64_t i = 0; i < n_labels; i++) {
        k->labels[i] = (int32_t)rng_int(&k->rng, 0, s[1] - 1);
        if (ignoring && rng_int(&k->rng, 0, 3) == 0) k->labels[i] = ignore;
        counted += !(ignoring && k->labels[i] == ignore);
    }
    brg_ck_upload(k, labels);
    brg_op op;
    const ck_tensor *in[2] = {k->x, labels}, *out[2] = {loss, probs};
    brg_ck_op_set(&op, BRG_OP_SOFTMAX_XENT_FORWARD, 2, in, 2, out);
    op.p.xent.ignore_label = ignore;
    brg_ck_run(k, &op, 1);
    double l = brg_ck_ref_eval(k);
    /* The loss is lse - logit[label]: a confident row cancels it towards 0. */
    double lscale = 0.0;
    for (int64_t i = 0; i < k->x->numel; i++)
        if (fabs(k->x->ref[i]) > lscale) lscale = fabs(k->x->ref[i]);
    lscale += log((double)s[1]);
    brg_ck_compare(k, WHICH_FWD, loss, &l, lscale);
    brg_ck_compare(k, WHICH_FWD, probs, k->yref, 0.0);
    ck_tensor *dlogits = brg_ck_output(k, "dlogits", c->ndim, s);
    const ck_tensor *bin[2] = {probs, labels}, *bout[1] = {dlogits};
    brg_ck_op_set(&op, BRG_OP_SOFTMAX_XENT_BACKWARD, 2, bin, 1, bout);
    op.p.xent.grad_scale = counted ? (float)(1.0 / (double)counted) : 0.0f;
    op.p.xent.ignore_label = ignore;
    ck_tensor *g[1] = {dlogits}, *p[1] = {k->x};
    brg_ck_backward(k, &op, g, p, NULL, NULL, 1);
}

static void run_upsample(ck *k)
{
    const int64_t *s = k->c.x_shape;
    int f = k->c.factor;
    const int64_t ys[4] = {s[0], s[1], s[2] * f, s[3] * f};
    k->x = brg_ck_input(k, "x", 4, s, FILL_SIGNED);
    ck_tensor *y = brg_ck_output(k, "y", 4, ys);
    brg_ck_model_output(k, 4, ys, 1);
    if (!ck_ok(k)) return;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {y};
    brg_ck_op_set(&op, BRG_OP_UPSAMPLE_FORWARD, 1, in, 1, out);
    op.p.upsample.factor = f;
    brg_ck_forward(k, &op, y);
    const ck_tensor *bin[1] = {k->dy};
    brg_ck_backward_dx(k, &op, BRG_OP_UPSAMPLE_BACKWARD, bin, 1);
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
    int64_t n = brg_check_case_numel(c);
    ck_tensor *grad = brg_ck_input(k, "grad", c->ndim, c->x_shape, FILL_UNIFORM);
    ck_tensor *param = brg_ck_input(k, "param", c->ndim, c->x_shape, FILL_SIGNED);
    ck_tensor *s1 = NULL, *s2 = NULL;
    if (adam) {
        s1 = brg_ck_input(k, "m", c->ndim, c->x_shape, FILL_UNIFORM);
        s2 = brg_ck_input(k, "v", c->ndim, c->x_shape, FILL_POSITIVE);
    } else if (c->velocity) {
        s1 = brg_ck_input(k, "velocity", c->ndim, c->x_shape, FILL_UNIFORM);
    }
    double *want_p = brg_ck_host(k, (size_t)n, sizeof(double));
    double *want_1 = s1 ? brg_ck_host(k, (size_t)n, sizeof(double)) : NULL;
    double *want_2 = s2 ? brg_ck_host(k, (size_t)n, sizeof(double)) : NULL;
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
        brg_ck_upload(k, s1);
        brg_ck_upload(k, s2);
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
    brg_ck_op_set(&op, adam ? BRG_OP_ADAM_UPDATE : BRG_OP_SGD_UPDATE, 1, in, adam ? 3 : trim(out, 2), out);
    op.p.optim.lr = c->lr;
    op.p.optim.momentum = c->momentum;
    op.p.optim.weight_decay = c->weight_decay;
    op.p.optim.beta1 = c->beta1;
    op.p.optim.beta2 = c->beta2;
    op.p.optim.epsilon = c->epsilon;
    op.p.optim.step = c->step;
    brg_ck_run(k, &op, 1);
    /* The parameter: error over the largest step. */
    brg_ck_download(k, param);
    if (!ck_ok(k)) return;
    double step = 0.0, diff = 0.0;
    brg_ck_inject(k, WHICH_FWD, param->host, want_p, n);
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
    brg_ck_record(k, WHICH_FWD, "param", diff / (step > ERR_FLOOR * 1e-3 ? step : ERR_FLOOR * 1e-3));
    if (s1) brg_ck_compare(k, WHICH_FWD, s1, want_1, state_scale);
    if (s2) brg_ck_compare(k, WHICH_FWD, s2, want_2, 0.0); /* a sum of non-negative terms */
}

/* A value that is not finite, drawn: NaN, +inf or -inf. */
static float nonfinite_value(ck *k)
{
    switch (rng_int(&k->rng, 0, 2)) {
    case 0: return NAN;
    case 1: return INFINITY;
    default: return -INFINITY;
    }
}

/* Set element i of an input on the host (and its double copy). */
static void plant(ck_tensor *t, int64_t i, float v)
{
    ((float *)t->host)[i] = v;
    t->ref[i] = v;
}

/* The row's first maximum as the reference scan finds it. */
/* The first maximum of row r (a pixel's classes px apart). */
static int64_t row_argmax(const double *scores, int64_t r, int64_t k, int64_t px)
{
    int64_t best = 0;
    for (int64_t j = 1; j < k; j++)
        if (scores[score_index(r, j, k, px)] > scores[score_index(r, best, k, px)]) best = j;
    return best;
}

/* Correct predictions: scores (ties, NaN and infinities as the case asks),
 * labels at the rows' first maxima or not; the count overwritten, then
 * accumulated into a random prefill. */
static void run_count_correct(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t classes = c->x_shape[1], one = 1, px = c->ndim == 4 ? c->x_shape[2] * c->x_shape[3] : 1;
    int64_t n = 0; /* rows: samples, or samples x pixels */
    k->x = brg_ck_input(k, "scores", c->ndim, c->x_shape, c->ties ? FILL_TIES : FILL_LOGITS);
    ck_tensor *labels = labels_for(k, &n);
    ck_tensor *count = brg_ck_tensor_new(k, "count", BRG_I32, 1, &one);
    if (!ck_ok(k)) return;
    if (c->nonfinite) {
        for (int64_t r = 0; r < n; r++) {
            if (rng_int(&k->rng, 0, 1)) continue;
            const int64_t where[3] = {0, classes / 2, classes - 1};
            plant(k->x, score_index(r, where[rng_int(&k->rng, 0, 2)], classes, px), nonfinite_value(k));
        }
        brg_ck_upload(k, k->x);
    }
    k->labels = labels->host;
    for (int64_t r = 0; r < n; r++) {
        const int64_t best = row_argmax(k->x->ref, r, classes, px);
        /* 0..3: the first maximum (half the mixed rows), 4..6: another class, 7: outside [0, classes). */
        int64_t pick = c->label_mode == 1 ? 0 : c->label_mode == 2 ? 4 : rng_int(&k->rng, 0, 7);
        if (pick >= 4 && pick <= 6 && classes == 1) pick = 7;
        int64_t label = best;
        if (pick >= 4 && pick <= 6) label = (best + 1 + rng_int(&k->rng, 0, classes - 2)) % classes;
        if (pick == 7) label = rng_int(&k->rng, 0, 1) ? -1 : classes;
        k->labels[r] = (int32_t)label;
    }
    brg_ck_upload(k, labels);
    const int32_t want = (int32_t)brg_ref_count_correct(c->x_shape[0], classes, px, k->x->ref, k->labels);
    brg_op op;
    const ck_tensor *in[2] = {k->x, labels}, *out[1] = {count};
    brg_ck_op_set(&op, BRG_OP_COUNT_CORRECT, 2, in, 1, out);
    brg_ck_run(k, &op, 1);
    brg_ck_compare_i32(k, WHICH_FWD, count, &want);
    /* Accumulate into a prefill. */
    int32_t *h = count->host;
    h[0] = (int32_t)rng_int(&k->rng, 0, 1000);
    const int32_t want_acc = h[0] + want;
    brg_ck_upload(k, count);
    op.accumulate = 1;
    brg_ck_run(k, &op, 1);
    brg_ck_compare_i32(k, WHICH_ACC, count, &want_acc);
}

/* The finite check: a NaN or an infinity planted where the case says, the
 * flag clear or preset; then a second check with another tag, which must
 * not change a flag that is set. */
static void run_check_finite(ck *k)
{
    const brg_check_case *c = &k->c;
    const int64_t one = 1;
    k->x = brg_ck_input(k, "x", c->ndim, c->x_shape, FILL_UNIFORM);
    ck_tensor *flag = brg_ck_tensor_new(k, "flag", BRG_I32, 1, &one);
    if (!ck_ok(k)) return;
    const int64_t n = k->x->numel;
    if (c->nonfinite) {
        const int64_t at = c->nonfinite == 1 ? 0 : c->nonfinite == 2 ? n / 2 : n - 1;
        plant(k->x, at, nonfinite_value(k));
        brg_ck_upload(k, k->x);
    }
    ((int32_t *)flag->host)[0] = c->preset;
    brg_ck_upload(k, flag);
    const int32_t want = c->preset ? c->preset : brg_ref_all_finite(n, k->x->ref) ? 0 : c->tag;
    brg_op op;
    const ck_tensor *in[1] = {k->x}, *out[1] = {flag};
    brg_ck_op_set(&op, BRG_OP_CHECK_FINITE, 1, in, 1, out);
    op.p.finite.tag = c->tag;
    brg_ck_run(k, &op, 1);
    brg_ck_compare_i32(k, WHICH_FWD, flag, &want);
    /* A later check in stream order: the first failure's tag stays. */
    op.p.finite.tag = c->tag + 1;
    brg_ck_run(k, &op, 1);
    const int32_t want2 = want ? want : brg_ref_all_finite(n, k->x->ref) ? 0 : c->tag + 1;
    brg_ck_compare_i32(k, WHICH_FWD, flag, &want2);
}

void brg_ck_run_family(ck *k)
{
    switch (k->c.family) {
    case BRG_CHECK_CONV2D: run_conv(k); break;
    case BRG_CHECK_LINEAR: run_linear(k); break;
    case BRG_CHECK_BATCHNORM_TRAIN:
    case BRG_CHECK_BATCHNORM_INFER: run_batchnorm(k); break;
    case BRG_CHECK_BATCHNORM_SYNC: run_batchnorm_sync(k); break;
    case BRG_CHECK_RELU: run_relu(k); break;
    case BRG_CHECK_MAXPOOL:
    case BRG_CHECK_AVGPOOL: run_pool(k); break;
    case BRG_CHECK_GLOBAL_AVGPOOL: run_global_avgpool(k); break;
    case BRG_CHECK_CONCAT: run_concat(k); break;
    case BRG_CHECK_ADD: run_add(k); break;
    case BRG_CHECK_DROPOUT: run_dropout(k); break;
    case BRG_CHECK_SOFTMAX_XENT: run_xent(k); break;
    case BRG_CHECK_UPSAMPLE: run_upsample(k); break;
    case BRG_CHECK_SGD:
    case BRG_CHECK_ADAM: run_optim(k); break;
    case BRG_CHECK_COUNT_CORRECT: run_count_correct(k); break;
    case BRG_CHECK_CHECK_FINITE: run_check_finite(k); break;
    default: break;
    }
}
