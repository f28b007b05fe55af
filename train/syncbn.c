/* Synchronized BatchNorm: a stage's BatchNorm layers normalize with the
 * statistics of every replica's micro-batch of the same index, and their
 * backward goes through those statistics, so D replicas of micro-batch n
 * train as one device with micro-batch D x n.
 *
 * A train forward runs BATCHNORM_STATS on the micro-batch, gathers every
 * replica's count, mean and variance (the stage's gather hook, an
 * all-gather in the executor), merges them on the host in double in
 * replica order (Chan et al.'s pairwise update, so every replica computes
 * the same numbers), and normalizes with BATCHNORM_FORWARD_INFER given
 * the merged mean and variance; the saved stash gets the merged mean and
 * 1/sqrt(var + eps). The means travel as two floats (the float and its
 * low part, mean_lo), so that data far from zero keep full precision as
 * on one device; the stash keeps the float, the stage's host memory the
 * low part until the backward. The backward runs BATCHNORM_BACKWARD_REDUCE (its
 * sums of dy and dy * xhat, which are also this replica's part of the
 * gamma and beta gradients that the gradient sums add up later), gathers
 * and adds the sums in replica order, and finishes with
 * BATCHNORM_BACKWARD_ELEMT. A replay (recomputation) gathers again: every
 * replica replays the same micro-batches in the same order, and the
 * statistics come out the same.
 *
 * The sums, the merged variance and mean_lo live in one persistent device
 * buffer of BRG_BATCHNORM_SYNC_VECTORS x the widest BatchNorm's channels
 * per stage (the plans count it);
 * the ops that use it run one after another on the stage's device, and
 * each copy out waits for the ops before it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "base/internal.h"
#include "train/stage-impl.h"

brg_status brg_stage_set_gather(brg_stage *s, brg_stage_gather_fn fn, void *ctx, int replicas)
{
    if (replicas < 1 || (!fn && replicas != 1))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "stage %d: a gather over %d replicas", s->cfg.index, replicas);
    if (s->sync.widest > 0 && replicas != s->sync.replicas) BRG_CHECK(brg_stage_sync_host_alloc(s, replicas));
    s->sync.gather = fn;
    s->sync.ctx = ctx;
    s->sync.replicas = replicas;
    return BRG_OK;
}

/* Every replica's n values (mine[0..n)) into all[replicas * n]. */
static brg_status gather(brg_stage *s, size_t n)
{
    if (!s->sync.gather) {
        memcpy(s->sync.all, s->sync.mine, n * sizeof(double));
        return BRG_OK;
    }
    return s->sync.gather(s->sync.ctx, s->sync.mine, s->sync.all, n);
}

/* The device buffer as BRG_BATCHNORM_SYNC_VECTORS [c] vectors. */
static brg_status sync_vectors(brg_stage *s, int64_t c, brg_tensor v[BRG_BATCHNORM_SYNC_VECTORS])
{
    for (int i = 0; i < BRG_BATCHNORM_SYNC_VECTORS; i++)
        BRG_CHECK(brg_tensor_init(&v[i], s->sync.dev + i * c, BRG_F32, 1, &c, s->dev));
    return BRG_OK;
}

/* Slot sl's merged-mean low parts of layer l (host). */
static float *mean_lo_of(brg_stage *s, const slot *sl, int l)
{
    return s->sync.mean_lo + (size_t)(sl - s->slots) * (size_t)s->sync.lo_row +
           (size_t)s->layers[l - s->first_layer].sync_lo_at;
}

/* Run op, which writes this replica's two [c] vectors of layer output t
 * into the device buffer (with with_lo, a mean and its low part in the
 * third), then gather them from every replica: mine holds the count of
 * values per channel of slot sl's micro-batch, then the 2c values. */
static brg_status run_and_gather(brg_stage *s, const slot *sl, const brg_model_tensor *t, const brg_op *op,
                                 int with_lo)
{
    const int64_t c = t->c;
    BRG_CHECK(brg_device_run(s->dev, op));
    BRG_CHECK(brg_device_copy_out(s->dev, s->sync.host, s->sync.dev, (with_lo ? 3 : 2) * (size_t)c * sizeof(float)));
    s->sync.mine[0] = (double)sl->n * (double)(t->h * t->w);
    for (int64_t k = 0; k < 2 * c; k++) s->sync.mine[1 + k] = s->sync.host[k];
    if (with_lo)
        for (int64_t k = 0; k < c; k++) s->sync.mine[1 + k] += s->sync.host[2 * c + k];
    return gather(s, 1 + 2 * (size_t)c);
}

/* Move layer l's running statistics towards the merged mean and the
 * unbiased merged variance, as BATCHNORM_FORWARD_TRAIN would on the
 * whole synchronized batch of n values. */
static brg_status move_running(brg_stage *s, int l, int64_t c, const double *mean, const double *m2, double n)
{
    const stage_layer *pl = &s->layers[l - s->first_layer];
    float *rm = s->sync.host + 3 * c, *rv = s->sync.host + 4 * c;
    void *dm = s->params[pl->role[BRG_P_RMEAN]].value.data, *dv = s->params[pl->role[BRG_P_RVAR]].value.data;
    BRG_CHECK(brg_device_copy_out(s->dev, rm, dm, (size_t)c * sizeof(float)));
    BRG_CHECK(brg_device_copy_out(s->dev, rv, dv, (size_t)c * sizeof(float)));
    const double mom = brg_stage_layer(s, l)->desc.momentum;
    for (int64_t k = 0; k < c; k++) {
        rm[k] = (float)((1.0 - mom) * rm[k] + mom * mean[k]);
        rv[k] = (float)((1.0 - mom) * rv[k] + mom * (m2[k] / (n - 1.0)));
    }
    BRG_CHECK(brg_device_copy_in(s->dev, dm, rm, (size_t)c * sizeof(float)));
    return brg_device_copy_in(s->dev, dv, rv, (size_t)c * sizeof(float));
}

brg_status brg_stage_sync_forward(brg_stage *s, int slot_id, int l)
{
    slot *sl = &s->slots[slot_id];
    const brg_layer *ly = brg_stage_layer(s, l);
    const brg_model_tensor *t = brg_stage_tensor(s, ly->output);
    const int64_t c = t->c;
    const size_t stride = 1 + 2 * (size_t)c;
    brg_layer_io io;
    brg_op op;
    brg_tensor v[BRG_BATCHNORM_SYNC_VECTORS]; /* mean, var, mean_lo */
    brg_stage_layer_io(s, sl, l, &io);
    BRG_CHECK(sync_vectors(s, c, v));
    memset(&op, 0, sizeof op);
    brg_batchnorm_sync_stats(&io, &op, &v[0], &v[1], &v[2]);
    BRG_CHECK(run_and_gather(s, sl, t, &op, 1));
    /* Deferred BatchNorm adds this replica's own statistics (the sums of
     * the replicas' accumulators make the whole batch's at the step). */
    if (s->cfg.deferred_batchnorm && !brg_stage_statistics_kept(s, sl))
        brg_stage_bn_merge(s, l, s->sync.mine + 1, s->sync.mine + 1 + c, s->sync.mine[0]);

    /* Merge in replica order into mine (no longer needed): mean, M2. */
    double *gm = s->sync.mine, *m2 = s->sync.mine + c, n = 0.0;
    for (int64_t k = 0; k < c; k++) gm[k] = m2[k] = 0.0;
    for (int r = 0; r < s->sync.replicas; r++) {
        const double *row = s->sync.all + (size_t)r * stride;
        const double nb = row[0], total = n + nb;
        if (nb <= 0.0) continue;
        for (int64_t k = 0; k < c; k++) {
            const double delta = row[1 + k] - gm[k];
            gm[k] += delta * nb / total;
            m2[k] += row[1 + c + k] * nb + delta * delta * n * nb / total;
        }
        n = total;
    }
    if (n < 2.0 && !brg_device_is_planning(s->dev))
        return brg_error(BRG_ERR_SHAPE, "BatchNorm '%s': training needs more than one value per channel over the "
                         "replicas (%.0f)", ly->name, n);
    /* The stash (merged mean, 1/sqrt(var + eps)), the mean's low part
     * (kept for the backward) and the variance to normalize with, then y. */
    float *fm = s->sync.host, *fv = s->sync.host + c, *fi = s->sync.host + 2 * c, *lo = mean_lo_of(s, sl, l);
    const double eps = ly->desc.epsilon;
    for (int64_t k = 0; k < c; k++) {
        const double var = n > 0.0 ? m2[k] / n : 0.0;
        fm[k] = (float)gm[k];
        lo[k] = (float)(gm[k] - (double)fm[k]);
        fv[k] = (float)var;
        fi[k] = (float)(1.0 / sqrt(var + eps));
    }
    BRG_CHECK(brg_device_copy_in(s->dev, io.saved[0]->data, fm, (size_t)c * sizeof(float)));
    BRG_CHECK(brg_device_copy_in(s->dev, io.saved[1]->data, fi, (size_t)c * sizeof(float)));
    BRG_CHECK(brg_device_copy_in(s->dev, v[1].data, fv, (size_t)c * sizeof(float)));
    BRG_CHECK(brg_device_copy_in(s->dev, v[2].data, lo, (size_t)c * sizeof(float)));
    memset(&op, 0, sizeof op);
    brg_batchnorm_sync_normalize(&io, &op, &v[1], &v[2]);
    BRG_CHECK(brg_device_run(s->dev, &op));
    if (brg_stage_statistics_kept(s, sl) || s->cfg.deferred_batchnorm || n < 2.0) return BRG_OK;
    return move_running(s, l, c, gm, m2, n);
}

brg_status brg_stage_sync_backward(brg_stage *s, slot *sl, int l, const brg_tensor *dy, int accumulate)
{
    const brg_model_tensor *t = brg_stage_tensor(s, brg_stage_layer(s, l)->output);
    const int64_t c = t->c;
    const size_t stride = 1 + 2 * (size_t)c;
    brg_layer_io io;
    brg_op op;
    brg_tensor v[BRG_BATCHNORM_SYNC_VECTORS]; /* sum_dy, sum_dy_xhat, mean_lo */
    brg_stage_layer_io(s, sl, l, &io);
    io.dy = dy;
    io.accumulate = accumulate;
    BRG_CHECK(sync_vectors(s, c, v));
    BRG_CHECK(brg_device_copy_in(s->dev, v[2].data, mean_lo_of(s, sl, l), (size_t)c * sizeof(float)));
    memset(&op, 0, sizeof op);
    brg_batchnorm_sync_reduce(&io, &op, &v[0], &v[1], &v[2]);
    BRG_CHECK(run_and_gather(s, sl, t, &op, 0));
    double n = 0.0;
    float *f = s->sync.host;
    for (int64_t k = 0; k < 2 * c; k++) s->sync.mine[k] = 0.0;
    for (int r = 0; r < s->sync.replicas; r++) {
        const double *row = s->sync.all + (size_t)r * stride;
        n += row[0];
        for (int64_t k = 0; k < 2 * c; k++) s->sync.mine[k] += row[1 + k];
    }
    for (int64_t k = 0; k < 2 * c; k++) f[k] = (float)s->sync.mine[k];
    BRG_CHECK(brg_device_copy_in(s->dev, s->sync.dev, f, 2 * (size_t)c * sizeof(float)));
    memset(&op, 0, sizeof op);
    brg_batchnorm_sync_elemt(&io, &op, &v[0], &v[1], &v[2], (int64_t)n);
    return brg_device_run(s->dev, &op);
}
