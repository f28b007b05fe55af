/* conv2d: a 2-D cross-correlation with optional bias (NCHW). */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field fields[] = {
    {"out_channels", BRG_FIELD_INT, offsetof(brg_layer_desc, out_channels), 0, 1, 1, BRG_LAYER_MAX_CHANNELS, 0, 0},
    BRG_FIELD_KERNEL(1),
    BRG_FIELD_STRIDE(0),
    BRG_FIELD_PADDING,
    {"bias", BRG_FIELD_BOOL, offsetof(brg_layer_desc, bias), 0, 1, 0, 1, 0, 0},
    BRG_FIELD_END,
};

static brg_status infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w)
{
    (void)n_in;
    const brg_model_tensor *x = in[0];
    BRG_CHECK(brg_layer_check_window(name, d));
    BRG_CHECK(brg_layer_window_extent(name, d, x, h, w));
    if (d->out_channels < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': out_channels must be positive", name);
    if ((double)d->out_channels * (double)x->c * d->kernel_h * d->kernel_w > BRG_LAYER_MAX_WEIGHTS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': more than 2^40 weights", name);
    *c = d->out_channels;
    return BRG_OK;
}

/* 2*N*K*C*R*S*P*Q per pass, the bias one per output element. */
static void flops(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin, double *bw)
{
    const brg_layer_desc *d = &l->desc;
    const double out = u * brg_layer_elems(m, l->output);
    const brg_model_tensor *xt = brg_model_get_tensor(m, l->inputs[0]);
    const double macs = out * (double)xt->c * d->kernel_h * d->kernel_w;
    brg_layer_flops_product(l, out, macs, wants_dx, fwd, bin, bw);
}

/* The op fill builds, with the convolution's stride and padding. */
static brg_status conv_op(brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *t,
                          brg_layer_product_fn fill)
{
    const brg_layer_desc *d = &io->layer->desc;
    fill(io, op, kind, t);
    op->p.conv.stride_h = d->stride_h;
    op->p.conv.stride_w = d->stride_w;
    op->p.conv.pad_h = d->pad_h;
    op->p.conv.pad_w = d->pad_w;
    return BRG_OK;
}

static brg_status forward(brg_layer_io *io, brg_op *op)
{
    return conv_op(io, op, BRG_OP_CONV2D_FORWARD, io->y, brg_layer_product_forward);
}

static brg_status backward_data(brg_layer_io *io, brg_op *op)
{
    return conv_op(io, op, BRG_OP_CONV2D_BACKWARD_DATA, io->dy, brg_layer_product_data);
}

static brg_status backward_weight(brg_layer_io *io, brg_op *op)
{
    return conv_op(io, op, BRG_OP_CONV2D_BACKWARD_FILTER, io->dy, brg_layer_product_weight);
}

const brg_layer_kind_info brg_layer_conv2d = {
    .name = "conv2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.kernel_h = 1, .kernel_w = 1, .stride_h = 1, .stride_w = 1},
    .fields = fields,
    .infer = infer,
    .param_kinds = brg_layer_weight_bias_params,
    .filter_weight = 1,
    .backward_reads_input = 1,
    .flops = flops,
    .forward = forward,
    .backward_data = backward_data,
    .backward_weight = backward_weight,
    .data_only_when_wanted = 1,
    .blocks = BRG_BLOCKS_EACH,
};

/* The builder's shorthand (brigade/model.h). */
brg_status brg_model_add_conv2d(brg_model *m, const char *name, const char *input, int out_channels, int kernel_h,
                                int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w, int bias)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_CONV2D);
    d.out_channels = out_channels;
    d.kernel_h = kernel_h;
    d.kernel_w = kernel_w;
    d.stride_h = stride_h;
    d.stride_w = stride_w;
    d.pad_h = pad_h;
    d.pad_w = pad_w;
    d.bias = bias;
    return brg_model_add(m, name, &d, &input, 1, NULL);
}
