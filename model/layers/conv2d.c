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
    .weight_part = 1,
    .flops = flops,
};
