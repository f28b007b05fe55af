/* batchnorm: batch normalization over N, H and W per channel, with
 * optional learnable scale (gamma) and shift (beta) and running statistics. */
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

const brg_layer_kind_info brg_layer_batchnorm = {
    .name = "batchnorm",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1, .epsilon = 1e-5f, .momentum = 0.1f, .scale = 1, .center = 1},
    .fields = fields,
    .infer = infer,
    .param_kinds = params,
    .backward_reads_input = 1,
    .flops = flops,
};
