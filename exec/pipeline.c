/* brigade: pipelined training from a description (brigade/pipeline.h):
 * devices, what each holds, a schedule, the micro-batch and the optimizer,
 * whether a plan made it or the caller. The executor (executor-impl.h) runs
 * the step; evaluation sends pieces through the stages, computing on the
 * executor's workers (eval_run).
 * See docs/pipeline.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade/pipeline.h"
#include "executor-impl.h"
#include "base/internal.h"
#include "train/metrics-impl.h"
#include "world-impl.h"

enum { MEM_PERSISTENT, MEM_PARAMS, MEM_GRADS, MEM_OPTIMIZER, MEM_RECEIVE, MEM_PEAK, MEM_FIELDS };

struct brg_pipeline {
    brg_pipeline_desc desc; /* desc.parts points to parts */
    brg_device_part *parts;
    const brg_model *model;
    int p, v, m, micro_batch, batch;
    brg_executor *ex;
    brg_pipeline_options opt;
    int64_t steps;
    double last_step_s;
    int64_t sample;              /* floats per sample */
    int64_t labels;              /* labels per sample (brg_model_label_count) */
    unsigned char *host;         /* evaluation: one boundary tensor on its way between devices */
    size_t host_bytes;
    const brg_world *world;      /* NULL: every device is here */
    int distributed;
    /* Replicas (brg_world_split_replicas): a step takes replicas x batch
     * samples, of which this replica's micro-batches are gathered here. */
    int replicas, replica;
    float *share_images;
    int32_t *share_labels;
    /* Every device's memory, here or on other ranks: persistent, weights,
     * gradients, optimizer state, receive buffers, peak (the peak as of
     * the latest step or evaluation). */
    size_t (*mem)[MEM_FIELDS];
};

brg_pipeline_options brg_pipeline_options_init(void)
{
    brg_pipeline_options o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    o.channel_capacity = 0; /* the parts' */
    return o;
}

/* This rank holds virtual stage 0: it reads the batches. */
static int feeds(const brg_pipeline *pl) { return brg_world_holds(pl->world, 0, pl->p); }

/* A description the executor can run: everything given, the model
 * finalized, the parts one per device of the schedule with its chunks. The
 * executor checks the rest (block ranges, devices) as it builds programs. */
static brg_status check_desc(const brg_pipeline_desc *desc, int n_devices)
{
    if (!desc->model || !desc->schedule || !desc->parts)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_pipeline_create: the description needs a model, a schedule and the devices' parts");
    if (!brg_model_is_final(desc->model))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_create: model '%s' is not finalized",
                         brg_model_name(desc->model));
    const int p = brg_schedule_devices(desc->schedule);
    if (n_devices != p)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_create: %d devices given for a pipeline of %d",
                         n_devices, p);
    if (desc->micro_batch < 1)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_create: micro-batches of %d samples",
                         desc->micro_batch);
    for (int d = 0; d < p; d++)
        if (desc->parts[d].chunks != brg_schedule_chunks(desc->schedule))
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "brg_pipeline_create: device %d holds %d chunks, but the schedule has %d per device", d,
                             desc->parts[d].chunks, brg_schedule_chunks(desc->schedule));
    return BRG_OK;
}

/* Every device's memory figures on every rank: this rank's devices are
 * read here, the others' come summed over the ranks. A collective call
 * when distributed. */
static brg_status share_memory(brg_pipeline *pl)
{
    double *v = brg_calloc((size_t)pl->p * MEM_FIELDS, sizeof *v, "the devices' memory figures");
    if (!v) return BRG_ERR_HOST_MEMORY;
    for (int d = 0; d < pl->p; d++) {
        const brg_program *g = brg_executor_program(pl->ex, d);
        if (!g) continue;
        size_t f[MEM_FIELDS];
        brg_program_persistent(g, &f[MEM_PERSISTENT], &f[MEM_PARAMS], &f[MEM_GRADS], &f[MEM_OPTIMIZER]);
        f[MEM_RECEIVE] = brg_program_receive_bytes(g);
        f[MEM_PEAK] = brg_device_peak(brg_program_device(g));
        for (int k = 0; k < MEM_FIELDS; k++) v[d * MEM_FIELDS + k] = (double)f[k];
    }
    brg_status st = brg_world_sum(pl->world, v, pl->p * MEM_FIELDS);
    if (st == BRG_OK)
        for (int d = 0; d < pl->p; d++)
            for (int k = 0; k < MEM_FIELDS; k++) pl->mem[d][k] = (size_t)v[d * MEM_FIELDS + k];
    free(v);
    return st;
}

/* Append n bytes to a growing buffer (for the description's fingerprint). */
static int put(unsigned char **buf, size_t *len, size_t *cap, const void *bytes, size_t n)
{
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n) c *= 2;
        unsigned char *b = realloc(*buf, c);
        if (!b) return 0;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, bytes, n);
    *len += n;
    return 1;
}

/* The ranks must run one description: the model's shape, the parts, every
 * action, the micro-batch, the optimizer and the options that change the
 * numbers or the collectives (record_times shares the times). Agreed one
 * part at a time, so that a difference is named. (The structs hashed are
 * all 4-byte fields: no padding.) */
static brg_status agree_on_desc(const brg_pipeline *pl)
{
    unsigned char *buf[4] = {NULL, NULL, NULL, NULL};
    size_t len[4] = {0, 0, 0, 0}, cap[4] = {0, 0, 0, 0};
    static const char *const what[4] = {
        "the model (its name, blocks, layers, parameters, input and classes)",
        "the plan's parts (which blocks each device holds, and what it recomputes)",
        "the schedule (every device's actions)",
        "the pipeline's settings (micro-batches, seed, optimizer, replicas and options)"};
    int ok = 1;
    const brg_model *m = pl->model;
    const char *name = brg_model_name(m);
    const int64_t model[] = {brg_model_block_count(m), brg_model_layer_count(m), brg_model_trainable_params(m),
                             brg_model_frozen_params(m), pl->sample, brg_model_label_count(m), brg_model_classes(m)};
    const int64_t settings[] = {pl->p, pl->v, pl->m, pl->micro_batch, (int64_t)pl->opt.seed,
                                pl->opt.deferred_batchnorm, pl->opt.channel_capacity, pl->opt.ignore_label,
                                pl->replicas, pl->opt.record_times};
    ok &= put(&buf[0], &len[0], &cap[0], name, strlen(name) + 1);
    ok &= put(&buf[0], &len[0], &cap[0], model, sizeof model);
    ok &= put(&buf[1], &len[1], &cap[1], pl->parts, (size_t)pl->p * sizeof *pl->parts);
    for (int d = 0; d < pl->p && ok; d++)
        for (int i = 0; i < brg_schedule_action_count(pl->desc.schedule, d) && ok; i++)
            ok &= put(&buf[2], &len[2], &cap[2], brg_schedule_action(pl->desc.schedule, d, i), sizeof(brg_action));
    ok &= put(&buf[3], &len[3], &cap[3], settings, sizeof settings);
    ok &= put(&buf[3], &len[3], &cap[3], &pl->desc.optimizer, sizeof pl->desc.optimizer);
    brg_status st = ok ? BRG_OK : brg_error(BRG_ERR_HOST_MEMORY, "the pipeline's fingerprint");
    /* Every rank makes every call, even after a difference or out of
     * memory on another rank: the first failure is kept. */
    for (int k = 0; k < 4; k++) {
        const unsigned char *bytes = buf[k] ? buf[k] : (const unsigned char *)"";
        const brg_status agreed = brg_world_agree(pl->world, bytes, len[k], what[k]);
        if (st == BRG_OK) st = agreed;
        free(buf[k]);
    }
    return st;
}

brg_status brg_pipeline_create(const brg_pipeline_desc *desc, brg_device *const *devices, int n_devices,
                               const brg_pipeline_options *options, brg_pipeline **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_create: out is NULL");
    *out = NULL;
    if (!desc || !devices)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_create: a description and devices must be given");
    BRG_CHECK(check_desc(desc, n_devices));
    brg_pipeline_options opt = options ? *options : brg_pipeline_options_init();
    /* 0: what the parts say (their plan's), else the option overrides it. */
    if (opt.channel_capacity == 0) opt.channel_capacity = desc->parts[0].channel_capacity;
    if (opt.channel_capacity == 0) opt.channel_capacity = BRG_CHANNEL_CAPACITY_DEFAULT;
    if (opt.channel_capacity < 1 || opt.channel_capacity > BRG_CHANNEL_CAPACITY_MAX)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "channel capacity %d: must be 1..%d (0 for the plan's, %d by default)", opt.channel_capacity,
                         BRG_CHANNEL_CAPACITY_MAX, BRG_CHANNEL_CAPACITY_DEFAULT);
    /* A hand-made schedule that cannot run is refused here, with the
     * verifier's account of who waits for what, not at its first step. */
    char why[1024];
    if (brg_schedule_verify(desc->schedule, opt.channel_capacity, why, sizeof why) != BRG_OK)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_pipeline_create: the schedule cannot run with channels of %d messages: %s",
                         opt.channel_capacity, why);
    brg_pipeline *pl = brg_calloc(1, sizeof *pl, "a pipeline");
    brg_device_part *parts = brg_calloc((size_t)n_devices, sizeof *parts, "the pipeline's parts");
    brg_status ret = BRG_OK;
    if (!parts || !pl) {
        free(parts);
        free(pl);
        return BRG_ERR_HOST_MEMORY;
    }
    memcpy(parts, desc->parts, (size_t)n_devices * sizeof *parts);
    for (int d = 0; d < n_devices; d++) parts[d].channel_capacity = opt.channel_capacity;
    pl->parts = parts;
    pl->desc = *desc;
    pl->desc.parts = parts;
    pl->model = desc->model;
    pl->p = n_devices;
    pl->v = brg_schedule_chunks(desc->schedule);
    pl->m = brg_schedule_micro_batches(desc->schedule);
    pl->micro_batch = desc->micro_batch;
    pl->batch = pl->m * pl->micro_batch;
    pl->opt = opt;
    const brg_model_tensor *in = brg_model_get_tensor(pl->model, brg_model_input(pl->model));
    pl->sample = in->c * in->h * in->w;
    pl->labels = brg_model_label_count(pl->model);
    pl->world = opt.world;
    pl->distributed = brg_world_is_distributed(opt.world);
    pl->replicas = brg_world_replicas(opt.world);
    pl->replica = brg_world_replica(opt.world);
    pl->mem = brg_calloc((size_t)n_devices, sizeof *pl->mem, "the devices' memory figures");
    if (!pl->mem) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    /* Ranks that would build different pipelines would wait for each
     * other's messages forever: compare before anything is exchanged. */
    if (pl->distributed || pl->replicas > 1) {
        BRG_CHECK_GOTO(brg_world_check_devices(opt.world, n_devices), ret, fail);
        BRG_CHECK_GOTO(agree_on_desc(pl), ret, fail);
    }
    if (pl->replicas > 1 && feeds(pl)) {
        pl->share_images = brg_calloc((size_t)pl->batch * (size_t)pl->sample, sizeof(float), "a replica's batch");
        pl->share_labels = brg_calloc((size_t)pl->batch * (size_t)pl->labels, sizeof(int32_t), "a replica's batch");
        if (!pl->share_images || !pl->share_labels) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
    }
    /* The executor checks the devices (given, distinct) and creates every
     * program or none; an out-of-memory names the device and the block. */
    BRG_CHECK_GOTO(brg_executor_create(pl->model, desc->schedule, devices, parts, pl->micro_batch, &desc->optimizer,
                                       opt.seed, opt.deferred_batchnorm, opt.world, &pl->ex),
                   ret, fail);
    BRG_CHECK_GOTO(share_memory(pl), ret, fail);
    brg_executor_record_times(pl->ex, opt.record_times);
    brg_executor_set_ignore_label(pl->ex, opt.ignore_label);
    *out = pl;
    return BRG_OK;
fail:
    brg_pipeline_destroy(pl);
    return ret;
}

void brg_pipeline_destroy(brg_pipeline *pl)
{
    if (!pl) return;
    brg_executor_destroy(pl->ex);
    free(pl->mem);
    free(pl->host);
    free(pl->share_images);
    free(pl->share_labels);
    free(pl->parts);
    free(pl);
}


static brg_status check_batch(const brg_pipeline *pl, const char *fn, const float *images, const int32_t *labels,
                              int n)
{
    if (!pl) return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: no pipeline", fn);
    if ((!images || !labels) && feeds(pl))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: images and labels must be given%s", fn,
                         pl->distributed ? " on the rank of the first stage" : "");
    if (n != pl->batch * pl->replicas && !(pl->replicas > 1 && n == pl->batch)) {
        if (pl->replicas > 1)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "%s: %d samples, but the pipeline's mini-batch is %d (%d replicas of %d micro-batches of "
                             "%d), or %d for this replica's share alone", fn, n, pl->batch * pl->replicas,
                             pl->replicas, pl->m, pl->micro_batch, pl->batch);
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: %d samples, but the pipeline's mini-batch is %d (%d micro-batches of %d)", fn, n,
                         pl->batch, pl->m, pl->micro_batch);
    }
    return BRG_OK;
}

int64_t brg_pipeline_share_sample(const brg_pipeline *pl, int64_t k)
{
    if (!pl || k < 0 || k >= pl->batch) return -1;
    const int64_t mb = pl->micro_batch;
    return (k / mb * pl->replicas + pl->replica) * mb + k % mb;
}

/* The executor's run on this replica's share of the mini-batch: its
 * micro-batches i * replicas + replica, gathered (so that with synchronized
 * statistics micro-batch i of every replica is one micro-batch of the
 * whole) unless the images are the share already. */

static brg_status run_share(brg_pipeline *pl, const float *images, const int32_t *labels, int n, double *loss,
                            int64_t *correct)
{
    if (pl->replicas > 1 && images && n == pl->batch * pl->replicas) {
        const size_t mb_floats = (size_t)pl->micro_batch * (size_t)pl->sample;
        const size_t mb_labels = (size_t)pl->micro_batch * (size_t)pl->labels;
        for (int i = 0; i < pl->m; i++) {
            const size_t from = (size_t)brg_pipeline_share_sample(pl, (int64_t)i * pl->micro_batch) / pl->micro_batch;
            memcpy(pl->share_images + i * mb_floats, images + from * mb_floats, mb_floats * sizeof(float));
            memcpy(pl->share_labels + i * mb_labels, labels + from * mb_labels, mb_labels * sizeof(int32_t));
        }
        images = pl->share_images;
        labels = pl->share_labels;
    }
    return brg_executor_run(pl->ex, images, labels, pl->batch, loss, correct);
}

brg_status brg_pipeline_forward_backward(brg_pipeline *pl, const float *images, const int32_t *labels, int n,
                                         double *loss, int64_t *correct)
{
    if (loss) *loss = 0.0;
    if (correct) *correct = 0;
    BRG_CHECK(check_batch(pl, "brg_pipeline_forward_backward", images, labels, n));
    BRG_CHECK(run_share(pl, images, labels, n, loss, correct));
    return pl->distributed ? share_memory(pl) : BRG_OK;
}

brg_status brg_pipeline_update(brg_pipeline *pl, float lr)
{
    if (!pl) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_update: no pipeline");
    if (!(lr >= 0.0f)) return brg_error(BRG_ERR_INVALID_ARGUMENT, "learning rate %g must be >= 0", (double)lr);
    BRG_CHECK(brg_executor_update(pl->ex, lr));
    pl->steps++;
    return BRG_OK;
}

brg_status brg_pipeline_step(brg_pipeline *pl, float lr, const float *images, const int32_t *labels, int n,
                             double *loss, int64_t *correct)
{
    if (loss) *loss = 0.0;
    if (correct) *correct = 0;
    BRG_CHECK(check_batch(pl, "brg_pipeline_step", images, labels, n));
    if (!(lr >= 0.0f)) return brg_error(BRG_ERR_INVALID_ARGUMENT, "learning rate %g must be >= 0", (double)lr);
    const double t0 = brg_now_seconds();
    BRG_CHECK(run_share(pl, images, labels, n, loss, correct));
    BRG_CHECK(brg_pipeline_update(pl, lr));
    pl->last_step_s = brg_now_seconds() - t0;
    if (pl->distributed) BRG_CHECK(share_memory(pl));
    return BRG_OK;
}

/* ---- evaluation ---- */

static brg_status host_room(brg_pipeline *pl, size_t bytes)
{
    if (bytes <= pl->host_bytes) return BRG_OK;
    unsigned char *h = realloc(pl->host, bytes);
    if (!h) return brg_error(BRG_ERR_HOST_MEMORY, "evaluation: %zu bytes of host memory for a boundary tensor", bytes);
    pl->host = h;
    pl->host_bytes = bytes;
    return BRG_OK;
}

/* The device of virtual stage j (the schedule's placement). */
static int device_of(const brg_pipeline *pl, int j) { return brg_schedule_device_of(pl->desc.schedule, j); }

/* Virtual stage j's stage: chunk j / p of its device; NULL where another
 * rank holds it. */
static brg_stage *vstage(const brg_pipeline *pl, int j)
{
    const brg_program *g = brg_executor_program(pl->ex, device_of(pl, j));
    return g ? brg_program_stage(g, j / pl->p) : NULL;
}

/* Boundary tensor i of stage prev (here) into input i of st (here), through
 * host memory, so devices of any backend mix. */
static brg_status pass_local(brg_pipeline *pl, brg_stage *prev, brg_stage *st, int i, int k)
{
    brg_tensor src, t;
    BRG_CHECK(brg_stage_output(prev, 0, i, &src));
    BRG_CHECK(brg_stage_input(st, 0, i, k, &t));
    BRG_CHECK(host_room(pl, brg_tensor_bytes(&src)));
    BRG_CHECK(brg_device_copy_out(brg_stage_device(prev), pl->host, src.data, brg_tensor_bytes(&src)));
    return brg_device_copy_in(brg_stage_device(st), t.data, pl->host, brg_tensor_bytes(&t));
}

/* The same between ranks: the sender's half and the receiver's. */
static brg_status pass_out(brg_pipeline *pl, brg_stage *prev, int i, int to)
{
    brg_tensor src;
    BRG_CHECK(brg_stage_output(prev, 0, i, &src));
    BRG_CHECK(host_room(pl, brg_tensor_bytes(&src)));
    BRG_CHECK(brg_device_copy_out(brg_stage_device(prev), pl->host, src.data, brg_tensor_bytes(&src)));
    return brg_world_send(pl->world, to, pl->host, brg_tensor_bytes(&src));
}

static brg_status pass_in(brg_pipeline *pl, brg_stage *st, int i, int k, int from)
{
    brg_tensor t;
    BRG_CHECK(brg_stage_input(st, 0, i, k, &t));
    BRG_CHECK(host_room(pl, brg_tensor_bytes(&t)));
    BRG_CHECK(brg_world_recv(pl->world, from, pl->host, brg_tensor_bytes(&t)));
    return brg_device_copy_in(brg_stage_device(st), t.data, pl->host, brg_tensor_bytes(&t));
}

/* An evaluation goes through the stages in pieces of at most one
 * micro-batch, one tick at a time: at tick t virtual stage j has piece
 * (t - j) / stride where that divides. With stride 1 the pieces go as a
 * pipeline, every device computing at once; with stride V (the virtual
 * stages) one stage computes at a time. Each tick, the boundary tensors
 * move into the stage that takes each piece next (through the host, and
 * between ranks through MPI), last stage first so that a stage's outputs
 * are gone before its next input comes; then the stages forward their
 * pieces (eval_ticks says on which threads). Every stage uses slot 0 (free
 * between steps) in inference mode. */
typedef struct eval_run {
    brg_pipeline *pl;
    int64_t n, tick;
    int alone; /* stride V, the whole evaluation on one worker (eval_all); else stride 1 */
    const float *images;
    const int32_t *all_labels; /* the caller's, n x the labels per sample (NULL on ranks that do not feed) */
    const int32_t *labels;     /* the current last piece's, where the last stage is */
    brg_stage_result res;      /* res.metrics NULL: no figures wanted */
    float *outputs;            /* here, n x the output's elements; NULL: not wanted */
    int64_t out_elems;
} eval_run;

static int64_t eval_stride(const eval_run *r) { return r->alone ? r->pl->p * r->pl->v : 1; }

/* Virtual stage j's piece in this tick: 0 when it has none, else its size
 * k, and its first sample at *offset. */
static int eval_piece_at(const eval_run *r, int j, int64_t *offset)
{
    const int64_t since = r->tick - j, stride = eval_stride(r), piece = since / stride, mb = r->pl->micro_batch;
    *offset = piece * mb;
    if (since < 0 || since % stride != 0 || *offset >= r->n) return 0;
    return (int)(r->n - *offset < mb ? r->n - *offset : mb);
}

static brg_status eval_failed(const eval_run *r, brg_status st, int j, int64_t offset, int k)
{
    return brg_error_context(st, "evaluation, samples %lld..%lld: device %d (virtual stage %d)", (long long)offset,
                             (long long)offset + k - 1, device_of(r->pl, j), j);
}

/* Virtual stage j's piece of this tick into its inputs (and labels), from
 * the images or the stage before, whose outputs are then released; where
 * the stage before is here and j is on another rank, its outputs go there. */
static brg_status eval_feed(eval_run *r, int j)
{
    brg_pipeline *pl = r->pl;
    int64_t offset;
    const int k = eval_piece_at(r, j, &offset);
    if (k == 0) return BRG_OK;
    brg_stage *st = vstage(pl, j);
    brg_stage *prev = j > 0 ? vstage(pl, j - 1) : NULL;
    brg_status ret = BRG_OK;
    if (!st) {
        /* Another rank's stage: hand it our outputs, if they are ours. */
        const int to = brg_world_device_rank(pl->world, device_of(pl, j), pl->p);
        for (int i = 0; prev && i < brg_stage_output_count(prev) && ret == BRG_OK; i++) ret = pass_out(pl, prev, i, to);
        if (prev && ret == BRG_OK) ret = brg_stage_release_outputs(prev, 0);
        return ret == BRG_OK ? BRG_OK : eval_failed(r, ret, j - 1, offset, k);
    }
    brg_device *dev = brg_stage_device(st);
    brg_tensor t;
    if (j == 0) {
        ret = brg_stage_input(st, 0, 0, k, &t);
        if (ret == BRG_OK) ret = brg_device_copy_in(dev, t.data, r->images + offset * pl->sample, brg_tensor_bytes(&t));
    } else {
        const int from = brg_world_device_rank(pl->world, device_of(pl, j - 1), pl->p);
        for (int i = 0; i < brg_stage_input_count(st) && ret == BRG_OK; i++)
            ret = prev ? pass_local(pl, prev, st, i, k) : pass_in(pl, st, i, k, from);
        /* In inference mode this empties the previous stage's slot. */
        if (prev && ret == BRG_OK) ret = brg_stage_release_outputs(prev, 0);
    }
    if (ret == BRG_OK && j == pl->p * pl->v - 1) {
        ret = brg_stage_labels(st, 0, k, &t);
        if (ret == BRG_OK) ret = brg_device_copy_in(dev, t.data, r->labels, brg_tensor_bytes(&t));
    }
    return ret == BRG_OK ? BRG_OK : eval_failed(r, ret, j, offset, k);
}

/* brg_executor_work: the device's stages forward their pieces of this
 * tick; the last one reports to res and copies the outputs. */
static brg_status eval_forward(void *arg, int device)
{
    eval_run *r = arg;
    brg_pipeline *pl = r->pl;
    const int V = pl->p * pl->v;
    for (int c = 0; c < pl->v; c++) {
        const int j = brg_schedule_stage_of(pl->desc.schedule, device, c);
        int64_t offset;
        const int k = eval_piece_at(r, j, &offset);
        if (k == 0) continue;
        brg_stage *st = vstage(pl, j);
        const brg_pass pass = {BRG_PASS_EVAL, pl->steps + 1, offset};
        brg_status ret = j == V - 1 ? brg_stage_forward_outputs(st, 0, &pass, r->res.metrics ? &r->res : NULL,
                                                                r->outputs ? r->outputs + offset * r->out_elems : NULL)
                                    : brg_stage_forward(st, 0, &pass, NULL);
        /* An asynchronous failure is this piece's. */
        if (ret == BRG_OK) ret = brg_device_synchronize(brg_stage_device(st));
        if (ret != BRG_OK) return eval_failed(r, ret, j, offset, k);
    }
    return BRG_OK;
}

/* Add from, summed by sum over ranks (brg_world_sum: the pipeline's,
 * brg_world_replicas_sum: the replicas'), to into, which may be from (a
 * collective call). */
static brg_status add_summed(const brg_pipeline *pl, brg_status (*sum)(const brg_world *, double *, int),
                             const brg_metrics *from, brg_metrics *into)
{
    const size_t count = brg_metrics_packed_count(from);
    double *v = brg_calloc(count, sizeof *v, "the evaluation's sums");
    if (!v) return BRG_ERR_HOST_MEMORY;
    brg_metrics_pack(from, v);
    const brg_status st = sum(pl->world, v, (int)count);
    if (st == BRG_OK) {
        if (from == into) brg_metrics_reset(into);
        brg_metrics_add_packed(into, v);
    }
    free(v);
    return st;
}

brg_status brg_pipeline_merge_replicas(brg_pipeline *pl, brg_metrics *metrics)
{
    if (!pl || !metrics)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_merge_replicas: no pipeline or metrics");
    return pl->replicas > 1 ? add_summed(pl, brg_world_replicas_sum, metrics, metrics) : BRG_OK;
}

/* Whether an evaluation goes one stage at a time (stride V, eval_run):
 * devices that share the host's cores (CPU devices, all in this process)
 * evaluate so, each stage with every core; at once each would have its
 * share, and the pieces would go at the pace of the busiest core
 * (fmnist-cnn on 4 devices and 2 cores evaluated at half the speed).
 * Others, GPUs, evaluate at once (stride 1). */
static int eval_one_at_a_time(const brg_pipeline *pl)
{
    const char *at_once = getenv("BRG_EVAL_AT_ONCE"); /* "1": as GPUs do, for the tests */
    if (pl->distributed || (at_once && !strcmp(at_once, "1"))) return 0;
    for (int d = 0; d < pl->p; d++)
        if (brg_device_backend(brg_pipeline_device(pl, d)) != BRG_BACKEND_CPU) return 0;
    return 1;
}

/* Every tick of an evaluation. With stride 1 this thread (the caller's)
 * moves the tensors and the devices' workers forward at once; alone, with
 * stride V, this thread (one worker's, with every core: eval_all) does it
 * all: one stage computes per tick, and a call to that stage's own worker
 * per stage and piece would wake threads, and grow an OpenMP pool on each
 * worker. */
static brg_status eval_ticks(eval_run *r)
{
    brg_pipeline *pl = r->pl;
    const int V = pl->p * pl->v;
    const int64_t pieces = (r->n + pl->micro_batch - 1) / pl->micro_batch;
    brg_status st = BRG_OK;
    for (r->tick = 0; r->tick < (pieces - 1) * eval_stride(r) + V && st == BRG_OK; r->tick++) {
        int64_t at;
        const int k = eval_piece_at(r, V - 1, &at);
        if (k > 0 && r->res.metrics)
            st = brg_executor_share_labels(pl->ex, r->all_labels ? r->all_labels + at * pl->labels : NULL, k,
                                           &r->labels);
        for (int j = V - 1; j >= 0 && st == BRG_OK; j--) st = eval_feed(r, j);
        if (st == BRG_OK)
            st = r->alone ? eval_forward(r, device_of(pl, (int)(r->tick % V)))
                          : brg_executor_call(pl->ex, eval_forward, r);
    }
    return st;
}

/* brg_executor_work: eval_ticks on a worker. */
static brg_status eval_ticks_work(void *arg, int device)
{
    (void)device;
    return eval_ticks(arg);
}

/* n samples through the stages (eval_run). labels NULL (and no metrics):
 * the model outputs alone are wanted (outputs, n x the output's elements);
 * the last stage, which needs labels, gets class 0 for every label and its
 * loss is not read. Otherwise the figures go to metrics and the outputs,
 * if wanted, to outputs. Distributed, the last stage's rank computes the
 * figures and outputs and every rank gets them; every rank goes through
 * the same ticks, and each moves its boundary tensors in the same order,
 * so the sends and receives between two ranks match. On failure every
 * stage's slot 0 is emptied (and, distributed, the job ends: the other
 * ranks would wait). */
static brg_status eval_all(brg_pipeline *pl, const float *images, const int32_t *labels, int64_t n, float *outputs,
                           brg_metrics *metrics)
{
    const int V = pl->p * pl->v;
    const int last_rank = brg_world_device_rank(pl->world, device_of(pl, V - 1), pl->p);
    const int last_here = brg_world_rank(pl->world) == last_rank;
    int32_t *zeros = NULL;
    brg_metrics *piece = NULL; /* distributed: this call's figures, summed over the ranks at the end */
    brg_status st = BRG_OK;
    if (!metrics) {
        zeros = brg_calloc((size_t)(pl->micro_batch * pl->labels), sizeof *zeros,
                           "the placeholder labels of a prediction");
        if (!zeros) return BRG_ERR_HOST_MEMORY;
    } else if (pl->distributed) {
        st = brg_metrics_create(brg_model_classes(pl->model), pl->opt.ignore_label, &piece);
    }
    const brg_model_tensor *mo = brg_model_get_tensor(pl->model, brg_model_output(pl->model));
    const int alone = eval_one_at_a_time(pl);
    eval_run r = {.pl = pl, .n = n, .alone = alone, .images = images, .all_labels = labels,
                  .labels = zeros,
                  .res = {0.0f, 0, 0, metrics ? (piece ? piece : metrics) : NULL},
                  .outputs = outputs && last_here ? outputs : NULL, .out_elems = mo->c * mo->h * mo->w};
    /* The forwards run on the workers, never on this thread: an OpenMP
     * pool would stay here beside the workers' (brg_executor_call). */
    if (st == BRG_OK)
        st = alone ? brg_executor_call_alone(pl->ex, device_of(pl, 0), eval_ticks_work, &r) : eval_ticks(&r);
    if (st != BRG_OK) {
        for (int j = 0; j < V; j++)
            if (vstage(pl, j)) brg_stage_discard(vstage(pl, j), 0);
        if (pl->distributed) brg_world_abort(pl->world, 1, brg_last_error());
    }
    if (st == BRG_OK && piece) st = add_summed(pl, brg_world_sum, piece, metrics);
    if (st == BRG_OK && outputs && pl->distributed)
        st = brg_world_bcast(pl->world, last_rank, outputs, (size_t)n * (size_t)r.out_elems * sizeof(float));
    if (st == BRG_OK && pl->distributed) st = share_memory(pl);
    brg_metrics_destroy(piece);
    free(zeros);
    return st;
}

brg_status brg_pipeline_evaluate_metrics(brg_pipeline *pl, const float *images, const int32_t *labels, int64_t n,
                                         brg_metrics *metrics)
{
    if (!pl || n < 1 || !metrics || ((!images || !labels) && feeds(pl)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_pipeline_evaluate: pipeline, images, labels, n >= 1 samples and metrics must be given");
    return eval_all(pl, images, labels, n, NULL, metrics);
}

brg_status brg_pipeline_evaluate_top5(brg_pipeline *pl, const float *images, const int32_t *labels, int64_t n,
                                      double *loss, double *top1, double *top5)
{
    if (loss) *loss = 0.0;
    if (top1) *top1 = 0.0;
    if (top5) *top5 = 0.0;
    if (!pl || n < 1 || ((!images || !labels) && feeds(pl)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_pipeline_evaluate: pipeline, images, labels and n >= 1 samples must be given");
    brg_metrics *m;
    BRG_CHECK(brg_metrics_create(brg_model_classes(pl->model), pl->opt.ignore_label, &m));
    brg_status st = eval_all(pl, images, labels, n, NULL, m);
    if (st == BRG_OK) {
        if (loss) *loss = brg_metrics_loss(m);
        if (top1) *top1 = brg_metrics_accuracy(m);
        if (top5) *top5 = brg_metrics_top5(m);
    }
    brg_metrics_destroy(m);
    return st;
}

brg_status brg_pipeline_predict(brg_pipeline *pl, const float *images, int64_t n, float *outputs)
{
    if (!pl || !outputs || n < 1 || (!images && feeds(pl)))
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_pipeline_predict: pipeline, images, outputs and n >= 1 samples must be given");
    return eval_all(pl, images, NULL, n, outputs, NULL);
}

brg_status brg_pipeline_evaluate(brg_pipeline *pl, const float *images, const int32_t *labels, int64_t n,
                                 double *loss, double *accuracy)
{
    return brg_pipeline_evaluate_top5(pl, images, labels, n, loss, accuracy, NULL);
}

int64_t brg_pipeline_counted_labels(const brg_pipeline *pl) { return pl ? brg_executor_counted(pl->ex) : 0; }

/* ---- reading ---- */

const brg_pipeline_desc *brg_pipeline_get_desc(const brg_pipeline *pl) { return pl ? &pl->desc : NULL; }
int brg_pipeline_devices(const brg_pipeline *pl) { return pl ? pl->p : 0; }
brg_device *brg_pipeline_device(const brg_pipeline *pl, int device)
{
    const brg_program *g = pl && device >= 0 && device < pl->p ? brg_executor_program(pl->ex, device) : NULL;
    return g ? brg_program_device(g) : NULL; /* NULL: another rank's */
}
int64_t brg_pipeline_steps(const brg_pipeline *pl) { return pl ? pl->steps : 0; }

brg_status brg_pipeline_set_steps(brg_pipeline *pl, int64_t steps)
{
    if (!pl || steps < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_set_steps: %lld steps; give a pipeline and steps >= 0",
                         (long long)steps);
    pl->steps = steps;
    brg_executor_set_step_count(pl->ex, steps + 1);
    return BRG_OK;
}

brg_stage *brg_pipeline_stage(const brg_pipeline *pl, int device, int chunk)
{
    if (!pl || device < 0 || device >= pl->p || chunk < 0 || chunk >= pl->v) return NULL;
    const brg_program *g = brg_executor_program(pl->ex, device);
    return g ? brg_program_stage(g, chunk) : NULL; /* NULL: another rank's */
}

const brg_world *brg_pipeline_world(const brg_pipeline *pl) { return pl ? pl->world : NULL; }

/* The device holding the layer's block and its stage there (NULL: another
 * rank's); -1 when no part holds it. */
static int layer_home(const brg_pipeline *pl, int layer, brg_stage **stage)
{
    *stage = NULL;
    if (layer < 0 || layer >= brg_model_layer_count(pl->model)) return -1;
    const int block = brg_model_get_layer(pl->model, layer)->block;
    for (int d = 0; d < pl->p; d++)
        for (int c = 0; c < pl->parts[d].chunks; c++)
            if (block >= pl->parts[d].first_block[c] && block <= pl->parts[d].last_block[c]) {
                *stage = brg_pipeline_stage(pl, d, c);
                return d;
            }
    return -1;
}

/* The state tensor on this rank's stage, count floats. */
static brg_status state_tensor(const brg_stage *s, int layer, int param, int which, size_t count, brg_tensor *t)
{
    BRG_CHECK(which < 0 ? brg_stage_param(s, layer, param, t) : brg_stage_optimizer_state(s, layer, param, which, t));
    if ((size_t)brg_tensor_numel(t) != count)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "state tensor %d of layer %d holds %lld floats, not %zu", param,
                         layer, (long long)brg_tensor_numel(t), count);
    return BRG_OK;
}

brg_status brg_pipeline_read_state(const brg_pipeline *pl, int layer, int param, int which, float *host, size_t count)
{
    if (!pl || !host)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_read_state: pipeline and host must be given");
    brg_stage *s;
    const int d = layer_home(pl, layer, &s);
    if (d < 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_read_state: no device holds layer %d", layer);
    if (pl->replica != 0) return BRG_OK; /* replica 0 speaks for every replica: their state is the same */
    const int holder = brg_world_device_rank(pl->world, d, pl->p), me = brg_world_rank(pl->world);
    if (me != holder && me != 0) return BRG_OK;
    brg_status st = BRG_OK;
    if (me == holder) {
        brg_tensor t;
        st = state_tensor(s, layer, param, which, count, &t);
        if (st == BRG_OK) st = brg_device_copy_out(t.device, host, t.data, count * sizeof(float));
        if (holder == 0) return st;
        /* Sent even after a failure, so that rank 0 is not left waiting;
         * the caller agrees on the outcome (brg_world_any). */
        if (brg_world_send(pl->world, 0, host, count * sizeof(float)) != BRG_OK)
            brg_world_abort(pl->world, 1, brg_last_error());
        return st;
    }
    if (brg_world_recv(pl->world, holder, host, count * sizeof(float)) != BRG_OK)
        brg_world_abort(pl->world, 1, brg_last_error());
    return BRG_OK;
}

brg_status brg_pipeline_write_state(brg_pipeline *pl, int layer, int param, int which, const float *host, size_t count)
{
    if (!pl || !host)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_write_state: pipeline and host must be given");
    brg_stage *s;
    if (layer_home(pl, layer, &s) < 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_write_state: no device holds layer %d", layer);
    if (!s) return BRG_OK; /* another rank's */
    brg_tensor t;
    BRG_CHECK(state_tensor(s, layer, param, which, count, &t));
    return brg_device_copy_in(t.device, t.data, host, count * sizeof(float));
}

brg_status brg_pipeline_memory(const brg_pipeline *pl, int device, brg_memory_report *report)
{
    if (!report) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_memory: report is NULL");
    memset(report, 0, sizeof *report);
    if (!pl || device < 0 || device >= pl->p)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_memory: device %d of %d", device, pl ? pl->p : 0);
    const brg_program *g = brg_executor_program(pl->ex, device);
    if (g) {
        brg_program_persistent(g, &report->persistent_bytes, &report->param_bytes, &report->grad_bytes,
                               &report->optimizer_bytes);
        report->receive_bytes = brg_program_receive_bytes(g);
        report->peak_bytes = brg_device_peak(brg_program_device(g));
    } else { /* another rank's, as of the latest step or evaluation */
        const size_t *f = pl->mem[device];
        report->persistent_bytes = f[MEM_PERSISTENT];
        report->param_bytes = f[MEM_PARAMS];
        report->grad_bytes = f[MEM_GRADS];
        report->optimizer_bytes = f[MEM_OPTIMIZER];
        report->receive_bytes = f[MEM_RECEIVE];
        report->peak_bytes = f[MEM_PEAK];
    }
    report->activation_peak_bytes =
        report->peak_bytes > report->persistent_bytes ? report->peak_bytes - report->persistent_bytes : 0;
    const int inflight = brg_schedule_max_in_flight(pl->desc.schedule, device, -1);
    report->max_in_flight = inflight > 0 ? inflight : 0;
    return BRG_OK;
}

brg_status brg_pipeline_action_times(const brg_pipeline *pl, int device, const double **start, const double **end)
{
    if (!pl) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_action_times: no pipeline");
    return brg_executor_action_times(pl->ex, device, start, end);
}

double brg_pipeline_last_step_seconds(const brg_pipeline *pl) { return pl ? pl->last_step_s : 0.0; }
brg_status brg_pipeline_copy_times(const brg_pipeline *pl, int device, double *copy_s, double *hidden_s)
{
    if (!pl || !copy_s || !hidden_s) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_copy_times: no pipeline");
    return brg_executor_copy_times(pl->ex, device, copy_s, hidden_s);
}

uint64_t brg_pipeline_host_bytes(const brg_pipeline *pl) { return pl ? brg_executor_host_bytes(pl->ex) : 0; }
