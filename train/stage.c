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
 *
 * This file makes, reads and frees stages and their micro-batch memory;
 * forward.c and backward.c run the layers, each through its kind's
 * lowering (model/layers/), and optimizer.c the step (stage-impl.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "brigade/program.h"
#include "brigade/train.h"
#include "base/device-impl.h"
#include "base/rng.h"
#include "base/internal.h"
#include "model/layout-rule.h"
#include "model/stash-rule.h"
#include "train/stage-impl.h"

/* Name of the block a tensor's memory is charged to in tags. */
static const char *tensor_block(const brg_stage *s, int t)
{
    const brg_model_tensor *mt = brg_stage_tensor(s, t);
    if (mt->block < s->cfg.first_block) return "inputs";
    return brg_model_block_name(s->model, mt->block);
}

/* ---- micro-batch memory ---- */

brg_status brg_stage_slot_alloc(brg_stage *s, int slot_id, brg_tensor *t, brg_dtype dtype, int ndim,
                             const int64_t *shape, const char *block, const char *what, const char *name)
{
    char tag[96];
    snprintf(tag, sizeof tag, "stage %d / %s / %s%s%s mb %d", s->cfg.index, block, what, name[0] ? " " : "", name,
             slot_id);
    BRG_CHECK(brg_tensor_alloc(s->dev, dtype, ndim, shape, tag, t));
    s->live += brg_arena_rounded(brg_tensor_bytes(t));
    return BRG_OK;
}

void brg_stage_slot_free(brg_stage *s, brg_tensor *t)
{
    if (t->data) {
        s->live -= brg_arena_rounded(brg_tensor_bytes(t));
        brg_tensor_free(t);
    }
    memset(t, 0, sizeof *t);
}

brg_status brg_stage_alloc_tensor(brg_stage *s, int slot_id, int t, int n, brg_tensor *out, const char *what)
{
    const brg_model_tensor *mt = brg_stage_tensor(s, t);
    const int64_t shape[4] = {n, mt->c, mt->h, mt->w};
    BRG_CHECK(brg_stage_slot_alloc(s, slot_id, out, BRG_F32, 4, shape, tensor_block(s, t), what, mt->name));
    return brg_tensor_set_block(out, s->layout[t]);
}

void brg_stage_discard(brg_stage *s, int slot_id)
{
    if (!s || slot_id < 0 || slot_id >= s->cfg.slots) return;
    slot *sl = &s->slots[slot_id];
    for (int t = 0; t < s->n_tensors; t++) {
        brg_stage_slot_free(s, &sl->act[t]);
        brg_stage_slot_free(s, &sl->grad[t]);
    }
    for (int l = s->first_layer; l < s->end_layer; l++) brg_stage_free_saved(s, sl, l);
    for (int i = 0; i < s->end_layer - s->first_layer; i++) brg_stage_slot_free(s, &sl->wdy[i]);
    brg_stage_slot_free(s, &sl->probs);
    brg_stage_slot_free(s, &sl->labels);
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

void brg_stage_maybe_free_act(brg_stage *s, slot *sl, int t)
{
    if (sl->fwd_left[t] > 0 || sl->bwd_left[t] > 0) return;
    if (s->is_output[t] && !sl->outputs_released) return;
    if (s->is_input[t] && sl->hold_inputs) return;
    brg_stage_slot_free(s, &sl->act[t]);
}

void brg_stage_free_saved(brg_stage *s, slot *sl, int l)
{
    brg_tensor *saved = &sl->saved[BRG_LAYER_MAX_SAVED * (l - s->first_layer)];
    for (int i = 0; i < BRG_LAYER_MAX_SAVED; i++) brg_stage_slot_free(s, &saved[i]);
}

/* Model layer l's dropout seed in optimizer step `step` (see dropout in
 * model/layers/activation.c for the offset). */
static uint64_t dropout_seed(const brg_stage *s, int64_t step, int l)
{
    return brg_splitmix64(brg_splitmix64(s->cfg.seed ^ 0x64726f706f7574ULL) ^ brg_splitmix64((uint64_t)step) ^
                          ((uint64_t)l * 0x9e3779b97f4a7c15ULL));
}

void brg_stage_layer_io(const brg_stage *s, slot *sl, int l, brg_layer_io *io)
{
    const brg_layer *ly = brg_stage_layer(s, l);
    const stage_layer *pl = &s->layers[l - s->first_layer];
    memset(io, 0, sizeof *io);
    io->layer = ly;
    io->model = s->model;
    io->n = sl->n;
    io->train = sl->pass.mode == BRG_PASS_TRAIN;
    /* A replay must not move the running statistics a second time, a
     * warm-up not at all, and deferred BatchNorm moves them in the
     * optimizer step. */
    io->freeze_running_stats = brg_stage_statistics_kept(s, sl) || s->cfg.deferred_batchnorm;
    io->seed = dropout_seed(s, sl->pass.step, l);
    io->sample_offset = sl->pass.sample_offset;
    for (int k = 0; k < ly->n_inputs; k++) {
        io->x[k] = &sl->act[ly->inputs[k]];
        io->dx[k] = &sl->grad[ly->inputs[k]];
    }
    io->y = &sl->act[ly->output];
    io->dy = &sl->grad[ly->output];
    for (int r = 0; r < BRG_LAYER_MAX_PARAMS; r++) {
        if (pl->role[r] < 0) continue;
        const stage_param *p = &s->params[pl->role[r]];
        io->param[r] = &p->value;
        io->grad[r] = p->info.trainable ? &p->grad : NULL;
    }
    brg_tensor *saved = &sl->saved[BRG_LAYER_MAX_SAVED * (l - s->first_layer)];
    for (int i = 0; i < BRG_LAYER_MAX_SAVED; i++) io->saved[i] = &saved[i];
}

/* ---- creation ---- */

brg_status brg_stage_check_slot(const brg_stage *s, int slot_id, const char *what)
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
        const brg_layer *ly = brg_stage_layer(s, l);
        for (int k = 0; k < ly->n_inputs; k++) {
            int t = ly->inputs[k];
            const brg_model_tensor *mt = brg_stage_tensor(s, t);
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

/* Which activations (and their gradients) are channel-blocked, on a
 * device that wants them so (brg_device_channel_block): the layout rule
 * (model/layout-rule.h). With the edges plain (config.edge_block 0) the
 * classes are the stage's own, and those holding a stage input or output
 * are plain: blocking is invisible outside the stage. With edge_block the
 * device's block, the classes are the whole model's, so every stage of the
 * pipeline decides each tensor alike and a tensor crossing an edge has one
 * layout on both sides (blocked stage 0 of fmnist-cnn ran its forward in
 * 1.1 ms at micro-batches of 16 where the plain edge took 2.3). The
 * kernels give the same bits in either layout (brigade/ops.h), so this
 * changes speed, never results. */
static brg_status choose_layouts(brg_stage *s)
{
    const int b = brg_device_channel_block(s->dev);
    if (!b) return BRG_OK;
    const int nt = s->n_tensors;
    if (s->cfg.edge_block == b)
        BRG_CHECK(brg_model_choose_layouts(s->model, b, 0, brg_model_layer_count(s->model), NULL, s->layout));
    else {
        unsigned char *keep_plain = brg_calloc((size_t)nt, 1, "stage layouts");
        if (!keep_plain) return BRG_ERR_HOST_MEMORY;
        for (int t = 0; t < nt; t++) keep_plain[t] = !s->in_stage[t] || s->is_input[t] || s->is_output[t];
        const brg_status st =
            brg_model_choose_layouts(s->model, b, s->first_layer, s->end_layer, keep_plain, s->layout);
        free(keep_plain);
        BRG_CHECK(st);
    }
    for (int t = 0; t < nt; t++)
        if (!s->in_stage[t]) s->layout[t] = 0;
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
        const brg_layer *ly = brg_stage_layer(s, l);
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
    for (int l = s->first_layer; l < s->end_layer; l++) total += brg_layer_param_count(brg_stage_layer(s, l), m);
    s->params = brg_calloc((size_t)(total ? total : 1), sizeof *s->params, "stage parameters");
    if (!s->params) return BRG_ERR_HOST_MEMORY;
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = brg_stage_layer(s, l);
        stage_layer *sl = &s->layers[l - s->first_layer];
        sl->first_param = s->n_params;
        brg_param_kind kinds[BRG_LAYER_MAX_PARAMS];
        sl->n_params = brg_layer_param_kinds(ly, kinds);
        for (int r = 0; r < BRG_LAYER_MAX_PARAMS; r++) sl->role[r] = -1;
        for (int i = 0; i < sl->n_params; i++) {
            stage_param *p = &s->params[s->n_params];
            p->layer = l;
            p->index = i;
            BRG_CHECK(brg_layer_param(ly, m, i, &p->info));
            sl->role[kinds[i]] = s->n_params;
            s->n_params++;
        }
    }
    return BRG_OK;
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
    BRG_CHECK(brg_stage_check_optimizer(&config->optimizer));
    const brg_model_tensor *mo = brg_model_get_tensor(model, brg_model_output(model));

    s = brg_calloc(1, sizeof *s, "a stage");
    if (!s) return BRG_ERR_HOST_MEMORY;
    s->model = model;
    s->dev = dev;
    s->cfg = *config;
    s->is_first = config->first_block == 0;
    s->is_last = config->last_block == nb - 1;
    s->classes = mo->c;
    s->pixels = mo->h * mo->w;
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
    s->layout = brg_calloc(nt, sizeof(int), "stage tensor layouts");
    s->fwd_uses = brg_calloc(nt, sizeof(int), "stage tensor counts");
    s->bwd_uses = brg_calloc(nt, sizeof(int), "stage tensor counts");
    s->layers = brg_calloc((size_t)n_layers, sizeof *s->layers, "stage layers");
    s->n_slabs = 3 * (config->last_block - config->first_block + 1);
    s->slabs = brg_calloc((size_t)s->n_slabs, sizeof *s->slabs, "stage slabs");
    s->slab_bytes = brg_calloc((size_t)s->n_slabs, sizeof *s->slab_bytes, "stage slabs");
    s->slots = brg_calloc((size_t)config->slots, sizeof *s->slots, "stage slots");
    if (!s->in_stage || !s->is_input || !s->is_output || !s->layout || !s->fwd_uses || !s->bwd_uses || !s->layers ||
        !s->slabs || !s->slab_bytes || !s->slots) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    for (int i = 0; i < config->slots; i++) {
        slot *sl = &s->slots[i];
        sl->act = brg_calloc(nt, sizeof *sl->act, "slot tensors");
        sl->grad = brg_calloc(nt, sizeof *sl->grad, "slot tensors");
        sl->fwd_left = brg_calloc(nt, sizeof(int), "slot counters");
        sl->bwd_left = brg_calloc(nt, sizeof(int), "slot counters");
        sl->saved = brg_calloc((size_t)(BRG_LAYER_MAX_SAVED * n_layers), sizeof *sl->saved, "slot stash");
        sl->wdy = brg_calloc((size_t)n_layers, sizeof *sl->wdy, "slot stash");
        if (!sl->act || !sl->grad || !sl->fwd_left || !sl->bwd_left || !sl->saved || !sl->wdy) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
    }
    BRG_CHECK_GOTO(analyse(s), ret, fail);
    BRG_CHECK_GOTO(choose_layouts(s), ret, fail);
    BRG_CHECK_GOTO(list_params(s), ret, fail);
    if (config->deferred_batchnorm) BRG_CHECK_GOTO(brg_stage_bn_alloc(s), ret, fail);
    if (config->sync_batchnorm) BRG_CHECK_GOTO(brg_stage_sync_alloc(s), ret, fail);
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

/* ---- synchronized BatchNorm's memory (the rest is syncbn.c) ---- */

brg_status brg_stage_sync_host_alloc(brg_stage *s, int replicas)
{
    const size_t n = 1 + 2 * (size_t)s->sync.widest;
    double *mine = brg_malloc(n * sizeof *mine, "synchronized BatchNorm statistics");
    double *all = brg_malloc(n * (size_t)replicas * sizeof *all, "synchronized BatchNorm statistics");
    if (!mine || !all) {
        free(mine);
        free(all);
        return BRG_ERR_HOST_MEMORY;
    }
    free(s->sync.mine);
    free(s->sync.all);
    s->sync.mine = mine;
    s->sync.all = all;
    s->sync.replicas = replicas;
    return BRG_OK;
}

brg_status brg_stage_sync_alloc(brg_stage *s)
{
    for (int l = s->first_layer; l < s->end_layer; l++)
        if (brg_stage_bn_synced(s, l)) {
            const int64_t c = brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
            if (c > s->sync.widest) s->sync.widest = c;
            s->layers[l - s->first_layer].sync_lo_at = s->sync.lo_row;
            s->sync.lo_row += c;
        }
    if (s->sync.widest == 0) return BRG_OK;
    s->sync.mean_lo = brg_calloc((size_t)s->cfg.slots * (size_t)s->sync.lo_row, sizeof(float),
                                 "synchronized BatchNorm means");
    if (!s->sync.mean_lo) return BRG_ERR_HOST_MEMORY;
    const size_t bytes = BRG_BATCHNORM_SYNC_VECTORS * (size_t)s->sync.widest * sizeof(float);
    char tag[64];
    snprintf(tag, sizeof tag, "stage %d / synchronized BatchNorm sums", s->cfg.index);
    void *p = NULL;
    BRG_CHECK(brg_device_alloc(s->dev, bytes, tag, &p));
    s->sync.dev = p;
    s->persistent += brg_arena_rounded(bytes);
    /* merged mean, variance, invstd; the running mean and variance */
    s->sync.host = brg_malloc(5 * (size_t)s->sync.widest * sizeof(float), "synchronized BatchNorm statistics");
    if (!s->sync.host) return BRG_ERR_HOST_MEMORY;
    return brg_stage_sync_host_alloc(s, 1);
}

void brg_stage_sync_free(brg_stage *s)
{
    brg_device_free(s->dev, s->sync.dev);
    free(s->sync.host);
    free(s->sync.mean_lo);
    free(s->sync.mine);
    free(s->sync.all);
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
    for (int i = 0; i < s->clocked.n_events; i++) brg_event_destroy(s->clocked.events[i]);
    free(s->clocked.events);
    free(s->clocked.laps);
    brg_stage_sync_free(s);
    free(s->slabs);
    free(s->slab_bytes);
    free(s->params);
    free(s->layers);
    free(s->in_stage);
    free(s->is_input);
    free(s->is_output);
    free(s->layout);
    free(s->fwd_uses);
    free(s->bwd_uses);
    free(s->inputs);
    free(s->outputs);
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

int brg_stage_tensor_layout(const brg_stage *s, int t)
{
    return s && t >= 0 && t < s->n_tensors ? s->layout[t] : 0;
}
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
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "layer '%s' has %d parameters, not %d",
                         brg_stage_layer(s, layer)->name, sl->n_params, index + 1);
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
                         p->info.name, brg_stage_layer(s, layer)->name);
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
                         p->info.name, brg_stage_layer(s, layer)->name, n, which + 1);
    *out = p->state[which];
    return BRG_OK;
}

/* ---- micro-batch buffers ---- */

/* Start or continue filling slot with n samples. */
static brg_status fill_begin(brg_stage *s, int slot_id, int n, const char *what)
{
    BRG_CHECK(brg_stage_check_slot(s, slot_id, what));
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
        brg_status st = brg_stage_alloc_tensor(s, slot_id, t, n, &sl->act[t], "input");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: input '%s' of micro-batch slot %d", s->cfg.index,
                                     brg_stage_tensor(s, t)->name, slot_id);
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
        const brg_model_tensor *mo = brg_model_get_tensor(s->model, brg_model_output(s->model));
        const int64_t shape[3] = {n, mo->h, mo->w};
        brg_status st = brg_stage_slot_alloc(s, slot_id, &sl->labels, BRG_I32, s->pixels > 1 ? 3 : 1, shape,
                                             "loss", "labels", "");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: labels of micro-batch slot %d", s->cfg.index, slot_id);
    }
    *out = sl->labels;
    return BRG_OK;
}


void brg_stage_set_ignore_label(brg_stage *s, int32_t ignore_label) { s->cfg.ignore_label = ignore_label; }
int64_t brg_stage_label_count(const brg_stage *s) { return s->pixels; }

int64_t brg_stage_counted_labels(const brg_stage *s, const int32_t *labels, int64_t n)
{
    const int64_t total = n * s->pixels;
    const int32_t ignore = s->cfg.ignore_label;
    if (ignore >= 0 && ignore < s->classes) return total;
    int64_t counted = 0;
    for (int64_t i = 0; i < total; i++) counted += labels[i] != ignore;
    return counted;
}

void brg_stage_freeze_statistics(brg_stage *s, int frozen) { s->statistics_frozen = frozen; }

void brg_stage_set_layer_clock(brg_stage *s, brg_layer_clock *clock)
{
    s->clock = clock;
    s->clocked.used = 0; /* laps of another clock are not this one's */
    s->clocked.n_laps = 0;
}

/* The clock's next event, recorded on the compute stream: its index in *at. */
static brg_status clock_record(brg_stage *s, int *at)
{
    if (s->clocked.used == s->clocked.n_events) {
        const int n = s->clocked.n_events ? 2 * s->clocked.n_events : 64;
        brg_event **grown = realloc(s->clocked.events, (size_t)n * sizeof *grown);
        if (!grown) return brg_error(BRG_ERR_HOST_MEMORY, "out of host memory for the layer clock's events");
        s->clocked.events = grown;
        for (int i = s->clocked.n_events; i < n; i++) grown[i] = NULL;
        s->clocked.n_events = n;
    }
    brg_event **ev = &s->clocked.events[s->clocked.used];
    if (!*ev) BRG_CHECK(brg_event_create(s->dev, ev));
    BRG_CHECK(brg_event_record(*ev, BRG_STREAM_COMPUTE));
    *at = s->clocked.used++;
    return BRG_OK;
}

brg_status brg_stage_clock_start(brg_stage *s, int *mark)
{
    if (!s->clock) return BRG_OK;
    return clock_record(s, mark);
}

brg_status brg_stage_clock_lap(brg_stage *s, double *times, int l, int *mark)
{
    if (!s->clock) return BRG_OK;
    if (s->clocked.n_laps == s->clocked.cap_laps) {
        const int n = s->clocked.cap_laps ? 2 * s->clocked.cap_laps : 64;
        brg_clock_lap *grown = realloc(s->clocked.laps, (size_t)n * sizeof *grown);
        if (!grown) return brg_error(BRG_ERR_HOST_MEMORY, "out of host memory for the layer clock's laps");
        s->clocked.laps = grown;
        s->clocked.cap_laps = n;
    }
    int end = 0;
    BRG_CHECK(clock_record(s, &end));
    s->clocked.laps[s->clocked.n_laps++] = (brg_clock_lap){times, l, *mark, end};
    *mark = end;
    return BRG_OK;
}

brg_status brg_stage_read_layer_clock(brg_stage *s)
{
    if (!s->clock) return BRG_OK;
    brg_status st = s->clocked.used ? brg_event_synchronize(s->clocked.events[s->clocked.used - 1]) : BRG_OK;
    for (int i = 0; st == BRG_OK && i < s->clocked.n_laps; i++) {
        const brg_clock_lap *lap = &s->clocked.laps[i];
        double seconds = 0.0;
        st = brg_event_elapsed(s->clocked.events[lap->from], s->clocked.events[lap->to], &seconds);
        if (st == BRG_OK && lap->times) lap->times[lap->l] += seconds;
    }
    s->clocked.used = 0;
    s->clocked.n_laps = 0;
    return st;
}
