/* A micro-batch's backward through a stage, whole or in two parts (ZB-H1):
 * the loss's, then each layer's in reverse through its kind's lowering
 * (model/layers/), freeing the stash by the stash rule as it goes, and the
 * gradients handed back to the previous stage. */
#include <string.h>

#include "brigade/ops.h"
#include "brigade/train.h"
#include "base/internal.h"
#include "model/stash-rule.h"
#include "train/stage-impl.h"

brg_status brg_stage_output_grad(brg_stage *s, int slot_id, int i, brg_tensor *out)
{
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "output gradient"));
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
        brg_status st = brg_stage_alloc_tensor(s, slot_id, t, sl->n, &sl->grad[t], "gradients");
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: gradient of output '%s' of micro-batch slot %d", s->cfg.index,
                                     brg_stage_tensor(s, t)->name, slot_id);
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
        BRG_CHECK(brg_stage_alloc_tensor(s, slot_id, ids[i], sl->n, g, "gradients"));
        if (acc) BRG_CHECK(brg_device_memset_zero(s->dev, g->data, brg_tensor_bytes(g)));
    }
    *accumulate = acc;
    return BRG_OK;
}

/* Whether the gradient of tensor t is wanted: all but the model input. */
static int wants_grad(const brg_stage *s, int t) { return !(s->is_first && t == brg_model_input(s->model)); }

static brg_status need_live(const brg_stage *s, const brg_tensor *t, int id)
{
    if (!t->data) return brg_error(BRG_ERR_INTERNAL, "stashed tensor '%s' is not live", brg_stage_tensor(s, id)->name);
    return BRG_OK;
}

/* Run the op that kind's lower builds for layer l of slot sl, with dy as
 * the output gradient and dx_accumulate for backward data. */
static brg_status run_lowered(brg_stage *s, slot *sl, int l, brg_layer_lower_fn lower, const brg_tensor *dy,
                              int accumulate)
{
    brg_layer_io io;
    brg_op op;
    brg_stage_layer_io(s, sl, l, &io);
    io.dy = dy;
    io.accumulate = accumulate;
    memset(&op, 0, sizeof op);
    BRG_CHECK(lower(&io, &op));
    return brg_device_run(s->dev, &op);
}

/* The backward of layer l: what it reads checked live, the weight part
 * (unless split defers it), then the input gradients, their buffers made
 * ready by prepare_grads. With split, a kind with a weight part moves dy
 * to sl->wdy for brg_stage_backward_weight. */
static brg_status backward_layer(brg_stage *s, int slot_id, int l, int split)
{
    slot *sl = &s->slots[slot_id];
    const brg_layer *ly = brg_stage_layer(s, l);
    const brg_layer_kind_info *kind = brg_layer_kind_info_of(ly->desc.kind);
    const int xi = ly->inputs[0];
    brg_tensor *dy = &sl->grad[ly->output];
    if (!dy->data) return BRG_OK; /* no gradient reached this layer: it contributes nothing */
    if (kind->backward_reads_input) BRG_CHECK(need_live(s, &sl->act[xi], xi));
    if (kind->backward_reads_output) BRG_CHECK(need_live(s, &sl->act[ly->output], ly->output));
    if (kind->backward_weight && !split) BRG_CHECK(run_lowered(s, sl, l, kind->backward_weight, dy, 1));
    if (!kind->data_only_when_wanted || wants_grad(s, xi)) {
        /* A kind without a weight part writes its parameter gradients in
         * the same op, and those always accumulate. */
        const int force = !kind->backward_weight && ly->trainable_params > 0;
        int acc = 0;
        BRG_CHECK(prepare_grads(s, slot_id, ly->inputs, ly->n_inputs, force, &acc));
        if (brg_stage_bn_synced(s, l))
            BRG_CHECK(brg_stage_sync_backward(s, sl, l, dy, acc));
        else
            BRG_CHECK(run_lowered(s, sl, l, kind->backward_data, dy, acc));
    }
    if (split && kind->backward_weight) {
        /* dy is complete: the weight part takes it over (its bytes stay live). */
        sl->wdy[l - s->first_layer] = *dy;
        memset(dy, 0, sizeof *dy);
    }
    return BRG_OK;
}

/* The last stage's first backward op: dlogits from the stashed probs. */
static brg_status backward_loss(brg_stage *s, int slot_id, float loss_scale)
{
    slot *sl = &s->slots[slot_id];
    const int out = brg_model_output(s->model);
    BRG_CHECK(need_live(s, &sl->probs, out));
    BRG_CHECK(brg_stage_alloc_tensor(s, slot_id, out, sl->n, &sl->grad[out], "gradients"));
    brg_tensor dl;
    BRG_CHECK(brg_tensor_reshape(&sl->grad[out], sl->probs.ndim, sl->probs.shape, &dl));
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_SOFTMAX_XENT_BACKWARD;
    op.p.xent.grad_scale = loss_scale;
    op.p.xent.ignore_label = s->cfg.ignore_label;
    op.n_in = 2;
    op.in[0] = &sl->probs;
    op.in[1] = &sl->labels;
    op.n_out = 1;
    op.out[0] = &dl;
    BRG_CHECK(brg_device_run(s->dev, &op));
    brg_stage_slot_free(s, &sl->probs);
    brg_stage_slot_free(s, &sl->labels);
    return BRG_OK;
}

/* The backward of a slot, whole (split = 0) or its input part (split = 1). */
void brg_stage_set_grads_done(brg_stage *s, brg_stage_grads_done_fn fn, void *ctx)
{
    s->grads_done = fn;
    s->grads_done_ctx = ctx;
}

/* After layer l of a backward loop (which runs backward): at the block's
 * first layer, the block is done. */
static brg_status block_done(brg_stage *s, int l)
{
    if (!s->grads_done) return BRG_OK;
    const int b = brg_stage_layer(s, l)->block;
    if (l > s->first_layer && brg_stage_layer(s, l - 1)->block == b) return BRG_OK;
    return s->grads_done(s->grads_done_ctx, b - s->cfg.first_block);
}

static brg_status backward(brg_stage *s, int slot_id, float loss_scale, int split)
{
    const char *what = split ? "input-gradient backward" : "backward";
    BRG_CHECK(brg_stage_check_slot(s, slot_id, what));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_FORWARD || sl->pass.mode != BRG_PASS_TRAIN)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: %s of micro-batch slot %d, which has not been forwarded in train mode",
                         s->cfg.index, what, slot_id);
    brg_status ret = BRG_OK;
    if (!sl->outputs_released) {
        sl->outputs_released = 1;
        for (int i = 0; i < s->n_outputs; i++) brg_stage_maybe_free_act(s, sl, s->outputs[i]);
    }
    if (sl->needs_replay) {
        ret = brg_stage_replay_forward(s, slot_id);
        if (ret != BRG_OK) goto fail;
    }
    int lap = 0;
    ret = brg_stage_clock_start(s, &lap);
    if (ret != BRG_OK) goto fail;
    if (s->is_last) {
        ret = backward_loss(s, slot_id, loss_scale);
        if (ret == BRG_OK && s->clock) ret = brg_stage_clock_lap(s, s->clock->bwd_in, s->end_layer - 1, &lap);
        if (ret != BRG_OK) {
            ret = brg_error_context(ret, "stage %d, loss, %s of micro-batch slot %d", s->cfg.index, what, slot_id);
            goto fail;
        }
    }
    for (int l = s->end_layer - 1; l >= s->first_layer; l--) {
        const brg_layer *ly = brg_stage_layer(s, l);
        ret = backward_layer(s, slot_id, l, split);
        if (ret == BRG_OK && s->clock) ret = brg_stage_clock_lap(s, s->clock->bwd_in, l, &lap);
        if (ret != BRG_OK) {
            ret = brg_stage_layer_failed(s, ret, ly, what, slot_id);
            goto fail;
        }
        /* The layer's output gradient is complete and now consumed (or
         * moved to the weight part); its stash is read for the last time,
         * except a conv2d or linear input that the weight part still reads. */
        brg_stage_slot_free(s, &sl->grad[ly->output]);
        if (brg_backward_reads_input(ly->desc.kind) && !(split && brg_backward_has_weight_part(ly->desc.kind))) {
            sl->bwd_left[ly->inputs[0]]--;
            brg_stage_maybe_free_act(s, sl, ly->inputs[0]);
        }
        if (brg_backward_reads_output(ly->desc.kind)) {
            sl->bwd_left[ly->output]--;
            brg_stage_maybe_free_act(s, sl, ly->output);
        }
        brg_stage_free_saved(s, sl, l);
        ret = block_done(s, l);
        if (ret != BRG_OK) goto fail;
    }
    /* Whatever is still live is dead now (but what the weight part reads):
     * activations that no backward op reads were freed in the forward, so
     * this only catches inconsistencies, and the model input's gradient,
     * which nobody wants. */
    for (int t = 0; t < s->n_tensors; t++) {
        if (!split || sl->bwd_left[t] == 0) brg_stage_slot_free(s, &sl->act[t]);
        if (!wants_grad(s, t)) brg_stage_slot_free(s, &sl->grad[t]);
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
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "weight-gradient backward"));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_BACKWARD || !sl->weight_pending)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "stage %d: weight-gradient backward of micro-batch slot %d, which has no input-gradient "
                         "backward (brg_stage_backward_input) waiting for it",
                         s->cfg.index, slot_id);
    int lap = 0;
    brg_status ret = brg_stage_clock_start(s, &lap);
    if (ret != BRG_OK) {
        brg_stage_discard(s, slot_id);
        return ret;
    }
    for (int l = s->end_layer - 1; l >= s->first_layer; l--) {
        const brg_layer *ly = brg_stage_layer(s, l);
        const brg_layer_lower_fn weight_part = brg_layer_kind_info_of(ly->desc.kind)->backward_weight;
        if (weight_part) {
            const int xi = ly->inputs[0];
            brg_tensor *dy = &sl->wdy[l - s->first_layer];
            if (dy->data) {
                ret = need_live(s, &sl->act[xi], xi);
                if (ret == BRG_OK) ret = run_lowered(s, sl, l, weight_part, dy, 1);
                if (ret == BRG_OK && s->clock) ret = brg_stage_clock_lap(s, s->clock->bwd_w, l, &lap);
                if (ret != BRG_OK) {
                    ret = brg_stage_layer_failed(s, ret, ly, "weight-gradient backward", slot_id);
                    brg_stage_discard(s, slot_id);
                    return ret;
                }
                brg_stage_slot_free(s, dy);
            }
            sl->bwd_left[xi]--;
            brg_stage_maybe_free_act(s, sl, xi);
        }
        ret = block_done(s, l);
        if (ret != BRG_OK) {
            brg_stage_discard(s, slot_id);
            return ret;
        }
    }
    for (int t = 0; t < s->n_tensors; t++) brg_stage_slot_free(s, &sl->act[t]);
    sl->weight_pending = 0;
    if (!sl->input_grads_held) brg_stage_discard(s, slot_id);
    return BRG_OK;
}

brg_status brg_stage_input_grad(brg_stage *s, int slot_id, int i, brg_tensor *out)
{
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "input gradient"));
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
        brg_status st = brg_stage_alloc_tensor(s, slot_id, t, sl->n, &sl->grad[t], "gradients");
        if (st == BRG_OK) st = brg_device_memset_zero(s->dev, sl->grad[t].data, brg_tensor_bytes(&sl->grad[t]));
        if (st != BRG_OK)
            return brg_error_context(st, "stage %d: gradient of input '%s' of micro-batch slot %d", s->cfg.index,
                                     brg_stage_tensor(s, t)->name, slot_id);
    }
    *out = sl->grad[t];
    return BRG_OK;
}

brg_status brg_stage_release_input_grads(brg_stage *s, int slot_id)
{
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "release input gradients"));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_BACKWARD || !sl->input_grads_held)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: micro-batch slot %d holds no input gradients",
                         s->cfg.index, slot_id);
    /* After the backward only input gradients are left in grad[]. */
    for (int t = 0; t < s->n_tensors; t++) brg_stage_slot_free(s, &sl->grad[t]);
    sl->input_grads_held = 0;
    if (!sl->weight_pending) brg_stage_discard(s, slot_id);
    return BRG_OK;
}

