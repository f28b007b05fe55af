/* linear: a fully connected layer over the flattened input, optional bias. */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field fields[] = {
    {"out_features", BRG_FIELD_INT, offsetof(brg_layer_desc, out_channels), 0, 1, 1, BRG_LAYER_MAX_CHANNELS, 0, 0},
    {"bias", BRG_FIELD_BOOL, offsetof(brg_layer_desc, bias), 0, 1, 0, 1, 0, 0},
    BRG_FIELD_END,
};

static brg_status infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w)
{
    (void)n_in;
    const brg_model_tensor *x = in[0];
    if (d->out_channels < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': out_features must be positive", name);
    if ((double)d->out_channels * (double)x->c * (double)x->h * (double)x->w > BRG_LAYER_MAX_WEIGHTS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': more than 2^40 weights", name);
    *c = d->out_channels;
    *h = *w = 1;
    return BRG_OK;
}

static void flops(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin, double *bw)
{
    const double out = u * brg_layer_elems(m, l->output);
    const double macs = out * brg_layer_elems(m, l->inputs[0]);
    brg_layer_flops_product(l, out, macs, wants_dx, fwd, bin, bw);
}

const brg_layer_kind_info brg_layer_linear = {
    .name = "linear",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = fields,
    .infer = infer,
    .param_kinds = brg_layer_weight_bias_params,
    .backward_reads_input = 1,
    .weight_part = 1,
    .flops = flops,
};
