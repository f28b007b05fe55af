/* The cost model: bytes and FLOPs per block, and an upper bound of a block
 * range's peak memory as a pipeline stage (docs/planning.md, "The
 * estimate").
 *
 * Per block it replays, in bytes only, what train/stage.c allocates and frees
 * when the block runs alone as a stage: the stash rule of docs/training.md
 * (an activation survives its last forward reader exactly when a backward
 * op reads it), gradient buffers from their first writer to their
 * producer's backward, BatchNorm statistics, the loss's probabilities and
 * labels, and each convolution's workspace as the target backend reports
 * it (through a planning device). That gives the block's forward and
 * backward peaks for one micro-batch. A range's peak is then bounded from
 * the blocks' numbers and the range's stash, which is computed exactly
 * (a tensor read backward by several blocks of the range is kept once).
 *
 * What is per kind (FLOPs, the stash rule, the per-channel stash, the ops
 * whose workspace is asked for) comes from the kind's file in model/layers/.
 *
 * The replay has to follow train/stage.c; when the two drift apart the plan's
 * dry runs (the real stage code) catch it, and brg_cost_create checks that
 * each block's replayed stash equals the stash rule's count. */
#include <stdlib.h>
#include <string.h>

#include "brigade/arena.h"
#include "brigade/ops.h"
#include "brigade/program.h"
#include "plan-impl.h"
#include "model/layers/layer-kind.h"
#include "model/stash-rule.h"

static size_t rounded_floats(int64_t count) { return brg_arena_rounded((size_t)count * sizeof(float)); }

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The flag the finite check of sent messages sets, on every device of a
 * pipeline (exec/program.c). */
static size_t message_flag_bytes(void) { return brg_arena_rounded(sizeof(int32_t)); }

/* ---- build-time state ---- */

typedef struct builder {
    const brg_model *m;
    brg_cost *cost;
    brg_device *dev;  /* planning device for workspace sizes */
    int n_tensors, n_layers, nb;
    int64_t u;        /* micro-batch */
    size_t *sz;       /* [n_tensors] rounded bytes of a micro-batch of the tensor */
    int *cross_start; /* CSR over boundaries: tensors crossing boundary k (between blocks k and k+1) */
    int *cross;
    size_t *ws_fwd, *ws_data, *ws_filter; /* [n_layers] */
    /* replay state, per tensor */
    unsigned char *act, *grad, *is_in, *is_out;
    unsigned char *excl; /* activation charged elsewhere (see replay_block) */
    int *fwd_left, *bwd_left;
    int *touched;
    int n_touched;
    unsigned char *mark;
} builder;

static const brg_model_tensor *tensor(const builder *b, int t) { return brg_model_get_tensor(b->m, t); }

static int64_t tensor_elems(const builder *b, int t)
{
    const brg_model_tensor *x = tensor(b, t);
    return x->c * x->h * x->w;
}

/* Tensors crossing boundary k, or for k = -1 the model input alone. */
static void boundary_list(const builder *b, int k, const int **ids, int *count, int *input_storage)
{
    if (k < 0) {
        *input_storage = brg_model_input(b->m);
        *ids = input_storage;
        *count = 1;
        return;
    }
    if (k >= b->nb - 1) {
        *ids = NULL;
        *count = 0;
        return;
    }
    *ids = b->cross + b->cross_start[k];
    *count = b->cross_start[k + 1] - b->cross_start[k];
}

/* Which tensors cross which boundary, in one pass: tensor t (made in block
 * block(t), or the input, block -1) crosses boundaries
 * max(block(t), 0) .. last_use_block(t) - 1. */
static brg_status build_crossings(builder *b)
{
    const int nbound = b->nb > 1 ? b->nb - 1 : 0;
    b->cross_start = brg_calloc((size_t)nbound + 2, sizeof(int), "the cost model");
    if (!b->cross_start) return BRG_ERR_HOST_MEMORY;
    size_t total = 0;
    for (int t = 0; t < b->n_tensors; t++) {
        const brg_model_tensor *x = tensor(b, t);
        int lo = x->block < 0 ? 0 : x->block;
        for (int k = lo; k < x->last_use_block && k < nbound; k++) {
            b->cross_start[k + 1]++;
            total++;
        }
    }
    for (int k = 0; k < nbound; k++) b->cross_start[k + 1] += b->cross_start[k];
    b->cross = brg_malloc((total ? total : 1) * sizeof(int), "the cost model");
    int *fill = brg_calloc((size_t)nbound + 1, sizeof(int), "the cost model");
    if (!b->cross || !fill) {
        free(fill);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int t = 0; t < b->n_tensors; t++) {
        const brg_model_tensor *x = tensor(b, t);
        int lo = x->block < 0 ? 0 : x->block;
        for (int k = lo; k < x->last_use_block && k < nbound; k++) b->cross[b->cross_start[k] + fill[k]++] = t;
    }
    free(fill);
    return BRG_OK;
}

/* ---- workspace and FLOPs per layer ---- */

/* Layer l's tensors for a micro-batch, shapes only: no kernel runs, but
 * validation wants non-NULL data. */
typedef struct shaped_layer {
    brg_tensor x[BRG_LAYER_MAX_INPUTS], dx[BRG_LAYER_MAX_INPUTS], y, dy, saved;
    brg_tensor param[BRG_LAYER_MAX_PARAMS];
} shaped_layer;

static brg_status shape_layer(const builder *b, int l, shaped_layer *t, brg_layer_io *io)
{
    static float dummy[1];
    const brg_layer *ly = brg_model_get_layer(b->m, l);
    memset(io, 0, sizeof *io);
    io->layer = ly;
    io->model = b->m;
    io->n = (int)b->u;
    io->train = 1;
    io->accumulate = 1;
    for (int k = 0; k < ly->n_inputs; k++) {
        const brg_model_tensor *x = tensor(b, ly->inputs[k]);
        const int64_t xs[4] = {b->u, x->c, x->h, x->w};
        BRG_CHECK(brg_tensor_init(&t->x[k], dummy, BRG_F32, 4, xs, NULL));
        t->dx[k] = t->x[k];
        io->x[k] = &t->x[k];
        io->dx[k] = &t->dx[k];
    }
    const brg_model_tensor *y = tensor(b, ly->output);
    const int64_t ys[4] = {b->u, y->c, y->h, y->w};
    BRG_CHECK(brg_tensor_init(&t->y, dummy, BRG_F32, 4, ys, NULL));
    BRG_CHECK(brg_tensor_init(&t->saved, dummy, BRG_F32, 1, &y->c, NULL));
    t->dy = t->y;
    io->y = &t->y;
    io->dy = &t->dy;
    for (int i = 0; i < BRG_LAYER_MAX_SAVED; i++) io->saved[i] = &t->saved;
    brg_param_kind kinds[BRG_LAYER_MAX_PARAMS];
    const int np = brg_layer_param_kinds(ly, kinds);
    for (int i = 0; i < np; i++) {
        brg_param_info info;
        BRG_CHECK(brg_layer_param(ly, b->m, i, &info));
        BRG_CHECK(brg_tensor_init(&t->param[kinds[i]], dummy, BRG_F32, info.ndim, info.shape, NULL));
        io->param[kinds[i]] = &t->param[kinds[i]];
        io->grad[kinds[i]] = info.trainable ? &t->param[kinds[i]] : NULL;
    }
    return BRG_OK;
}

/* The workspace the target's device takes from the arena for the op that
 * lower builds (0 without one), rounded like everything the arena lends. */
static brg_status op_workspace(builder *b, brg_layer_io *io, brg_layer_lower_fn lower, size_t *bytes)
{
    brg_op op;
    *bytes = 0;
    if (!lower) return BRG_OK;
    memset(&op, 0, sizeof op);
    BRG_CHECK(lower(io, &op));
    BRG_CHECK(brg_device_workspace_bytes(b->dev, &op, bytes));
    if (*bytes) *bytes = brg_arena_rounded(*bytes);
    return BRG_OK;
}

/* The workspace of layer l's forward, backward-data and backward-weight
 * ops, for the ops its kind lowers it to (model/layers/). */
static brg_status layer_workspaces(builder *b, int l)
{
    const brg_layer_kind_info *kind = brg_layer_kind_info_of(brg_model_get_layer(b->m, l)->desc.kind);
    shaped_layer t;
    brg_layer_io io;
    BRG_CHECK(shape_layer(b, l, &t, &io));
    BRG_CHECK(op_workspace(b, &io, kind->forward, &b->ws_fwd[l]));
    BRG_CHECK(op_workspace(b, &io, kind->backward_data, &b->ws_data[l]));
    return op_workspace(b, &io, kind->backward_weight, &b->ws_filter[l]);
}

/* FLOPs of layer l for the micro-batch: forward, the input-gradient part of
 * the backward and the weight-gradient part, as its kind counts them
 * (model/layers/). */
static void layer_flops(const builder *b, int l, double *fwd, double *bin, double *bw)
{
    const brg_layer *ly = brg_model_get_layer(b->m, l);
    /* The first stage computes no gradient for the model input. */
    const int wants_dx = ly->inputs[0] != brg_model_input(b->m);
    *fwd = *bin = *bw = 0.0;
    brg_layer_kind_info_of(ly->desc.kind)->flops(ly, b->m, (double)b->u, wants_dx, fwd, bin, bw);
}

/* Bytes of layer l's per-channel stash (BatchNorm's mean and invstd). */
static size_t saved_bytes(const builder *b, const brg_layer *ly)
{
    const int n = brg_layer_kind_info_of(ly->desc.kind)->n_saved;
    return (size_t)n * rounded_floats(tensor(b, ly->output)->c);
}

/* ---- the per-block replay of train/stage.c ---- */

static void touch(builder *b, int t)
{
    if (b->mark[t]) return;
    b->mark[t] = 1;
    b->touched[b->n_touched++] = t;
}

static void reset_touched(builder *b)
{
    for (int i = 0; i < b->n_touched; i++) {
        int t = b->touched[i];
        b->mark[t] = b->act[t] = b->grad[t] = b->is_in[t] = b->is_out[t] = b->excl[t] = 0;
        b->fwd_left[t] = b->bwd_left[t] = 0;
    }
    b->n_touched = 0;
}

typedef struct replay {
    size_t live, peak;
    int released;
} replay;

static void take(replay *r, size_t bytes)
{
    r->live += bytes;
    if (r->live > r->peak) r->peak = r->live;
}

static void at_least(replay *r, size_t bytes)
{
    if (bytes > r->peak) r->peak = bytes;
}

/* Bytes of t's activation charged to the replay. */
static size_t act_bytes(const builder *b, int t) { return b->excl[t] ? 0 : b->sz[t]; }

static void free_act(builder *b, replay *r, int t)
{
    if (!b->act[t]) return;
    b->act[t] = 0;
    r->live -= act_bytes(b, t);
}

static void free_grad(builder *b, replay *r, int t)
{
    if (!b->grad[t]) return;
    b->grad[t] = 0;
    r->live -= b->sz[t];
}

/* train/stage.c's maybe_free_act. */
static void maybe_free(builder *b, replay *r, int t)
{
    if (b->fwd_left[t] > 0 || b->bwd_left[t] > 0) return;
    if (b->is_out[t] && !r->released) return;
    free_act(b, r, t);
}

static void need_grad(builder *b, replay *r, int t)
{
    if (b->grad[t]) return;
    b->grad[t] = 1;
    take(r, b->sz[t]);
}

/* Whether conv2d or linear layer of block blk reads tensor t as its input
 * (which the split backward keeps until its weight part). */
static int kept_for_weights_by(const builder *b, int blk, int t)
{
    int first, count;
    brg_model_block_layers(b->m, blk, &first, &count);
    for (int l = first; l < first + count; l++) {
        const brg_layer *ly = brg_model_get_layer(b->m, l);
        if (brg_backward_has_weight_part(ly->desc.kind) && ly->inputs[0] == t) return 1;
    }
    return 0;
}

/* Whether a backward op of block blk reads tensor t. */
static int stashed_by(const builder *b, int blk, int t)
{
    int first, count;
    brg_model_block_layers(b->m, blk, &first, &count);
    for (int l = first; l < first + count; l++) {
        const brg_layer *ly = brg_model_get_layer(b->m, l);
        if (brg_backward_reads_input(ly->desc.kind) && ly->inputs[0] == t) return 1;
        if (brg_backward_reads_output(ly->desc.kind) && ly->output == t) return 1;
    }
    return 0;
}

/* Replay one micro-batch through block blk run alone as a stage: the
 * forward (peak into *pf, the stash left after the outputs are released
 * into *stash), then the backward, whole (split = 0, peak *pb) or its input
 * part (split = 1, peak *pb; what the weight part will read into *residue),
 * up to and including the release of the input gradients.
 *
 * With `inside`, blk is not the first block of its range: inputs that a
 * backward op of block blk-1 reads are then in the range's stash S(..blk-1)
 * for as long as blk runs (blk-1's backward comes after blk's), so their
 * activation is not charged here a second time (their gradients are).
 * With `next` (split only), blk is not the last block of its range: in the
 * backward, outputs that a conv2d or linear layer of block blk+1 reads are
 * in that block's residue R(blk+1), held until the weight part, so they are
 * not charged either. */
static void replay_block(builder *b, int blk, int split, int inside, int next, size_t *pf, size_t *stash, size_t *pb,
                         size_t *residue)
{
    const brg_model *m = b->m;
    const int is_first = blk == 0, is_last = blk == b->nb - 1;
    const int model_in = brg_model_input(m), model_out = brg_model_output(m);
    const int64_t classes = brg_model_classes(m), pixels = brg_model_label_count(m);
    int first, count, input_storage;
    const int *ins, *outs;
    int n_ins, n_outs;
    brg_model_block_layers(m, blk, &first, &count);
    boundary_list(b, blk - 1, &ins, &n_ins, &input_storage);
    if (is_last) {
        outs = NULL;
        n_outs = 0;
    } else {
        boundary_list(b, blk, &outs, &n_outs, &input_storage);
    }

    /* analyse(): readers per tensor. */
    for (int i = 0; i < n_ins; i++) {
        touch(b, ins[i]);
        b->is_in[ins[i]] = 1;
    }
    for (int i = 0; i < n_outs; i++) {
        touch(b, outs[i]);
        b->is_out[outs[i]] = 1;
    }
    for (int l = first; l < first + count; l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        for (int k = 0; k < ly->n_inputs; k++) {
            touch(b, ly->inputs[k]);
            b->fwd_left[ly->inputs[k]]++;
        }
        touch(b, ly->output);
        if (brg_backward_reads_input(ly->desc.kind)) b->bwd_left[ly->inputs[0]]++;
        if (brg_backward_reads_output(ly->desc.kind)) b->bwd_left[ly->output]++;
    }
    if (is_last) {
        touch(b, model_out);
        b->fwd_left[model_out]++;
    }
    if (inside && blk > 0)
        for (int i = 0; i < n_ins; i++) b->excl[ins[i]] = (unsigned char)stashed_by(b, blk - 1, ins[i]);

    /* The forward: inputs (and labels) filled, then the layers. */
    replay r = {0, 0, 0};
    for (int i = 0; i < n_ins; i++) {
        b->act[ins[i]] = 1;
        take(&r, act_bytes(b, ins[i]));
    }
    const size_t labels = rounded_floats(b->u * pixels); /* int32, same size as float */
    const size_t probs = rounded_floats(b->u * classes * pixels);
    if (is_last) take(&r, labels);
    for (int l = first; l < first + count; l++) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        b->act[ly->output] = 1;
        take(&r, b->sz[ly->output]);
        take(&r, saved_bytes(b, ly));
        at_least(&r, r.live + b->ws_fwd[l]);
        for (int k = 0; k < ly->n_inputs; k++) {
            b->fwd_left[ly->inputs[k]]--;
            maybe_free(b, &r, ly->inputs[k]);
        }
        maybe_free(b, &r, ly->output);
    }
    if (is_last) {
        take(&r, probs);
        take(&r, brg_arena_rounded(sizeof(float))); /* the loss value, for its op */
        r.live -= brg_arena_rounded(sizeof(float));
        b->fwd_left[model_out]--;
        maybe_free(b, &r, model_out);
    }
    *pf = r.peak;
    /* The outputs are sent on and released. */
    r.released = 1;
    for (int i = 0; i < n_outs; i++) maybe_free(b, &r, outs[i]);
    *stash = r.live;

    /* The backward: output gradients received, then the layers in reverse. */
    if (split && next && !is_last)
        for (int i = 0; i < n_outs; i++) {
            const int t = outs[i];
            if (b->excl[t] || !kept_for_weights_by(b, blk + 1, t)) continue;
            if (b->act[t]) r.live -= b->sz[t];
            b->excl[t] = 1;
        }
    r.peak = r.live;
    for (int i = 0; i < n_outs; i++) need_grad(b, &r, outs[i]);
    if (is_last) {
        need_grad(b, &r, model_out);
        r.live -= probs + labels;
    }
    for (int l = first + count - 1; l >= first; l--) {
        const brg_layer *ly = brg_model_get_layer(m, l);
        const brg_layer_kind kind = ly->desc.kind;
        const int x = ly->inputs[0], y = ly->output;
        const int wants_dx = !(is_first && x == model_in);
        if (b->grad[y]) {
            const brg_layer_kind_info *info = brg_layer_kind_info_of(kind);
            if (info->backward_weight && !split) at_least(&r, r.live + b->ws_filter[l]);
            if (!info->data_only_when_wanted || wants_dx) {
                for (int k = 0; k < ly->n_inputs; k++) need_grad(b, &r, ly->inputs[k]);
                at_least(&r, r.live + b->ws_data[l]);
            }
            if (split && info->backward_weight) b->grad[y] = 0; /* dy moves to the weight part: its bytes stay live */
        }
        free_grad(b, &r, y);
        if (brg_backward_reads_input(kind) && !(split && brg_backward_has_weight_part(kind))) {
            b->bwd_left[x]--;
            maybe_free(b, &r, x);
        }
        if (brg_backward_reads_output(kind)) {
            b->bwd_left[y]--;
            maybe_free(b, &r, y);
        }
        r.live -= saved_bytes(b, ly);
    }
    for (int i = 0; i < b->n_touched; i++) {
        int t = b->touched[i];
        if (!split || b->bwd_left[t] == 0) free_act(b, &r, t);
        if (is_first && t == model_in) free_grad(b, &r, t);
    }
    /* The input gradients are sent back (zeros where nothing flowed). */
    if (!is_first)
        for (int i = 0; i < n_ins; i++) need_grad(b, &r, ins[i]);
    *pb = r.peak;
    for (int i = 0; i < n_ins; i++) free_grad(b, &r, ins[i]);
    *residue = r.live;
    reset_touched(b);
}

/* ---- building ---- */

/* The stash charged to each block and the pairs (see brg_cost_pair): walk
 * the layers in order and, for each tensor a backward op reads, note the
 * blocks reading it. */
static brg_status build_stash(builder *b)
{
    brg_cost *c = b->cost;
    int *last_reader = brg_malloc((size_t)b->n_tensors * sizeof(int), "the cost model");
    if (!last_reader) return BRG_ERR_HOST_MEMORY;
    for (int t = 0; t < b->n_tensors; t++) last_reader[t] = -1;
    int cap = 16;
    c->pairs = brg_malloc((size_t)cap * sizeof *c->pairs, "the cost model");
    c->pair_start = brg_calloc((size_t)b->nb + 1, sizeof(int), "the cost model");
    if (!c->pairs || !c->pair_start) {
        free(last_reader);
        return BRG_ERR_HOST_MEMORY;
    }
    for (int l = 0; l < b->n_layers; l++) {
        const brg_layer *ly = brg_model_get_layer(b->m, l);
        const int blk = ly->block;
        int reads[2], nr = 0;
        if (brg_backward_reads_input(ly->desc.kind)) reads[nr++] = ly->inputs[0];
        if (brg_backward_reads_output(ly->desc.kind)) reads[nr++] = ly->output;
        for (int k = 0; k < nr; k++) {
            int t = reads[k];
            if (last_reader[t] == blk) continue;
            c->blocks[blk].stash_new += b->sz[t];
            if (last_reader[t] >= 0) {
                if (c->n_pairs == cap) {
                    cap *= 2;
                    brg_cost_pair *p = realloc(c->pairs, (size_t)cap * sizeof *p);
                    if (!p) {
                        free(last_reader);
                        return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate host memory for the cost model");
                    }
                    c->pairs = p;
                }
                c->pairs[c->n_pairs++] = (brg_cost_pair){last_reader[t], blk, b->sz[t]};
                c->pair_start[blk + 1]++;
            }
            last_reader[t] = blk;
        }
        c->blocks[blk].stash_new += saved_bytes(b, ly);
    }
    c->blocks[b->nb - 1].stash_new += c->loss_stash;
    for (int k = 0; k < b->nb; k++) c->pair_start[k + 1] += c->pair_start[k];
    free(last_reader);
    return BRG_OK;
}

static brg_status build_params(builder *b, const brg_optimizer_config *optimizer)
{
    const int n_state = brg_optimizer_state_count(optimizer);
    for (int l = 0; l < b->n_layers; l++) {
        const brg_layer *ly = brg_model_get_layer(b->m, l);
        brg_cost_block *cb = &b->cost->blocks[ly->block];
        if (ly->desc.kind == BRG_LAYER_BATCHNORM) {
            const int64_t ch = brg_model_get_tensor(b->m, ly->output)->c;
            if (ch > cb->bn_widest) cb->bn_widest = ch;
        }
        int np = brg_layer_param_count(ly, b->m);
        for (int i = 0; i < np; i++) {
            brg_param_info info;
            BRG_CHECK(brg_layer_param(ly, b->m, i, &info));
            size_t r = rounded_floats(info.count);
            cb->weights += r;
            if (info.trainable) {
                cb->grads += r;
                cb->optimizer += r * (size_t)n_state;
                cb->params += info.count;
            }
        }
    }
    /* One slab per block and kind, each rounded (train/stage.c). */
    for (int k = 0; k < b->nb; k++) {
        brg_cost_block *cb = &b->cost->blocks[k];
        cb->weights = cb->weights ? brg_arena_rounded(cb->weights) : 0;
        cb->grads = cb->grads ? brg_arena_rounded(cb->grads) : 0;
        cb->optimizer = cb->optimizer ? brg_arena_rounded(cb->optimizer) : 0;
    }
    return BRG_OK;
}

static void builder_free(builder *b)
{
    brg_device_destroy(b->dev);
    free(b->sz);
    free(b->cross_start);
    free(b->cross);
    free(b->ws_fwd);
    free(b->ws_data);
    free(b->ws_filter);
    free(b->act);
    free(b->grad);
    free(b->is_in);
    free(b->is_out);
    free(b->excl);
    free(b->fwd_left);
    free(b->bwd_left);
    free(b->touched);
    free(b->mark);
}

brg_status brg_cost_create(const brg_model *model, int micro_batch, const brg_optimizer_config *optimizer,
                           const brg_device_spec *target, int sync_batchnorm, brg_cost **out)
{
    brg_status ret = BRG_OK;
    builder b;
    memset(&b, 0, sizeof b);
    *out = NULL;
    if (!brg_model_is_final(model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "model '%s' is not finalized", brg_model_name(model));
    if (micro_batch < 1) return brg_error(BRG_ERR_INVALID_ARGUMENT, "micro-batch %d must be >= 1", micro_batch);
    brg_cost *c = brg_calloc(1, sizeof *c, "the cost model");
    if (!c) return BRG_ERR_HOST_MEMORY;
    b.m = model;
    b.cost = c;
    b.u = micro_batch;
    b.nb = brg_model_block_count(model);
    b.n_tensors = brg_model_tensor_count(model);
    b.n_layers = brg_model_layer_count(model);
    c->model = model;
    c->n_blocks = b.nb;
    c->micro_batch = micro_batch;
    c->sync_batchnorm = sync_batchnorm != 0;
    const int64_t pixels = brg_model_label_count(model);
    c->loss_stash = rounded_floats(b.u * brg_model_classes(model) * pixels) + rounded_floats(b.u * pixels);
    const size_t nt = (size_t)b.n_tensors, nl = (size_t)b.n_layers;
    c->blocks = brg_calloc((size_t)b.nb, sizeof *c->blocks, "the cost model");
    b.sz = brg_calloc(nt, sizeof *b.sz, "the cost model");
    b.ws_fwd = brg_calloc(nl, sizeof(size_t), "the cost model");
    b.ws_data = brg_calloc(nl, sizeof(size_t), "the cost model");
    b.ws_filter = brg_calloc(nl, sizeof(size_t), "the cost model");
    b.act = brg_calloc(nt, 1, "the cost model");
    b.grad = brg_calloc(nt, 1, "the cost model");
    b.is_in = brg_calloc(nt, 1, "the cost model");
    b.is_out = brg_calloc(nt, 1, "the cost model");
    b.excl = brg_calloc(nt, 1, "the cost model");
    b.mark = brg_calloc(nt, 1, "the cost model");
    b.fwd_left = brg_calloc(nt, sizeof(int), "the cost model");
    b.bwd_left = brg_calloc(nt, sizeof(int), "the cost model");
    b.touched = brg_calloc(nt, sizeof(int), "the cost model");
    if (!c->blocks || !b.sz || !b.ws_fwd || !b.ws_data || !b.ws_filter || !b.act || !b.grad || !b.is_in ||
        !b.is_out || !b.excl || !b.mark || !b.fwd_left || !b.bwd_left || !b.touched) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    BRG_CHECK_GOTO(brg_device_create_planning(target, 0, &b.dev), ret, fail);
    for (int t = 0; t < b.n_tensors; t++) b.sz[t] = rounded_floats(b.u * tensor_elems(&b, t));
    BRG_CHECK_GOTO(build_crossings(&b), ret, fail);
    for (int l = 0; l < b.n_layers; l++) {
        ret = layer_workspaces(&b, l);
        if (ret != BRG_OK) {
            ret = brg_error_context(ret, "cost model, layer '%s'", brg_model_get_layer(model, l)->name);
            goto fail;
        }
        double f, bi, bw;
        layer_flops(&b, l, &f, &bi, &bw);
        brg_cost_block *cb = &c->blocks[brg_model_get_layer(model, l)->block];
        cb->fwd_flops += f;
        cb->bwd_in_flops += bi;
        cb->bwd_w_flops += bw;
        if (b.ws_filter[l] > cb->ws_weight) cb->ws_weight = b.ws_filter[l];
    }
    if (c->n_blocks > 0)
        c->blocks[c->n_blocks - 1].fwd_flops += 5.0 * (double)b.u * (double)brg_model_classes(model) * (double)pixels;
    BRG_CHECK_GOTO(build_params(&b, optimizer), ret, fail);
    BRG_CHECK_GOTO(build_stash(&b), ret, fail);
    for (int k = 0; k < b.nb; k++) {
        brg_cost_block *cb = &c->blocks[k];
        const int *ids;
        int n, storage;
        boundary_list(&b, k - 1, &ids, &n, &storage);
        for (int i = 0; i < n; i++) cb->in_bytes += b.sz[ids[i]];
        boundary_list(&b, k, &ids, &n, &storage);
        for (int i = 0; i < n; i++) cb->out_bytes += b.sz[ids[i]];
        size_t stash, ignored, residue_unsplit;
        replay_block(&b, k, 0, 0, 0, &cb->peak_fwd, &stash, &cb->peak_bwd, &residue_unsplit);
        replay_block(&b, k, 0, 1, 0, &cb->inside_fwd, &ignored, &cb->inside_bwd, &ignored);
        for (int inside = 0; inside < 2; inside++)
            for (int next = 0; next < 2; next++)
                replay_block(&b, k, 1, inside, next, &ignored, &ignored, &cb->bwd_in[inside][next],
                             inside || next ? &ignored : &cb->residue);
        /* The replay and the stash rule must agree on what a block keeps;
         * a difference means this file no longer follows train/stage.c. */
        if (stash != cb->stash_new || residue_unsplit != 0) {
            ret = brg_error(BRG_ERR_INTERNAL,
                            "cost model of '%s', block '%s': the replay keeps %zu bytes after the forward and %zu "
                            "after the backward, the stash rule %zu and 0",
                            brg_model_name(model), brg_model_block_name(model, k), stash, residue_unsplit,
                            cb->stash_new);
            goto fail;
        }
    }
    *out = c;
    c = NULL;
exit:
    builder_free(&b);
    return ret;
fail:
    brg_cost_destroy(c);
    goto exit;
}

void brg_cost_destroy(brg_cost *c)
{
    if (!c) return;
    free(c->blocks);
    free(c->pairs);
    free(c->pair_start);
    free(c);
}

/* ---- ranges ---- */

void brg_cost_range_start(const brg_cost *c, int first, brg_cost_range *r)
{
    (void)c;
    memset(r, 0, sizeof *r);
    r->first = first;
    r->last = first - 1;
}

/* Adding block j to [first, j-1]: every bound term "S(first..b-1) + peak[b]"
 * gains the term for b = j, the split backward's terms gain j's residue
 * (block j's input part runs before those of the blocks left of it), and
 * the stash gains what j keeps that the range does not keep already. */
void brg_cost_range_extend(const brg_cost *c, brg_cost_range *r)
{
    const int j = r->last + 1;
    const brg_cost_block *cb = &c->blocks[j];
    const size_t s = r->stash;
    const int inside = j > r->first;
    r->work_fwd = max_size(r->work_fwd, s + (inside ? cb->inside_fwd : cb->peak_fwd));
    r->work_bwd = max_size(r->work_bwd, s + (inside ? cb->inside_bwd : cb->peak_bwd));
    /* The split backward's terms of the blocks left of j gain j's residue;
     * block j-1's term switches to its variant with a block after it. */
    if (inside) r->bwd_in_closed = max_size(r->bwd_in_closed, r->bwd_in_pending) + cb->residue;
    r->bwd_in_pending = s + cb->bwd_in[inside][1];
    r->work_bwd_in = max_size(r->bwd_in_closed, s + cb->bwd_in[inside][0]);
    size_t add = cb->stash_new;
    for (int p = c->pair_start[j]; p < c->pair_start[j + 1]; p++)
        if (c->pairs[p].prev >= r->first) add -= c->pairs[p].bytes;
    r->stash += add;
    r->residue += cb->residue;
    r->ws_weight = max_size(r->ws_weight, cb->ws_weight);
    r->weights += cb->weights;
    r->grads += cb->grads;
    r->optimizer += cb->optimizer;
    /* The receive buffers of a stage that starts or ends inside the model
     * (a pipeline's devices receive what crosses its edges). */
    r->receive_in = r->first > 0 ? (size_t)BRG_CHANNEL_CAPACITY_DEFAULT * c->blocks[r->first].in_bytes : 0;
    r->receive_out = j < c->n_blocks - 1 ? (size_t)BRG_CHANNEL_CAPACITY_DEFAULT * cb->out_bytes : 0;
    r->receive = r->receive_in + r->receive_out + (r->receive_in + r->receive_out ? message_flag_bytes() : 0);
    if (cb->bn_widest > r->bn_widest) r->bn_widest = cb->bn_widest;
    r->sync = c->sync_batchnorm && r->bn_widest > 0 ? rounded_floats(BRG_BATCHNORM_SYNC_VECTORS * r->bn_widest) : 0;
    r->persistent = r->weights + r->grads + r->optimizer + r->receive + r->sync;
    r->params += cb->params;
    r->fwd_flops += cb->fwd_flops;
    r->bwd_in_flops += cb->bwd_in_flops;
    r->bwd_w_flops += cb->bwd_w_flops;
    if (inside) r->max_peak_fwd = max_size(r->max_peak_fwd, cb->peak_fwd);
    r->last = j;
}

size_t brg_cost_device_receive(const brg_cost_range *ranges, const brg_schedule *s, int device)
{
    /* As exec/program.c allocates them: per direction, one buffer for each
     * device that sends here, as large as its largest message; nothing
     * where the neighbour stage is on this device (the V's turn). */
    const int v = brg_schedule_chunks(s), V = v * brg_schedule_devices(s);
    int from[2][2] = {{-1, -1}, {-1, -1}};
    size_t most[2][2] = {{0, 0}, {0, 0}};
    for (int c = 0; c < v; c++) {
        const int j = brg_schedule_stage_of(s, device, c);
        for (int grad = 0; grad < 2; grad++) {
            const int other = grad ? j + 1 : j - 1;
            const size_t bytes = grad ? ranges[c].receive_out : ranges[c].receive_in;
            const int sender = other >= 0 && other < V ? brg_schedule_device_of(s, other) : -1;
            if (sender < 0 || sender == device || bytes == 0) continue;
            int k = 0;
            while (k < 1 && from[grad][k] >= 0 && from[grad][k] != sender) k++;
            from[grad][k] = sender;
            most[grad][k] = max_size(most[grad][k], bytes);
        }
    }
    const size_t total = most[0][0] + most[0][1] + most[1][0] + most[1][1];
    return total + (total ? message_flag_bytes() : 0);
}

void brg_cost_range_of(const brg_cost *c, int first, int last, brg_cost_range *r)
{
    brg_cost_range_start(c, first, r);
    while (r->last < last) brg_cost_range_extend(c, r);
}

static int range_is_last(const brg_cost *c, const brg_cost_range *r) { return r->last == c->n_blocks - 1; }

size_t brg_cost_range_rest(const brg_cost *c, const brg_cost_range *r, int recompute)
{
    if (!recompute) return r->stash;
    return c->blocks[r->first].in_bytes + (range_is_last(c, r) ? c->loss_stash : 0);
}

/* The working memory; with floor, a lower bound of it that only grows with
 * the range (the recomputing backward's output gradients left out). */
static size_t working(const brg_cost *c, const brg_cost_range *r, int recompute, int type, int floor)
{
    /* With recomputation the first forward holds the inputs throughout
     * (the first block's own peak counts them already), and the backward's
     * replay runs with the output gradients (or the loss's stash) there. */
    const size_t inputs = c->blocks[r->first].in_bytes;
    const size_t extra = floor ? 0 : range_is_last(c, r) ? c->loss_stash : c->blocks[r->last].out_bytes;
    const size_t replayed = recompute ? r->work_fwd + extra : 0;
    switch (type) {
    case BRG_HOLD_FORWARD:
        return recompute ? max_size(c->blocks[r->first].peak_fwd, inputs + r->max_peak_fwd) : r->work_fwd;
    case BRG_HOLD_BACKWARD: return max_size(replayed, r->work_bwd);
    case BRG_HOLD_BACKWARD_INPUT: return max_size(replayed, r->work_bwd_in);
    default: return r->residue + r->ws_weight;
    }
}

size_t brg_cost_range_working(const brg_cost *c, const brg_cost_range *r, int recompute, int type)
{
    return working(c, r, recompute, type, 0);
}

static size_t peak(const brg_cost *c, const brg_cost_range *r, const brg_hold *holds, int n_holds, int recompute,
                   int floor)
{
    const size_t rest = brg_cost_range_rest(c, r, recompute);
    size_t work[4], most = 0;
    for (int t = 0; t < 4; t++) work[t] = working(c, r, recompute, t, floor);
    for (int i = 0; i < n_holds; i++) {
        const brg_hold *h = &holds[i];
        size_t v = (size_t)h->rest * rest + (size_t)h->residue * r->residue + work[h->type];
        if (v > most) most = v;
    }
    /* The receive buffers for the outgoing boundary shrink when the range
     * grows to a smaller boundary (and with none at either end, the check
     * flag goes): the floor leaves them out. */
    return r->persistent - (floor ? r->receive - r->receive_in : 0) + most;
}

size_t brg_cost_range_peak(const brg_cost *c, const brg_cost_range *r, const brg_hold *holds, int n_holds,
                           int recompute)
{
    return peak(c, r, holds, n_holds, recompute, 0);
}

size_t brg_cost_range_peak_floor(const brg_cost *c, const brg_cost_range *r, const brg_hold *holds, int n_holds,
                                 int recompute)
{
    return peak(c, r, holds, n_holds, recompute, 1);
}

double brg_cost_range_flops(const brg_cost_range *r, int recompute)
{
    return r->fwd_flops * (recompute ? 2.0 : 1.0) + r->bwd_in_flops + r->bwd_w_flops;
}
