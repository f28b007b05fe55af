/* The optimizers' settings, the optimizer step over a stage's parameters,
 * and deferred BatchNorm, whose running statistics move once per
 * mini-batch in the step (docs/training.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/ops.h"
#include "brigade/train.h"
#include "base/internal.h"
#include "train/stage-impl.h"

/* ---- settings ---- */

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

brg_status brg_stage_check_optimizer(const brg_optimizer_config *c)
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

/* ---- deferred BatchNorm ---- */

/* Whether layer l keeps running statistics (BatchNorm): deferred BatchNorm
 * moves them once per mini-batch. */
static int has_running_stats(const brg_stage *s, int l)
{
    return s->layers[l - s->first_layer].role[BRG_P_RMEAN] >= 0;
}

/* Host accumulators per layer with running statistics. */
brg_status brg_stage_bn_alloc(brg_stage *s)
{
    int64_t widest = 0;
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = brg_stage_layer(s, l);
        if (!has_running_stats(s, l)) continue;
        const int64_t c = brg_stage_tensor(s, ly->output)->c;
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

/* Merge a micro-batch's channel k (mean and biased variance over nb
 * values) into the na values so far (Chan et al.'s pairwise update). */
static void merge_channel(stage_layer *pl, int64_t k, double mean, double var, double na, double nb)
{
    const double total = na + nb, delta = mean - pl->bn_mean[k];
    pl->bn_mean[k] += delta * nb / total;
    pl->bn_m2[k] += var * nb + delta * delta * na * nb / total;
}

/* Deferred BatchNorm, after a train forward of BatchNorm layer l on n
 * samples: merge the micro-batch's statistics (its saved mean and
 * 1/sqrt(var + eps), read back to the host) into the mini-batch's. */
brg_status brg_stage_bn_accumulate(brg_stage *s, int slot_id, int l)
{
    if (brg_device_is_planning(s->dev)) return BRG_OK; /* no values to read */
    const slot *sl = &s->slots[slot_id];
    const brg_layer *ly = brg_stage_layer(s, l);
    stage_layer *pl = &s->layers[l - s->first_layer];
    const brg_tensor *saved = &sl->saved[BRG_LAYER_MAX_SAVED * (l - s->first_layer)];
    const brg_model_tensor *t = brg_stage_tensor(s, ly->output);
    const int64_t c = t->c;
    float *mean = s->bn_host, *invstd = s->bn_host + c;
    BRG_CHECK(brg_device_copy_out(s->dev, mean, saved[0].data, (size_t)c * sizeof(float)));
    BRG_CHECK(brg_device_copy_out(s->dev, invstd, saved[1].data, (size_t)c * sizeof(float)));
    const double nb = (double)sl->n * (double)(t->h * t->w), na = pl->bn_count, total = na + nb;
    for (int64_t k = 0; k < c; k++) {
        const double inv = invstd[k];
        merge_channel(pl, k, mean[k], 1.0 / (inv * inv) - (double)ly->desc.epsilon, na, nb);
    }
    pl->bn_count = total;
    return BRG_OK;
}

void brg_stage_bn_merge(brg_stage *s, int l, const double *mean, const double *var, double count)
{
    stage_layer *pl = &s->layers[l - s->first_layer];
    if (!pl->bn_mean || brg_device_is_planning(s->dev)) return;
    const int64_t c = brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
    for (int64_t k = 0; k < c; k++) merge_channel(pl, k, mean[k], var[k], pl->bn_count, count);
    pl->bn_count += count;
}

/* Deferred BatchNorm, before layer l's first train forward of a
 * mini-batch: keep its running statistics (read between steps, so weights
 * loaded into the stage count). */
brg_status brg_stage_bn_snapshot(brg_stage *s, int l)
{
    stage_layer *pl = &s->layers[l - s->first_layer];
    const int rmean = pl->role[BRG_P_RMEAN], rvar = pl->role[BRG_P_RVAR];
    if (pl->bn_snapped || !pl->bn_snap || rmean < 0 || rvar < 0 || brg_device_is_planning(s->dev)) return BRG_OK;
    const size_t c = (size_t)brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
    BRG_CHECK(brg_device_copy_out(s->dev, pl->bn_snap, s->params[rmean].value.data, c * sizeof(float)));
    BRG_CHECK(brg_device_copy_out(s->dev, pl->bn_snap + c, s->params[rvar].value.data, c * sizeof(float)));
    pl->bn_snapped = 1;
    return BRG_OK;
}

/* Write layer pl's running mean and variance (c channels each) from
 * host[0..c) and host[c..2c). */
static brg_status bn_put_running(brg_stage *s, const stage_layer *pl, size_t c, const float *host)
{
    BRG_CHECK(brg_device_copy_in(s->dev, s->params[pl->role[BRG_P_RMEAN]].value.data, host, c * sizeof(float)));
    return brg_device_copy_in(s->dev, s->params[pl->role[BRG_P_RVAR]].value.data, host + c, c * sizeof(float));
}

/* Deferred BatchNorm, in the optimizer step: move the running statistics
 * once with the mini-batch's, as BATCHNORM_FORWARD_TRAIN on the whole
 * batch would (unbiased variance). */
static brg_status bn_apply(brg_stage *s)
{
    for (int l = s->first_layer; l < s->end_layer; l++) {
        const brg_layer *ly = brg_stage_layer(s, l);
        stage_layer *pl = &s->layers[l - s->first_layer];
        if (!has_running_stats(s, l) || !pl->bn_snapped || pl->bn_count < 2.0) continue;
        const int64_t c = brg_stage_tensor(s, ly->output)->c;
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
        const size_t c = (size_t)brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
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

/* ---- the step ---- */

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
                                     brg_stage_layer(s, p->layer)->name, p->info.name);
    }
    brg_status st = bn_apply(s);
    if (st != BRG_OK)
        return brg_error_context(st, "stage %d: updating the BatchNorm running statistics", s->cfg.index);
    return brg_stage_zero_grads(s);
}

/* ---- replicas (exec/replicas.c) ---- */

int brg_stage_grad_slab_count(const brg_stage *s) { return s->n_slabs / 3; }

float *brg_stage_grad_slab(const brg_stage *s, int b, size_t *floats)
{
    *floats = 0;
    if (b < 0 || b >= s->n_slabs / 3 || !s->slabs[3 * b + 1]) return NULL;
    *floats = s->slab_bytes[3 * b + 1] / sizeof(float);
    return s->slabs[3 * b + 1];
}

/* Per layer with running statistics, c channels: deferred, the
 * accumulators as sums that add over replicas (count, count x mean,
 * m2 + count x mean^2 per channel: 1 + 2c); otherwise the running mean and
 * variance themselves (2c), averaged. */
size_t brg_stage_replica_stats_count(const brg_stage *s)
{
    size_t n = 0;
    for (int l = s->first_layer; l < s->end_layer; l++) {
        if (!has_running_stats(s, l)) continue;
        const size_t c = (size_t)brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
        n += s->layers[l - s->first_layer].bn_mean ? 1 + 2 * c : 2 * c;
    }
    return n;
}

brg_status brg_stage_replica_stats_pack(brg_stage *s, double *out)
{
    for (int l = s->first_layer; l < s->end_layer; l++) {
        if (!has_running_stats(s, l)) continue;
        const stage_layer *pl = &s->layers[l - s->first_layer];
        const size_t c = (size_t)brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
        if (pl->bn_mean) {
            const double n = pl->bn_count;
            *out++ = n;
            for (size_t k = 0; k < c; k++) out[k] = n * pl->bn_mean[k];
            for (size_t k = 0; k < c; k++) out[c + k] = pl->bn_m2[k] + n * pl->bn_mean[k] * pl->bn_mean[k];
        } else {
            float *h = brg_malloc(2 * c * sizeof(float), "a BatchNorm's running statistics");
            if (!h) return BRG_ERR_HOST_MEMORY;
            const void *mean = s->params[pl->role[BRG_P_RMEAN]].value.data;
            const void *var = s->params[pl->role[BRG_P_RVAR]].value.data;
            brg_status st = brg_device_copy_out(s->dev, h, mean, c * sizeof(float));
            if (st == BRG_OK) st = brg_device_copy_out(s->dev, h + c, var, c * sizeof(float));
            for (size_t k = 0; k < 2 * c; k++) out[k] = h[k];
            free(h);
            BRG_CHECK(st);
        }
        out += 2 * c;
    }
    return BRG_OK;
}

brg_status brg_stage_replica_stats_merge(brg_stage *s, const double *sums, int replicas)
{
    for (int l = s->first_layer; l < s->end_layer; l++) {
        if (!has_running_stats(s, l)) continue;
        stage_layer *pl = &s->layers[l - s->first_layer];
        const size_t c = (size_t)brg_stage_tensor(s, brg_stage_layer(s, l)->output)->c;
        if (pl->bn_mean) {
            /* The replicas' samples as one mini-batch (Chan et al.'s
             * combination, from sums). */
            const double n = *sums++;
            pl->bn_count = n;
            for (size_t k = 0; k < c && n > 0.0; k++) {
                const double mean = sums[k] / n;
                pl->bn_mean[k] = mean;
                pl->bn_m2[k] = fmax(sums[c + k] - n * mean * mean, 0.0);
            }
        } else {
            float *h = brg_malloc(2 * c * sizeof(float), "a BatchNorm's running statistics");
            if (!h) return BRG_ERR_HOST_MEMORY;
            for (size_t k = 0; k < 2 * c; k++) h[k] = (float)(sums[k] / replicas);
            const brg_status st = bn_put_running(s, pl, c, h);
            free(h);
            BRG_CHECK(st);
        }
        sums += 2 * c;
    }
    return BRG_OK;
}
