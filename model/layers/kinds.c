/* The table of layer kinds and what the kinds share (layer-kind.h). */
#include <stdio.h>
#include <string.h>

#include "brigade/ops.h"
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_kind_info *const kind_table[BRG_LAYER_KIND_COUNT] = {
    [BRG_LAYER_CONV2D] = &brg_layer_conv2d,
    [BRG_LAYER_BATCHNORM] = &brg_layer_batchnorm,
    [BRG_LAYER_RELU] = &brg_layer_relu,
    [BRG_LAYER_MAXPOOL] = &brg_layer_maxpool,
    [BRG_LAYER_AVGPOOL] = &brg_layer_avgpool,
    [BRG_LAYER_GLOBAL_AVGPOOL] = &brg_layer_global_avgpool,
    [BRG_LAYER_CONCAT] = &brg_layer_concat,
    [BRG_LAYER_ADD] = &brg_layer_add,
    [BRG_LAYER_LINEAR] = &brg_layer_linear,
    [BRG_LAYER_DROPOUT] = &brg_layer_dropout,
    [BRG_LAYER_UPSAMPLE] = &brg_layer_upsample,
};

const brg_layer_kind_info *brg_layer_kind_info_of(brg_layer_kind kind)
{
    return (int)kind >= 0 && kind < BRG_LAYER_KIND_COUNT ? kind_table[kind] : NULL;
}

int brg_layer_param_kinds(const brg_layer *l, brg_param_kind kinds[BRG_LAYER_MAX_PARAMS])
{
    const brg_layer_kind_info *k = brg_layer_kind_info_of(l->desc.kind);
    return k && k->param_kinds ? k->param_kinds(&l->desc, kinds) : 0;
}

void brg_layer_shape_str(char *buf, size_t size, const brg_model_tensor *t)
{
    snprintf(buf, size, "[%lld, %lld, %lld]", (long long)t->c, (long long)t->h, (long long)t->w);
}

brg_status brg_layer_check_window(const char *name, const brg_layer_desc *d)
{
    if (d->kernel_h < 1 || d->kernel_w < 1 || d->stride_h < 1 || d->stride_w < 1 || d->pad_h < 0 || d->pad_w < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "layer '%s': kernel %dx%d and stride %dx%d must be positive, padding %dx%d non-negative",
                         name, d->kernel_h, d->kernel_w, d->stride_h, d->stride_w, d->pad_h, d->pad_w);
    return BRG_OK;
}

brg_status brg_layer_window_extent(const char *name, const brg_layer_desc *d, const brg_model_tensor *x, int64_t *h,
                                   int64_t *w)
{
    const int64_t p = brg_conv_out_extent(x->h, d->kernel_h, d->stride_h, d->pad_h);
    const int64_t q = brg_conv_out_extent(x->w, d->kernel_w, d->stride_w, d->pad_w);
    if (p < 1 || q < 1) {
        char s1[64];
        brg_layer_shape_str(s1, sizeof s1, x);
        return brg_error(BRG_ERR_SHAPE,
                         "layer '%s': a %dx%d window with padding %dx%d needs an input of at least %lldx%lld, "
                         "but '%s' is %s",
                         name, d->kernel_h, d->kernel_w, d->pad_h, d->pad_w,
                         (long long)d->kernel_h - 2 * (long long)d->pad_h,
                         (long long)d->kernel_w - 2 * (long long)d->pad_w, x->name, s1);
    }
    *h = p;
    *w = q;
    return BRG_OK;
}

void brg_layer_flops_per_output(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd,
                                double *bin, double *bw)
{
    (void)wants_dx;
    const double out = u * brg_layer_elems(m, l->output);
    *fwd = out;
    *bin = out;
    *bw = 0.0;
}

int brg_layer_weight_bias_params(const brg_layer_desc *d, brg_param_kind kinds[BRG_LAYER_MAX_PARAMS])
{
    int n = 0;
    kinds[n++] = BRG_P_WEIGHT;
    if (d->bias) kinds[n++] = BRG_P_BIAS;
    return n;
}

void brg_layer_flops_product(const brg_layer *l, double out, double macs, int wants_dx, double *fwd, double *bin,
                             double *bw)
{
    *fwd = 2.0 * macs + (l->desc.bias ? out : 0.0);
    *bin = wants_dx ? 2.0 * macs : 0.0;
    *bw = 2.0 * macs + (l->desc.bias ? out : 0.0);
}

/* ---- lowering ---- */

void brg_layer_product_forward(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *y)
{
    const brg_tensor *bias = io->param[BRG_P_BIAS];
    op->kind = kind;
    op->n_in = bias ? 3 : 2;
    op->in[0] = io->x[0];
    op->in[1] = io->param[BRG_P_WEIGHT];
    op->in[2] = bias;
    op->n_out = 1;
    op->out[0] = y;
}

void brg_layer_product_data(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *dy)
{
    op->kind = kind;
    op->n_in = 2;
    op->in[0] = dy;
    op->in[1] = io->param[BRG_P_WEIGHT];
    op->n_out = 1;
    op->out[0] = io->dx[0];
    op->accumulate = io->accumulate;
}

void brg_layer_product_weight(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *dy)
{
    const brg_tensor *dbias = io->grad[BRG_P_BIAS];
    op->kind = kind;
    op->n_in = 2;
    op->in[0] = io->x[0];
    op->in[1] = dy;
    op->n_out = dbias ? 2 : 1;
    op->out[0] = io->grad[BRG_P_WEIGHT];
    op->out[1] = dbias;
    op->accumulate = 1;
}

void brg_layer_unary_forward(const brg_layer_io *io, brg_op *op, brg_op_kind kind)
{
    op->kind = kind;
    op->n_in = 1;
    op->in[0] = io->x[0];
    op->n_out = 1;
    op->out[0] = io->y;
}

void brg_layer_unary_backward(const brg_layer_io *io, brg_op *op, brg_op_kind kind)
{
    op->kind = kind;
    op->n_in = 1;
    op->in[0] = io->dy;
    op->n_out = 1;
    op->out[0] = io->dx[0];
    op->accumulate = io->accumulate;
}
