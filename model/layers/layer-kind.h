/* brigade: layer kinds, each described in one place (internal to the
 * model room and the rooms above it).
 *
 * A kind's file in model/layers/ holds everything about it: its name, its
 * inputs, its fields (their model-file keys, ranges and defaults, which the
 * JSON reader, the writer and the builder's normalisation all read from
 * here), shape inference with its checks, its parameters, what its backward
 * reads (the stash rule the stages keep and the cost model replays), its
 * FLOPs, and its lowering to ops (forward, backward-data, backward-weight).
 * The lowering builds brg_ops from tensors it is handed (brg_layer_io) and
 * runs nothing, so it needs only core: the stages (train/) hand it their
 * buffers and run the ops, the cost model (plan/cost.c) hands it shapes
 * and asks a planning device for each op's workspace. docs/architecture.md
 * lists the files a new kind touches. */
#ifndef BRIGADE_LAYER_KIND_H
#define BRIGADE_LAYER_KIND_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/model.h"
#include "brigade/ops.h"
#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits on what a model may ask for, the same as brg_model_create's on
 * the input, so no tensor's element count can overflow. */
#define BRG_LAYER_MAX_CHANNELS (1 << 24)
#define BRG_LAYER_MAX_EXTENT (1 << 20)
#define BRG_LAYER_MAX_UPSAMPLE 64
/* No layer may have more weights than this: keeps every count and byte
 * size far from int64 overflow, whatever a model file asks for. */
#define BRG_LAYER_MAX_WEIGHTS 1099511627776.0 /* 2^40 */

typedef enum brg_field_type {
    BRG_FIELD_INT,   /* an int member */
    BRG_FIELD_PAIR,  /* two int members (h, w), written [h, w], read as n or [h, w] */
    BRG_FIELD_BOOL,  /* an int member holding 0 or 1 */
    BRG_FIELD_FLOAT, /* a float member */
} brg_field_type;

/* One field of a kind: its key in model files, where it lives in
 * brg_layer_desc, and what values it takes. An optional field that is
 * absent keeps the kind's default. */
typedef struct brg_layer_field {
    const char *key;
    brg_field_type type;
    size_t at, at2;       /* offsetof(brg_layer_desc, member); a pair's second member */
    int required;
    double lo, hi;        /* the range of ints, pairs and floats */
    int lo_open, hi_open; /* floats: the range excludes lo / hi */
} brg_layer_field;

/* The parameters a layer may have, in the order brg_layer_param lists them. */
typedef enum brg_param_kind {
    BRG_P_WEIGHT, BRG_P_BIAS, BRG_P_GAMMA, BRG_P_BETA, BRG_P_RMEAN, BRG_P_RVAR
} brg_param_kind;
#define BRG_LAYER_MAX_PARAMS 6
/* Per-channel tensors a train forward keeps for the backward (BatchNorm's
 * batch mean and inverse deviation). */
#define BRG_LAYER_MAX_SAVED 2

/* What a kind's lowering works on, for one micro-batch of n samples:
 * activations and gradients [n, C, H, W], parameters and their gradients
 * by brg_param_kind (NULL where the layer has none). The caller fills what
 * the op being lowered reads and writes; the lowering points the op at
 * them, and at io->view for the reshaped views it makes. */
typedef struct brg_layer_io {
    const brg_layer *layer;
    const brg_model *model;
    int n;
    int train;                /* forward: batch statistics, the saved stash, dropout */
    int freeze_running_stats; /* forward: running statistics keep their values (momentum 0) */
    uint64_t seed;            /* the layer's random stream in this step (dropout masks) */
    int64_t sample_offset;    /* the micro-batch's first sample in its mini-batch */
    int accumulate;           /* backward data: add into dx and the parameter gradients */
    const brg_tensor *x[BRG_LAYER_MAX_INPUTS];
    const brg_tensor *y;
    const brg_tensor *dx[BRG_LAYER_MAX_INPUTS];
    const brg_tensor *dy;
    const brg_tensor *param[BRG_LAYER_MAX_PARAMS];
    const brg_tensor *grad[BRG_LAYER_MAX_PARAMS];
    const brg_tensor *saved[BRG_LAYER_MAX_SAVED];
    brg_tensor view[2];
} brg_layer_io;

/* Fills *op, which comes cleared, with one op of the layer in io. */
typedef brg_status (*brg_layer_lower_fn)(brg_layer_io *io, brg_op *op);

/* Which of a layer's activations its ops take channel-blocked
 * (brigade/tensor.h, brigade/ops.h), for the stages' choice of layouts. */
typedef enum brg_layer_blocks {
    BRG_BLOCKS_NONE = 0, /* plain only: its inputs and output stay plain NCHW */
    BRG_BLOCKS_EACH,     /* each input and the output as it comes (conv2d) */
    BRG_BLOCKS_TIED,     /* the inputs and the output all in one layout (batchnorm, relu, the pools, concat, add) */
    BRG_BLOCKS_INPUT,    /* the input as it comes, the output plain (global_avgpool) */
} brg_layer_blocks;

typedef struct brg_layer_kind_info {
    const char *name;                 /* as model files and messages spell it */
    int min_inputs, max_inputs;
    brg_layer_desc defaults;          /* brg_layer_desc_init's values (kind aside) */
    const brg_layer_field *fields;    /* in model-file order; NULL-key terminated */
    /* Check the description against the inputs (the builder has checked
     * their count) and give the output's shape; messages name the layer. */
    brg_status (*infer)(const char *name, const brg_layer_desc *d, const brg_model_tensor *const *in, int n_in,
                        int64_t *c, int64_t *h, int64_t *w);
    /* The layer's parameters, in order; NULL for a kind without any. */
    int (*param_kinds)(const brg_layer_desc *d, brg_param_kind kinds[BRG_LAYER_MAX_PARAMS]);
    int filter_weight;                /* its weight is [out, in, kh, kw], He-initialised; else [out, in*h*w] */
    /* The stash rule: what the backward reads besides dy, and the
     * per-channel tensors of y's channels the train forward saves for it
     * (their names in memory tags). */
    int backward_reads_input, backward_reads_output;
    int n_saved;
    const char *saved_names[BRG_LAYER_MAX_SAVED];
    /* FLOPs for u samples: forward, input-gradient part (wants_dx: 0 when
     * the input is the model's, which needs no gradient), weight part. */
    void (*flops)(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd, double *bin,
                  double *bw);
    /* Lowering. forward: y (and in train mode the saved stash, and the
     * running statistics) from x. backward_data: the gradients of all
     * inputs from dy, and, for a kind without backward_weight, its
     * parameter gradients too (always accumulated). backward_weight: NULL,
     * or the weight (and bias) gradients from x and dy, accumulated; the
     * split backward (ZB-H1) defers it to its weight part. */
    brg_layer_lower_fn forward, backward_data, backward_weight;
    /* backward_data runs only when the input's gradient is wanted (not for
     * the model input); other kinds compute it anyway and the stage drops
     * it, as the plans have always counted. */
    int data_only_when_wanted;
    /* Which of its activations (and their gradients) may be channel-blocked. */
    brg_layer_blocks blocks;
} brg_layer_kind_info;

/* The description of kind; NULL for a kind out of range. */
const brg_layer_kind_info *brg_layer_kind_info_of(brg_layer_kind kind);

/* The parameter kinds of layer l, in brg_layer_param's order; how many. */
int brg_layer_param_kinds(const brg_layer *l, brg_param_kind kinds[BRG_LAYER_MAX_PARAMS]);

/* The kinds, one per file of model/layers/ (pool.c, activation.c and
 * join.c hold small families). */
extern const brg_layer_kind_info brg_layer_conv2d, brg_layer_batchnorm, brg_layer_relu, brg_layer_maxpool,
    brg_layer_avgpool, brg_layer_global_avgpool, brg_layer_concat, brg_layer_add, brg_layer_linear, brg_layer_dropout,
    brg_layer_upsample;

/* ---- shared by the kinds (kinds.c) ---- */

/* "[c, h, w]" of a tensor, for messages. */
void brg_layer_shape_str(char *buf, size_t size, const brg_model_tensor *t);

/* A window's kernel and stride positive and its padding non-negative
 * (conv2d and the pools). */
brg_status brg_layer_check_window(const char *name, const brg_layer_desc *d);

/* The output extent of the window sliding over x; an input smaller than
 * the window is a shape error. */
brg_status brg_layer_window_extent(const char *name, const brg_layer_desc *d, const brg_model_tensor *x, int64_t *h,
                                   int64_t *w);

/* Elements of a model tensor per sample. */
static inline double brg_layer_elems(const brg_model *m, int t)
{
    const brg_model_tensor *x = brg_model_get_tensor(m, t);
    return (double)(x->c * x->h * x->w);
}

/* One FLOP per output element forward and backward (relu, concat, add,
 * upsample). */
void brg_layer_flops_per_output(const brg_layer *l, const brg_model *m, double u, int wants_dx, double *fwd,
                                double *bin, double *bw);

/* A weight and, with desc->bias, a bias (conv2d, linear). */
int brg_layer_weight_bias_params(const brg_layer_desc *d, brg_param_kind kinds[BRG_LAYER_MAX_PARAMS]);

/* FLOPs of a layer that is one product of macs multiply-adds each way
 * (conv2d, linear), the bias one per output element. */
void brg_layer_flops_product(const brg_layer *l, double out, double macs, int wants_dx, double *fwd, double *bin,
                             double *bw);

/* The ops of a product layer (conv2d, linear) with y or dy as given (a
 * linear layer's [n, features] view): forward y = x * W (+ b); data
 * dx = dy * W; weight dW (and db) from x and dy, accumulated. */
typedef void (*brg_layer_product_fn)(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *t);
void brg_layer_product_forward(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *y);
void brg_layer_product_data(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *dy);
void brg_layer_product_weight(const brg_layer_io *io, brg_op *op, brg_op_kind kind, const brg_tensor *dy);

/* One input, one output: kind from x to y (forward), or from dy to the
 * input's gradient (backward); the caller adds parameters and inputs. */
void brg_layer_unary_forward(const brg_layer_io *io, brg_op *op, brg_op_kind kind);
void brg_layer_unary_backward(const brg_layer_io *io, brg_op *op, brg_op_kind kind);

/* Synchronized BatchNorm's ops for the layer in io (batchnorm.c; the
 * stages merge what they compute over the replicas, train/syncbn.c).
 * stats: the micro-batch's per-channel mean (as a float and its low part
 * mean_lo) and variance; normalize: y from the merged mean (io->saved[0]
 * and mean_lo) and variance; reduce: the sums of io->dy (and the gamma
 * and beta gradients, accumulated as io->accumulate says); elemt: io->dx
 * from the merged sums over count values per channel. */
void brg_batchnorm_sync_stats(const brg_layer_io *io, brg_op *op, const brg_tensor *mean, const brg_tensor *var,
                              const brg_tensor *mean_lo);
void brg_batchnorm_sync_normalize(const brg_layer_io *io, brg_op *op, const brg_tensor *var,
                                  const brg_tensor *mean_lo);
void brg_batchnorm_sync_reduce(const brg_layer_io *io, brg_op *op, const brg_tensor *sum_dy,
                               const brg_tensor *sum_dy_xhat, const brg_tensor *mean_lo);
void brg_batchnorm_sync_elemt(const brg_layer_io *io, brg_op *op, const brg_tensor *sum_dy,
                              const brg_tensor *sum_dy_xhat, const brg_tensor *mean_lo, int64_t count);
/* The [C] vectors of a stage's persistent device buffer for synchronized
 * BatchNorm, C its widest such layer's channels: two sums (or the
 * variance) and the merged mean's low part. Plans count it. */
#define BRG_BATCHNORM_SYNC_VECTORS 3

/* Fields every window kind has. */
#define BRG_FIELD_KERNEL(req)                                                                                          \
    {"kernel", BRG_FIELD_PAIR, offsetof(brg_layer_desc, kernel_h), offsetof(brg_layer_desc, kernel_w), req, 1,         \
     BRG_LAYER_MAX_EXTENT, 0, 0}
#define BRG_FIELD_STRIDE(req)                                                                                          \
    {"stride", BRG_FIELD_PAIR, offsetof(brg_layer_desc, stride_h), offsetof(brg_layer_desc, stride_w), req, 1,         \
     BRG_LAYER_MAX_EXTENT, 0, 0}
#define BRG_FIELD_PADDING                                                                                              \
    {"padding", BRG_FIELD_PAIR, offsetof(brg_layer_desc, pad_h), offsetof(brg_layer_desc, pad_w), 0, 0,                \
     BRG_LAYER_MAX_EXTENT, 0, 0}
#define BRG_FIELD_END {NULL, BRG_FIELD_INT, 0, 0, 0, 0, 0, 0, 0}

#ifdef __cplusplus
}
#endif

#endif /* BRIGADE_LAYER_KIND_H */
