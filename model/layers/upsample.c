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
    if (x->h > (1 << 20) / d->factor || x->w > (1 << 20) / d->factor)
        return brg_error(BRG_ERR_SHAPE, "layer '%s': upsampling %lldx%lld by %d exceeds 2^20 per side", name,
                         (long long)x->h, (long long)x->w, d->factor);
    *h = x->h * d->factor;
    *w = x->w * d->factor;
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
};
