/* relu and dropout (inverted dropout: kept elements scaled by 1/(1-rate),
 * the mask a hash of seed and element, base/rng.h). */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field no_fields[] = {BRG_FIELD_END};

static brg_status relu_infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                             int64_t *c, int64_t *h, int64_t *w)
{
    (void)name, (void)d, (void)in, (void)n_in, (void)c, (void)h, (void)w;
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_relu = {
    .name = "relu",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = relu_infer,
    .backward_reads_output = 1,
    .flops = brg_layer_flops_per_output,
};

static const brg_layer_field dropout_fields[] = {
    {"rate", BRG_FIELD_FLOAT, offsetof(brg_layer_desc, rate), 0, 0, 0.0, 1.0, 0, 1},
    BRG_FIELD_END,
};

static brg_status dropout_infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in,
                                int n_in, int64_t *c, int64_t *h, int64_t *w)
{
    (void)in, (void)n_in, (void)c, (void)h, (void)w;
    if (!(d->rate >= 0.0f && d->rate < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s': dropout rate %g must be in [0, 1)", name,
                         (double)d->rate);
    return BRG_OK;
}

/* The mask hash and the product, both ways. */
static void dropout_flops(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin,
                          double *bw)
{
    (void)wants_dx;
    const double out = u * brg_layer_elems(m, l->output);
    *fwd = 3.0 * out;
    *bin = 3.0 * out;
    *bw = 0.0;
}

const brg_layer_kind_info brg_layer_dropout = {
    .name = "dropout",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1, .rate = 0.5f},
    .fields = dropout_fields,
    .infer = dropout_infer,
    .flops = dropout_flops,
};
