/* concat (along channels) and add (elementwise, two inputs of one shape). */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field no_fields[] = {BRG_FIELD_END};

static brg_status concat_infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in,
                               int n_in, int64_t *c, int64_t *h, int64_t *w)
{
    (void)d, (void)h, (void)w;
    const brg_model_tensor *x = in[0];
    char s1[64], s2[64];
    if (n_in < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' (concat) needs at least one input", name);
    *c = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i]->h != x->h || in[i]->w != x->w) {
            brg_layer_shape_str(s1, sizeof s1, x);
            brg_layer_shape_str(s2, sizeof s2, in[i]);
            return brg_error(BRG_ERR_SHAPE, "layer '%s' (concat): '%s' is %s but '%s' is %s; only channels may differ",
                             name, x->name, s1, in[i]->name, s2);
        }
        *c += in[i]->c;
    }
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_concat = {
    .name = "concat",
    .min_inputs = 1,
    .max_inputs = BRG_LAYER_MAX_INPUTS,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = concat_infer,
    .flops = brg_layer_flops_per_output,
};

static brg_status add_infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                            int64_t *c, int64_t *h, int64_t *w)
{
    (void)d, (void)n_in, (void)c, (void)h, (void)w;
    const brg_model_tensor *x = in[0];
    if (in[1]->c != x->c || in[1]->h != x->h || in[1]->w != x->w) {
        char s1[64], s2[64];
        brg_layer_shape_str(s1, sizeof s1, x);
        brg_layer_shape_str(s2, sizeof s2, in[1]);
        return brg_error(BRG_ERR_SHAPE, "layer '%s' (add): '%s' is %s but '%s' is %s; they must match", name, x->name,
                         s1, in[1]->name, s2);
    }
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_add = {
    .name = "add",
    .min_inputs = 2,
    .max_inputs = 2,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = add_infer,
    .flops = brg_layer_flops_per_output,
};
