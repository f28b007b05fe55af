/* Pipelined training through the public API (brigade/pipeline.h), over
 * plans from brg_plan_create:
 *   - gradients after one mini-batch equal one device's full-batch
 *     gradients, and three steps give the trainer's weights, for p 1..4,
 *     m 1..8 and every schedule, searched and manual cuts;
 *   - deferred BatchNorm gives the full-batch running statistics;
 *   - a NaN stops the step with BRG_ERR_NUMERIC and the next step is clean;
 *   - every device's measured peak is the plan's, to the byte, also after
 *     evaluation, on zoo models;
 *   - an out-of-memory names device, micro-batch and layer, stops every
 *     worker fast and leaks nothing;
 *   - per-action times are recorded and consistent;
 *   - a description built by hand (even parts, a custom schedule from
 *     brg_schedule_create) trains like one device, and one whose schedule
 *     cannot run is refused. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/pipeline.h"
#include "brigade/plan.h"
#include "brigade/zoo.h"
#include "pipeline_test.h"

#define BATCH 8

/* A plan on p CPU devices of `capacity` bytes; split (n_split = p*v - 1)
 * NULL to search. */
static brg_plan *make_plan(const brg_model *m, int p, int batch, int mbs, brg_schedule_kind kind, int v,
                           const int *split, brg_recompute recompute, size_t capacity,
                           const brg_optimizer_config *opt)
{
    brg_device_spec specs[8];
    for (int d = 0; d < p; d++) specs[d] = cpu_spec(capacity);
    brg_plan_options o = plan_options(specs, p, batch, mbs, kind, v, split);
    o.recompute = recompute;
    if (opt) o.optimizer = *opt;
    o.explain = 0;
    brg_plan *plan = NULL;
    brg_status st = brg_plan_create(m, &o, &plan);
    CHECK_MSG(st == BRG_OK, "plan %s p=%d m=%d: %s", brg_schedule_kind_name(kind), p, mbs, brg_last_error());
    if (plan) CHECK_MSG(brg_plan_get_info(plan)->feasible, "plan %s p=%d m=%d is not feasible: %s",
                        brg_schedule_kind_name(kind), p, mbs, brg_plan_get_info(plan)->note);
    return plan;
}

/* Devices with each stage's capacity (or `capacity` when nonzero). */
static int make_devices(const brg_plan *plan, size_t capacity, brg_device **devs)
{
    const int p = brg_plan_get_info(plan)->devices;
    for (int d = 0; d < p; d++) {
        devs[d] = NULL;
        brg_device_spec spec = brg_plan_get_stage(plan, d)->spec;
        if (capacity) spec.capacity = capacity;
        CHECK_OK(test_device_create(&spec, d, &devs[d]));
        if (!devs[d]) return 0;
    }
    return 1;
}

/* The pipeline, its p devices and its plan (each may be NULL). */
static void destroy_all(brg_pipeline *pl, brg_device **devs, int p, brg_plan *plan)
{
    brg_pipeline_destroy(pl);
    for (int d = 0; d < p; d++) brg_device_destroy(devs[d]);
    brg_plan_destroy(plan);
}

/* A trainer of the whole model on a new CPU device (*dev) that runs each
 * batch of BATCH at once, with opt (NULL: the default optimizer). NULL
 * after a failed check. */
static brg_trainer *whole_batch_trainer(const brg_model *m, const brg_optimizer_config *opt, float lr, brg_device **dev)
{
    brg_trainer *t = NULL;
    *dev = NULL;
    CHECK_OK(test_cpu_device(64 * MiB, 0, dev));
    brg_trainer_config tc = brg_trainer_config_init();
    tc.batch = BATCH;
    tc.micro_batch = BATCH;
    tc.lr = lr;
    if (opt) tc.optimizer = *opt;
    tc.seed = 1;
    if (*dev) CHECK_OK(brg_trainer_create(m, *dev, &tc, &t));
    return t;
}

/* ---- gradients and weights equal one device's ---- */

typedef struct reference {
    const brg_model *m;
    const float *images;
    const int32_t *labels;
    float *grads, *weights; /* full-batch gradients; weights after 3 trainer steps */
    int64_t n_grads, n_weights;
    double loss;
    brg_optimizer_config opt;
} reference;

static const float LR = 0.05f;

static int grad_case(const reference *r, int p, int mbs, brg_schedule_kind kind, int v, int manual)
{
    char what[128];
    snprintf(what, sizeof what, "%s p=%d v=%d m=%d %s", brg_schedule_kind_name(kind), p, v, mbs,
             manual ? "manual" : "searched");
    int split[16];
    even_split(r->m, p * v, split); /* even cuts, unlike the search's */
    brg_plan *plan = make_plan(r->m, p, BATCH, mbs, kind, v, manual ? split : NULL, BRG_RECOMPUTE_NONE, 64 * MiB,
                               &r->opt);
    brg_device *devs[8] = {NULL};
    brg_pipeline *pl = NULL;
    int ok = 0;
    if (!plan || !make_devices(plan, 0, devs)) goto done;
    brg_pipeline_options o = brg_pipeline_options_init();
    CHECK_OK(pipeline_from_plan(plan, devs, p, &o, &pl));
    if (!pl) goto done;
    double loss = 0.0;
    brg_status st = brg_pipeline_forward_backward(pl, r->images, r->labels, BATCH, &loss, NULL);
    CHECK_MSG(st == BRG_OK, "%s: %s", what, brg_last_error());
    if (st != BRG_OK) goto done;
    CHECK_MSG(fabs(loss - r->loss) <= 1e-5 * fabs(r->loss), "%s: loss %.9g, one device %.9g", what, loss, r->loss);
    brg_stage *stages[64];
    const int k = pipeline_stages(pl, stages);
    int64_t n = 0;
    float *g = gather_grads(r->m, stages, k, &n);
    CHECK(g && n == r->n_grads);
    if (g && n == r->n_grads) {
        const double d = rel_diff(r->grads, g, n);
        CHECK_MSG(d <= 1e-5, "%s: gradients differ from one device's full batch by %.3g", what, d);
    }
    free(g);
    CHECK_OK(brg_pipeline_update(pl, LR));
    for (int s = 2; s <= 3; s++) CHECK_OK(brg_pipeline_step(pl, LR, r->images, r->labels, BATCH, NULL, NULL));
    CHECK(brg_pipeline_steps(pl) == 3);
    float *w = gather(r->m, stages, k, 0, NULL, &n);
    CHECK(w && n == r->n_weights);
    if (w && n == r->n_weights) {
        const double d = rel_diff(r->weights, w, n);
        CHECK_MSG(d <= 1e-5, "%s: weights after 3 steps differ from the trainer's by %.3g", what, d);
    }
    free(w);
    ok = 1;
done:
    destroy_all(pl, devs, p, plan);
    return ok;
}

/* ---- a description built by hand ---- */

#define A(type, mb, peer) {BRG_ACTION_##type, mb, 0, peer}

/* A pipeline from a description made without the planner: even parts and a
 * custom schedule from brg_schedule_create whose order no built-in kind
 * has (device 1 runs both forwards before either backward and sends the
 * second micro-batch's gradient first; device 0 takes the backwards in
 * that order). Its gradients and loss are one device's. Then the same
 * description with device 0 waiting for the gradient of micro-batch 0
 * before it sends micro-batch 1's activation cannot run: creating the
 * pipeline fails and says why. */
static void hand_built_case(const reference *r)
{
    enum { P = 2, M = 2 };
    const brg_action dev0[] = {A(FORWARD, 0, -1),   A(SEND_ACT, 0, 1), A(FORWARD, 1, -1), A(SEND_ACT, 1, 1),
                               A(RECV_GRAD, 1, 1), A(BACKWARD, 1, -1), A(RECV_GRAD, 0, 1), A(BACKWARD, 0, -1)};
    const brg_action dev1[] = {A(RECV_ACT, 0, 0),  A(FORWARD, 0, -1),  A(RECV_ACT, 1, 0), A(FORWARD, 1, -1),
                               A(BACKWARD, 1, -1), A(SEND_GRAD, 1, 0), A(BACKWARD, 0, -1), A(SEND_GRAD, 0, 0)};
    const brg_action stuck0[] = {A(FORWARD, 0, -1),   A(SEND_ACT, 0, 1),  A(FORWARD, 1, -1), A(RECV_GRAD, 0, 1),
                                 A(BACKWARD, 0, -1), A(SEND_ACT, 1, 1),  A(RECV_GRAD, 1, 1), A(BACKWARD, 1, -1)};
    const brg_action stuck1[] = {A(RECV_ACT, 0, 0),  A(FORWARD, 0, -1),  A(RECV_ACT, 1, 0), A(FORWARD, 1, -1),
                                 A(BACKWARD, 0, -1), A(SEND_GRAD, 0, 0), A(BACKWARD, 1, -1), A(SEND_GRAD, 1, 0)};
    const int counts[P] = {8, 8};
    const brg_action *const lists[P] = {dev0, dev1}, *const stuck_lists[P] = {stuck0, stuck1};
    brg_schedule *sched = NULL, *stuck = NULL;
    CHECK_OK(brg_schedule_create(P, M, 1, counts, lists, &sched));
    CHECK_OK(brg_schedule_create(P, M, 1, counts, stuck_lists, &stuck));
    brg_device_part parts[P] = {even_part(r->m, P, 1, 0, 0), even_part(r->m, P, 1, 1, 0)};
    brg_pipeline_desc desc = {.model = r->m, .schedule = sched, .parts = parts, .micro_batch = BATCH / M,
                              .optimizer = r->opt};
    brg_device *devs[P] = {NULL, NULL};
    for (int d = 0; d < P; d++) CHECK_OK(test_cpu_device(64 * MiB, d, &devs[d]));
    brg_pipeline_options o = brg_pipeline_options_init();
    brg_pipeline *pl = NULL;
    if (sched && devs[0] && devs[1]) CHECK_OK(brg_pipeline_create(&desc, devs, P, &o, &pl));
    double loss = 0.0;
    if (pl) {
        CHECK_OK(brg_pipeline_forward_backward(pl, r->images, r->labels, BATCH, &loss, NULL));
        CHECK_MSG(fabs(loss - r->loss) <= 1e-5 * fabs(r->loss), "hand-built: loss %.9g, one device %.9g", loss,
                  r->loss);
        brg_stage *stages[P];
        const int k = pipeline_stages(pl, stages);
        int64_t n = 0;
        float *g = gather_grads(r->m, stages, k, &n);
        CHECK(g && n == r->n_grads);
        if (g && n == r->n_grads) {
            const double d = rel_diff(r->grads, g, n);
            CHECK_MSG(d <= 1e-5, "hand-built: gradients differ from one device's full batch by %.3g", d);
        }
        free(g);
    }
    brg_pipeline_destroy(pl);
    pl = NULL;
    desc.schedule = stuck;
    if (stuck) {
        const brg_status st = brg_pipeline_create(&desc, devs, P, &o, &pl);
        CHECK_MSG(st == BRG_ERR_INVALID_ARGUMENT && pl == NULL, "a schedule that cannot run was accepted (%s)",
                  brg_status_string(st));
        CHECK_MSG(strstr(brg_last_error(), "RECV") || strstr(brg_last_error(), "recv") ||
                      strstr(brg_last_error(), "deadlock"),
                  "the refusal does not say what waits: %s", brg_last_error());
        printf("  refused as it should be: %s\n", brg_last_error());
    }
    brg_pipeline_destroy(pl);
    for (int d = 0; d < P; d++) brg_device_destroy(devs[d]);
    brg_schedule_destroy(sched);
    brg_schedule_destroy(stuck);
}

#undef A

static void test_gradients(void)
{
    brg_model *m = skip_model_bn(0);
    if (!m) return;
    float *images = NULL;
    int32_t *labels = NULL;
    new_data(m, BATCH, &images, &labels);
    reference r = {.m = m, .images = images, .labels = labels};
    r.opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    r.opt.momentum = 0.9f;
    /* One device, the whole batch at once. */
    if (images) r.grads = reference_grads(m, 1, BATCH, images, labels, 1, 0, 0, &r.n_grads, &r.loss);
    brg_device *dev = NULL;
    brg_trainer *t = images ? whole_batch_trainer(m, &r.opt, LR, &dev) : NULL;
    if (t) {
        for (int s = 0; s < 3; s++) CHECK_OK(brg_trainer_step(t, images, labels, BATCH, NULL, NULL));
        brg_stage *st = brg_trainer_stage(t);
        r.weights = gather(m, &st, 1, 0, NULL, &r.n_weights);
    }
    int cases = 0;
    const brg_schedule_kind kinds[8] = {BRG_SCHEDULE_GPIPE, BRG_SCHEDULE_1F1B, BRG_SCHEDULE_INTERLEAVED,
                                        BRG_SCHEDULE_ZB_H1, BRG_SCHEDULE_ZB_H2, BRG_SCHEDULE_ZB_V,
                                        BRG_SCHEDULE_V_HALF, BRG_SCHEDULE_V_MIN};
    if (r.grads && r.weights)
        for (int p = 1; p <= 4; p++)
            for (int mbs = 1; mbs <= 8; mbs *= 2)
                for (int k = 0; k < 8; k++) {
                    const int v = brg_schedule_kind_chunks(kinds[k], 0);
                    if (v > 1 && p == 1) continue; /* plans refuse several chunks on one device */
                    /* Alternate searched and manual cuts over the cases. */
                    cases += grad_case(&r, p, mbs, kinds[k], v, (p + mbs + k) % 2);
                }
    CHECK_MSG(cases == 112, "%d of 112 cases ran", cases);
    if (r.grads) hand_built_case(&r);
    brg_trainer_destroy(t);
    brg_device_destroy(dev);
    free(r.grads);
    free(r.weights);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

/* ---- deferred BatchNorm ---- */

/* Running mean and variance of the first BatchNorm (bn1, 4 channels) after
 * one pipelined step. Only it: bn6's input comes through bn1, which
 * normalizes each micro-batch with its own statistics, so what bn6 sees
 * differs from the full batch's activations whatever bn6 does. */
/* bn1's 4 running means and variances out of all BatchNorms' (bn1 first). */
static float *bn1_stats(const float *mean, int64_t nm, const float *var, int64_t nv, int64_t *n)
{
    float *out = mean && var && nm >= 4 && nv >= 4 ? malloc(8 * sizeof *out) : NULL;
    if (!out) return NULL;
    memcpy(out, mean, 4 * sizeof *out);
    memcpy(out + 4, var, 4 * sizeof *out);
    *n = 8;
    return out;
}

static float *bn_stats_after_step(const brg_model *m, int p, brg_schedule_kind kind, brg_recompute rc, int deferred,
                                  const float *images, const int32_t *labels, int64_t *n)
{
    /* bn1 (block 1) on device 0, so that the NaN below reaches its batch
     * statistics before device 0's message check stops the step. */
    const int split[2] = {3, 5};
    brg_plan *plan = make_plan(m, p, BATCH, 4, kind, 1, split, rc, 64 * MiB, NULL);
    brg_device *devs[8] = {NULL};
    brg_pipeline *pl = NULL;
    float *out = NULL;
    if (!plan || !make_devices(plan, 0, devs)) goto done;
    brg_pipeline_options o = brg_pipeline_options_init();
    o.deferred_batchnorm = deferred;
    CHECK_OK(pipeline_from_plan(plan, devs, p, &o, &pl));
    if (!pl) goto done;
    if (deferred) {
        /* A mini-batch abandoned in its last micro-batch, with a NaN in its
         * batch statistics, leaves neither sums nor NaN running statistics
         * behind. */
        const int64_t sample = sample_floats(m);
        float *bad = malloc((size_t)(BATCH * sample) * sizeof *bad);
        if (bad) {
            memcpy(bad, images, (size_t)(BATCH * sample) * sizeof *bad);
            bad[(BATCH - 1) * sample + 7] = NAN;
            CHECK_STATUS(brg_pipeline_step(pl, LR, bad, labels, BATCH, NULL, NULL), BRG_ERR_NUMERIC);
            CHECK_ERROR_HAS("micro-batch 3");
        }
        free(bad);
    }
    CHECK_OK(brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL));
    /* Deferred or not, device memory is the plan's. */
    for (int d = 0; d < p; d++)
        CHECK_MSG(brg_device_peak(devs[d]) == brg_plan_get_stage(plan, d)->peak_bytes,
                  "deferred %d: device %d peak %zu, plan %zu", deferred, d, brg_device_peak(devs[d]),
                  brg_plan_get_stage(plan, d)->peak_bytes);
    brg_stage *stages[8];
    const int k = pipeline_stages(pl, stages);
    int64_t nm = 0, nv = 0;
    float *mean = gather(m, stages, k, 0, "running_mean", &nm);
    float *var = gather(m, stages, k, 0, "running_var", &nv);
    out = bn1_stats(mean, nm, var, nv, n);
    free(mean);
    free(var);
done:
    destroy_all(pl, devs, p, plan);
    return out;
}

static void test_deferred_batchnorm(void)
{
    brg_model *m = skip_model_bn(1);
    if (!m) return;
    float *images = NULL;
    int32_t *labels = NULL;
    new_data(m, BATCH, &images, &labels);
    /* The reference: one device, the whole batch in one forward. */
    brg_device *dev = NULL;
    brg_trainer *t = images ? whole_batch_trainer(m, NULL, LR, &dev) : NULL;
    float *ref = NULL;
    int64_t n_ref = 0;
    if (t) {
        CHECK_OK(brg_trainer_step(t, images, labels, BATCH, NULL, NULL));
        brg_stage *st = brg_trainer_stage(t);
        int64_t nm = 0, nv = 0;
        float *mean = gather(m, &st, 1, 0, "running_mean", &nm);
        float *var = gather(m, &st, 1, 0, "running_var", &nv);
        ref = bn1_stats(mean, nm, var, nv, &n_ref);
        free(mean);
        free(var);
    }
    CHECK(ref && n_ref == 8);
    /* The micro-batch statistics are float (mean, 1/sqrt(var + eps)) and
     * merged in double: a few float roundings, ~1e-7 relative; 1e-5 leaves
     * room, while per-micro-batch updates miss by ~1e-1. */
    const struct {
        int p;
        brg_schedule_kind kind;
        brg_recompute rc;
    } cases[] = {{2, BRG_SCHEDULE_1F1B, BRG_RECOMPUTE_NONE},
                 {3, BRG_SCHEDULE_GPIPE, BRG_RECOMPUTE_ALL}, /* a replay must not count twice */
                 {3, BRG_SCHEDULE_ZB_H1, BRG_RECOMPUTE_NONE}};
    for (size_t i = 0; ref && i < sizeof cases / sizeof cases[0]; i++) {
        for (int deferred = 1; deferred >= 0; deferred--) {
            int64_t n = 0;
            float *got = bn_stats_after_step(m, cases[i].p, cases[i].kind, cases[i].rc, deferred, images, labels, &n);
            CHECK(got && n == n_ref);
            if (got && n == n_ref) {
                const double d = rel_diff(ref, got, n);
                fprintf(stderr, "%s p=%d recompute %s, deferred %d: running statistics off the full batch's by %.3g\n",
                        brg_schedule_kind_name(cases[i].kind), cases[i].p, brg_recompute_name(cases[i].rc), deferred,
                        d);
                if (deferred)
                    CHECK_MSG(d <= 1e-5, "%s p=%d: deferred running statistics differ from the full batch's by %.3g",
                              brg_schedule_kind_name(cases[i].kind), cases[i].p, d);
                else
                    CHECK_MSG(d > 1e-3, "%s p=%d: per-micro-batch running statistics match the full batch's (%.3g): "
                              "the test could not fail", brg_schedule_kind_name(cases[i].kind), cases[i].p, d);
            }
            free(got);
        }
    }
    free(ref);
    brg_trainer_destroy(t);
    brg_device_destroy(dev);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

/* ---- numeric failures ---- */

static void persistent_check(const brg_pipeline *pl, const char *what)
{
    for (int d = 0; d < brg_pipeline_devices(pl); d++) {
        brg_memory_report rep;
        CHECK_OK(brg_pipeline_memory(pl, d, &rep));
        CHECK_MSG(brg_device_in_use(brg_pipeline_device(pl, d)) == rep.persistent_bytes,
                  "%s: device %d holds %zu bytes, persistent %zu", what, d,
                  brg_device_in_use(brg_pipeline_device(pl, d)), rep.persistent_bytes);
    }
}

static void numeric_case(const brg_model *m, int p, int whole_sample, const char *want)
{
    const int64_t sample = sample_floats(m);
    float *images = NULL;
    int32_t *labels = NULL;
    new_data(m, BATCH, &images, &labels);
    brg_plan *plan = make_plan(m, p, BATCH, 4, BRG_SCHEDULE_1F1B, 1, NULL, BRG_RECOMPUTE_NONE, 64 * MiB, NULL);
    brg_device *devs[8] = {NULL};
    brg_pipeline *pl = NULL;
    if (!images || !plan || !make_devices(plan, 0, devs)) goto done;
    CHECK_OK(pipeline_from_plan(plan, devs, p, NULL, &pl));
    if (!pl) goto done;
    /* Micro-batch 2 (samples 4, 5) gets a NaN. */
    float *bad = images + 4 * sample;
    const float keep = bad[sample / 2];
    if (whole_sample)
        for (int64_t i = 0; i < sample; i++) bad[i] = NAN;
    else
        bad[sample / 2] = NAN;
    CHECK_STATUS(brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL), BRG_ERR_NUMERIC);
    fprintf(stderr, "numeric: %s\n", brg_last_error());
    CHECK_ERROR_HAS("micro-batch 2");
    CHECK_ERROR_HAS("device 0");
    CHECK_ERROR_HAS("NaN");
    CHECK_ERROR_HAS(want);
    CHECK(brg_pipeline_steps(pl) == 0);
    persistent_check(pl, "after a NaN");
    for (int64_t i = 0; i < sample; i++) bad[i] = whole_sample ? 0.5f : bad[i];
    bad[sample / 2] = keep;
    double loss = NAN;
    CHECK_OK(brg_pipeline_step(pl, LR, images, labels, BATCH, &loss, NULL));
    CHECK(isfinite(loss) && loss > 0.0);
    CHECK(brg_pipeline_steps(pl) == 1);
    persistent_check(pl, "the clean step after a NaN");
done:
    destroy_all(pl, devs, p, plan);
    free(images);
    free(labels);
}

static void test_numeric(void)
{
    brg_model *m = skip_model_bn(0);
    if (!m) return;
    /* Two devices: device 0's activations carry the NaN to device 1. */
    numeric_case(m, 2, 0, "activation of 'r0'");
    /* One device: no messages, the loss is NaN. */
    numeric_case(m, 1, 1, "loss of micro-batch 2");
    brg_model_destroy(m);
}

/* ---- measured peaks equal the plan's ---- */

static void peak_case(const char *name, int64_t c, int64_t hw, double width, int p, int batch, int mbs,
                      brg_schedule_kind kind, int v, int manual, brg_recompute rc)
{
    brg_zoo_options zo;
    memset(&zo, 0, sizeof zo);
    zo.channels = c;
    zo.height = zo.width = hw;
    zo.width_mult = width;
    brg_model *m = NULL;
    CHECK_OK(brg_zoo_build(name, &zo, &m));
    if (!m) return;
    char what[160];
    snprintf(what, sizeof what, "%s %s p=%d v=%d m=%d %s recompute %s", name, brg_schedule_kind_name(kind), p, v, mbs,
             manual ? "manual" : "searched", brg_recompute_name(rc));
    const int nb = brg_model_block_count(m);
    int split[8];
    for (int j = 0; j + 1 < p; j++) split[j] = (j + 1) * nb / p - 1;
    if (p > 1 && split[0] + 1 < (p > 2 ? split[1] : nb - 1)) split[0]++; /* uneven on purpose */
    brg_plan *plan = make_plan(m, p, batch, mbs, kind, v, manual && v == 1 ? split : NULL, rc, 256 * MiB, NULL);
    brg_device *devs[8] = {NULL};
    brg_pipeline *pl = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    if (!plan || !new_data(m, batch, &images, &labels) || !make_devices(plan, 0, devs)) goto done;
    CHECK_OK(pipeline_from_plan(plan, devs, p, NULL, &pl));
    if (!pl) goto done;
    for (int s = 0; s < 2; s++) CHECK_OK(brg_pipeline_step(pl, 0.01f, images, labels, batch, NULL, NULL));
    /* Only the inputs and labels go in, and per micro-batch its loss and
     * count of correct answers (8 bytes) come out, with each device's flag
     * of its messages' finite check (4 bytes): messages stay on devices. */
    const uint64_t host_want = (uint64_t)batch * ((uint64_t)sample_floats(m) * sizeof(float) + sizeof(int32_t)) +
                               8u * (uint64_t)mbs + (p > 1 ? 4u * (uint64_t)p : 0u);
    CHECK_MSG(brg_pipeline_host_bytes(pl) == host_want, "%s: the step moved %llu bytes through the host, want %llu",
              what, (unsigned long long)brg_pipeline_host_bytes(pl), (unsigned long long)host_want);
    for (int d = 0; d < p; d++) {
        brg_memory_report rep;
        CHECK_OK(brg_pipeline_memory(pl, d, &rep));
        const brg_plan_stage *ps = brg_plan_get_stage(plan, d);
        CHECK_MSG(rep.peak_bytes == ps->peak_bytes, "%s: device %d measured peak %zu, planned %zu", what, d,
                  rep.peak_bytes, ps->peak_bytes);
        CHECK_MSG(rep.persistent_bytes == ps->param_bytes + ps->grad_bytes + ps->optimizer_bytes + ps->receive_bytes,
                  "%s: device %d persistent %zu, planned %zu", what, d, rep.persistent_bytes,
                  ps->param_bytes + ps->grad_bytes + ps->optimizer_bytes + ps->receive_bytes);
        CHECK_MSG(rep.receive_bytes == ps->receive_bytes && (p == 1) == (rep.receive_bytes == 0),
                  "%s: device %d receive buffers %zu, planned %zu", what, d, rep.receive_bytes, ps->receive_bytes);
    }
    double loss = 0.0, acc = -1.0;
    CHECK_OK(brg_pipeline_evaluate(pl, images, labels, batch - 1, &loss, &acc)); /* a short last piece too */
    CHECK(isfinite(loss) && acc >= 0.0 && acc <= 1.0);
    for (int d = 0; d < p; d++)
        CHECK_MSG(brg_device_peak(devs[d]) == brg_plan_get_stage(plan, d)->peak_bytes,
                  "%s: device %d peak %zu after evaluation, planned %zu", what, d, brg_device_peak(devs[d]),
                  brg_plan_get_stage(plan, d)->peak_bytes);
    persistent_check(pl, what);
done:
    destroy_all(pl, devs, p, plan);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

static void test_peaks(void)
{
    peak_case("fmnist-cnn", 0, 0, 0.0, 2, 8, 4, BRG_SCHEDULE_1F1B, 1, 0, BRG_RECOMPUTE_NONE);
    peak_case("fmnist-cnn", 0, 0, 0.0, 3, 6, 3, BRG_SCHEDULE_ZB_H1, 1, 1, BRG_RECOMPUTE_NONE);
    peak_case("resnet18", 3, 32, 0.125, 3, 8, 4, BRG_SCHEDULE_GPIPE, 1, 1, BRG_RECOMPUTE_NONE);
    peak_case("resnet18", 3, 32, 0.125, 2, 8, 4, BRG_SCHEDULE_1F1B, 1, 0, BRG_RECOMPUTE_ALL);
    peak_case("resnet18", 3, 32, 0.125, 2, 8, 4, BRG_SCHEDULE_INTERLEAVED, 2, 0, BRG_RECOMPUTE_NONE);
    peak_case("inception-v3", 3, 75, 0.125, 2, 4, 2, BRG_SCHEDULE_ZB_H1, 1, 0, BRG_RECOMPUTE_NONE);
    peak_case("inception-v3", 3, 75, 0.125, 3, 6, 3, BRG_SCHEDULE_1F1B, 1, 1, BRG_RECOMPUTE_AUTO);
}

/* ---- out of memory ---- */

static void test_out_of_memory(void)
{
    brg_model *m = skip_model_bn(1);
    if (!m) return;
    float *images = NULL;
    int32_t *labels = NULL;
    new_data(m, BATCH, &images, &labels);
    brg_plan *plan = make_plan(m, 2, BATCH, 4, BRG_SCHEDULE_1F1B, 1, NULL, BRG_RECOMPUTE_NONE, 64 * MiB, NULL);
    brg_device *devs[2] = {NULL};
    brg_pipeline *pl = NULL;
    if (!images || !plan) goto done;
    /* Device 1 gets its persistent memory and half its activations. */
    const brg_plan_stage *s1 = brg_plan_get_stage(plan, 1);
    const size_t persistent = s1->param_bytes + s1->grad_bytes + s1->optimizer_bytes + s1->receive_bytes;
    brg_device_spec spec0 = brg_plan_get_stage(plan, 0)->spec, spec1 = s1->spec;
    spec1.capacity = persistent + (s1->peak_bytes - persistent) / 2;
    CHECK_OK(test_device_create(&spec0, 0, &devs[0]));
    CHECK_OK(test_device_create(&spec1, 1, &devs[1]));
    if (!devs[0] || !devs[1]) goto done;
    CHECK_OK(pipeline_from_plan(plan, devs, 2, NULL, &pl));
    if (!pl) goto done;
    for (int attempt = 0; attempt < 2; attempt++) {
        const double t0 = now_seconds();
        CHECK_STATUS(brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL), BRG_ERR_OUT_OF_MEMORY);
        const double dt = now_seconds() - t0;
        if (attempt == 0) fprintf(stderr, "out of memory: %s\n", brg_last_error());
        CHECK_ERROR_HAS("device 1");
        CHECK_ERROR_HAS("micro-batch");
        CHECK_ERROR_HAS("layer '");
        CHECK_MSG(dt < 1.0, "the failed step took %.3f s", dt);
        CHECK(brg_pipeline_steps(pl) == 0);
        persistent_check(pl, "after an out-of-memory");
    }
done:
    destroy_all(pl, devs, 2, plan);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

/* ---- per-action times ---- */

static void test_times(void)
{
    brg_model *m = skip_model_bn(1);
    if (!m) return;
    float *images = NULL;
    int32_t *labels = NULL;
    new_data(m, BATCH, &images, &labels);
    const int p = 3;
    brg_plan *plan = make_plan(m, p, BATCH, 4, BRG_SCHEDULE_INTERLEAVED, 2, NULL, BRG_RECOMPUTE_NONE, 64 * MiB, NULL);
    brg_device *devs[3] = {NULL};
    brg_pipeline *pl = NULL, *untimed = NULL;
    const double *start = NULL, *end = NULL;
    if (!images || !plan || !make_devices(plan, 0, devs)) goto done;
    brg_pipeline_options o = brg_pipeline_options_init();
    o.record_times = 1;
    o.channel_capacity = 1;
    CHECK_OK(pipeline_from_plan(plan, devs, p, &o, &pl));
    if (!pl) goto done;
    CHECK_STATUS(brg_pipeline_action_times(pl, 0, &start, &end), BRG_ERR_INVALID_ARGUMENT); /* no step yet */
    CHECK(brg_pipeline_last_step_seconds(pl) == 0.0);
    CHECK_OK(brg_pipeline_step(pl, LR, images, labels, BATCH, NULL, NULL));
    const double step_s = brg_pipeline_last_step_seconds(pl);
    CHECK(step_s > 0.0 && step_s < 10.0);
    const brg_schedule *s = brg_plan_schedule(plan);
    for (int d = 0; d < p; d++) {
        CHECK_OK(brg_pipeline_action_times(pl, d, &start, &end));
        if (!start || !end) continue;
        const int count = brg_schedule_action_count(s, d);
        int bad = 0;
        for (int i = 0; i < count; i++) {
            if (!(start[i] >= 0.0 && end[i] >= start[i] && end[i] <= step_s)) bad++;
            if (i > 0 && start[i] < end[i - 1]) bad++; /* one worker runs its list in order */
        }
        CHECK_MSG(bad == 0, "device %d: %d inconsistent action times of %d", d, bad, count);
    }
    CHECK_STATUS(brg_pipeline_action_times(pl, p, &start, &end), BRG_ERR_INVALID_ARGUMENT);
    brg_pipeline_destroy(pl);
    pl = NULL;
    /* Not recorded: an error, not stale numbers. */
    CHECK_OK(pipeline_from_plan(plan, devs, p, NULL, &untimed));
    if (untimed) {
        CHECK_OK(brg_pipeline_step(untimed, LR, images, labels, BATCH, NULL, NULL));
        CHECK_STATUS(brg_pipeline_action_times(untimed, 0, &start, &end), BRG_ERR_INVALID_ARGUMENT);
        CHECK(brg_pipeline_last_step_seconds(untimed) > 0.0);
    }
    /* Wrong sizes and devices. */
    CHECK_STATUS(pipeline_from_plan(plan, devs, p - 1, NULL, &pl), BRG_ERR_INVALID_ARGUMENT);
    brg_device *same[3] = {devs[0], devs[0], devs[2]};
    CHECK_STATUS(pipeline_from_plan(plan, same, p, NULL, &pl), BRG_ERR_INVALID_ARGUMENT);
    CHECK(pl == NULL);
    if (untimed) CHECK_STATUS(brg_pipeline_step(untimed, LR, images, labels, BATCH - 1, NULL, NULL),
                              BRG_ERR_INVALID_ARGUMENT);
done:
    brg_pipeline_destroy(untimed);
    destroy_all(pl, devs, p, plan);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

int main(void)
{
    const double t0 = now_seconds();
    test_gradients();
    fprintf(stderr, "gradients: %.2f s\n", now_seconds() - t0);
    test_deferred_batchnorm();
    test_numeric();
    test_out_of_memory();
    test_times();
    fprintf(stderr, "before peaks: %.2f s\n", now_seconds() - t0);
    test_peaks();
    fprintf(stderr, "total: %.2f s\n", now_seconds() - t0);
    TEST_EXIT();
}
