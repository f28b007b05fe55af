/* Stages: a contiguous block range of a model bound to one device.
 *
 * Everything a stage holds comes from its device's arena:
 *   - persistent, per block: one slab of weights (trainable parameters and
 *     BatchNorm running statistics), one of gradients, one of optimizer
 *     state; tensors point into them (size first, allocate once);
 *   - per micro-batch slot: the input buffers, the labels, the activations
 *     while they are live, the stash the backward reads, the gradient
 *     buffers while they are live.
 *
 * The stash rule (mirrored by the memory planner; docs/training.md): in
 * train mode an activation survives its last forward reader iff a backward
 * op reads it, that is, it is the input x of a conv2d, linear, batchnorm or
 * maxpool layer, or the output y of a relu or maxpool layer. BatchNorm also
 * keeps its saved mean and inverse deviation, the loss its probabilities
 * and the labels. Everything else is freed right after its last forward
 * reader has run. In the backward, a gradient buffer is allocated by the
 * first op that writes it and freed right after the backward of the layer
 * that produced its tensor; a stashed tensor is freed right after the last
 * backward op that reads it.
 *
 * Recomputation (config->recompute): a train-mode forward keeps only the
 * stage's inputs (and, on the last stage, the probabilities and labels the
 * loss backward reads) and frees everything else as above with no backward
 * readers; the backward first replays the forward in train mode with the
 * stash rule (BatchNorm with momentum 0, so the running statistics move once
 * per micro-batch; dropout masks come from the same seed and offset), then
 * runs as usual. The replay computes exactly the activations the first
 * forward did, so gradients are the same bit for bit.
 *
 * The backward may run in two parts (ZB-H1): brg_stage_backward_input
 * computes every activation gradient and BatchNorm's gamma and beta
 * gradients (a by-product of its dx), and keeps for each conv2d and linear
 * layer its input x and its output gradient dy; brg_stage_backward_weight
 * then computes those layers' weight and bias gradients and frees x and dy.
 * brg_stage_backward does both layer by layer, freeing dy at once.
 *
 * On a planning device (brg_device_is_planning) the stage allocates exactly
 * as on a real one but writes no initial values, and never reads device
 * memory on the host except through brg_device_copy_out.
 *
 * Per-tensor bookkeeping is indexed by model tensor index, so a tensor that
 * passes through a stage untouched (a U-Net skip crossing it) is an input
 * and an output at once, with one buffer and one gradient.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "brigade/program.h"
#include "brigade/train.h"
#include "train/stage.h"
#include "core/rng.h"
#include "core/internal.h"
#include "model/stash-rule.h"

/* ---- optimizers ---- */

brg_optimizer_config brg_optimizer_config_init(brg_optimizer_kind kind)
{
    brg_optimizer_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.epsilon = 1e-8f;
    return c;
}

const char *brg_optimizer_name(brg_optimizer_kind kind)
{
    switch (kind) {
    case BRG_OPTIMIZER_SGD: return "sgd";
    case BRG_OPTIMIZER_ADAM: return "adam";
    }
    return "unknown";
}

brg_status brg_optimizer_parse(const char *name, brg_optimizer_kind *kind)
{
    for (int k = BRG_OPTIMIZER_SGD; name && k <= BRG_OPTIMIZER_ADAM; k++)
        if (strcmp(name, brg_optimizer_name((brg_optimizer_kind)k)) == 0) {
            *kind = (brg_optimizer_kind)k;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown optimizer '%.100s' (expected sgd or adam)",
                     name ? name : "(null)");
}

int brg_optimizer_state_count(const brg_optimizer_config *c)
{
    if (c->kind == BRG_OPTIMIZER_ADAM) return 2;
    return c->momentum > 0.0f ? 1 : 0;
}

static brg_status check_optimizer(const brg_optimizer_config *c)
{
    if (c->kind != BRG_OPTIMIZER_SGD && c->kind != BRG_OPTIMIZER_ADAM)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d (known: sgd, adam)", (int)c->kind);
    if (!(c->weight_decay >= 0.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "weight decay %g must be non-negative", (double)c->weight_decay);
    if (c->kind == BRG_OPTIMIZER_SGD && !(c->momentum >= 0.0f && c->momentum < 1.0f))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "SGD momentum %g must be in [0, 1)", (double)c->momentum);
    if (c->kind == BRG_OPTIMIZER_ADAM &&
        (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f) || !(c->epsilon > 0.0f)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "Adam betas (%g, %g) must be in [0, 1) and epsilon %g positive",
                         (double)c->beta1, (double)c->beta2, (double)c->epsilon);
    return BRG_OK;
}

/* ---- the stage's structures ---- */

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

static const brg_layer *layer_at(const brg_stage *s, int l) { return brg_model_get_layer(s->model, l); }
static const brg_model_tensor *tensor_at(const brg_stage *s, int t) { return brg_model_get_tensor(s->model, t); }

/* Name of the block a tensor's memory is charged to in tags. */
static const char *tensor_block(const brg_stage *s, int t)
{
    const brg_model_tensor *mt = tensor_at(s, t);
    if (mt->block < s->cfg.first_block) return "inputs";
    return brg_model_block_name(s->model, mt->block);
}

/* ---- micro-batch memory ---- */

/* Allocate a micro-batch tensor tagged "stage S / BLOCK / WHAT mb SLOT". */
static brg_status slot_alloc(brg_stage *s, int slot_id, brg_tensor *t, brg_dtype dtype, int ndim,
                             const int64_t *shape, const char *block, const char *what, const char *name)
{
    char tag[96];
    snprintf(tag, sizeof tag, "stage %d / %s / %s%s%s mb %d", s->cfg.index, block, what, name[0] ? " " : "", name,
             slot_id);
    BRG_CHECK(brg_tensor_alloc(s->dev, dtype, ndim, shape, tag, t));
    s->live += brg_arena_rounded(brg_tensor_bytes(t));
    return BRG_OK;
}

static void slot_free(brg_stage *s, brg_tensor *t)
{
    if (t->data) {
        s->live -= brg_arena_rounded(brg_tensor_bytes(t));
        brg_tensor_free(t);
    }
    memset(t, 0, sizeof *t);
}

/* The activation or gradient of model tensor t for n samples: [n, C, H, W]. */
static brg_status alloc_tensor(brg_stage *s, int slot_id, int t, int n, brg_tensor *out, const char *what)
{
    const brg_model_tensor *mt = tensor_at(s, t);
    const int64_t shape[4] = {n, mt->c, mt->h, mt->w};
    return slot_alloc(s, slot_id, out, BRG_F32, 4, shape, tensor_block(s, t), what, mt->name);
}

void brg_stage_discard(brg_stage *s, int slot_id)
{
    if (!s || slot_id < 0 || slot_id >= s->cfg.slots) return;
    slot *sl = &s->slots[slot_id];
    for (int t = 0; t < s->n_tensors; t++) {
        slot_free(s, &sl->act[t]);
        slot_free(s, &sl->grad[t]);
    }
    for (int i = 0; i < 2 * (s->end_layer - s->first_layer); i++) slot_free(s, &sl->saved[i]);
    for (int i = 0; i < s->end_layer - s->first_layer; i++) slot_free(s, &sl->wdy[i]);
    slot_free(s, &sl->probs);
    slot_free(s, &sl->labels);
    sl->state = SLOT_EMPTY;
    sl->n = 0;
    sl->outputs_released = 0;
    sl->stash = sl->hold_inputs = sl->needs_replay = sl->replaying = 0;
    sl->input_grads_held = sl->weight_pending = 0;
}

int brg_stage_slot_in_use(const brg_stage *s, int slot_id)
{
    return s && slot_id >= 0 && slot_id < s->cfg.slots && s->slots[slot_id].state != SLOT_EMPTY;
}

/* Free t's activation once nothing will read it: no forward reader left, no
 * backward reader left, and not an output the caller still holds. */
static void maybe_free_act(brg_stage *s, slot *sl, int t)
{
    if (sl->fwd_left[t] > 0 || sl->bwd_left[t] > 0) return;
    if (s->is_output[t] && !sl->outputs_released) return;
    if (s->is_input[t] && sl->hold_inputs) return;
    slot_free(s, &sl->act[t]);
}

/* ---- creation ---- */

static brg_status check_slot(const brg_stage *s, int slot_id, const char *what)
{
    if (slot_id < 0 || slot_id >= s->cfg.slots)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: %s: micro-batch slot %d is outside 0..%d", s->cfg.index,
                         what, slot_id, s->cfg.slots - 1);
    return BRG_OK;
}

/* Mark a stage boundary's tensors: fills list (ascending) and flags. */
static brg_status boundary(brg_stage *s, int b, int **list, int *count)
{
    int *ids = brg_malloc((size_t)s->n_tensors * sizeof *ids, "a stage boundary");
    if (!ids) return BRG_ERR_HOST_MEMORY;
    brg_status st = brg_model_boundary_tensors(s->model, b, ids, s->n_tensors, count);
    if (st != BRG_OK) {
        free(ids);
        return st;
    }
    *list = ids;
    return BRG_OK;
}

/* Find which tensors the stage reads and writes, its inputs and outputs, and
 * how many forward and backward readers each tensor has in the stage. */
static brg_status analyse(brg_stage *s)
{
    const brg_model *m = s->model;
    if (s->is_first) {
        s->inputs = brg_malloc(sizeof *s->inputs, "stage inputs");
        if (!s->inputs) return BRG_ERR_HOST_MEMORY;
        s->inputs[0] = brg_model_input(m);
        s->n_inputs = 1;
    } else {
        BRG_CHECK(boundary(s, s->cfg.first_block - 1, &s->inputs, &s->n_inputs));
    }
    if (s->is_last) {
        s->outputs = NULL;
        s->n_outputs = 0;
    } else {
        BRG_CHECK(boundary(s, s->cfg.last_block, &s->outputs, &s->n_outputs));
    }
    for (int i = 0; i < s->n_inputs; i++) {
        s->in_stage[s->inputs[i]] = 1;
        s->is_input[s->inputs[i]] = 1;
    }
    for (int i = 0; i < s->n_outputs; i++) {
        s->in_stage[s->outputs[i]] = 1;
        s->is_output[s->outputs[i]] = 1;
    }
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = layer_at(s, l);
        for (int k = 0; k < ly->n_inputs; k++) {
            int t = ly->inputs[k];
            const brg_model_tensor *mt = tensor_at(s, t);
            int is_input = 0;
            for (int i = 0; i < s->n_inputs; i++) is_input |= s->inputs[i] == t;
            if (!is_input && (mt->block < s->cfg.first_block || mt->block > s->cfg.last_block))
                return brg_error(BRG_ERR_INTERNAL, "stage %d: layer '%s' reads '%s', which is neither made in the "
                                 "stage nor one of its inputs", s->cfg.index, ly->name, mt->name);
            s->in_stage[t] = 1;
            s->fwd_uses[t]++;
        }
        if (brg_backward_reads_input(ly->desc.kind)) s->bwd_uses[ly->inputs[0]]++;
        s->in_stage[ly->output] = 1;
        if (brg_backward_reads_output(ly->desc.kind)) s->bwd_uses[ly->output]++;
    }
    if (s->is_last) s->fwd_uses[brg_model_output(m)]++; /* the loss */
    return BRG_OK;
}

/* Lay out and allocate the weights, grads and optimizer slabs of block b,
 * initialize the parameters and zero the rest. On a planning device nothing
 * is written: generating VGG's initial weights on the host would take
 * seconds, and the values cannot matter to a dry run. */
static brg_status make_block_params(brg_stage *s, int b, float **host, size_t *host_floats)
{
    const brg_model *m = s->model;
    const int n_state = brg_optimizer_state_count(&s->cfg.optimizer);
    const int planning = brg_device_is_planning(s->dev);
    int first, count;
    brg_model_block_layers(m, b, &first, &count);
    size_t bytes[3] = {0, 0, 0};
    for (int l = first; l < first + count; l++) {
        stage_layer *sl = &s->layers[l - s->first_layer];
        for (int i = 0; i < sl->n_params; i++) {
            const stage_param *p = &s->params[sl->first_param + i];
            size_t r = brg_arena_rounded((size_t)p->info.count * sizeof(float));
            bytes[0] += r;
            if (p->info.trainable) {
                bytes[1] += r;
                bytes[2] += r * (size_t)n_state;
            }
        }
    }
    static const char *const what[3] = {"weights", "grads", "optimizer"};
    const char *bname = brg_model_block_name(m, b);
    char *base[3] = {NULL, NULL, NULL};
    int slab0 = 3 * (b - s->cfg.first_block);
    for (int k = 0; k < 3; k++) {
        if (bytes[k] == 0) continue;
        char tag[96];
        snprintf(tag, sizeof tag, "stage %d / %s / %s", s->cfg.index, bname, what[k]);
        void *p = NULL;
        brg_status st = brg_device_alloc(s->dev, bytes[k], tag, &p);
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d, block '%s': allocating its %s", s->cfg.index, bname, what[k]);
        s->slabs[slab0 + k] = p;
        s->slab_bytes[slab0 + k] = bytes[k];
        s->persistent += brg_arena_rounded(bytes[k]);
        s->persistent_kind[k] += brg_arena_rounded(bytes[k]);
        base[k] = p;
        if (k > 0) BRG_CHECK(brg_device_memset_zero(s->dev, p, bytes[k]));
    }
    size_t off[3] = {0, 0, 0};
    for (int l = first; l < first + count; l++) {
        const brg_layer *ly = layer_at(s, l);
        stage_layer *sl = &s->layers[l - s->first_layer];
        for (int i = 0; i < sl->n_params; i++) {
            stage_param *p = &s->params[sl->first_param + i];
            size_t r = brg_arena_rounded((size_t)p->info.count * sizeof(float));
            BRG_CHECK(brg_tensor_init(&p->value, base[0] + off[0], BRG_F32, p->info.ndim, p->info.shape, s->dev));
            off[0] += r;
            if (!planning) {
                if ((size_t)p->info.count > *host_floats) {
                    float *h = realloc(*host, (size_t)p->info.count * sizeof(float));
                    if (!h)
                        return brg_error(BRG_ERR_HOST_MEMORY,
                                         "cannot allocate host memory to initialize '%s' of layer '%s'", p->info.name,
                                         ly->name);
                    *host = h;
                    *host_floats = (size_t)p->info.count;
                }
                BRG_CHECK(brg_layer_init_param(ly, m, i, s->cfg.seed, *host));
                BRG_CHECK(brg_device_copy_in(s->dev, p->value.data, *host, (size_t)p->info.count * sizeof(float)));
            }
            if (!p->info.trainable) continue;
            BRG_CHECK(brg_tensor_init(&p->grad, base[1] + off[1], BRG_F32, p->info.ndim, p->info.shape, s->dev));
            off[1] += r;
            for (int k = 0; k < n_state; k++) {
                BRG_CHECK(brg_tensor_init(&p->state[k], base[2] + off[2], BRG_F32, p->info.ndim, p->info.shape,
                                          s->dev));
                off[2] += r;
            }
        }
    }
    return BRG_OK;
}

/* Describe every parameter of the stage's layers (no memory yet). */
static brg_status list_params(brg_stage *s)
{
    const brg_model *m = s->model;
    int total = 0;
    for (int l = s->first_layer; l < s->end_layer; l++) total += brg_layer_param_count(layer_at(s, l), m);
    s->params = brg_calloc((size_t)(total ? total : 1), sizeof *s->params, "stage parameters");
    if (!s->params) return BRG_ERR_HOST_MEMORY;
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = layer_at(s, l);
        stage_layer *sl = &s->layers[l - s->first_layer];
        sl->first_param = s->n_params;
        sl->n_params = brg_layer_param_count(ly, m);
        sl->weight = sl->bias = sl->gamma = sl->beta = sl->rmean = sl->rvar = -1;
        for (int i = 0; i < sl->n_params; i++) {
            stage_param *p = &s->params[s->n_params];
            p->layer = l;
            p->index = i;
            BRG_CHECK(brg_layer_param(ly, m, i, &p->info));
            const char *nm = p->info.name;
            int *role = strcmp(nm, "weight") == 0   ? &sl->weight
                        : strcmp(nm, "bias") == 0   ? &sl->bias
                        : strcmp(nm, "gamma") == 0  ? &sl->gamma
                        : strcmp(nm, "beta") == 0   ? &sl->beta
                        : strcmp(nm, "running_mean") == 0 ? &sl->rmean
                        : strcmp(nm, "running_var") == 0  ? &sl->rvar
                                                          : NULL;
            if (!role)
                return brg_error(BRG_ERR_INTERNAL, "layer '%s': unknown parameter '%s'", ly->name, nm);
            *role = s->n_params;
            s->n_params++;
        }
    }
    return BRG_OK;
}

/* Deferred BatchNorm: host accumulators per BatchNorm layer. */
static brg_status alloc_bn_accumulators(brg_stage *s)
{
    int64_t widest = 0;
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = layer_at(s, l);
        if (ly->desc.kind != BRG_LAYER_BATCHNORM) continue;
        const int64_t c = tensor_at(s, ly->output)->c;
        stage_layer *sl = &s->layers[l - s->first_layer];
        sl->bn_mean = brg_calloc((size_t)c, sizeof(double), "deferred BatchNorm statistics");
        sl->bn_m2 = brg_calloc((size_t)c, sizeof(double), "deferred BatchNorm statistics");
        sl->bn_snap = brg_calloc(2 * (size_t)c, sizeof(float), "deferred BatchNorm statistics");
        if (!sl->bn_mean || !sl->bn_m2 || !sl->bn_snap) return BRG_ERR_HOST_MEMORY;
        if (c > widest) widest = c;
    }
    if (widest > 0) {
        s->bn_host = brg_malloc(2 * (size_t)widest * sizeof(float), "deferred BatchNorm statistics");
        if (!s->bn_host) return BRG_ERR_HOST_MEMORY;
    }
    return BRG_OK;
}

/* Deferred BatchNorm, after a train forward of BatchNorm layer l on n
 * samples: merge the micro-batch's statistics (its saved mean and
 * 1/sqrt(var + eps), read back to the host) into the mini-batch's. */
static brg_status bn_accumulate(brg_stage *s, int slot_id, int l)
{
    if (brg_device_is_planning(s->dev)) return BRG_OK; /* no values to read */
    const slot *sl = &s->slots[slot_id];
    const brg_layer *ly = layer_at(s, l);
    stage_layer *pl = &s->layers[l - s->first_layer];
    const brg_tensor *saved = &sl->saved[2 * (l - s->first_layer)];
    const brg_model_tensor *t = tensor_at(s, ly->output);
    const int64_t c = t->c;
    float *mean = s->bn_host, *invstd = s->bn_host + c;
    BRG_CHECK(brg_device_copy_out(s->dev, mean, saved[0].data, (size_t)c * sizeof(float)));
    BRG_CHECK(brg_device_copy_out(s->dev, invstd, saved[1].data, (size_t)c * sizeof(float)));
    const double nb = (double)sl->n * (double)(t->h * t->w), na = pl->bn_count, total = na + nb;
    for (int64_t k = 0; k < c; k++) {
        const double inv = invstd[k];
        const double var = 1.0 / (inv * inv) - (double)ly->desc.epsilon;
        const double delta = (double)mean[k] - pl->bn_mean[k];
        pl->bn_mean[k] += delta * nb / total;
        pl->bn_m2[k] += var * nb + delta * delta * na * nb / total;
    }
    pl->bn_count = total;
    return BRG_OK;
}

/* Deferred BatchNorm, before layer l's first train forward of a
 * mini-batch: keep its running statistics (read between steps, so weights
 * loaded into the stage count). */
static brg_status bn_snapshot(brg_stage *s, int l)
{
    stage_layer *pl = &s->layers[l - s->first_layer];
    if (pl->bn_snapped || !pl->bn_snap || pl->rmean < 0 || pl->rvar < 0 || brg_device_is_planning(s->dev))
        return BRG_OK;
    const size_t c = (size_t)tensor_at(s, layer_at(s, l)->output)->c;
    BRG_CHECK(brg_device_copy_out(s->dev, pl->bn_snap, s->params[pl->rmean].value.data, c * sizeof(float)));
    BRG_CHECK(brg_device_copy_out(s->dev, pl->bn_snap + c, s->params[pl->rvar].value.data, c * sizeof(float)));
    pl->bn_snapped = 1;
    return BRG_OK;
}

/* Write layer pl's running mean and variance (c channels each) from
 * host[0..c) and host[c..2c). */
static brg_status bn_put_running(brg_stage *s, const stage_layer *pl, size_t c, const float *host)
{
    BRG_CHECK(brg_device_copy_in(s->dev, s->params[pl->rmean].value.data, host, c * sizeof(float)));
    return brg_device_copy_in(s->dev, s->params[pl->rvar].value.data, host + c, c * sizeof(float));
}

/* Deferred BatchNorm, in the optimizer step: move the running statistics
 * once with the mini-batch's, as BATCHNORM_FORWARD_TRAIN on the whole
 * batch would (unbiased variance). */
static brg_status bn_apply(brg_stage *s)
{
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = layer_at(s, l);
        stage_layer *pl = &s->layers[l - s->first_layer];
        if (ly->desc.kind != BRG_LAYER_BATCHNORM || !pl->bn_snapped || pl->bn_count < 2.0) continue;
        const int64_t c = tensor_at(s, ly->output)->c;
        float *rm = s->bn_host, *rv = s->bn_host + c;
        memcpy(s->bn_host, pl->bn_snap, 2 * (size_t)c * sizeof(float));
        const double mom = ly->desc.momentum, count = pl->bn_count;
        for (int64_t k = 0; k < c; k++) {
            rm[k] = (float)((1.0 - mom) * rm[k] + mom * pl->bn_mean[k]);
            rv[k] = (float)((1.0 - mom) * rv[k] + mom * (pl->bn_m2[k] / (count - 1.0)));
        }
        BRG_CHECK(bn_put_running(s, pl, (size_t)c, s->bn_host));
        pl->bn_snapped = 0; /* applied: nothing to put back */
    }
    return BRG_OK;
}

/* Forget what the mini-batch accumulated for deferred BatchNorm; if it was
 * abandoned, put the running statistics back as it found them. */
static brg_status bn_reset(brg_stage *s)
{
    brg_status ret = BRG_OK;
    for (int l = s->first_layer; l < s->end_layer; l++) {
        stage_layer *pl = &s->layers[l - s->first_layer];
        if (!pl->bn_mean) continue;
        const size_t c = (size_t)tensor_at(s, layer_at(s, l)->output)->c;
        if (pl->bn_snapped) {
            brg_status st = bn_put_running(s, pl, c, pl->bn_snap);
            if (ret == BRG_OK) ret = st;
            pl->bn_snapped = 0;
        }
        memset(pl->bn_mean, 0, c * sizeof(double));
        memset(pl->bn_m2, 0, c * sizeof(double));
        pl->bn_count = 0.0;
    }
    return ret;
}

brg_status brg_stage_create(const brg_model *model, brg_device *dev, const brg_stage_config *config,
                            brg_stage **out)
{
    brg_status ret = BRG_OK;
    brg_stage *s = NULL;
    float *host = NULL;
    size_t host_floats = 0;

    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_stage_create: out is NULL");
    *out = NULL;
    if (!model || !dev || !config)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_stage_create: model, device and config must be given");
    if (!brg_model_is_final(model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(model));
    const int nb = brg_model_block_count(model);
    if (config->first_block < 0 || config->last_block >= nb || config->first_block > config->last_block)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: blocks %d..%d are not a range inside 0..%d of model '%s'",
                         config->index, config->first_block, config->last_block, nb - 1, brg_model_name(model));
    if (config->max_batch < 1 || config->slots < 1 || config->slots > 4096)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: max_batch %d must be >= 1 and slots %d in 1..4096",
                         config->index, config->max_batch, config->slots);
    BRG_CHECK(check_optimizer(&config->optimizer));
    const brg_model_tensor *mo = brg_model_get_tensor(model, brg_model_output(model));
    if (config->last_block == nb - 1 && (mo->h != 1 || mo->w != 1))
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "model '%s': its output '%s' is [%lld, %lld, %lld]; training needs class logits "
                         "[classes, 1, 1] (per-pixel losses, as for segmentation, are not supported yet)",
                         brg_model_name(model), mo->name, (long long)mo->c, (long long)mo->h, (long long)mo->w);

    s = brg_calloc(1, sizeof *s, "a stage");
    if (!s) return BRG_ERR_HOST_MEMORY;
    s->model = model;
    s->dev = dev;
    s->cfg = *config;
    s->is_first = config->first_block == 0;
    s->is_last = config->last_block == nb - 1;
    s->classes = mo->c;
    s->n_tensors = brg_model_tensor_count(model);
    int first, count;
    brg_model_block_layers(model, config->first_block, &first, &count);
    s->first_layer = first;
    brg_model_block_layers(model, config->last_block, &first, &count);
    s->end_layer = first + count;
    const int n_layers = s->end_layer - s->first_layer;
    const size_t nt = (size_t)s->n_tensors;

    s->in_stage = brg_calloc(nt, 1, "stage tensor flags");
    s->is_input = brg_calloc(nt, 1, "stage tensor flags");
    s->is_output = brg_calloc(nt, 1, "stage tensor flags");
    s->fwd_uses = brg_calloc(nt, sizeof(int), "stage tensor counts");
    s->bwd_uses = brg_calloc(nt, sizeof(int), "stage tensor counts");
    s->layers = brg_calloc((size_t)n_layers, sizeof *s->layers, "stage layers");
    s->n_slabs = 3 * (config->last_block - config->first_block + 1);
    s->slabs = brg_calloc((size_t)s->n_slabs, sizeof *s->slabs, "stage slabs");
    s->slab_bytes = brg_calloc((size_t)s->n_slabs, sizeof *s->slab_bytes, "stage slabs");
    s->slots = brg_calloc((size_t)config->slots, sizeof *s->slots, "stage slots");
    if (!s->in_stage || !s->is_input || !s->is_output || !s->fwd_uses || !s->bwd_uses || !s->layers || !s->slabs ||
        !s->slab_bytes || !s->slots) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    for (int i = 0; i < config->slots; i++) {
        slot *sl = &s->slots[i];
        sl->act = brg_calloc(nt, sizeof *sl->act, "slot tensors");
        sl->grad = brg_calloc(nt, sizeof *sl->grad, "slot tensors");
        sl->fwd_left = brg_calloc(nt, sizeof(int), "slot counters");
        sl->bwd_left = brg_calloc(nt, sizeof(int), "slot counters");
        sl->saved = brg_calloc((size_t)(2 * n_layers), sizeof *sl->saved, "slot stash");
        sl->wdy = brg_calloc((size_t)n_layers, sizeof *sl->wdy, "slot stash");
        if (!sl->act || !sl->grad || !sl->fwd_left || !sl->bwd_left || !sl->saved || !sl->wdy) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
    }
    if (s->is_last) {
        s->host_probs = brg_malloc((size_t)config->max_batch * (size_t)s->classes * sizeof(float), "probabilities");
        s->host_labels = brg_malloc((size_t)config->max_batch * sizeof(int32_t), "labels");
        if (!s->host_probs || !s->host_labels) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
    }
    BRG_CHECK_GOTO(analyse(s), ret, fail);
    BRG_CHECK_GOTO(list_params(s), ret, fail);
    if (config->deferred_batchnorm) BRG_CHECK_GOTO(alloc_bn_accumulators(s), ret, fail);
    for (int b = config->first_block; b <= config->last_block; b++)
        BRG_CHECK_GOTO(make_block_params(s, b, &host, &host_floats), ret, fail);
    *out = s;
    s = NULL;
exit:
    free(host);
    return ret;
fail:
    brg_stage_destroy(s);
    goto exit;
}

void brg_stage_destroy(brg_stage *s)
{
    if (!s) return;
    if (s->slots) {
        for (int i = 0; i < s->cfg.slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->act && sl->grad && sl->saved && sl->wdy) brg_stage_discard(s, i);
            free(sl->act);
            free(sl->grad);
            free(sl->fwd_left);
            free(sl->bwd_left);
            free(sl->saved);
            free(sl->wdy);
        }
    }
    if (s->slabs)
        for (int i = 0; i < s->n_slabs; i++) brg_device_free(s->dev, s->slabs[i]);
    free(s->slots);
    if (s->layers)
        for (int l = 0; l < s->end_layer - s->first_layer; l++) {
            free(s->layers[l].bn_mean);
            free(s->layers[l].bn_m2);
            free(s->layers[l].bn_snap);
        }
    free(s->bn_host);
    free(s->slabs);
    free(s->slab_bytes);
    free(s->params);
    free(s->layers);
    free(s->in_stage);
    free(s->is_input);
    free(s->is_output);
    free(s->fwd_uses);
    free(s->bwd_uses);
    free(s->inputs);
    free(s->outputs);
    free(s->host_probs);
    free(s->host_labels);
    free(s);
}

/* ---- reading ---- */

brg_device *brg_stage_device(const brg_stage *s) { return s->dev; }
const brg_model *brg_stage_model(const brg_stage *s) { return s->model; }
const brg_stage_config *brg_stage_get_config(const brg_stage *s) { return &s->cfg; }
int brg_stage_is_first(const brg_stage *s) { return s->is_first; }
int brg_stage_is_last(const brg_stage *s) { return s->is_last; }
int brg_stage_input_count(const brg_stage *s) { return s->n_inputs; }
int brg_stage_input_tensor(const brg_stage *s, int i) { return i >= 0 && i < s->n_inputs ? s->inputs[i] : -1; }
int brg_stage_output_count(const brg_stage *s) { return s->n_outputs; }
int brg_stage_output_tensor(const brg_stage *s, int i) { return i >= 0 && i < s->n_outputs ? s->outputs[i] : -1; }
size_t brg_stage_persistent_bytes(const brg_stage *s) { return s->persistent; }
size_t brg_stage_bytes_in_use(const brg_stage *s) { return s->persistent + s->live; }

void brg_stage_persistent_breakdown(const brg_stage *s, size_t *weights, size_t *grads, size_t *optimizer)
{
    if (weights) *weights = s->persistent_kind[0];
    if (grads) *grads = s->persistent_kind[1];
    if (optimizer) *optimizer = s->persistent_kind[2];
}

static brg_status find_param(const brg_stage *s, int layer, int index, const stage_param **out)
{
    if (layer < s->first_layer || layer >= s->end_layer)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d holds layers %d..%d, not %d", s->cfg.index,
                         s->first_layer, s->end_layer - 1, layer);
    const stage_layer *sl = &s->layers[layer - s->first_layer];
    if (index < 0 || index >= sl->n_params)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' has %d parameters, not %d", layer_at(s, layer)->name,
                         sl->n_params, index + 1);
    *out = &s->params[sl->first_param + index];
    return BRG_OK;
}

brg_status brg_stage_param(const brg_stage *s, int layer, int index, brg_tensor *out)
{
    const stage_param *p;
    BRG_CHECK(find_param(s, layer, index, &p));
    *out = p->value;
    return BRG_OK;
}

brg_status brg_stage_grad(const brg_stage *s, int layer, int index, brg_tensor *out)
{
    const stage_param *p;
    BRG_CHECK(find_param(s, layer, index, &p));
    if (!p->info.trainable)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "'%s' of layer '%s' is not trainable and has no gradient",
                         p->info.name, layer_at(s, layer)->name);
    *out = p->grad;
    return BRG_OK;
}

brg_status brg_stage_optimizer_state(const brg_stage *s, int layer, int index, int which, brg_tensor *out)
{
    const stage_param *p;
    BRG_CHECK(find_param(s, layer, index, &p));
    int n = p->info.trainable ? brg_optimizer_state_count(&s->cfg.optimizer) : 0;
    if (which < 0 || which >= n)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "'%s' of layer '%s' has %d optimizer tensors, not %d",
                         p->info.name, layer_at(s, layer)->name, n, which + 1);
    *out = p->state[which];
    return BRG_OK;
}

/* ---- micro-batch buffers ---- */

/* Start or continue filling slot with n samples. */
static brg_status fill_begin(brg_stage *s, int slot_id, int n, const char *what)
{
    BRG_CHECK(check_slot(s, slot_id, what));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_EMPTY && sl->state != SLOT_FILLING)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: %s: micro-batch slot %d is still in use (run its backward or discard it)",
                         s->cfg.index, what, slot_id);
    if (n < 1 || n > s->cfg.max_batch)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: %s: %d samples, expected 1..%d (the stage's max batch)",
                         s->cfg.index, what, n, s->cfg.max_batch);
    if (sl->state == SLOT_FILLING && sl->n != n)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: %s: slot %d holds a micro-batch of %d samples, not %d",
                         s->cfg.index, what, slot_id, sl->n, n);
    sl->state = SLOT_FILLING;
    sl->n = n;
    return BRG_OK;
}

brg_status brg_stage_input(brg_stage *s, int slot_id, int i, int n, brg_tensor *out)
{
    if (i < 0 || i >= s->n_inputs)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d has %d inputs, not %d", s->cfg.index, s->n_inputs, i + 1);
    BRG_CHECK(fill_begin(s, slot_id, n, "input"));
    slot *sl = &s->slots[slot_id];
    int t = s->inputs[i];
    if (!sl->act[t].data) {
        brg_status st = alloc_tensor(s, slot_id, t, n, &sl->act[t], "input");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: input '%s' of micro-batch slot %d", s->cfg.index,
                                     tensor_at(s, t)->name, slot_id);
    }
    *out = sl->act[t];
    return BRG_OK;
}

brg_status brg_stage_labels(brg_stage *s, int slot_id, int n, brg_tensor *out)
{
    if (!s->is_last)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d is not the last stage; only the last takes labels",
                         s->cfg.index);
    BRG_CHECK(fill_begin(s, slot_id, n, "labels"));
    slot *sl = &s->slots[slot_id];
    if (!sl->labels.data) {
        const int64_t shape[1] = {n};
        brg_status st = slot_alloc(s, slot_id, &sl->labels, BRG_I32, 1, shape, "loss", "labels", "");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: labels of micro-batch slot %d", s->cfg.index, slot_id);
    }
    *out = sl->labels;
    return BRG_OK;
}

/* ---- forward ---- */

/* The value of stage parameter `index`, or NULL for an absent one (-1). */
static const brg_tensor *opt_param(const brg_stage *s, int index)
{
    return index >= 0 ? &s->params[index].value : NULL;
}

/* Seed of layer l's dropout mask in optimizer step `step`. The offset of a
 * micro-batch is its first sample's position in the mini-batch times the
 * elements per sample, so the mask of a sample does not depend on how the
 * mini-batch is cut into micro-batches. */
static uint64_t dropout_seed(const brg_stage *s, int64_t step, int l)
{
    return brg_splitmix64(brg_splitmix64(s->cfg.seed ^ 0x64726f706f7574ULL) ^ brg_splitmix64((uint64_t)step) ^
                          ((uint64_t)l * 0x9e3779b97f4a7c15ULL));
}

static void fill_pool(brg_op *op, const brg_layer_desc *d)
{
    op->p.pool.kernel_h = d->kernel_h;
    op->p.pool.kernel_w = d->kernel_w;
    op->p.pool.stride_h = d->stride_h;
    op->p.pool.stride_w = d->stride_w;
    op->p.pool.pad_h = d->pad_h;
    op->p.pool.pad_w = d->pad_w;
    op->p.pool.count_include_pad = d->count_include_pad;
}

static brg_status forward_layer(brg_stage *s, int slot_id, int l)
{
    slot *sl = &s->slots[slot_id];
    const brg_layer *ly = layer_at(s, l);
    const brg_layer_desc *d = &ly->desc;
    const stage_layer *pl = &s->layers[l - s->first_layer];
    const int train = sl->pass.mode == BRG_PASS_TRAIN;
    const int n = sl->n;
    brg_tensor *x = &sl->act[ly->inputs[0]];
    brg_tensor *y = &sl->act[ly->output];
    for (int k = 0; k < ly->n_inputs; k++)
        if (!sl->act[ly->inputs[k]].data)
            return brg_error(BRG_ERR_INTERNAL, "input '%s' is not live", tensor_at(s, ly->inputs[k])->name);
    BRG_CHECK(alloc_tensor(s, slot_id, ly->output, n, y, "activations"));

    brg_op op;
    memset(&op, 0, sizeof op);
    brg_tensor yview;
    op.n_in = 1;
    op.in[0] = x;
    op.n_out = 1;
    op.out[0] = y;
    switch (d->kind) {
    case BRG_LAYER_CONV2D:
        op.kind = BRG_OP_CONV2D_FORWARD;
        op.p.conv.stride_h = d->stride_h;
        op.p.conv.stride_w = d->stride_w;
        op.p.conv.pad_h = d->pad_h;
        op.p.conv.pad_w = d->pad_w;
        op.in[1] = opt_param(s, pl->weight);
        op.in[2] = opt_param(s, pl->bias);
        op.n_in = pl->bias >= 0 ? 3 : 2;
        break;
    case BRG_LAYER_LINEAR: {
        const int64_t shape[2] = {n, tensor_at(s, ly->output)->c};
        BRG_CHECK(brg_tensor_reshape(y, 2, shape, &yview));
        op.kind = BRG_OP_LINEAR_FORWARD;
        op.in[1] = opt_param(s, pl->weight);
        op.in[2] = opt_param(s, pl->bias);
        op.n_in = pl->bias >= 0 ? 3 : 2;
        op.out[0] = &yview;
        break;
    }
    case BRG_LAYER_BATCHNORM:
        op.p.bn.epsilon = d->epsilon;
        /* A replay must not move the running statistics a second time,
         * and deferred BatchNorm moves them in the optimizer step: with
         * momentum 0 they are rewritten with their own values. */
        op.p.bn.momentum = sl->replaying || s->cfg.deferred_batchnorm ? 0.0f : d->momentum;
        op.in[1] = opt_param(s, pl->gamma);
        op.in[2] = opt_param(s, pl->beta);
        if (train) {
            brg_tensor *saved = &sl->saved[2 * (l - s->first_layer)];
            const int64_t c = tensor_at(s, ly->output)->c;
            const char *bname = brg_model_block_name(s->model, ly->block);
            BRG_CHECK(slot_alloc(s, slot_id, &saved[0], BRG_F32, 1, &c, bname, "stash mean", ly->name));
            BRG_CHECK(slot_alloc(s, slot_id, &saved[1], BRG_F32, 1, &c, bname, "stash invstd", ly->name));
            op.kind = BRG_OP_BATCHNORM_FORWARD_TRAIN;
            op.n_in = 3;
            op.n_out = 5;
            op.out[1] = opt_param(s, pl->rmean);
            op.out[2] = opt_param(s, pl->rvar);
            op.out[3] = &saved[0];
            op.out[4] = &saved[1];
        } else {
            op.kind = BRG_OP_BATCHNORM_FORWARD_INFER;
            op.n_in = 5;
            op.in[3] = opt_param(s, pl->rmean);
            op.in[4] = opt_param(s, pl->rvar);
        }
        break;
    case BRG_LAYER_RELU: op.kind = BRG_OP_RELU_FORWARD; break;
    case BRG_LAYER_MAXPOOL:
        op.kind = BRG_OP_MAXPOOL_FORWARD;
        fill_pool(&op, d);
        break;
    case BRG_LAYER_AVGPOOL:
        op.kind = BRG_OP_AVGPOOL_FORWARD;
        fill_pool(&op, d);
        break;
    case BRG_LAYER_GLOBAL_AVGPOOL: op.kind = BRG_OP_GLOBAL_AVGPOOL_FORWARD; break;
    case BRG_LAYER_CONCAT:
        op.kind = BRG_OP_CONCAT_FORWARD;
        op.n_in = ly->n_inputs;
        for (int k = 0; k < ly->n_inputs; k++) op.in[k] = &sl->act[ly->inputs[k]];
        break;
    case BRG_LAYER_ADD:
        op.kind = BRG_OP_ADD_FORWARD;
        op.n_in = 2;
        op.in[1] = &sl->act[ly->inputs[1]];
        break;
    case BRG_LAYER_DROPOUT: {
        const brg_model_tensor *xt = tensor_at(s, ly->inputs[0]);
        op.kind = BRG_OP_DROPOUT_FORWARD;
        op.p.dropout.rate = train ? d->rate : 0.0f; /* rate 0 keeps everything: a copy */
        op.p.dropout.seed = dropout_seed(s, sl->pass.step, l);
        op.p.dropout.offset = (uint64_t)sl->pass.sample_offset * (uint64_t)(xt->c * xt->h * xt->w);
        break;
    }
    case BRG_LAYER_UPSAMPLE:
        op.kind = BRG_OP_UPSAMPLE_FORWARD;
        op.p.upsample.factor = d->factor;
        break;
    default: return brg_error(BRG_ERR_UNSUPPORTED, "layer kind %s has no forward", brg_layer_kind_name(d->kind));
    }
    if (d->kind == BRG_LAYER_BATCHNORM && train && s->cfg.deferred_batchnorm) BRG_CHECK(bn_snapshot(s, l));
    BRG_CHECK(brg_device_run(s->dev, &op));
    /* Once per micro-batch: a replay computes the same statistics again. */
    if (d->kind == BRG_LAYER_BATCHNORM && train && s->cfg.deferred_batchnorm && !sl->replaying)
        BRG_CHECK(bn_accumulate(s, slot_id, l));
    return BRG_OK;
}

/* The loss on the last stage: softmax cross-entropy of the model output
 * against the labels; counts the correct predictions on the host. */
static brg_status forward_loss(brg_stage *s, int slot_id, brg_stage_result *result)
{
    slot *sl = &s->slots[slot_id];
    const int n = sl->n;
    const int64_t k = s->classes;
    const int out = brg_model_output(s->model);
    brg_status ret = BRG_OK;
    brg_tensor loss = {0};
    brg_tensor logits;
    const int64_t shape[2] = {n, k};
    const int64_t one = 1;
    BRG_CHECK(brg_tensor_reshape(&sl->act[out], 2, shape, &logits));
    BRG_CHECK(slot_alloc(s, slot_id, &sl->probs, BRG_F32, 2, shape, "loss", "stash probs", ""));
    BRG_CHECK(slot_alloc(s, slot_id, &loss, BRG_F32, 1, &one, "loss", "value", ""));
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_SOFTMAX_XENT_FORWARD;
    op.n_in = 2;
    op.in[0] = &logits;
    op.in[1] = &sl->labels;
    op.n_out = 2;
    op.out[0] = &loss;
    op.out[1] = &sl->probs;
    float value = 0.0f;
    BRG_CHECK_GOTO(brg_device_run(s->dev, &op), ret, exit);
    BRG_CHECK_GOTO(brg_device_copy_out(s->dev, &value, loss.data, sizeof value), ret, exit);
    if (result) {
        BRG_CHECK_GOTO(brg_device_copy_out(s->dev, s->host_probs, sl->probs.data, (size_t)(n * k) * sizeof(float)),
                       ret, exit);
        BRG_CHECK_GOTO(brg_device_copy_out(s->dev, s->host_labels, sl->labels.data, (size_t)n * sizeof(int32_t)),
                       ret, exit);
        int64_t correct = 0;
        for (int i = 0; i < n; i++) {
            const float *p = s->host_probs + (int64_t)i * k;
            int64_t best = 0;
            for (int64_t j = 1; j < k; j++)
                if (p[j] > p[best]) best = j;
            correct += best == s->host_labels[i];
        }
        result->loss = value;
        result->correct = correct;
    }
exit:
    slot_free(s, &loss);
    return ret;
}

/* A failure of layer ly in `what` ("forward", ...) of a slot, with the
 * stage, layer and block named in front of the message. */
static brg_status layer_failed(const brg_stage *s, brg_status st, const brg_layer *ly, const char *what, int slot_id)
{
    return brg_error_context(st, "stage %d, layer '%s' (block '%s'), %s of micro-batch slot %d", s->cfg.index,
                             ly->name, brg_model_block_name(s->model, ly->block), what, slot_id);
}

/* Run the stage's layers on slot, whose counters are set, freeing each
 * input after its last reader. Without the stash (sl->stash == 0) nothing
 * has backward readers and BatchNorm's saved statistics go at once. On
 * failure the slot is left as it is for the caller to discard. */
static brg_status forward_layers(brg_stage *s, int slot_id)
{
    slot *sl = &s->slots[slot_id];
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = layer_at(s, l);
        brg_status st = forward_layer(s, slot_id, l);
        if (st != BRG_OK)
            return layer_failed(s, st, ly, sl->replaying ? "recomputing the forward" : "forward", slot_id);
        if (!sl->stash && ly->desc.kind == BRG_LAYER_BATCHNORM) {
            slot_free(s, &sl->saved[2 * (l - s->first_layer)]);
            slot_free(s, &sl->saved[2 * (l - s->first_layer) + 1]);
        }
        for (int k = 0; k < ly->n_inputs; k++) {
            sl->fwd_left[ly->inputs[k]]--;
            maybe_free_act(s, sl, ly->inputs[k]);
        }
        maybe_free_act(s, sl, ly->output);
    }
    return BRG_OK;
}

brg_status brg_stage_forward(brg_stage *s, int slot_id, const brg_pass *pass, brg_stage_result *result)
{
    BRG_CHECK(check_slot(s, slot_id, "forward"));
    slot *sl = &s->slots[slot_id];
    if (!pass) return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward without a pass description", s->cfg.index);
    if (sl->state != SLOT_FILLING)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward of micro-batch slot %d, which %s", s->cfg.index,
                         slot_id, sl->state == SLOT_EMPTY ? "has no inputs yet" : "has been forwarded already");
    for (int i = 0; i < s->n_inputs; i++)
        if (!sl->act[s->inputs[i]].data)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward of micro-batch slot %d without input '%s'",
                             s->cfg.index, slot_id, tensor_at(s, s->inputs[i])->name);
    if (s->is_last && !sl->labels.data)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward of micro-batch slot %d without labels",
                         s->cfg.index, slot_id);
    sl->pass = *pass;
    sl->outputs_released = 0;
    const int train = pass->mode == BRG_PASS_TRAIN;
    /* With recomputation the train forward keeps only the inputs (and the
     * loss's probabilities and labels); the backward replays the rest. */
    sl->needs_replay = train && s->cfg.recompute;
    sl->hold_inputs = sl->needs_replay;
    sl->stash = train && !sl->needs_replay;
    sl->replaying = 0;
    for (int t = 0; t < s->n_tensors; t++) {
        sl->fwd_left[t] = s->fwd_uses[t];
        sl->bwd_left[t] = sl->stash ? s->bwd_uses[t] : 0;
    }
    brg_status ret = forward_layers(s, slot_id);
    if (ret != BRG_OK) goto fail;
    if (s->is_last) {
        const int out = brg_model_output(s->model);
        ret = forward_loss(s, slot_id, result);
        if (ret != BRG_OK) {
            ret = brg_error_context(ret, "stage %d, loss, forward of micro-batch slot %d", s->cfg.index, slot_id);
            goto fail;
        }
        sl->fwd_left[out]--;
        maybe_free_act(s, sl, out);
        if (!train) {
            slot_free(s, &sl->probs);
            slot_free(s, &sl->labels);
        }
    }
    sl->state = SLOT_FORWARD;
    if (!train && s->n_outputs == 0) brg_stage_discard(s, slot_id); /* nothing left to hand over */
    return BRG_OK;
fail:
    brg_stage_discard(s, slot_id);
    return ret;
}

/* Recomputation: rebuild the stash of a slot whose forward kept only its
 * inputs, by running the layers again in train mode with the same pass (so
 * the same dropout masks) and BatchNorm momentum 0. The loss is not run
 * again: its probabilities and labels were kept. The outputs are released
 * by now, so they are freed like any activation. */
static brg_status replay_forward(brg_stage *s, int slot_id)
{
    slot *sl = &s->slots[slot_id];
    sl->hold_inputs = 0;
    sl->stash = 1;
    sl->replaying = 1;
    for (int t = 0; t < s->n_tensors; t++) {
        sl->fwd_left[t] = s->fwd_uses[t];
        sl->bwd_left[t] = s->bwd_uses[t];
    }
    if (s->is_last) sl->fwd_left[brg_model_output(s->model)]--; /* the loss does not run again */
    brg_status st = forward_layers(s, slot_id);
    /* An input that only passes through the stage has no reader here. */
    for (int i = 0; i < s->n_inputs && st == BRG_OK; i++) maybe_free_act(s, sl, s->inputs[i]);
    sl->replaying = 0;
    sl->needs_replay = 0;
    return st;
}

brg_status brg_stage_output(brg_stage *s, int slot_id, int i, brg_tensor *out)
{
    BRG_CHECK(check_slot(s, slot_id, "output"));
    if (i < 0 || i >= s->n_outputs)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d has %d outputs, not %d", s->cfg.index, s->n_outputs,
                         i + 1);
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_FORWARD || sl->outputs_released || !sl->act[s->outputs[i]].data)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: micro-batch slot %d has no outputs to read (forward it "
                         "first; outputs are gone once released)", s->cfg.index, slot_id);
    *out = sl->act[s->outputs[i]];
    return BRG_OK;
}

brg_status brg_stage_release_outputs(brg_stage *s, int slot_id)
{
    BRG_CHECK(check_slot(s, slot_id, "release outputs"));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_FORWARD)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: micro-batch slot %d has not been forwarded",
                         s->cfg.index, slot_id);
    sl->outputs_released = 1;
    for (int i = 0; i < s->n_outputs; i++) maybe_free_act(s, sl, s->outputs[i]);
    if (sl->pass.mode != BRG_PASS_TRAIN) brg_stage_discard(s, slot_id);
    return BRG_OK;
}

/* ---- backward ---- */

brg_status brg_stage_output_grad(brg_stage *s, int slot_id, int i, brg_tensor *out)
{
    BRG_CHECK(check_slot(s, slot_id, "output gradient"));
    if (i < 0 || i >= s->n_outputs)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d has %d outputs, not %d", s->cfg.index, s->n_outputs,
                         i + 1);
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_FORWARD || sl->pass.mode != BRG_PASS_TRAIN)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: micro-batch slot %d takes output gradients only after a train-mode forward",
                         s->cfg.index, slot_id);
    int t = s->outputs[i];
    if (!sl->grad[t].data) {
        brg_status st = alloc_tensor(s, slot_id, t, sl->n, &sl->grad[t], "gradients");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: gradient of output '%s' of micro-batch slot %d", s->cfg.index,
                                     tensor_at(s, t)->name, slot_id);
    }
    *out = sl->grad[t];
    return BRG_OK;
}

/* Make the gradient buffers of tensors ids[0..k) ready for one op that writes
 * them all and tell whether it must accumulate. Missing buffers are
 * allocated; when any already holds a contribution, a tensor appears twice,
 * or force is set (the op also writes parameter gradients, which always
 * accumulate), the new ones are zeroed and the op accumulates. */
static brg_status prepare_grads(brg_stage *s, int slot_id, const int *ids, int k, int force, int *accumulate)
{
    slot *sl = &s->slots[slot_id];
    int acc = force;
    for (int i = 0; i < k; i++) {
        if (sl->grad[ids[i]].data) acc = 1;
        for (int j = 0; j < i; j++) acc |= ids[j] == ids[i];
    }
    for (int i = 0; i < k; i++) {
        brg_tensor *g = &sl->grad[ids[i]];
        if (g->data) continue;
        BRG_CHECK(alloc_tensor(s, slot_id, ids[i], sl->n, g, "gradients"));
        if (acc) BRG_CHECK(brg_device_memset_zero(s->dev, g->data, brg_tensor_bytes(g)));
    }
    *accumulate = acc;
    return BRG_OK;
}

/* Whether the gradient of tensor t is wanted: all but the model input. */
static int wants_grad(const brg_stage *s, int t) { return !(s->is_first && t == brg_model_input(s->model)); }

static brg_status need_live(const brg_stage *s, const brg_tensor *t, int id)
{
    if (!t->data) return brg_error(BRG_ERR_INTERNAL, "stashed tensor '%s' is not live", tensor_at(s, id)->name);
    return BRG_OK;
}

/* The weight (and bias) gradient of conv2d or linear layer l from its input
 * x and its output gradient dy (for linear, dy viewed as [n, features]),
 * accumulated into the parameter gradients. */
static brg_status weight_grad_op(brg_stage *s, int l, const brg_tensor *x, const brg_tensor *dy)
{
    const brg_layer_desc *d = &layer_at(s, l)->desc;
    const stage_layer *pl = &s->layers[l - s->first_layer];
    brg_op op;
    memset(&op, 0, sizeof op);
    if (d->kind == BRG_LAYER_CONV2D) {
        op.kind = BRG_OP_CONV2D_BACKWARD_FILTER;
        op.p.conv.stride_h = d->stride_h;
        op.p.conv.stride_w = d->stride_w;
        op.p.conv.pad_h = d->pad_h;
        op.p.conv.pad_w = d->pad_w;
    } else {
        op.kind = BRG_OP_LINEAR_BACKWARD_WEIGHT;
    }
    op.n_in = 2;
    op.in[0] = x;
    op.in[1] = dy;
    op.out[0] = &s->params[pl->weight].grad;
    op.out[1] = pl->bias >= 0 ? &s->params[pl->bias].grad : NULL;
    op.n_out = pl->bias >= 0 ? 2 : 1;
    op.accumulate = 1;
    return brg_device_run(s->dev, &op);
}

/* The backward of layer l. With split, a conv2d or linear layer computes
 * only its input gradient and moves dy to sl->wdy for the weight part. */
static brg_status backward_layer(brg_stage *s, int slot_id, int l, int split)
{
    slot *sl = &s->slots[slot_id];
    const brg_layer *ly = layer_at(s, l);
    const brg_layer_desc *d = &ly->desc;
    const stage_layer *pl = &s->layers[l - s->first_layer];
    const int n = sl->n;
    const int xi = ly->inputs[0];
    brg_tensor *dy = &sl->grad[ly->output];
    if (!dy->data) return BRG_OK; /* no gradient reached this layer: it contributes nothing */
    int acc = 0;
    brg_op op;
    memset(&op, 0, sizeof op);
    op.n_in = 1;
    op.in[0] = dy;
    op.n_out = 1;

    switch (d->kind) {
    case BRG_LAYER_CONV2D:
    case BRG_LAYER_LINEAR: {
        const int conv = d->kind == BRG_LAYER_CONV2D;
        brg_tensor dyv = *dy;
        if (!conv) {
            const int64_t shape[2] = {n, tensor_at(s, ly->output)->c};
            BRG_CHECK(brg_tensor_reshape(dy, 2, shape, &dyv));
        }
        BRG_CHECK(need_live(s, &sl->act[xi], xi));
        if (conv) {
            op.p.conv.stride_h = d->stride_h;
            op.p.conv.stride_w = d->stride_w;
            op.p.conv.pad_h = d->pad_h;
            op.p.conv.pad_w = d->pad_w;
        }
        if (!split) BRG_CHECK(weight_grad_op(s, l, &sl->act[xi], &dyv));
        if (wants_grad(s, xi)) {
            BRG_CHECK(prepare_grads(s, slot_id, &xi, 1, 0, &acc));
            op.kind = conv ? BRG_OP_CONV2D_BACKWARD_DATA : BRG_OP_LINEAR_BACKWARD_DATA;
            op.n_in = 2;
            op.in[0] = &dyv;
            op.in[1] = &s->params[pl->weight].value;
            op.out[0] = &sl->grad[xi];
            op.accumulate = acc;
            BRG_CHECK(brg_device_run(s->dev, &op));
        }
        if (split) {
            /* dy is complete: the weight part takes it over (its bytes stay live). */
            sl->wdy[l - s->first_layer] = *dy;
            memset(dy, 0, sizeof *dy);
        }
        return BRG_OK;
    }
    case BRG_LAYER_BATCHNORM: {
        const int has_params = pl->gamma >= 0 || pl->beta >= 0;
        BRG_CHECK(need_live(s, &sl->act[xi], xi));
        BRG_CHECK(prepare_grads(s, slot_id, &xi, 1, has_params, &acc));
        brg_tensor *saved = &sl->saved[2 * (l - s->first_layer)];
        op.kind = BRG_OP_BATCHNORM_BACKWARD;
        op.p.bn.epsilon = d->epsilon;
        op.p.bn.momentum = d->momentum;
        op.n_in = 5;
        op.in[0] = &sl->act[xi];
        op.in[1] = dy;
        op.in[2] = opt_param(s, pl->gamma);
        op.in[3] = &saved[0];
        op.in[4] = &saved[1];
        op.n_out = 3;
        op.out[0] = &sl->grad[xi];
        op.out[1] = pl->gamma >= 0 ? &s->params[pl->gamma].grad : NULL;
        op.out[2] = pl->beta >= 0 ? &s->params[pl->beta].grad : NULL;
        op.accumulate = acc;
        return brg_device_run(s->dev, &op);
    }
    case BRG_LAYER_CONCAT:
    case BRG_LAYER_ADD:
        BRG_CHECK(prepare_grads(s, slot_id, ly->inputs, ly->n_inputs, 0, &acc));
        op.kind = d->kind == BRG_LAYER_CONCAT ? BRG_OP_CONCAT_BACKWARD : BRG_OP_ADD_BACKWARD;
        op.n_out = ly->n_inputs;
        for (int k = 0; k < ly->n_inputs; k++) op.out[k] = &sl->grad[ly->inputs[k]];
        op.accumulate = acc;
        return brg_device_run(s->dev, &op);
    default: break;
    }

    /* One input, one output. */
    BRG_CHECK(prepare_grads(s, slot_id, &xi, 1, 0, &acc));
    op.out[0] = &sl->grad[xi];
    op.accumulate = acc;
    switch (d->kind) {
    case BRG_LAYER_RELU:
        BRG_CHECK(need_live(s, &sl->act[ly->output], ly->output));
        op.kind = BRG_OP_RELU_BACKWARD;
        op.n_in = 2;
        op.in[0] = &sl->act[ly->output];
        op.in[1] = dy;
        break;
    case BRG_LAYER_MAXPOOL:
        BRG_CHECK(need_live(s, &sl->act[xi], xi));
        BRG_CHECK(need_live(s, &sl->act[ly->output], ly->output));
        op.kind = BRG_OP_MAXPOOL_BACKWARD;
        fill_pool(&op, d);
        op.n_in = 3;
        op.in[0] = &sl->act[xi];
        op.in[1] = &sl->act[ly->output];
        op.in[2] = dy;
        break;
    case BRG_LAYER_AVGPOOL:
        op.kind = BRG_OP_AVGPOOL_BACKWARD;
        fill_pool(&op, d);
        break;
    case BRG_LAYER_GLOBAL_AVGPOOL: op.kind = BRG_OP_GLOBAL_AVGPOOL_BACKWARD; break;
    case BRG_LAYER_DROPOUT: {
        const brg_model_tensor *xt = tensor_at(s, xi);
        op.kind = BRG_OP_DROPOUT_BACKWARD;
        op.p.dropout.rate = d->rate;
        op.p.dropout.seed = dropout_seed(s, sl->pass.step, l);
        op.p.dropout.offset = (uint64_t)sl->pass.sample_offset * (uint64_t)(xt->c * xt->h * xt->w);
        break;
    }
    case BRG_LAYER_UPSAMPLE:
        op.kind = BRG_OP_UPSAMPLE_BACKWARD;
        op.p.upsample.factor = d->factor;
        break;
    default: return brg_error(BRG_ERR_UNSUPPORTED, "layer kind %s has no backward", brg_layer_kind_name(d->kind));
    }
    return brg_device_run(s->dev, &op);
}

/* The last stage's first backward op: dlogits from the stashed probs. */
static brg_status backward_loss(brg_stage *s, int slot_id, float loss_scale)
{
    slot *sl = &s->slots[slot_id];
    const int out = brg_model_output(s->model);
    const int64_t shape[2] = {sl->n, s->classes};
    BRG_CHECK(need_live(s, &sl->probs, out));
    BRG_CHECK(alloc_tensor(s, slot_id, out, sl->n, &sl->grad[out], "gradients"));
    brg_tensor dl;
    BRG_CHECK(brg_tensor_reshape(&sl->grad[out], 2, shape, &dl));
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_SOFTMAX_XENT_BACKWARD;
    op.p.xent.grad_scale = loss_scale;
    op.n_in = 2;
    op.in[0] = &sl->probs;
    op.in[1] = &sl->labels;
    op.n_out = 1;
    op.out[0] = &dl;
    BRG_CHECK(brg_device_run(s->dev, &op));
    slot_free(s, &sl->probs);
    slot_free(s, &sl->labels);
    return BRG_OK;
}

/* The backward of a slot, whole (split = 0) or its input part (split = 1). */
static brg_status backward(brg_stage *s, int slot_id, float loss_scale, int split)
{
    const char *what = split ? "input-gradient backward" : "backward";
    BRG_CHECK(check_slot(s, slot_id, what));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_FORWARD || sl->pass.mode != BRG_PASS_TRAIN)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: %s of micro-batch slot %d, which has not been forwarded in train mode",
                         s->cfg.index, what, slot_id);
    brg_status ret = BRG_OK;
    if (!sl->outputs_released) {
        sl->outputs_released = 1;
        for (int i = 0; i < s->n_outputs; i++) maybe_free_act(s, sl, s->outputs[i]);
    }
    if (sl->needs_replay) {
        ret = replay_forward(s, slot_id);
        if (ret != BRG_OK) goto fail;
    }
    if (s->is_last) {
        ret = backward_loss(s, slot_id, loss_scale);
        if (ret != BRG_OK) {
            ret = brg_error_context(ret, "stage %d, loss, %s of micro-batch slot %d", s->cfg.index, what, slot_id);
            goto fail;
        }
    }
    for (int l = s->end_layer - 1; l >= s->first_layer; l--) {
        const brg_layer *ly = layer_at(s, l);
        ret = backward_layer(s, slot_id, l, split);
        if (ret != BRG_OK) {
            ret = layer_failed(s, ret, ly, what, slot_id);
            goto fail;
        }
        /* The layer's output gradient is complete and now consumed (or
         * moved to the weight part); its stash is read for the last time,
         * except a conv2d or linear input that the weight part still reads. */
        slot_free(s, &sl->grad[ly->output]);
        if (brg_backward_reads_input(ly->desc.kind) && !(split && brg_backward_has_weight_part(ly->desc.kind))) {
            sl->bwd_left[ly->inputs[0]]--;
            maybe_free_act(s, sl, ly->inputs[0]);
        }
        if (brg_backward_reads_output(ly->desc.kind)) {
            sl->bwd_left[ly->output]--;
            maybe_free_act(s, sl, ly->output);
        }
        if (ly->desc.kind == BRG_LAYER_BATCHNORM) {
            slot_free(s, &sl->saved[2 * (l - s->first_layer)]);
            slot_free(s, &sl->saved[2 * (l - s->first_layer) + 1]);
        }
    }
    /* Whatever is still live is dead now (but what the weight part reads):
     * activations that no backward op reads were freed in the forward, so
     * this only catches inconsistencies, and the model input's gradient,
     * which nobody wants. */
    for (int t = 0; t < s->n_tensors; t++) {
        if (!split || sl->bwd_left[t] == 0) slot_free(s, &sl->act[t]);
        if (!wants_grad(s, t)) slot_free(s, &sl->grad[t]);
    }
    sl->state = SLOT_BACKWARD;
    sl->input_grads_held = !s->is_first;
    sl->weight_pending = split;
    if (!sl->input_grads_held && !sl->weight_pending) brg_stage_discard(s, slot_id);
    return BRG_OK;
fail:
    brg_stage_discard(s, slot_id);
    return ret;
}

brg_status brg_stage_backward(brg_stage *s, int slot_id, float loss_scale)
{
    return backward(s, slot_id, loss_scale, 0);
}

brg_status brg_stage_backward_input(brg_stage *s, int slot_id, float loss_scale)
{
    return backward(s, slot_id, loss_scale, 1);
}

brg_status brg_stage_backward_weight(brg_stage *s, int slot_id)
{
    BRG_CHECK(check_slot(s, slot_id, "weight-gradient backward"));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_BACKWARD || !sl->weight_pending)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: weight-gradient backward of micro-batch slot %d, which has no input-gradient "
                         "backward (brg_stage_backward_input) waiting for it",
                         s->cfg.index, slot_id);
    brg_status ret = BRG_OK;
    for (int l = s->end_layer - 1; l >= s->first_layer; l--) {
        const brg_layer *ly = layer_at(s, l);
        if (!brg_backward_has_weight_part(ly->desc.kind)) continue;
        const int xi = ly->inputs[0];
        brg_tensor *dy = &sl->wdy[l - s->first_layer];
        if (dy->data) {
            brg_tensor dyv = *dy;
            if (ly->desc.kind == BRG_LAYER_LINEAR) {
                const int64_t shape[2] = {sl->n, tensor_at(s, ly->output)->c};
                ret = brg_tensor_reshape(dy, 2, shape, &dyv);
            }
            if (ret == BRG_OK) ret = need_live(s, &sl->act[xi], xi);
            if (ret == BRG_OK) ret = weight_grad_op(s, l, &sl->act[xi], &dyv);
            if (ret != BRG_OK) {
                ret = layer_failed(s, ret, ly, "weight-gradient backward", slot_id);
                brg_stage_discard(s, slot_id);
                return ret;
            }
            slot_free(s, dy);
        }
        sl->bwd_left[xi]--;
        maybe_free_act(s, sl, xi);
    }
    for (int t = 0; t < s->n_tensors; t++) slot_free(s, &sl->act[t]);
    sl->weight_pending = 0;
    if (!sl->input_grads_held) brg_stage_discard(s, slot_id);
    return BRG_OK;
}

brg_status brg_stage_input_grad(brg_stage *s, int slot_id, int i, brg_tensor *out)
{
    BRG_CHECK(check_slot(s, slot_id, "input gradient"));
    if (i < 0 || i >= s->n_inputs)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d has %d inputs, not %d", s->cfg.index, s->n_inputs, i + 1);
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_BACKWARD || !sl->input_grads_held)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: micro-batch slot %d has no input gradients (the first stage computes none; "
                         "others after brg_stage_backward or brg_stage_backward_input, until released)",
                         s->cfg.index, slot_id);
    int t = s->inputs[i];
    if (!sl->grad[t].data) {
        /* No gradient flowed back to this input: it is zero. */
        brg_status st = alloc_tensor(s, slot_id, t, sl->n, &sl->grad[t], "gradients");
        if (st == BRG_OK) st = brg_device_memset_zero(s->dev, sl->grad[t].data, brg_tensor_bytes(&sl->grad[t]));
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: gradient of input '%s' of micro-batch slot %d", s->cfg.index,
                                     tensor_at(s, t)->name, slot_id);
    }
    *out = sl->grad[t];
    return BRG_OK;
}

brg_status brg_stage_release_input_grads(brg_stage *s, int slot_id)
{
    BRG_CHECK(check_slot(s, slot_id, "release input gradients"));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_BACKWARD || !sl->input_grads_held)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: micro-batch slot %d holds no input gradients",
                         s->cfg.index, slot_id);
    /* After the backward only input gradients are left in grad[]. */
    for (int t = 0; t < s->n_tensors; t++) slot_free(s, &sl->grad[t]);
    sl->input_grads_held = 0;
    if (!sl->weight_pending) brg_stage_discard(s, slot_id);
    return BRG_OK;
}

/* ---- optimizer ---- */

brg_status brg_stage_zero_grads(brg_stage *s)
{
    BRG_CHECK(bn_reset(s));
    for (int b = 0; b < s->n_slabs / 3; b++) {
        int i = 3 * b + 1;
        if (s->slabs[i]) BRG_CHECK(brg_device_memset_zero(s->dev, s->slabs[i], s->slab_bytes[i]));
    }
    return BRG_OK;
}

brg_status brg_stage_step(brg_stage *s, float lr, int64_t step)
{
    const brg_optimizer_config *c = &s->cfg.optimizer;
    if (!(lr >= 0.0f) || step < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: step %lld with lr %g: lr must be >= 0 and step >= 1",
                         s->cfg.index, (long long)step, (double)lr);
    const int n_state = brg_optimizer_state_count(c);
    for (int i = 0; i < s->n_params; i++) {
        stage_param *p = &s->params[i];
        if (!p->info.trainable) continue;
        brg_op op;
        memset(&op, 0, sizeof op);
        op.kind = c->kind == BRG_OPTIMIZER_ADAM ? BRG_OP_ADAM_UPDATE : BRG_OP_SGD_UPDATE;
        op.p.optim.lr = lr;
        op.p.optim.momentum = c->momentum;
        op.p.optim.weight_decay = c->weight_decay;
        op.p.optim.beta1 = c->beta1;
        op.p.optim.beta2 = c->beta2;
        op.p.optim.epsilon = c->epsilon;
        op.p.optim.step = step;
        op.n_in = 1;
        op.in[0] = &p->grad;
        op.n_out = 1 + n_state;
        op.out[0] = &p->value;
        for (int k = 0; k < n_state; k++) op.out[1 + k] = &p->state[k];
        brg_status st = brg_device_run(s->dev, &op);
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d, layer '%s', updating '%s'", s->cfg.index,
                                     layer_at(s, p->layer)->name, p->info.name);
    }
    brg_status st = bn_apply(s);
    if (st != BRG_OK)
        return brg_error_context(st, "stage %d: updating the BatchNorm running statistics", s->cfg.index);
    return brg_stage_zero_grads(s);
}
