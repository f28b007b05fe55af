/* maxpool, avgpool and global_avgpool. Padding never wins a max pool's
 * window, and at most half a window may be padding. */
#include "base/internal.h"
#include "model/layers/layer-kind.h"

static const brg_layer_field max_fields[] = {
    BRG_FIELD_KERNEL(1),
    BRG_FIELD_STRIDE(1),
    BRG_FIELD_PADDING,
    BRG_FIELD_END,
};

static const brg_layer_field avg_fields[] = {
    BRG_FIELD_KERNEL(1),
    BRG_FIELD_STRIDE(1),
    BRG_FIELD_PADDING,
    {"count_include_pad", BRG_FIELD_BOOL, offsetof(brg_layer_desc, count_include_pad), 0, 0, 0, 1, 0, 0},
    BRG_FIELD_END,
};

static brg_status infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w)
{
    (void)n_in, (void)c;
    BRG_CHECK(brg_layer_check_window(name, d));
    if (2 * (int64_t)d->pad_h > d->kernel_h || 2 * (int64_t)d->pad_w > d->kernel_w) /* 2 * INT32_MAX wrapped */
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "layer '%s': padding %dx%d must be at most half of the %dx%d pooling window", name,
                         d->pad_h, d->pad_w, d->kernel_h, d->kernel_w);
    return brg_layer_window_extent(name, d, in[0], h, w);
}

/* One per window element forward, the same back. */
static void flops(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin, double *bw)
{
    (void)wants_dx;
    const double out = u * brg_layer_elems(m, l->output);
    *fwd = out * l->desc.kernel_h * l->desc.kernel_w;
    *bin = *fwd;
    *bw = 0.0;
}

static void window(const brg_layer_io *io, brg_op *op)
{
    const brg_layer_desc *d = &io->layer->desc;
    op->p.pool.kernel_h = d->kernel_h;
    op->p.pool.kernel_w = d->kernel_w;
    op->p.pool.stride_h = d->stride_h;
    op->p.pool.stride_w = d->stride_w;
    op->p.pool.pad_h = d->pad_h;
    op->p.pool.pad_w = d->pad_w;
    op->p.pool.count_include_pad = d->count_include_pad;
}

static brg_status max_forward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_forward(io, op, BRG_OP_MAXPOOL_FORWARD);
    window(io, op);
    return BRG_OK;
}

/* The backward finds each window's winner again from x and y. */
static brg_status max_backward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_backward(io, op, BRG_OP_MAXPOOL_BACKWARD);
    window(io, op);
    op->n_in = 3;
    op->in[0] = io->x[0];
    op->in[1] = io->y;
    op->in[2] = io->dy;
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_maxpool = {
    .name = "maxpool",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.kernel_h = 1, .kernel_w = 1, .stride_h = 1, .stride_w = 1},
    .fields = max_fields,
    .infer = infer,
    .backward_reads_input = 1,
    .backward_reads_output = 1,
    .flops = flops,
    .forward = max_forward,
    .backward_data = max_backward,
    .blocks = BRG_BLOCKS_TIED,
};

static brg_status avg_forward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_forward(io, op, BRG_OP_AVGPOOL_FORWARD);
    window(io, op);
    return BRG_OK;
}

static brg_status avg_backward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_backward(io, op, BRG_OP_AVGPOOL_BACKWARD);
    window(io, op);
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_avgpool = {
    .name = "avgpool",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.kernel_h = 1, .kernel_w = 1, .stride_h = 1, .stride_w = 1},
    .fields = avg_fields,
    .infer = infer,
    .flops = flops,
    .forward = avg_forward,
    .backward_data = avg_backward,
    .blocks = BRG_BLOCKS_TIED,
};

static const brg_layer_field no_fields[] = {BRG_FIELD_END};

static brg_status global_infer(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in,
                               int n_in, int64_t *c, int64_t *h, int64_t *w)
{
    (void)name, (void)d, (void)in, (void)n_in, (void)c;
    *h = *w = 1;
    return BRG_OK;
}

/* One per input element both ways. */
static void global_flops(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin,
                         double *bw)
{
    (void)wants_dx;
    const double in = u * brg_layer_elems(m, l->inputs[0]);
    *fwd = in;
    *bin = in;
    *bw = 0.0;
}

static brg_status global_forward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_forward(io, op, BRG_OP_GLOBAL_AVGPOOL_FORWARD);
    return BRG_OK;
}

static brg_status global_backward(brg_layer_io *io, brg_op *op)
{
    brg_layer_unary_backward(io, op, BRG_OP_GLOBAL_AVGPOOL_BACKWARD);
    return BRG_OK;
}

const brg_layer_kind_info brg_layer_global_avgpool = {
    .name = "global_avgpool",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = global_infer,
    .flops = global_flops,
    .forward = global_forward,
    .backward_data = global_backward,
    .blocks = BRG_BLOCKS_INPUT,
};

/* The builder's shorthands (brigade/model.h). */
static brg_status add_pool(brg_model *m, brg_layer_kind kind, const char *name, const char *input, int kernel,
                           int stride, int pad, int count_include_pad)
{
    brg_layer_desc d = brg_layer_desc_init(kind);
    d.kernel_h = d.kernel_w = kernel;
    d.stride_h = d.stride_w = stride;
    d.pad_h = d.pad_w = pad;
    d.count_include_pad = count_include_pad;
    return brg_model_add(m, name, &d, &input, 1, NULL);
}

brg_status brg_model_add_maxpool(brg_model *m, const char *name, const char *input, int kernel, int stride, int pad)
{
    return add_pool(m, BRG_LAYER_MAXPOOL, name, input, kernel, stride, pad, 0);
}

brg_status brg_model_add_avgpool(brg_model *m, const char *name, const char *input, int kernel, int stride, int pad,
                                 int count_include_pad)
{
    return add_pool(m, BRG_LAYER_AVGPOOL, name, input, kernel, stride, pad, count_include_pad);
}

brg_status brg_model_add_global_avgpool(brg_model *m, const char *name, const char *input)
{
    brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_GLOBAL_AVGPOOL);
    return brg_model_add(m, name, &d, &input, 1, NULL);
}
