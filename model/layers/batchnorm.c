/* batchnorm: batch normalization over N, H and W per channel, with
 * optional learnable scale (gamma) and shift (beta) and running statistics.
 * A train forward saves the batch mean and 1/sqrt(var + eps) per channel
 * for the backward (and for deferred BatchNorm, train/optimizer.c). */
#include <math.h>

#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field fields[] = {
    {"epsilon", BRG_FIELD_FLOAT, offsetof(brg_layer_desc, epsilon), 0, 0, 0.0, INFINITY, 1, 1},
    {"momentum", BRG_FIELD_FLOAT, offsetof(brg_layer_desc, momentum), 0, 0, 0.0, 1.0, 0, 0},
    {"scale", BRG_FIELD_BOOL, offsetof(brg_layer_desc, scale), 0, 0, 0, 1, 0, 0},
    {"center", BRG_FIELD_BOOL, offsetof(brg_layer_desc, center), 0, 0, 0, 1, 0, 0},
    BRG_FIELD_END,
};

static brg_status infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w)
{
    (void)in, (void)n_in, (void)c, (void)h, (void)w;
    if (!(d->epsilon > 0.0f) || !isfinite(d->epsilon) || !(d->momentum >= 0.0f && d->momentum <= 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': epsilon must be positive and momentum in [0, 1]",
                         name);
    return BRG_OK;
}

static int params(const brg_layer_desc *d, brg_param_kind kinds[BRG_LAYER_MAX_PARAMS])
{
    int n = 0;
    if (d->scale) kinds[n++] = BRG_P_GAMMA;
    if (d->center) kinds[n++] = BRG_P_BETA;
    kinds[n++] = BRG_P_RMEAN;
    kinds[n++] = BRG_P_RVAR;
    return n;
}

/* Mean, variance, normalize, scale, shift forward; eight per element back. */
static void flops(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin, double *bw)
{
    (void)wants_dx;
    const double out = u * brg_layer_elems(m, l->output);
    *fwd = 5.0 * out;
    *bin = 8.0 * out;
    *bw = 0.0;
}

static brg_status forward(brg_layer_io *io, brg_op *op)
{
    const brg_layer_desc *d = &io->layer->desc;
    op->p.bn.epsilon = d->epsilon;
    /* A replay must not move the running statistics a second time, and
     * deferred BatchNorm moves them in the optimizer step: with momentum 0
     * they are rewritten with their own values. */
    op->p.bn.momentum = io->freeze_running_stats ? 0.0f : d->momentum;
    op->in[0] = io->x[0];
    op->in[1] = io->param[BRG_P_GAMMA];
    op->in[2] = io->param[BRG_P_BETA];
    op->out[0] = io->y;
    if (io->train) {
        op->kind = BRG_OP_BATCHNORM_FORWARD_TRAIN;
        op->n_in = 3;
        op->n_out = 5;
        op->out[1] = io->param[BRG_P_RMEAN];
        op->out[2] = io->param[BRG_P_RVAR];
        op->out[3] = io->saved[0];
        op->out[4] = io->saved[1];
    } else {
        op->kind = BRG_OP_BATCHNORM_FORWARD_INFER;
        op->n_in = 5;
        op->n_out = 1;
        op->in[3] = io->param[BRG_P_RMEAN];
        op->in[4] = io->param[BRG_P_RVAR];
    }
    return BRG_OK;
}

/* dx, and dgamma and dbeta as a by-product. */
static brg_status backward_data(brg_layer_io *io, brg_op *op)
{
    const brg_layer_desc *d = &io->layer->desc;
    op->kind = BRG_OP_BATCHNORM_BACKWARD;
    op->p.bn.epsilon = d->epsilon;
    op->p.bn.momentum = d->momentum;
    op->n_in = 5;
    op->in[0] = io->x[0];
    op->in[1] = io->dy;
    op->in[2] = io->param[BRG_P_GAMMA];
    op->in[3] = io->saved[0];
    op->in[4] = io->saved[1];
    op->n_out = 3;
    op->out[0] = io->dx[0];
    op->out[1] = io->grad[BRG_P_GAMMA];
    op->out[2] = io->grad[BRG_P_BETA];
    op->accumulate = io->accumulate;
    return BRG_OK;
}

/* ---- synchronized BatchNorm (layer-kind.h) ---- */

void brg_batchnorm_sync_stats(const brg_layer_io *io, brg_op *op, const brg_tensor *mean, const brg_tensor *var,
                              const brg_tensor *mean_lo)
{
    op->kind = BRG_OP_BATCHNORM_STATS;
    op->n_in = 1;
    op->in[0] = io->x[0];
    op->n_out = 3;
    op->out[0] = mean;
    op->out[1] = var;
    op->out[2] = mean_lo;
}

void brg_batchnorm_sync_normalize(const brg_layer_io *io, brg_op *op, const brg_tensor *var,
                                  const brg_tensor *mean_lo)
{
    op->kind = BRG_OP_BATCHNORM_FORWARD_INFER;
    op->p.bn.epsilon = io->layer->desc.epsilon;
    op->n_in = 6;
    op->in[0] = io->x[0];
    op->in[1] = io->param[BRG_P_GAMMA];
    op->in[2] = io->param[BRG_P_BETA];
    op->in[3] = io->saved[0];
    op->in[4] = var;
    op->in[5] = mean_lo;
    op->n_out = 1;
    op->out[0] = io->y;
}

void brg_batchnorm_sync_reduce(const brg_layer_io *io, brg_op *op, const brg_tensor *sum_dy,
                               const brg_tensor *sum_dy_xhat, const brg_tensor *mean_lo)
{
    op->kind = BRG_OP_BATCHNORM_BACKWARD_REDUCE;
    op->n_in = 5;
    op->in[0] = io->x[0];
    op->in[1] = io->dy;
    op->in[2] = io->saved[0];
    op->in[3] = io->saved[1];
    op->in[4] = mean_lo;
    op->n_out = 4;
    op->out[0] = sum_dy;
    op->out[1] = sum_dy_xhat;
    op->out[2] = io->grad[BRG_P_GAMMA];
    op->out[3] = io->grad[BRG_P_BETA];
    op->accumulate = io->accumulate;
}

void brg_batchnorm_sync_elemt(const brg_layer_io *io, brg_op *op, const brg_tensor *sum_dy,
                              const brg_tensor *sum_dy_xhat, const brg_tensor *mean_lo, int64_t count)
{
    op->kind = BRG_OP_BATCHNORM_BACKWARD_ELEMT;
    op->p.bn.count = count;
    op->n_in = 8;
    op->in[0] = io->x[0];
    op->in[1] = io->dy;
    op->in[2] = io->param[BRG_P_GAMMA];
    op->in[3] = io->saved[0];
    op->in[4] = io->saved[1];
    op->in[5] = sum_dy;
    op->in[6] = sum_dy_xhat;
    op->in[7] = mean_lo;
    op->n_out = 1;
    op->out[0] = io->dx[0];
    op->accumulate = io->accumulate;
}

const brg_layer_kind_info brg_layer_batchnorm = {
    .name = "batchnorm",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1, .epsilon = 1e-5f, .momentum = 0.1f, .scale = 1, .center = 1},
    .fields = fields,
    .infer = infer,
    .param_kinds = params,
    .backward_reads_input = 1,
    .n_saved = 2,
    .saved_names = {"stash mean", "stash invstd"},
    .flops = flops,
    .forward = forward,
    .backward_data = backward_data,
    .blocks = BRG_BLOCKS_TIED,
};

/* The builder's shorthand (brigade/model.h). */
brg_status brg_model_add_batchnorm(brg_model *m, const char *name, const char *input, float epsilon, int scale,
                                   int center)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_BATCHNORM);
    d.epsilon = epsilon;
    d.scale = scale;
    d.center = center;
    return brg_model_add(m, name, &d, &input, 1, NULL);
}
