/* upsample: nearest-neighbour upsampling by an integer factor (U-Net). */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field fields[] = {
    {"factor", BRG_FIELD_INT, offsetof(brg_layer_desc, factor), 0, 0, 1, BRG_LAYER_MAX_UPSAMPLE, 0, 0},
    BRG_FIELD_END,
};

static brg_status infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w)
{
    (void)n_in, (void)c;
    const brg_model_tensor *x = in[0];
    if (d->factor < 1 || d->factor > BRG_LAYER_MAX_UPSAMPLE)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': upsample factor %d must be in 1..64", name, d->factor);
    if (x->h > BRG_LAYER_MAX_EXTENT / d->factor || x->w > BRG_LAYER_MAX_EXTENT / d->factor)
        return brg_error(BRG_ERR_SHAPE, "layer '%s': upsampling %lldx%lld by %d exceeds 2^20 per side", name,
                         (long long)x->h, (long long)x->w, d->factor);
    *h = x->h * d->factor;
    *w = x->w * d->factor;
    return BRG_OK;
}

static brg_status forward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_forward(io, op, BRG_OP_UPSAMPLE_FORWARD);
    op->p.upsample.factor = io->layer->desc.factor;
    return BRG_OK;
}

static brg_status backward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_backward(io, op, BRG_OP_UPSAMPLE_BACKWARD);
    op->p.upsample.factor = io->layer->desc.factor;
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_upsample = {
    .name = "upsample",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1, .factor = 2},
    .fields = fields,
    .infer = infer,
    .flops = brg_layer_flops_per_output,
    .forward = forward,
    .backward_data = backward,
};

/* The builder's shorthand (brigade/model.h). */
brg_status brg_model_add_upsample(brg_model *m, const char *name, const char *input, int factor)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_UPSAMPLE);
    d.factor = factor;
    return brg_model_add(m, name, &d, &input, 1, NULL);
}
