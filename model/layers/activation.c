/* relu and dropout (inverted dropout: kept elements scaled by 1/(1-rate),
 * the mask a pure hash of seed and element index, so the backward needs no
 * stored mask). */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field no_fields[] = {BRG_FIELD_END};

static brg_status relu_infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                             int64_t *c, int64_t *h, int64_t *w)
{
    (void)name, (void)d, (void)in, (void)n_in, (void)c, (void)h, (void)w;
    return BRG_OK;
}

static brg_status relu_forward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_forward(io, op, BRG_OP_RELU_FORWARD);
    return BRG_OK;
}

/* The backward reads y (y > 0 where x > 0), not x. */
static brg_status relu_backward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_backward(io, op, BRG_OP_RELU_BACKWARD);
    op->n_in = 2;
    op->in[0] = io->y;
    op->in[1] = io->dy;
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
    .forward = relu_forward,
    .backward_data = relu_backward,
    .blocks = BRG_BLOCKS_TIED,
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

/* The mask's seed and offset, the same in the forward and the backward: the
 * offset is the micro-batch's first element in the mini-batch's mask
 * stream, so a sample's mask does not depend on how the mini-batch is cut. */
static void dropout_params(const brg_layer_io *io, brg_op *op, float rate)
{
    op->p.dropout.rate = rate;
    op->p.dropout.seed = io->seed;
    const brg_model_tensor *x = brg_model_get_tensor(io->model, io->layer->inputs[0]);
    op->p.dropout.offset = (uint64_t)io->sample_offset * (uint64_t)(x->c * x->h * x->w);
}

static brg_status dropout_forward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_forward(io, op, BRG_OP_DROPOUT_FORWARD);
    dropout_params(io, op, io->train ? io->layer->desc.rate : 0.0f); /* rate 0 keeps everything: a copy */
    return BRG_OK;
}

static brg_status dropout_backward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_backward(io, op, BRG_OP_DROPOUT_BACKWARD);
    dropout_params(io, op, io->layer->desc.rate);
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_dropout = {
    .name = "dropout",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1, .rate = 0.5f},
    .fields = dropout_fields,
    .infer = dropout_infer,
    .flops = dropout_flops,
    .forward = dropout_forward,
    .backward_data = dropout_backward,
};

/* The builder's shorthands (brigade/model.h). */
brg_status brg_model_add_relu(brg_model *m, const char *name, const char *input)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_RELU);
    return brg_model_add(m, name, &d, &input, 1, NULL);
}

brg_status brg_model_add_dropout(brg_model *m, const char *name, const char *input, float rate)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_DROPOUT);
    d.rate = rate;
    return brg_model_add(m, name, &d, &input, 1, NULL);
}
