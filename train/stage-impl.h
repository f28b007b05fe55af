/* brigade: a stage's structures and the helpers its parts share (private
 * to train/). stage.c makes, reads and frees stages and their micro-batch
 * memory; forward.c and backward.c run a micro-batch's layers through
 * their kinds' lowering (model/layers/); optimizer.c holds the optimizers'
 * settings, the step and deferred BatchNorm. */
#ifndef BRIGADE_STAGE_IMPL_H
#define BRIGADE_STAGE_IMPL_H

#include <stdint.h>

#include "brigade/ops.h"
#include "brigade/program.h"
#include "brigade/train.h"
#include "train/stage.h"
#include "model/layers/layer-kind.h"

typedef struct brg_event brg_event; /* base/device-impl.h */

/* A layer clock's lap not yet read: from one of the clock's events to a
 * later one, for times[l] (times NULL: for nothing). */
typedef struct brg_clock_lap {
    double *times;
    int l, from, to;
} brg_clock_lap;

typedef struct stage_param {
    int layer, index;    /* model layer, parameter index within it */
    brg_param_info info;
    brg_tensor value;    /* view into the block's weights slab */
    brg_tensor grad;     /* trainable only: view into the grads slab */
    brg_tensor state[2]; /* optimizer tensors, view into the optimizer slab */
} stage_param;

/* A layer's parameters by role: indices into stage->params by
 * brg_param_kind, -1 if absent. */
typedef struct stage_layer {
    int first_param, n_params;
    int role[BRG_LAYER_MAX_PARAMS];
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
    /* Synchronized BatchNorm: where this layer's merged-mean low parts
     * start in each slot's row of sync.mean_lo. */
    int64_t sync_lo_at;
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
    brg_tensor *saved;      /* per stage layer, BRG_LAYER_MAX_SAVED: the per-channel stash (BatchNorm's mean, invstd) */
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
    int64_t pixels;         /* labels per sample: the model output's H x W (1 for class logits) */

    /* per model tensor */
    unsigned char *in_stage;  /* read or written by this stage */
    unsigned char *is_input;  /* enters the stage */
    unsigned char *is_output; /* leaves the stage */
    int *fwd_uses;            /* forward readers in the stage (the loss counts as one) */
    int *bwd_uses;            /* backward ops of the stage that read the activation */
    int *inputs, n_inputs;
    int *outputs, n_outputs;
    int *layout;              /* the channel block its activation and gradient have (0: plain NCHW) */

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
    brg_stage_grads_done_fn grads_done; /* brg_stage_set_grads_done */
    void *grads_done_ctx;
    brg_layer_clock *clock;             /* brg_stage_set_layer_clock, or NULL */
    int statistics_frozen;              /* brg_stage_freeze_statistics */
    /* The clock's events (kept from run to run: used of n_events so far)
     * and its laps not yet read (brg_stage_read_layer_clock). */
    struct {
        brg_event **events;
        int n_events, used;
        brg_clock_lap *laps;
        int n_laps, cap_laps;
    } clocked;
    /* Synchronized BatchNorm (syncbn.c): the sums on the device
     * (BRG_BATCHNORM_SYNC_VECTORS x the widest BatchNorm's channels,
     * persistent), their host copies, the merged means' low parts from
     * each slot's forward to its backward (host, a row of lo_row floats
     * per slot), and the replicas' gather. */
    struct {
        int64_t widest;
        float *mean_lo;
        int64_t lo_row;
        float *dev;
        float *host;
        double *mine, *all;
        brg_stage_gather_fn gather;
        void *ctx;
        int replicas;
    } sync;
};

static inline const brg_layer *brg_stage_layer(const brg_stage *s, int l) { return brg_model_get_layer(s->model, l); }

static inline const brg_model_tensor *brg_stage_tensor(const brg_stage *s, int t)
{
    return brg_model_get_tensor(s->model, t);
}

/* ---- micro-batch memory (stage.c) ---- */

/* Allocate a micro-batch tensor tagged "stage S / BLOCK / WHAT NAME mb SLOT". */
brg_status brg_stage_slot_alloc(brg_stage *s, int slot_id, brg_tensor *t, brg_dtype dtype, int ndim,
                                const int64_t *shape, const char *block, const char *what, const char *name);
/* Free t if it holds memory and clear it. */
void brg_stage_slot_free(brg_stage *s, brg_tensor *t);
/* The activation or gradient of model tensor t for n samples: [n, C, H, W]. */
brg_status brg_stage_alloc_tensor(brg_stage *s, int slot_id, int t, int n, brg_tensor *out, const char *what);
/* Free t's activation once nothing will read it: no forward reader left, no
 * backward reader left, and not an output the caller still holds. */
void brg_stage_maybe_free_act(brg_stage *s, slot *sl, int t);
/* Free the per-channel stash of layer l in sl (nothing when it has none). */
void brg_stage_free_saved(brg_stage *s, slot *sl, int l);
/* BRG_ERR_INVALID_ARGUMENT naming what unless slot_id is a slot. */
brg_status brg_stage_check_slot(const brg_stage *s, int slot_id, const char *what);

/* Layer l's tensors in slot sl for its kind's lowering (layer-kind.h):
 * activations, gradients, parameters and their gradients by role, the
 * saved stash, and the pass (mode, dropout seed and offset, whether the
 * running statistics stay). The caller sets accumulate. */
void brg_stage_layer_io(const brg_stage *s, slot *sl, int l, brg_layer_io *io);

/* A failure of layer ly in `what` ("forward", ...) of a slot, with the
 * stage, layer and block named in front of the message. */
brg_status brg_stage_layer_failed(const brg_stage *s, brg_status st, const brg_layer *ly, const char *what,
                                  int slot_id);

/* Recomputation: rebuild the stash of a slot whose forward kept only its
 * inputs (forward.c). */
brg_status brg_stage_replay_forward(brg_stage *s, int slot_id);

/* ---- optimizer.c ---- */

brg_status brg_stage_check_optimizer(const brg_optimizer_config *c);

/* Deferred BatchNorm: the layers with running statistics get host
 * accumulators at creation; their train forwards snapshot the running
 * statistics before the first micro-batch and merge each micro-batch's
 * statistics; the step moves the running statistics once (zero_grads
 * resets, putting them back when a mini-batch was abandoned). */
brg_status brg_stage_bn_alloc(brg_stage *s);
brg_status brg_stage_bn_snapshot(brg_stage *s, int l);
brg_status brg_stage_bn_accumulate(brg_stage *s, int slot_id, int l);

/* ---- syncbn.c ---- */

/* Whether layer l normalizes with statistics synchronized over the replicas. */
static inline int brg_stage_bn_synced(const brg_stage *s, int l)
{
    return s->cfg.sync_batchnorm && s->layers[l - s->first_layer].role[BRG_P_RMEAN] >= 0;
}
/* At creation (stage.c): the device and host memory of synchronized
 * BatchNorm; the host buffers again for `replicas` replicas of 1 + 2 x
 * the widest BatchNorm's channels each. */
brg_status brg_stage_sync_alloc(brg_stage *s);
brg_status brg_stage_sync_host_alloc(brg_stage *s, int replicas);
void brg_stage_sync_free(brg_stage *s);
/* A train forward of layer l (brg_stage_bn_synced) in slot slot_id, its
 * output and stash allocated: the statistics merged over the replicas,
 * the running statistics moved (or, deferred, the micro-batch's own
 * merged into the mini-batch's), y normalized. */
brg_status brg_stage_sync_forward(brg_stage *s, int slot_id, int l);
/* Layer l's backward data with its sums merged over the replicas; dy and
 * accumulate as run_lowered's. */
brg_status brg_stage_sync_backward(brg_stage *s, slot *sl, int l, const brg_tensor *dy, int accumulate);
/* Deferred BatchNorm: merge a micro-batch's per-channel mean and biased
 * variance over count values (host doubles) into layer l's accumulators. */
void brg_stage_bn_merge(brg_stage *s, int l, const double *mean, const double *var, double count);

/* Whether a train pass on sl leaves BatchNorm's running statistics and
 * deferred BatchNorm's sums alone: a replay (its micro-batch was counted
 * by the forward it replays), or a stage frozen for a warm-up. */
static inline int brg_stage_statistics_kept(const brg_stage *s, const slot *sl)
{
    return sl->replaying || s->statistics_frozen;
}

/* The layer clock (brg_stage_set_layer_clock): clock_start records an
 * event on the compute stream where a layer starts, *mark names it;
 * clock_lap records one where the layer ends, notes the lap from *mark to
 * it for times[l] (times NULL: for nothing) and moves *mark on. Neither
 * waits for the device. Both do nothing (and return BRG_OK) without a
 * clock. */
brg_status brg_stage_clock_start(brg_stage *s, int *mark);
brg_status brg_stage_clock_lap(brg_stage *s, double *times, int l, int *mark);

#endif /* BRIGADE_STAGE_IMPL_H */
