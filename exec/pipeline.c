/* brigade: pipelined training from a description (brigade/pipeline.h):
 * devices, what each holds, a schedule, the micro-batch and the optimizer,
 * whether a plan made it or the caller. The executor (executor-impl.h) runs
 * the step; evaluation walks the stages in order on the calling thread.
 * See docs/pipeline.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade/pipeline.h"
#include "executor-impl.h"
#include "base/internal.h"

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
};

brg_pipeline_options brg_pipeline_options_init(void)
{
    brg_pipeline_options o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    o.channel_capacity = 0; /* the parts' */
    return o;
}

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
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "channel capacity %d: must be 1..%d (0 for the plan's, %d by default)",
                         opt.channel_capacity, BRG_CHANNEL_CAPACITY_MAX, BRG_CHANNEL_CAPACITY_DEFAULT);
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
    /* The executor checks the devices (given, distinct) and creates every
     * program or none; an out-of-memory names the device and the block. */
    BRG_CHECK_GOTO(brg_executor_create(pl->model, desc->schedule, devices, parts, pl->micro_batch, &desc->optimizer,
                                       opt.seed, opt.deferred_batchnorm, &pl->ex),
                   ret, fail);
    brg_executor_record_times(pl->ex, opt.record_times);
    brg_executor_set_ignore_label(pl->ex, opt.ignore_label);
    pl->labels = brg_model_label_count(pl->model);
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
    free(pl->host);
    free(pl->parts);
    free(pl);
}

static brg_status check_batch(const brg_pipeline *pl, const char *fn, const float *images, const int32_t *labels,
                              int n)
{
    if (!pl || !images || !labels)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s: pipeline, images and labels must be given", fn);
    if (n != pl->batch)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%s: %d samples, but the pipeline's mini-batch is %d (%d micro-batches of %d)", fn, n, pl->batch,
                         pl->m, pl->micro_batch);
    return BRG_OK;
}

brg_status brg_pipeline_forward_backward(brg_pipeline *pl, const float *images, const int32_t *labels, int n,
                                         double *loss, int64_t *correct)
{
    if (loss) *loss = 0.0;
    if (correct) *correct = 0;
    BRG_CHECK(check_batch(pl, "brg_pipeline_forward_backward", images, labels, n));
    return brg_executor_run(pl->ex, images, labels, n, loss, correct);
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
    BRG_CHECK(brg_executor_run(pl->ex, images, labels, n, loss, correct));
    BRG_CHECK(brg_pipeline_update(pl, lr));
    pl->last_step_s = brg_now_seconds() - t0;
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

/* Virtual stage j's stage: chunk j / p of device j % p. */
static brg_stage *vstage(const brg_pipeline *pl, int j)
{
    return brg_program_stage(brg_executor_program(pl->ex, j % pl->p), j / pl->p);
}

/* Forward k samples in inference mode through every virtual stage, slot 0
 * of each (free between steps); the boundary tensors go through the host,
 * so devices of any backend mix. The last stage reports to res and, where
 * outputs is not NULL, copies the model output there (k x the output's
 * elements). */
static brg_status eval_piece(brg_pipeline *pl, const float *images, const int32_t *labels, int k, int64_t offset,
                             brg_stage_result *res, float *outputs)
{
    const int V = pl->p * pl->v;
    const brg_pass pass = {BRG_PASS_EVAL, pl->steps + 1, offset};
    for (int j = 0; j < V; j++) {
        brg_stage *st = vstage(pl, j);
        brg_device *dev = brg_stage_device(st);
        brg_tensor t;
        brg_status ret = BRG_OK;
        if (j == 0) {
            ret = brg_stage_input(st, 0, 0, k, &t);
            if (ret == BRG_OK) ret = brg_device_copy_in(dev, t.data, images, brg_tensor_bytes(&t));
        } else {
            brg_stage *prev = vstage(pl, j - 1);
            for (int i = 0; i < brg_stage_input_count(st) && ret == BRG_OK; i++) {
                brg_tensor src;
                ret = brg_stage_output(prev, 0, i, &src);
                if (ret == BRG_OK) ret = brg_stage_input(st, 0, i, k, &t);
                if (ret == BRG_OK) ret = host_room(pl, brg_tensor_bytes(&src));
                if (ret == BRG_OK) ret = brg_device_copy_out(brg_stage_device(prev), pl->host, src.data,
                                                             brg_tensor_bytes(&src));
                if (ret == BRG_OK) ret = brg_device_copy_in(dev, t.data, pl->host, brg_tensor_bytes(&t));
            }
            /* In inference mode this empties the previous stage's slot. */
            if (ret == BRG_OK) ret = brg_stage_release_outputs(prev, 0);
        }
        if (ret == BRG_OK && j == V - 1) {
            ret = brg_stage_labels(st, 0, k, &t);
            if (ret == BRG_OK) ret = brg_device_copy_in(dev, t.data, labels, brg_tensor_bytes(&t));
        }
        if (ret == BRG_OK)
            ret = j == V - 1 ? brg_stage_forward_outputs(st, 0, &pass, res, outputs) : brg_stage_forward(st, 0, &pass, NULL);
        if (ret != BRG_OK)
            return brg_error_context(ret, "evaluation, samples %lld..%lld: device %d (virtual stage %d)",
                                     (long long)offset, (long long)offset + k - 1, j % pl->p, j);
    }
    return BRG_OK;
}

/* n samples through eval_piece in pieces of at most one micro-batch.
 * labels NULL: the model outputs alone are wanted (outputs, n x the
 * output's elements); the last stage, which needs labels, gets class 0 for
 * every label and its loss is not read. Otherwise the figures go to
 * metrics and the outputs, if wanted, to outputs. On failure every stage's
 * slot 0 is emptied. */
static brg_status eval_all(brg_pipeline *pl, const float *images, const int32_t *labels, int64_t n, float *outputs,
                           brg_metrics *metrics)
{
    int32_t *zeros = NULL;
    if (!labels) {
        zeros = brg_calloc((size_t)(pl->micro_batch * pl->labels), sizeof *zeros,
                           "the placeholder labels of a prediction");
        if (!zeros) return BRG_ERR_HOST_MEMORY;
    }
    const brg_model_tensor *mo = brg_model_get_tensor(pl->model, brg_model_output(pl->model));
    const int64_t out_elems = mo->c * mo->h * mo->w;
    brg_status st = BRG_OK;
    for (int64_t at = 0; at < n && st == BRG_OK; at += pl->micro_batch) {
        const int k = (int)(n - at < pl->micro_batch ? n - at : pl->micro_batch);
        brg_stage_result res = {0.0f, 0, 0, metrics};
        st = eval_piece(pl, images + at * pl->sample, labels ? labels + at * pl->labels : zeros, k, at,
                        labels ? &res : NULL, outputs ? outputs + at * out_elems : NULL);
    }
    if (st != BRG_OK)
        for (int j = 0; j < pl->p * pl->v; j++) brg_stage_discard(vstage(pl, j), 0);
    free(zeros);
    return st;
}

brg_status brg_pipeline_evaluate_metrics(brg_pipeline *pl, const float *images, const int32_t *labels, int64_t n,
                                         brg_metrics *metrics)
{
    if (!pl || !images || !labels || n < 1 || !metrics)
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
    if (!pl || !images || !labels || n < 1)
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
    if (!pl || !images || !outputs || n < 1)
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
    return pl && device >= 0 && device < pl->p ? brg_program_device(brg_executor_program(pl->ex, device)) : NULL;
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
    return brg_program_stage(brg_executor_program(pl->ex, device), chunk);
}

brg_status brg_pipeline_memory(const brg_pipeline *pl, int device, brg_memory_report *report)
{
    if (!report) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_memory: report is NULL");
    memset(report, 0, sizeof *report);
    if (!pl || device < 0 || device >= pl->p)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_pipeline_memory: device %d of %d", device, pl ? pl->p : 0);
    const brg_program *g = brg_executor_program(pl->ex, device);
    brg_program_persistent(g, &report->persistent_bytes, &report->param_bytes, &report->grad_bytes,
                           &report->optimizer_bytes);
    report->receive_bytes = brg_program_receive_bytes(g);
    report->peak_bytes = brg_device_peak(brg_program_device(g));
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
