/* The stage's structures and the helpers its parts share (internal to
 * train/): stage.c makes, reads and frees stages and runs the optimizer
 * step, forward.c runs the forward of a micro-batch through the stage's
 * layers, backward.c its backward; optimizer.c has the optimizers'
 * settings. See stage.c for the memory rules every part keeps. */
#ifndef BRIGADE_TRAIN_STAGE_IMPL_H
#define BRIGADE_TRAIN_STAGE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/ops.h"
#include "brigade/train.h"
#include "base/internal.h"
#include "base/rng.h"
#include "train/stage.h"

typedef struct stage_param {
    int layer, index;    /* model layer, parameter index within it */
    brg_param_info info;
    brg_tensor value;    /* view into the block's weights slab */
    brg_tensor grad;     /* trainable only: view into the grads slab */
    brg_tensor state[2]; /* optimizer tensors, view into the optimizer slab */
} stage_param;

/* A layer's parameters by role: indices into stage->params, -1 if absent. */
typedef struct stage_layer {
    int first_param, n_params;
    int weight, bias, gamma, beta, rmean, rvar;
    /* Deferred BatchNorm: the mini-batch's statistics so far, merged per
     * micro-batch (Chan et al.): elements per channel, their mean and sum
     * of squared deviations, per channel (host memory). */
    double bn_count;
    double *bn_mean, *bn_m2;
    /* The running mean and variance as the mini-batch found them (2 x C):
     * the update starts from them, and an abandoned mini-batch puts them
     * back (a NaN batch statistic turns even a momentum-0 update into NaN). */
    float *bn_snap;
    int bn_snapped;
} stage_layer;

/* A slot's life: EMPTY -> FILLING (inputs being made) -> FORWARD (forwarded;
 * outputs until released) -> BACKWARD (backward done or, when split, its
 * input part; holds the input gradients until released and the weight part's
 * residue until brg_stage_backward_weight) -> EMPTY. */
enum { SLOT_EMPTY = 0, SLOT_FILLING, SLOT_FORWARD, SLOT_BACKWARD };

typedef struct slot {
    int state;
    int n;                  /* samples; 0 until the first buffer is made */
    int outputs_released;
    int stash;              /* this forward keeps what the backward reads */
    int hold_inputs;        /* recompute: the inputs stay until the replay */
    int needs_replay;       /* recompute: the backward must replay the forward first */
    int replaying;          /* the replay is running: no loss, BatchNorm momentum 0 */
    int input_grads_held;   /* BACKWARD: the input gradients are still there */
    int weight_pending;     /* BACKWARD: brg_stage_backward_weight is still to run */
    brg_pass pass;
    brg_tensor *act;        /* per model tensor: its activation while live */
    brg_tensor *grad;       /* per model tensor: its gradient while live */
    int *fwd_left;          /* forward readers still to run */
    int *bwd_left;          /* backward readers still to run */
    brg_tensor *saved;      /* per stage layer: BatchNorm saved mean, saved invstd */
    brg_tensor *wdy;        /* per stage layer: conv2d/linear dy kept from the input part for the weight part */
    brg_tensor probs, labels;
} slot;

struct brg_stage {
    const brg_model *model;
    brg_device *dev;
    brg_stage_config cfg;
    int first_layer, end_layer; /* layers [first_layer, end_layer) */
    int n_tensors;
    int is_first, is_last;
    int64_t classes;

    /* per model tensor */
    unsigned char *in_stage;  /* read or written by this stage */
    unsigned char *is_input;  /* enters the stage */
    unsigned char *is_output; /* leaves the stage */
    int *fwd_uses;            /* forward readers in the stage (the loss counts as one) */
    int *bwd_uses;            /* backward ops of the stage that read the activation */
    int *inputs, n_inputs;
    int *outputs, n_outputs;

    stage_layer *layers; /* end_layer - first_layer */
    stage_param *params;
    int n_params;
    void **slabs; /* 3 per block: weights, grads, optimizer (NULL where empty) */
    size_t *slab_bytes;
    int n_slabs;
    size_t persistent, live;
    size_t persistent_kind[3]; /* rounded bytes of the weights, grads and optimizer slabs */

    slot *slots;
    float *bn_host;       /* deferred BatchNorm: 2 x the widest BatchNorm's channels */
    float *host_probs;    /* max_batch x classes */
    int32_t *host_labels; /* max_batch */
};

static inline const brg_layer *layer_at(const brg_stage *s, int l) { return brg_model_get_layer(s->model, l); }
static inline const brg_model_tensor *tensor_at(const brg_stage *s, int t) { return brg_model_get_tensor(s->model, t); }

/* Name of the block a tensor's memory is charged to in tags. */
static inline const char *tensor_block(const brg_stage *s, int t)
{
    const brg_model_tensor *mt = tensor_at(s, t);
    if (mt->block < s->cfg.first_block) return "inputs";
    return brg_model_block_name(s->model, mt->block);
}

/* ---- shared by the parts ---- */

/* Seed of layer l's dropout mask in optimizer step `step`. The offset of a
 * micro-batch is its first sample's position in the mini-batch times the
 * elements per sample, so the mask of a sample does not depend on how the
 * mini-batch is cut into micro-batches. */
static inline uint64_t dropout_seed(const brg_stage *s, int64_t step, int l)
{
    return brg_splitmix64(brg_splitmix64(s->cfg.seed ^ 0x64726f706f7574ULL) ^ brg_splitmix64((uint64_t)step) ^
                          ((uint64_t)l * 0x9e3779b97f4a7c15ULL));
}

/* Layer l's dropout mask for the micro-batch of slot sl: the seed of its
 * step and the offset of its first sample, forward and backward alike. */
static inline void dropout_mask(const brg_stage *s, const slot *sl, int l, brg_op *op)
{
    const brg_model_tensor *xt = tensor_at(s, layer_at(s, l)->inputs[0]);
    op->p.dropout.seed = dropout_seed(s, sl->pass.step, l);
    op->p.dropout.offset = (uint64_t)sl->pass.sample_offset * (uint64_t)(xt->c * xt->h * xt->w);
}

/* The activation or gradient of model tensor t for n samples: [n, C, H, W]. */
brg_status brg_stage_alloc_tensor(brg_stage *s, int slot_id, int t, int n, brg_tensor *out, const char *what);

/* Deferred BatchNorm, after a train forward of BatchNorm layer l on n
 * samples: merge the micro-batch's statistics (its saved mean and
 * 1/sqrt(var + eps), read back to the host) into the mini-batch's. */
brg_status brg_stage_bn_accumulate(brg_stage *s, int slot_id, int l);

/* Deferred BatchNorm, before layer l's first train forward of a
 * mini-batch: keep its running statistics (read between steps, so weights
 * loaded into the stage count). */
brg_status brg_stage_bn_snapshot(brg_stage *s, int l);

/* A stage's optimizer settings in range (optimizer.c). */
brg_status brg_optimizer_check(const brg_optimizer_config *c);

/* slot_id names one of the stage's slots; `what` is the caller, for the message. */
brg_status brg_stage_check_slot(const brg_stage *s, int slot_id, const char *what);

/* A pooling layer's window and padding into its op. */
void brg_stage_fill_pool(brg_op *op, const brg_layer_desc *d);

/* A failure of layer ly in `what` ("forward", ...) of a slot, with the
 * stage, layer and block named in front of the message. */
brg_status brg_stage_layer_failed(const brg_stage *s, brg_status st, const brg_layer *ly, const char *what, int slot_id);

/* Free t's activation once nothing will read it: no forward reader left, no
 * backward reader left, and not an output the caller still holds. */
void brg_stage_maybe_free_act(brg_stage *s, slot *sl, int t);

/* The value of stage parameter `index`, or NULL for an absent one (-1). */
const brg_tensor *brg_stage_opt_param(const brg_stage *s, int index);

/* Recomputation: rebuild the stash of a slot whose forward kept only its
 * inputs, by running the layers again in train mode with the same pass (so
 * the same dropout masks) and BatchNorm momentum 0. The loss is not run
 * again: its probabilities and labels were kept. The outputs are released
 * by now, so they are freed like any activation. */
brg_status brg_stage_replay_forward(brg_stage *s, int slot_id);

/* Allocate a micro-batch tensor tagged "stage S / BLOCK / WHAT mb SLOT". */
brg_status brg_stage_slot_alloc(brg_stage *s, int slot_id, brg_tensor *t, brg_dtype dtype, int ndim,
                                const int64_t *shape, const char *block, const char *what, const char *name);

/* Give a micro-batch tensor back (a zeroed tensor is ignored). */
void brg_stage_slot_free(brg_stage *s, brg_tensor *t);

#endif /* BRIGADE_TRAIN_STAGE_IMPL_H */
