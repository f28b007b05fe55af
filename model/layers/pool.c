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
    if (2 * d->pad_h > d->kernel_h || 2 * d->pad_w > d->kernel_w)
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
};

const brg_layer_kind_info brg_layer_avgpool = {
    .name = "avgpool",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.kernel_h = 1, .kernel_w = 1, .stride_h = 1, .stride_w = 1},
    .fields = avg_fields,
    .infer = infer,
    .flops = flops,
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

const brg_layer_kind_info brg_layer_global_avgpool = {
    .name = "global_avgpool",
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = {.stride_h = 1, .stride_w = 1},
    .fields = no_fields,
    .infer = global_infer,
    .flops = global_flops,
};
