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

#include "brigade/program.h"
#include "model/stash-rule.h"
#include "train/stage-impl.h"

/* ---- micro-batch memory ---- */

/* Allocate a micro-batch tensor tagged "stage S / BLOCK / WHAT mb SLOT". */
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

/* The activation or gradient of model tensor t for n samples: [n, C, H, W]. */
brg_status brg_stage_alloc_tensor(brg_stage *s, int slot_id, int t, int n, brg_tensor *out, const char *what)
{
    const brg_model_tensor *mt = tensor_at(s, t);
    const int64_t shape[4] = {n, mt->c, mt->h, mt->w};
    return brg_stage_slot_alloc(s, slot_id, out, BRG_F32, 4, shape, tensor_block(s, t), what, mt->name);
}

void brg_stage_discard(brg_stage *s, int slot_id)
{
    if (!s || slot_id < 0 || slot_id >= s->cfg.slots) return;
    slot *sl = &s->slots[slot_id];
    for (int t = 0; t < s->n_tensors; t++) {
        brg_stage_slot_free(s, &sl->act[t]);
        brg_stage_slot_free(s, &sl->grad[t]);
    }
    for (int i = 0; i < 2 * (s->end_layer - s->first_layer); i++) brg_stage_slot_free(s, &sl->saved[i]);
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

/* Free t's activation once nothing will read it: no forward reader left, no
 * backward reader left, and not an output the caller still holds. */
void brg_stage_maybe_free_act(brg_stage *s, slot *sl, int t)
{
    if (sl->fwd_left[t] > 0 || sl->bwd_left[t] > 0) return;
    if (s->is_output[t] && !sl->outputs_released) return;
    if (s->is_input[t] && sl->hold_inputs) return;
    brg_stage_slot_free(s, &sl->act[t]);
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
brg_status brg_stage_bn_accumulate(brg_stage *s, int slot_id, int l)
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
brg_status brg_stage_bn_snapshot(brg_stage *s, int l)
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
    BRG_CHECK(brg_optimizer_check(&config->optimizer));
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
        brg_status st = brg_stage_slot_alloc(s, slot_id, &sl->labels, BRG_I32, 1, shape, "loss", "labels", "");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: labels of micro-batch slot %d", s->cfg.index, slot_id);
    }
    *out = sl->labels;
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
