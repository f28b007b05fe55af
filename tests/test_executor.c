/* The pipeline executor: one worker thread per device gives the same loss
 * and gradients as the single-threaded local driver (and one stage) for
 * GPipe, 1F1B, ZB-H1 and interleaved schedules on 2..4 devices, with
 * channel capacities 1 and 2, over two steps with an optimizer update in
 * between; an injected failure, or a real out-of-memory, on one device
 * stops every worker promptly, names the device and micro-batch, and
 * leaves every device at its persistent bytes; so does a failing optimizer
 * step, which each device runs on its own worker. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "backends/cpu/cpu-kernels.h"
#include "exec/executor-impl.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)

#include "pipeline_test.h"

/* ---- executor vs the local driver ---- */

static void persistent_check(brg_program *const *progs, brg_device *const *devs, int p, const char *what)
{
    for (int d = 0; d < p; d++) {
        size_t persistent = 0;
        brg_program_persistent(progs[d], &persistent, NULL, NULL, NULL);
        CHECK_MSG(brg_device_in_use(devs[d]) == persistent, "%s: device %d holds %zu bytes, persistent %zu", what,
                  d, brg_device_in_use(devs[d]), persistent);
    }
}

static float *all_grads(const brg_model *m, brg_program *const *progs, int p, int v, int64_t *count)
{
    brg_stage *stages[4 * BRG_PROGRAM_MAX_CHUNKS];
    int k = 0;
    for (int d = 0; d < p; d++)
        for (int c = 0; c < v; c++) stages[k++] = brg_program_stage(progs[d], c);
    return gather_grads(m, stages, k, count);
}

/* Two steps of kind on p devices, executor against brg_program_run_local
 * (and step 1 against one stage's ref). */
static int exec_case(const brg_model *m, brg_schedule_kind kind, int p, int v, int mbs, int n, int capacity,
                     const float *images, const int32_t *labels, const float *ref, int64_t ref_count, double ref_loss)
{
    const uint64_t seed = 11;
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    brg_schedule *s = NULL;
    brg_device *edev[4] = {NULL}, *ldev[4] = {NULL};
    brg_program *lprog[4] = {NULL}, *eprog[4] = {NULL};
    brg_device_part parts[4];
    brg_executor *ex = NULL;
    int ok = 0;
    char what[160];
    snprintf(what, sizeof what, "%s p=%d v=%d m=%d cap=%d", brg_schedule_kind_name(kind), p, v, mbs, capacity);
    CHECK_OK(brg_schedule_build(kind, p, mbs, v, &s));
    if (!s) return 0;
    for (int d = 0; d < p; d++) {
        parts[d] = even_part(m, p, v, d, 0);
        parts[d].channel_capacity = capacity;
        CHECK_OK(test_cpu_device(64 * MiB, d, &edev[d]));
        CHECK_OK(test_cpu_device(64 * MiB, d, &ldev[d]));
        if (!edev[d] || !ldev[d]) goto done;
        CHECK_OK(brg_program_create(m, s, d, &parts[d], n, &opt, seed, 0, ldev[d], &lprog[d]));
        if (!lprog[d]) goto done;
    }
    CHECK_OK(brg_executor_create(m, s, edev, parts, n, &opt, seed, 0, NULL, &ex));
    if (!ex) goto done;
    CHECK(brg_executor_capacity(ex) == capacity);
    for (int d = 0; d < p; d++) eprog[d] = brg_executor_program(ex, d);
    for (int step = 1; step <= 2; step++) {
        double eloss = 0.0, lsum = 0.0;
        brg_status st = brg_executor_run(ex, images, labels, mbs * n, &eloss, NULL);
        CHECK_MSG(st == BRG_OK, "%s step %d: executor: %s", what, step, brg_last_error());
        brg_status lst = brg_program_run_local(lprog, p, step, images, labels);
        CHECK_MSG(lst == BRG_OK, "%s step %d: local: %s", what, step, brg_last_error());
        if (st != BRG_OK || lst != BRG_OK) goto done;
        persistent_check(eprog, edev, p, what);
        for (int d = 0; d < p; d++)
            CHECK_MSG(brg_device_peak(edev[d]) == brg_device_peak(ldev[d]), "%s: device %d peak %zu, local %zu",
                      what, d, brg_device_peak(edev[d]), brg_device_peak(ldev[d]));
        brg_program_loss(lprog[(p * v - 1) % p], &lsum, NULL, NULL);
        const double lloss = lsum / (double)(mbs * n);
        CHECK_MSG(fabs(eloss - lloss) <= 1e-5 * fabs(lloss) + 1e-7, "%s step %d: loss %.9g, local %.9g", what, step,
                  eloss, lloss);
        if (step == 1)
            CHECK_MSG(fabs(eloss - ref_loss) <= 1e-5 * fabs(ref_loss) + 1e-7, "%s: loss %.9g, one stage %.9g", what,
                      eloss, ref_loss);
        int64_t ec = 0, lc = 0;
        float *eg = all_grads(m, eprog, p, v, &ec), *lg = all_grads(m, lprog, p, v, &lc);
        CHECK(eg && lg && ec == lc);
        if (eg && lg && ec == lc) {
            double r = rel_diff(lg, eg, ec);
            CHECK_MSG(r <= 1e-5, "%s step %d: gradients differ from the local driver's by %.3g", what, step, r);
            if (step == 1 && ec == ref_count) {
                r = rel_diff(ref, eg, ec);
                CHECK_MSG(r <= 1e-5, "%s: gradients differ from one stage's by %.3g", what, r);
            }
        }
        free(eg);
        free(lg);
        CHECK_OK(brg_executor_update(ex, 1e-2f));
        for (int d = 0; d < p; d++) CHECK_OK(brg_program_step(lprog[d], 1e-2f, step));
    }
    CHECK(brg_executor_step_count(ex) == 3);
    ok = 1;
done:
    brg_executor_destroy(ex);
    for (int d = 0; d < p; d++) {
        brg_program_destroy(lprog[d]);
        if (edev[d]) CHECK(brg_device_in_use(edev[d]) == 0);
        brg_device_destroy(edev[d]);
        brg_device_destroy(ldev[d]);
    }
    brg_schedule_destroy(s);
    return ok;
}

static void test_equals_local(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    const int n = 3;
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(4 * n * sample) * sizeof *images);
    int32_t *labels = malloc((size_t)(4 * n) * sizeof *labels);
    CHECK(images && labels);
    const brg_schedule_kind kinds[4] = {BRG_SCHEDULE_GPIPE, BRG_SCHEDULE_1F1B, BRG_SCHEDULE_ZB_H1,
                                        BRG_SCHEDULE_INTERLEAVED};
    int cases = 0;
    if (images && labels) {
        fill_data(m, 4 * n, images, labels);
        const int ms[3] = {1, 2, 4};
        for (int mi = 0; mi < 3; mi++) {
            const int mbs = ms[mi];
            int64_t ref_count = 0;
            double ref_loss = 0.0;
            float *ref = reference_grads(m, mbs, n, images, labels, 11, 0, 0, &ref_count, &ref_loss);
            CHECK(ref != NULL);
            for (int p = 2; p <= 4 && ref; p++)
                for (int k = 0; k < 4; k++) {
                    const int v = brg_schedule_kind_chunks(kinds[k], 0);
                    if (kinds[k] == BRG_SCHEDULE_INTERLEAVED && mbs % p != 0) continue;
                    for (int cap = 1; cap <= 2; cap++)
                        cases += exec_case(m, kinds[k], p, v, mbs, n, cap, images, labels, ref, ref_count,
                                           ref_loss);
                }
            free(ref);
        }
    }
    fprintf(stderr, "executor = local driver: %d cases\n", cases);
    CHECK(cases >= 3 * 3 * 3 * 2);
    free(images);
    free(labels);
    brg_model_destroy(m);
}

/* A rig for the tests below: the schedule's P CPU devices of `bytes`
 * each, the model's even parts and an executor on them (seed 5). */
typedef struct rig {
    int p;
    brg_device *devs[4];
    brg_program *progs[4];
    brg_executor *ex;
} rig;

/* The rig's executor, or NULL (the failure CHECKed). */
static brg_executor *rig_open(rig *r, const brg_model *m, const brg_schedule *s, size_t bytes, int n,
                              brg_optimizer_kind kind)
{
    memset(r, 0, sizeof *r);
    r->p = brg_schedule_devices(s);
    CHECK(r->p <= 4);
    brg_device_part parts[4];
    int ok = r->p <= 4;
    for (int d = 0; d < r->p && ok; d++) {
        parts[d] = even_part(m, r->p, 1, d, 0);
        CHECK_OK(test_cpu_device(bytes, d, &r->devs[d]));
        ok = r->devs[d] != NULL;
    }
    const brg_optimizer_config opt = brg_optimizer_config_init(kind);
    if (ok) CHECK_OK(brg_executor_create(m, s, r->devs, parts, n, &opt, 5, 0, NULL, &r->ex));
    for (int d = 0; r->ex && d < r->p; d++) r->progs[d] = brg_executor_program(r->ex, d);
    return r->ex;
}

/* Destroy the executor: every device holds nothing then. */
static void rig_close(rig *r)
{
    brg_executor_destroy(r->ex);
    for (int d = 0; d < r->p && d < 4; d++) {
        if (r->devs[d]) CHECK(brg_device_in_use(r->devs[d]) == 0);
        brg_device_destroy(r->devs[d]);
    }
    memset(r, 0, sizeof *r);
}

/* CPU devices of one process pass blocked tensors between their stages
 * as they are (brg_device_part.edge_block, set by the executor): mp1, the
 * stem's output, is blocked on devices 0 and 1, and the pipeline still
 * equals the local driver (plain edges) and one stage. */
static void test_blocked_edges(void)
{
    brg_model *m = blockable_model();
    if (!m) return;
    enum { P = 3, MB = 2, N = 2 };
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(MB * N * sample) * sizeof *images);
    int32_t labels[MB * N];
    CHECK(images != NULL);
    brg_schedule *s = NULL;
    if (images) {
        fill_data(m, MB * N, images, labels);
        int64_t ref_count = 0;
        double ref_loss = 0.0;
        float *ref = reference_grads(m, MB, N, images, labels, 11, 0, 0, &ref_count, &ref_loss);
        CHECK(ref != NULL);
        if (ref)
            CHECK(exec_case(m, BRG_SCHEDULE_1F1B, P, 1, MB, N, 1, images, labels, ref, ref_count, ref_loss));
        free(ref);
    }
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, P, MB, 1, &s));
    rig r;
    memset(&r, 0, sizeof r);
    if (s && rig_open(&r, m, s, 64 * MiB, N, BRG_OPTIMIZER_ADAM)) {
        const int block = brg_device_channel_block(r.devs[0]), mp1 = brg_model_find_tensor(m, "mp1");
        for (int d = 0; d < 2; d++) {
            const brg_stage *st = brg_program_stage(r.progs[d], 0);
            CHECK_MSG(brg_stage_tensor_layout(st, mp1) == block, "device %d holds mp1 in blocks of %d, not %d", d,
                      brg_stage_tensor_layout(st, mp1), block);
        }
        if (!block) printf("# CPU devices keep plain tensors here: blocked edges not checked\n");
    }
    rig_close(&r);
    brg_schedule_destroy(s);
    free(images);
    brg_model_destroy(m);
}

/* ---- failures ---- */

/* Run one step that must fail with `want`, and promptly: every worker
 * stops instead of waiting out the step. Prints the message under `what`;
 * the caller checks what it names. */
static void failed_step(brg_executor *ex, const float *images, const int32_t *labels, int n, brg_status want,
                        const char *what)
{
    const double t0 = now_seconds();
    const brg_status st = brg_executor_run(ex, images, labels, n, NULL, NULL);
    const double t = now_seconds() - t0;
    CHECK_STATUS(st, want);
    CHECK_MSG(t < 1.0, "%s: the failed step took %.3f s", what, t);
    fprintf(stderr, "%s: %.2f ms: %s\n", what, t * 1e3, brg_last_error());
}

static void test_injected_failure(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    enum { P = 4, MB = 4, N = 3 };
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(MB * N * sample) * sizeof *images);
    int32_t labels[MB * N];
    brg_schedule *s = NULL;
    CHECK(images != NULL);
    if (images) fill_data(m, MB * N, images, labels);
    const brg_schedule_kind kinds[2] = {BRG_SCHEDULE_1F1B, BRG_SCHEDULE_ZB_H1};
    const brg_action_type types[4] = {BRG_ACTION_FORWARD, BRG_ACTION_BACKWARD, BRG_ACTION_SEND_ACT,
                                      BRG_ACTION_RECV_GRAD};
    for (int k = 0; k < 2 && images; k++) {
        CHECK_OK(brg_schedule_build(kinds[k], P, MB, 1, &s));
        if (!s) continue;
        for (int ti = 0; ti < 4; ti++) {
            brg_action_type type = types[ti];
            if (kinds[k] == BRG_SCHEDULE_ZB_H1 && type == BRG_ACTION_BACKWARD) type = BRG_ACTION_BACKWARD_WEIGHT;
            const int dev = 1 + ti % 2, mb = 1 + ti % 3;
            rig r;
            brg_executor *ex = rig_open(&r, m, s, 64 * MiB, N, BRG_OPTIMIZER_ADAM);
            if (ex) {
                const brg_executor_fault f = {dev, mb, type, -1, BRG_ERR_NUMERIC};
                brg_executor_inject_fault(ex, &f);
                char what[64], want[64];
                snprintf(what, sizeof what, "%s fault at device %d mb %d", brg_schedule_kind_name(kinds[k]), dev, mb);
                failed_step(ex, images, labels, MB * N, BRG_ERR_NUMERIC, what);
                snprintf(want, sizeof want, "device %d (virtual stage %d), micro-batch %d", dev, dev, mb);
                CHECK_ERROR_HAS(want);
                CHECK_ERROR_HAS("injected fault");
                CHECK_ERROR_HAS("pipeline step 1");
                persistent_check(r.progs, r.devs, P, "after an injected failure");
                /* The executor recovers: the next step runs clean. */
                brg_executor_inject_fault(ex, NULL);
                CHECK_OK(brg_executor_run(ex, images, labels, MB * N, NULL, NULL));
                persistent_check(r.progs, r.devs, P, "after a step that followed a failure");
            }
            rig_close(&r);
        }
        brg_schedule_destroy(s);
        s = NULL;
    }
    free(images);
    brg_model_destroy(m);
}

/* The optimizer step runs on each device's worker: a failing kernel in
 * device 2's update is reported with the step and the device, the step
 * count stays, and the next update and step run clean. */
static void test_update_failure(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    enum { P = 3, MB = 2, N = 3 };
    float *images = malloc((size_t)(MB * N * sample_floats(m)) * sizeof *images);
    int32_t labels[MB * N];
    brg_schedule *s = NULL;
    rig r;
    memset(&r, 0, sizeof r);
    CHECK(images != NULL);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, P, MB, 1, &s));
    if (images && s) fill_data(m, MB * N, images, labels);
    brg_executor *ex = images && s ? rig_open(&r, m, s, 64 * MiB, N, BRG_OPTIMIZER_SGD) : NULL;
    if (ex) {
        CHECK_OK(brg_executor_run(ex, images, labels, MB * N, NULL, NULL));
        brg_device_set_fault(r.devs[2], 0, 0, 1);
        CHECK(brg_executor_update(ex, 1e-2f) == BRG_ERR_BACKEND);
        CHECK_ERROR_HAS("pipeline step 1, device 2");
        CHECK_ERROR_HAS("injected fault");
        CHECK(brg_executor_step_count(ex) == 1);
        brg_device_set_fault(r.devs[2], 0, 0, 0);
        CHECK_OK(brg_executor_update(ex, 1e-2f));
        CHECK(brg_executor_step_count(ex) == 2);
        CHECK_OK(brg_executor_run(ex, images, labels, MB * N, NULL, NULL));
        CHECK_OK(brg_executor_update(ex, 1e-2f));
        CHECK(brg_executor_step_count(ex) == 3);
    }
    rig_close(&r);
    brg_schedule_destroy(s);
    free(images);
    brg_model_destroy(m);
}

/* A real failure: device 2's arena holds its weights but hardly any
 * activations, so its first receive runs out of memory and says where. */
static void test_out_of_memory(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    enum { P = 3, MB = 2, N = 8 };
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(MB * N * sample) * sizeof *images);
    int32_t labels[MB * N];
    brg_schedule *s = NULL;
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, P, MB, 1, &s));
    if (images && s) {
        fill_data(m, MB * N, images, labels);
        brg_device *devs[P] = {NULL};
        brg_device_part parts[P];
        brg_executor *ex = NULL;
        for (int d = 0; d < P; d++) {
            parts[d] = even_part(m, P, 1, d, 0);
            brg_memory_report rep;
            CHECK_OK(brg_program_dry_run(m, s, d, &parts[d], N, &opt, &(brg_device_spec){.backend = BRG_BACKEND_CPU,
                                         .gpu = -1, .capacity = 64 * MiB}, &rep));
            const size_t cap = d == 2 ? rep.persistent_bytes + 2 * BRG_ARENA_ALIGN : 64 * MiB;
            CHECK_OK(test_cpu_device(cap, d, &devs[d]));
        }
        if (devs[0] && devs[1] && devs[2]) CHECK_OK(brg_executor_create(m, s, devs, parts, N, &opt, 5, 0, NULL, &ex));
        if (ex) {
            brg_program *progs[P];
            for (int d = 0; d < P; d++) progs[d] = brg_executor_program(ex, d);
            failed_step(ex, images, labels, MB * N, BRG_ERR_OUT_OF_MEMORY, "out of memory");
            CHECK_ERROR_HAS("device 2 (virtual stage 2), micro-batch 0");
            CHECK_ERROR_HAS("out of memory");
            CHECK_ERROR_HAS("stage 2 / inputs");
            persistent_check(progs, devs, P, "after an out-of-memory");
        }
        brg_executor_destroy(ex);
        for (int d = 0; d < P; d++) brg_device_destroy(devs[d]);
    }
    brg_schedule_destroy(s);
    free(images);
    brg_model_destroy(m);
}

/* A custom schedule that cannot run (device 0 waits for a gradient before
 * sending the activation device 1 waits for): the executor detects that
 * both workers wait on empty channels and fails instead of hanging. */
static void test_deadlock(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    enum { P = 2, N = 2 };
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(N * sample) * sizeof *images);
    int32_t labels[N];
    const brg_action l0[4] = {{BRG_ACTION_FORWARD, 0, 0, -1}, {BRG_ACTION_RECV_GRAD, 0, 0, 1},
                              {BRG_ACTION_SEND_ACT, 0, 0, 1}, {BRG_ACTION_BACKWARD, 0, 0, -1}};
    const brg_action l1[4] = {{BRG_ACTION_RECV_ACT, 0, 0, 0}, {BRG_ACTION_FORWARD, 0, 0, -1},
                              {BRG_ACTION_BACKWARD, 0, 0, -1}, {BRG_ACTION_SEND_GRAD, 0, 0, 0}};
    const brg_action *lists[P] = {l0, l1};
    const int counts[P] = {4, 4};
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_create(P, 1, 1, counts, lists, &s));
    if (images && s) {
        fill_data(m, N, images, labels);
        rig r;
        brg_executor *ex = rig_open(&r, m, s, 16 * MiB, N, BRG_OPTIMIZER_SGD);
        if (ex) {
            failed_step(ex, images, labels, N, BRG_ERR_INTERNAL, "deadlock");
            CHECK_ERROR_HAS("the schedule stopped");
            CHECK_ERROR_HAS("device 0 waits at action 1 (RG0<1) for a message from device 1");
            CHECK_ERROR_HAS("device 1 waits at action 0 (RA0<0) for a message from device 0");
            persistent_check(r.progs, r.devs, P, "after a deadlock");
        }
        rig_close(&r);
    }
    brg_schedule_destroy(s);
    free(images);
    brg_model_destroy(m);
}

/* Arguments. */
static void test_arguments(void)
{
    brg_model *m = skip_model();
    brg_schedule *s = NULL;
    brg_device *dev = NULL;
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 2, 2, 1, &s));
    CHECK_OK(test_cpu_device(16 * MiB, 0, &dev));
    if (m && s && dev) {
        brg_device *devs[2] = {dev, dev};
        brg_device_part parts[2] = {even_part(m, 2, 1, 0, 0), even_part(m, 2, 1, 1, 0)};
        brg_executor *ex = NULL;
        CHECK_STATUS(brg_executor_create(m, s, devs, parts, 2, &opt, 1, 0, NULL, &ex), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("same device");
        CHECK(ex == NULL);
        /* Every device's receive buffers hold as many messages. */
        brg_device *dev2 = NULL;
        CHECK_OK(brg_device_create_cpu(16 * MiB, 1, &dev2));
        if (dev2) {
            devs[1] = dev2;
            parts[0].channel_capacity = 1;
            parts[1].channel_capacity = 3;
            CHECK_STATUS(brg_executor_create(m, s, devs, parts, 2, &opt, 1, 0, NULL, &ex), BRG_ERR_INVALID_ARGUMENT);
            CHECK_ERROR_HAS("channel capacity");
            parts[1].channel_capacity = 5;
            parts[0].channel_capacity = 5;
            CHECK_STATUS(brg_executor_create(m, s, devs, parts, 2, &opt, 1, 0, NULL, &ex), BRG_ERR_INVALID_ARGUMENT);
            CHECK_ERROR_HAS("1..4");
            CHECK(ex == NULL);
            CHECK(brg_device_in_use(dev) == 0 && brg_device_in_use(dev2) == 0);
        }
        brg_device_destroy(dev2);
    }
    brg_executor_destroy(NULL);
    brg_device_destroy(dev);
    brg_schedule_destroy(s);
    brg_model_destroy(m);
}

/* Several CPU devices share OpenBLAS's threads while they compute, and the
 * count comes back afterwards; a user's OPENBLAS_NUM_THREADS wins. */
static void test_blas_threads(void)
{
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS")) {
        CHECK(brg_cpu_threads_share(4) == 0);
        return;
    }
    const int all = openblas_get_num_threads();
    CHECK(brg_cpu_threads_share(1) == 0);
    CHECK(openblas_get_num_threads() == all);
    const int saved = brg_cpu_threads_share(4);
    CHECK_MSG(saved == all, "share returned %d, the count was %d", saved, all);
    CHECK_MSG(openblas_get_num_threads() == (all / 4 > 1 ? all / 4 : 1), "%d threads for a quarter of %d",
              openblas_get_num_threads(), all);
    brg_cpu_threads_restore(saved);
    CHECK(openblas_get_num_threads() == all);
}

int main(void)
{
    const double t0 = now_seconds();
    test_arguments();
    test_blas_threads();
    test_equals_local();
    test_blocked_edges();
    test_injected_failure();
    test_update_failure();
    test_out_of_memory();
    test_deadlock();
    fprintf(stderr, "test_executor: %.2f s\n", now_seconds() - t0);
    TEST_EXIT();
}
