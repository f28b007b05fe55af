/* linear: a fully connected layer over the flattened input, optional bias.
 * Its output [F, 1, 1] is seen as [n, F] by the ops. */
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

/* The op fill builds with t ([n, F, 1, 1], y or dy) seen as [n, F]
 * (io->view[0]). */
static brg_status product_op(brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *t,
                             brg_layer_product_fn fill)
{
    const int64_t shape[2] = {io->n, brg_model_get_tensor(io->model, io->layer->output)->c};
    BRG_CHECK(brg_tensor_reshape(t, 2, shape, &io->view[0]));
    fill(io, op, kind, &io->view[0]);
    return BRG_OK;
}

static brg_status forward(brg_layer_io *io, brg_op *op)
{
    return product_op(io, op, BRG_OP_LINEAR_FORWARD, io->y, brg_layer_product_forward);
}

static brg_status backward_data(brg_layer_io *io, brg_op *op)
{
    return product_op(io, op, BRG_OP_LINEAR_BACKWARD_DATA, io->dy, brg_layer_product_data);
}

static brg_status backward_weight(brg_layer_io *io, brg_op *op)
{
    return product_op(io, op, BRG_OP_LINEAR_BACKWARD_WEIGHT, io->dy, brg_layer_product_weight);
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
    .flops = flops,
    .forward = forward,
    .backward_data = backward_data,
    .backward_weight = backward_weight,
    .data_only_when_wanted = 1,
};

/* The builder's shorthand (brigade/model.h). */
brg_status brg_model_add_linear(brg_model *m, const char *name, const char *input, int out_features, int bias)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_LINEAR);
    d.out_channels = out_features;
    d.bias = bias;
    return brg_model_add(m, name, &d, &input, 1, NULL);
}
