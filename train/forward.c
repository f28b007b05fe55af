/* A micro-batch's forward through a stage: each layer lowered to ops by its
 * kind (model/layers/), the loss on the last stage, the replay that
 * recomputation needs, and the outputs handed to the next stage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "brigade/train.h"
#include "base/internal.h"
#include "train/stage-impl.h"

/* Allocate layer l's per-channel stash (a train forward's). */
static brg_status alloc_saved(brg_stage *s, int slot_id, int l)
{
    const brg_layer *ly = brg_stage_layer(s, l);
    const brg_layer_kind_info *kind = brg_layer_kind_info_of(ly->desc.kind);
    brg_tensor *saved = &s->slots[slot_id].saved[BRG_LAYER_MAX_SAVED * (l - s->first_layer)];
    const int64_t c = brg_stage_tensor(s, ly->output)->c;
    const char *bname = brg_model_block_name(s->model, ly->block);
    for (int i = 0; i < kind->n_saved; i++)
        BRG_CHECK(brg_stage_slot_alloc(s, slot_id, &saved[i], BRG_F32, 1, &c, bname, kind->saved_names[i], ly->name));
    return BRG_OK;
}

/* Layer l's forward: its output (and in train mode its stash) allocated,
 * then the op its kind lowers it to. Deferred BatchNorm sees a train
 * forward's statistics once per micro-batch (a replay computes the same
 * statistics again). */
static brg_status forward_layer(brg_stage *s, int slot_id, int l)
{
    slot *sl = &s->slots[slot_id];
    const brg_layer *ly = brg_stage_layer(s, l);
    const brg_layer_kind_info *kind = brg_layer_kind_info_of(ly->desc.kind);
    const int train = sl->pass.mode == BRG_PASS_TRAIN;
    const int deferred = train && s->cfg.deferred_batchnorm && !brg_stage_statistics_kept(s, sl) &&
                         s->layers[l - s->first_layer].role[BRG_P_RMEAN] >= 0;
    for (int k = 0; k < ly->n_inputs; k++)
        if (!sl->act[ly->inputs[k]].data)
            return brg_error(BRG_ERR_INTERNAL, "input '%s' is not live", brg_stage_tensor(s, ly->inputs[k])->name);
    BRG_CHECK(brg_stage_alloc_tensor(s, slot_id, ly->output, sl->n, &sl->act[ly->output], "activations"));
    if (train) BRG_CHECK(alloc_saved(s, slot_id, l));
    if (deferred) BRG_CHECK(brg_stage_bn_snapshot(s, l));
    if (train && brg_stage_bn_synced(s, l)) return brg_stage_sync_forward(s, slot_id, l);
    brg_layer_io io;
    brg_op op;
    brg_stage_layer_io(s, sl, l, &io);
    memset(&op, 0, sizeof op);
    BRG_CHECK(kind->forward(&io, &op));
    BRG_CHECK(brg_device_run(s->dev, &op));
    if (deferred) BRG_CHECK(brg_stage_bn_accumulate(s, slot_id, l));
    return BRG_OK;
}

/* The loss's view of the model output and of its probabilities: [n,
 * classes] for class logits, [n, classes, H, W] for per-pixel logits. */
static int loss_shape(const brg_stage *s, int n, int64_t shape[4])
{
    const brg_model_tensor *mo = brg_model_get_tensor(s->model, brg_model_output(s->model));
    shape[0] = n;
    shape[1] = s->classes;
    shape[2] = mo->h;
    shape[3] = mo->w;
    return s->pixels > 1 ? 4 : 2;
}

/* An inference pass's scores on the host: probs and labels copied out
 * (evaluation is off the training path), top-5 counted as the device
 * counts the top-1 (the label ranks among the first five when fewer than
 * five classes beat it: larger, or equal with a lower index), and the
 * metrics, if wanted, given the probabilities and the loss. */
static brg_status score_on_host(brg_stage *s, slot *sl, float loss, brg_stage_result *result)
{
    const int64_t n = sl->n, k = s->classes, px = s->pixels;
    float *p = brg_malloc((size_t)(n * k * px) * sizeof *p, "the probabilities of an evaluation");
    int32_t *y = brg_malloc((size_t)(n * px) * sizeof *y, "the labels of an evaluation");
    brg_status st = p && y ? BRG_OK : BRG_ERR_HOST_MEMORY;
    if (st == BRG_OK) st = brg_device_copy_out(s->dev, p, sl->probs.data, (size_t)(n * k * px) * sizeof *p);
    if (st == BRG_OK) st = brg_device_copy_out(s->dev, y, sl->labels.data, (size_t)(n * px) * sizeof *y);
    result->top5 = 0;
    for (int64_t r = 0; r < n && px == 1 && st == BRG_OK; r++) {
        const float *row = p + r * k;
        if (y[r] < 0 || y[r] >= k) continue;
        const float v = row[y[r]];
        int64_t beaten_by = 0;
        for (int64_t j = 0; j < k; j++) beaten_by += row[j] > v || (row[j] == v && j < y[r]);
        result->top5 += beaten_by < 5;
    }
    if (st == BRG_OK && result->metrics) {
        brg_metrics_add_scores(result->metrics, p, y, n, px);
        brg_metrics_add_loss(result->metrics, loss, brg_stage_counted_labels(s, y, n));
    }
    free(p);
    free(y);
    return st;
}

/* The loss on the last stage: softmax cross-entropy of the model output
 * against the labels (per pixel for per-pixel logits) and, when the caller
 * wants a result, the correct predictions counted on the device
 * (count_correct over the probabilities: the first maximum against the
 * label). The loss and the count share one 8-byte device buffer, so a
 * micro-batch sends 8 bytes to the host, not its probabilities and labels. */
static brg_status forward_loss(brg_stage *s, int slot_id, brg_stage_result *result)
{
    slot *sl = &s->slots[slot_id];
    const int out = brg_model_output(s->model);
    brg_status ret = BRG_OK;
    brg_tensor value = {0}; /* [2] 32-bit words: the loss (float32), the count (int32) */
    brg_tensor logits, loss, count;
    int64_t shape[4];
    const int ndim = loss_shape(s, sl->n, shape);
    const int64_t one = 1, two = 2;
    BRG_CHECK(brg_tensor_reshape(&sl->act[out], ndim, shape, &logits));
    BRG_CHECK(brg_stage_slot_alloc(s, slot_id, &sl->probs, BRG_F32, ndim, shape, "loss", "stash probs", ""));
    BRG_CHECK(brg_stage_slot_alloc(s, slot_id, &value, BRG_I32, 1, &two, "loss", "value", ""));
    BRG_CHECK_GOTO(brg_tensor_init(&loss, value.data, BRG_F32, 1, &one, s->dev), ret, exit);
    BRG_CHECK_GOTO(brg_tensor_init(&count, (int32_t *)value.data + 1, BRG_I32, 1, &one, s->dev), ret, exit);
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_SOFTMAX_XENT_FORWARD;
    op.p.xent.ignore_label = s->cfg.ignore_label;
    op.n_in = 2;
    op.in[0] = &logits;
    op.in[1] = &sl->labels;
    op.n_out = 2;
    op.out[0] = &loss;
    op.out[1] = &sl->probs;
    BRG_CHECK_GOTO(brg_device_run(s->dev, &op), ret, exit);
    if (!result) {
        float v;
        BRG_CHECK_GOTO(brg_device_copy_out(s->dev, &v, loss.data, sizeof v), ret, exit);
        goto exit;
    }
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_COUNT_CORRECT;
    op.n_in = 2;
    op.in[0] = &sl->probs;
    op.in[1] = &sl->labels;
    op.n_out = 1;
    op.out[0] = &count;
    BRG_CHECK_GOTO(brg_device_run(s->dev, &op), ret, exit);
    uint32_t words[2];
    BRG_CHECK_GOTO(brg_device_copy_out(s->dev, words, value.data, sizeof words), ret, exit);
    float v;
    int32_t correct;
    memcpy(&v, &words[0], sizeof v);
    memcpy(&correct, &words[1], sizeof correct);
    result->loss = v;
    result->correct = correct;
    result->top5 = 0;
    if (sl->pass.mode != BRG_PASS_TRAIN) BRG_CHECK_GOTO(score_on_host(s, sl, v, result), ret, exit);
exit:
    brg_stage_slot_free(s, &value);
    return ret;
}

brg_status brg_stage_layer_failed(const brg_stage *s, brg_status st, const brg_layer *ly, const char *what, int slot_id)
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
    int lap = 0;
    BRG_CHECK(brg_stage_clock_start(s, &lap));
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = brg_stage_layer(s, l);
        brg_status st = forward_layer(s, slot_id, l);
        if (st == BRG_OK && s->clock) st = brg_stage_clock_lap(s, s->clock->fwd, l, &lap);
        if (st != BRG_OK)
            return brg_stage_layer_failed(s, st, ly, sl->replaying ? "recomputing the forward" : "forward", slot_id);
        if (!sl->stash) brg_stage_free_saved(s, sl, l);
        for (int k = 0; k < ly->n_inputs; k++) {
            sl->fwd_left[ly->inputs[k]]--;
            brg_stage_maybe_free_act(s, sl, ly->inputs[k]);
        }
        brg_stage_maybe_free_act(s, sl, ly->output);
    }
    return BRG_OK;
}

brg_status brg_stage_forward(brg_stage *s, int slot_id, const brg_pass *pass, brg_stage_result *result)
{
    return brg_stage_forward_outputs(s, slot_id, pass, result, NULL);
}

brg_status brg_stage_forward_outputs(brg_stage *s, int slot_id, const brg_pass *pass, brg_stage_result *result,
                                     float *outputs)
{
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "forward"));
    slot *sl = &s->slots[slot_id];
    if (!pass) return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward without a pass description", s->cfg.index);
    if (outputs && !s->is_last)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: the model output is wanted from a stage that is not "
                         "the last", s->cfg.index);
    if (sl->state != SLOT_FILLING)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward of micro-batch slot %d, which %s", s->cfg.index,
                         slot_id, sl->state == SLOT_EMPTY ? "has no inputs yet" : "has been forwarded already");
    for (int i = 0; i < s->n_inputs; i++)
        if (!sl->act[s->inputs[i]].data)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: forward of micro-batch slot %d without input '%s'",
                             s->cfg.index, slot_id, brg_stage_tensor(s, s->inputs[i])->name);
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
        if (outputs) {
            /* The logits, [n, classes] like the loss's view of them. */
            ret = brg_device_copy_out(s->dev, outputs, sl->act[out].data, brg_tensor_bytes(&sl->act[out]));
            if (ret != BRG_OK) {
                ret = brg_error_context(ret, "stage %d, copying the model output of micro-batch slot %d to the host",
                                        s->cfg.index, slot_id);
                goto fail;
            }
        }
        int lap = 0;
        ret = brg_stage_clock_start(s, &lap);
        if (ret == BRG_OK) ret = forward_loss(s, slot_id, result);
        if (ret == BRG_OK && s->clock) ret = brg_stage_clock_lap(s, s->clock->fwd, s->end_layer - 1, &lap);
        if (ret != BRG_OK) {
            ret = brg_error_context(ret, "stage %d, loss, forward of micro-batch slot %d", s->cfg.index, slot_id);
            goto fail;
        }
        sl->fwd_left[out]--;
        brg_stage_maybe_free_act(s, sl, out);
        if (!train) {
            brg_stage_slot_free(s, &sl->probs);
            brg_stage_slot_free(s, &sl->labels);
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
 * inputs (stage-impl.h), by running the layers again in train mode with the same pass (so
 * the same dropout masks) and BatchNorm momentum 0. The loss is not run
 * again: its probabilities and labels were kept. The outputs are released
 * by now, so they are freed like any activation. */
brg_status brg_stage_replay_forward(brg_stage *s, int slot_id)
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
    for (int i = 0; i < s->n_inputs && st == BRG_OK; i++) brg_stage_maybe_free_act(s, sl, s->inputs[i]);
    sl->replaying = 0;
    sl->needs_replay = 0;
    return st;
}

brg_status brg_stage_output(brg_stage *s, int slot_id, int i, brg_tensor *out)
{
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "output"));
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
    BRG_CHECK(brg_stage_check_slot(s, slot_id, "release outputs"));
    slot *sl = &s->slots[slot_id];
    if (sl->state != SLOT_FORWARD)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: micro-batch slot %d has not been forwarded",
                         s->cfg.index, slot_id);
    sl->outputs_released = 1;
    for (int i = 0; i < s->n_outputs; i++) brg_stage_maybe_free_act(s, sl, s->outputs[i]);
    if (sl->pass.mode != BRG_PASS_TRAIN) brg_stage_discard(s, slot_id);
    return BRG_OK;
}

