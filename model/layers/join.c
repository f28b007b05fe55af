/* concat (along channels) and add (elementwise, two inputs of one shape):
 * the layers with several inputs, whose backward writes each input's
 * gradient. */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field no_fields[] = {BRG_FIELD_END};

/* kind from every input to y. */
static brg_status join_forward(brg_layer_io *io, brg_op *op, brg_op_kind kind)
{
    op->kind = kind;
    op->n_in = io->layer->n_inputs;
    for (int k = 0; k < io->layer->n_inputs; k++) op->in[k] = io->x[k];
    op->n_out = 1;
    op->out[0] = io->y;
    return BRG_OK;
}

/* kind from dy to every input's gradient. */
static brg_status join_backward(brg_layer_io *io, brg_op *op, brg_op_kind kind)
{
    op->kind = kind;
    op->n_in = 1;
    op->in[0] = io->dy;
    op->n_out = io->layer->n_inputs;
    for (int k = 0; k < io->layer->n_inputs; k++) op->out[k] = io->dx[k];
    op->accumulate = io->accumulate;
    return BRG_OK;
}

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

static brg_status concat_forward(brg_layer_io *io, brg_op *op) { return join_forward(io, op, BRG_OP_CONCAT_FORWARD); }

static brg_status concat_backward(brg_layer_io *io, brg_op *op)
{
    return join_backward(io, op, BRG_OP_CONCAT_BACKWARD);
}

const brg_layer_kind_info brg_layer_concat = {
    .name = "concat",
    .min_inputs = 1,
    .max_inputs = BRG_LAYER_MAX_INPUTS,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = concat_infer,
    .flops = brg_layer_flops_per_output,
    .forward = concat_forward,
    .backward_data = concat_backward,
    .blocks = BRG_BLOCKS_TIED,
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

static brg_status add_forward(brg_layer_io *io, brg_op *op) { return join_forward(io, op, BRG_OP_ADD_FORWARD); }
static brg_status add_backward(brg_layer_io *io, brg_op *op) { return join_backward(io, op, BRG_OP_ADD_BACKWARD); }

const brg_layer_kind_info brg_layer_add = {
    .name = "add",
    .min_inputs = 2,
    .max_inputs = 2,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = add_infer,
    .flops = brg_layer_flops_per_output,
    .forward = add_forward,
    .backward_data = add_backward,
    .blocks = BRG_BLOCKS_TIED,
};

/* The builder's shorthands (brigade/model.h). */
brg_status brg_model_add_concat(brg_model *m, const char *name, const char *const *inputs, int n_inputs)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_CONCAT);
    return brg_model_add(m, name, &d, inputs, n_inputs, NULL);
}

brg_status brg_model_add_add(brg_model *m, const char *name, const char *a, const char *b)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_ADD);
    const char *in[2] = {a, b};
    return brg_model_add(m, name, &d, in, 2, NULL);
}
