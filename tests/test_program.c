/* Programs and the dry run: the dry-run peak of every device equals the
 * peak of the same program run with data on real CPU devices, for every
 * schedule kind; the pipelined gradients equal one stage's; recomputation
 * and the split backward give the same gradients bit for bit and change
 * memory as documented; GPipe's peak grows with m and 1F1B's does not; an
 * out-of-memory names the stage and layer and still reports the peak; a
 * planning device commits no memory, is fast, and reads back zeros; the
 * layer clock times layers by device events without waiting for them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/device-impl.h"
#include "exec/program-impl.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

#include "pipeline_test.h"

static brg_model *zoo_model(const char *name)
{
    brg_model *m = NULL;
    CHECK_OK(brg_zoo_build(name, NULL, &m));
    return m;
}

/* ---- (a) dry-run peaks equal real peaks; pipelined gradients equal one stage's ---- */

typedef struct case_result {
    size_t dry_peak[4], real_peak[4];
    int ok;
} case_result;

/* Dry-run and really run `kind` on p devices (v chunks) with m micro-batches
 * of n samples; compare per-device peaks and the gradients with ref. With
 * p = 1 and v = 2 the two chunks share the device and hand tensors over
 * without messages. */
static void run_case(const brg_model *m, brg_schedule_kind kind, int p, int v, int mbs, int n, int recompute,
                     const float *images, const int32_t *labels, const float *ref, int64_t ref_count,
                     double ref_loss, case_result *out)
{
    const uint64_t seed = 11;
    const size_t capacity = 64 * MiB;
    const brg_device_spec spec = cpu_spec(capacity);
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    brg_schedule *s = NULL;
    brg_device *devs[4] = {NULL, NULL, NULL, NULL};
    brg_program *progs[4] = {NULL, NULL, NULL, NULL};
    brg_stage *stages[4 * BRG_PROGRAM_MAX_CHUNKS];
    float *g = NULL;
    char what[160];
    snprintf(what, sizeof what, "%s, %s, p=%d v=%d m=%d n=%d%s", brg_model_name(m), brg_schedule_kind_name(kind), p,
             v, mbs, n, recompute ? ", recompute" : "");
    memset(out, 0, sizeof *out);
    CHECK_OK(brg_schedule_build(kind, p, mbs, v, &s));
    if (!s) return;
    for (int d = 0; d < p; d++) {
        brg_device_part part = even_part_of(m, s, d, recompute);
        brg_memory_report rep;
        brg_status st = brg_program_dry_run(m, s, d, &part, n, &opt, &spec, &rep);
        CHECK_MSG(st == BRG_OK, "%s: dry run of device %d: %s", what, d, brg_last_error());
        out->dry_peak[d] = rep.peak_bytes;
        CHECK(rep.max_in_flight == brg_schedule_max_in_flight(s, d, -1));
        CHECK(rep.persistent_bytes == rep.param_bytes + rep.grad_bytes + rep.optimizer_bytes + rep.receive_bytes);
        CHECK(rep.activation_peak_bytes == rep.peak_bytes - rep.persistent_bytes);
        CHECK_OK(test_cpu_device(capacity, d, &devs[d]));
        if (devs[d]) CHECK_OK(brg_program_create(m, s, d, &part, n, &opt, seed, 0, devs[d], &progs[d]));
        if (!progs[d]) goto done;
        size_t persistent = 0;
        brg_program_persistent(progs[d], &persistent, NULL, NULL, NULL);
        CHECK_MSG(persistent == rep.persistent_bytes, "%s: device %d persistent %zu vs dry run %zu", what, d,
                  persistent, rep.persistent_bytes);
    }
    brg_status st = brg_program_run_local(progs, p, 1, images, labels);
    CHECK_MSG(st == BRG_OK, "%s: real run: %s", what, brg_last_error());
    if (st != BRG_OK) goto done;
    int n_stages = 0;
    for (int d = 0; d < p; d++) {
        out->real_peak[d] = brg_device_peak(devs[d]);
        CHECK_MSG(out->real_peak[d] == out->dry_peak[d], "%s: device %d peaks at %zu bytes, its dry run at %zu", what,
                  d, out->real_peak[d], out->dry_peak[d]);
        size_t persistent = 0;
        brg_program_persistent(progs[d], &persistent, NULL, NULL, NULL);
        CHECK(brg_device_in_use(devs[d]) == persistent);
        for (int c = 0; c < v; c++) stages[n_stages++] = brg_program_stage(progs[d], c);
    }
    double loss_sum = 0.0;
    brg_program_loss(progs[brg_schedule_device_of(s, p * v - 1)], &loss_sum, NULL, NULL);
    CHECK_MSG(fabs(loss_sum / (double)(mbs * n) - ref_loss) <= 1e-5 * fabs(ref_loss) + 1e-7,
              "%s: loss %.9g, one stage %.9g", what, loss_sum / (double)(mbs * n), ref_loss);
    int64_t count = 0;
    g = gather_grads(m, stages, n_stages, &count);
    CHECK(g && count == ref_count);
    if (g && count == ref_count) {
        double r = rel_diff(ref, g, count);
        CHECK_MSG(r <= 1e-5, "%s: gradients differ from one stage's by %.3g (relative)", what, r);
    }
    out->ok = 1;
done:
    free(g);
    for (int d = 0; d < p; d++) {
        brg_program_destroy(progs[d]);
        brg_device_destroy(devs[d]);
    }
    brg_schedule_destroy(s);
}

static void test_dry_equals_real(void)
{
    const char *const names[2] = {"fmnist-cnn", "long-skip"};
    fprintf(stderr, "dry-run peak = real peak (per device, bytes):\n");
    for (int mi = 0; mi < 2; mi++) {
        brg_model *m = mi == 0 ? zoo_model(names[0]) : skip_model();
        if (!m) continue;
        const int mbs = 6, n = 4, nb = brg_model_block_count(m);
        const int64_t sample = sample_floats(m);
        float *images = malloc((size_t)(mbs * n * sample) * sizeof *images);
        int32_t *labels = malloc((size_t)(mbs * n) * sizeof *labels);
        CHECK(images && labels);
        if (!images || !labels) {
            free(images);
            free(labels);
            brg_model_destroy(m);
            continue;
        }
        fill_data(m, mbs * n, images, labels);
        int64_t ref_count = 0;
        double ref_loss = 0.0;
        float *ref = reference_grads(m, mbs, n, images, labels, 11, 0, 0, &ref_count, &ref_loss);
        CHECK(ref != NULL);
        for (int p = 1; p <= 4 && ref; p++) {
            for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++) {
                const int v = brg_schedule_kind_chunks((brg_schedule_kind)k, 0);
                if (p * v > nb) continue;
                for (int recompute = 0; recompute <= 1; recompute++) {
                    case_result r;
                    run_case(m, (brg_schedule_kind)k, p, v, mbs, n, recompute, images, labels, ref, ref_count,
                             ref_loss, &r);
                    if (!r.ok) continue;
                    fprintf(stderr, "  %-10s %-11s p=%d v=%d m=%d n=%d %-9s", names[mi],
                            brg_schedule_kind_name((brg_schedule_kind)k), p, v, mbs, n,
                            recompute ? "recompute" : "");
                    for (int d = 0; d < p; d++)
                        fprintf(stderr, " %zu%s%zu", r.dry_peak[d], r.dry_peak[d] == r.real_peak[d] ? "=" : "!=",
                                r.real_peak[d]);
                    fputc('\n', stderr);
                }
            }
        }
        free(ref);
        free(images);
        free(labels);
        brg_model_destroy(m);
    }
}

/* ---- recomputation and the split backward at the stage level ---- */

/* Gradients and running statistics of a one-stage run, bit for bit the same
 * with recompute and/or the split backward; the stash after a recompute
 * forward is the inputs (and the loss's probabilities and labels). */
static void test_recompute_and_split_exact(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    enum { MB = 3, N = 5 };
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(MB * N * sample) * sizeof *images);
    int32_t labels[MB * N];
    if (!images) {
        CHECK(images != NULL);
        brg_model_destroy(m);
        return;
    }
    fill_data(m, MB * N, images, labels);
    int64_t n0 = 0, n1 = 0, n2 = 0, n3 = 0;
    double l0 = 0, l1 = 0, l2 = 0, l3 = 0;
    float *g0 = reference_grads(m, MB, N, images, labels, 5, 0, 0, &n0, &l0);
    float *g1 = reference_grads(m, MB, N, images, labels, 5, 1, 0, &n1, &l1);
    float *g2 = reference_grads(m, MB, N, images, labels, 5, 0, 1, &n2, &l2);
    float *g3 = reference_grads(m, MB, N, images, labels, 5, 1, 1, &n3, &l3);
    CHECK(g0 && g1 && g2 && g3 && n0 == n1 && n0 == n2 && n0 == n3);
    if (g0 && g1 && g2 && g3 && n0 == n1 && n0 == n2 && n0 == n3) {
        CHECK_MSG(memcmp(g0, g1, (size_t)n0 * sizeof *g0) == 0, "recompute changes the gradients by %.3g",
                  rel_diff(g0, g1, n0));
        CHECK_MSG(memcmp(g0, g2, (size_t)n0 * sizeof *g0) == 0, "the split backward changes the gradients by %.3g",
                  rel_diff(g0, g2, n0));
        CHECK_MSG(memcmp(g0, g3, (size_t)n0 * sizeof *g0) == 0,
                  "recompute with the split backward changes the gradients by %.3g", rel_diff(g0, g3, n0));
        CHECK(l0 == l1 && l0 == l2 && l0 == l3);
    }
    free(g0);
    free(g1);
    free(g2);
    free(g3);

    /* Two stages over blocks 0..3 and 4..7, each with and without
     * recompute: BatchNorm's running statistics move once per micro-batch
     * (equal after the replay), and the stash is just the inputs. */
    brg_device *dev[2] = {NULL, NULL};
    brg_stage *st[2][2] = {{NULL, NULL}, {NULL, NULL}}; /* [recompute][stage] */
    for (int r = 0; r < 2; r++) CHECK_OK(test_cpu_device(64 * MiB, r, &dev[r]));
    for (int r = 0; r < 2 && dev[r]; r++) {
        for (int k = 0; k < 2; k++) {
            brg_stage_config c;
            memset(&c, 0, sizeof c);
            c.index = k;
            c.first_block = 4 * k;
            c.last_block = 4 * k + 3;
            c.max_batch = N;
            c.slots = 1;
            c.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
            c.seed = 5;
            c.recompute = r;
            CHECK_OK(brg_stage_create(m, dev[r], &c, &st[r][k]));
        }
    }
    if (!st[0][0] || !st[0][1] || !st[1][0] || !st[1][1]) goto done;
    for (int r = 0; r < 2; r++) {
        brg_stage *a = st[r][0], *b = st[r][1];
        brg_device *d = dev[r];
        brg_tensor x, y, t;
        const brg_pass pass = {BRG_PASS_TRAIN, 1, 0};
        brg_stage_result res;
        CHECK_OK(brg_stage_input(a, 0, 0, N, &x));
        CHECK_OK(brg_device_copy_in(d, x.data, images, brg_tensor_bytes(&x)));
        CHECK_OK(brg_stage_forward(a, 0, &pass, NULL));
        size_t in_bytes = 0;
        for (int i = 0; i < brg_stage_output_count(a); i++) {
            CHECK_OK(brg_stage_output(a, 0, i, &x));
            CHECK_OK(brg_stage_input(b, 0, i, N, &y));
            CHECK_OK(brg_device_copy_between(d, y.data, d, x.data, brg_tensor_bytes(&x)));
            in_bytes += brg_arena_rounded(brg_tensor_bytes(&y));
        }
        CHECK_OK(brg_stage_release_outputs(a, 0));
        CHECK_OK(brg_stage_labels(b, 0, N, &y));
        CHECK_OK(brg_device_copy_in(d, y.data, labels, brg_tensor_bytes(&y)));
        CHECK_OK(brg_stage_forward(b, 0, &pass, &res));
        if (r == 1) {
            /* Stage 0 keeps its input only; stage 1 its inputs (r0 and r3),
             * the probabilities [N, 5] and the labels. */
            CHECK(brg_stage_bytes_in_use(a) ==
                  brg_stage_persistent_bytes(a) + brg_arena_rounded((size_t)N * sample * sizeof(float)));
            CHECK(brg_stage_bytes_in_use(b) == brg_stage_persistent_bytes(b) + in_bytes +
                                                   brg_arena_rounded(N * 5 * sizeof(float)) +
                                                   brg_arena_rounded(N * sizeof(int32_t)));
        } else {
            CHECK(brg_stage_bytes_in_use(a) > brg_stage_persistent_bytes(a) + brg_tensor_bytes(&x));
        }
        CHECK_OK(brg_stage_backward(b, 0, 1.0f / N));
        for (int i = 0; i < brg_stage_input_count(b); i++) {
            CHECK_OK(brg_stage_input_grad(b, 0, i, &x));
            CHECK_OK(brg_stage_output_grad(a, 0, i, &t));
            CHECK_OK(brg_device_copy_between(d, t.data, d, x.data, brg_tensor_bytes(&x)));
        }
        CHECK_OK(brg_stage_release_input_grads(b, 0));
        CHECK_OK(brg_stage_backward(a, 0, 1.0f / N));
        CHECK(brg_device_in_use(d) == brg_stage_persistent_bytes(a) + brg_stage_persistent_bytes(b));
    }
    /* Running statistics of bn1 (stage 0) and bn6 (stage 1): same bits. */
    const char *const bns[2] = {"bn1", "bn6"};
    for (int k = 0; k < 2; k++) {
        int l = brg_model_find_layer(m, bns[k]);
        for (int i = 0; i < brg_layer_param_count(brg_model_get_layer(m, l), m); i++) {
            brg_tensor p0, p1;
            float h0[8], h1[8];
            CHECK_OK(brg_stage_param(st[0][k], l, i, &p0));
            CHECK_OK(brg_stage_param(st[1][k], l, i, &p1));
            CHECK(brg_tensor_bytes(&p0) <= sizeof h0);
            CHECK_OK(brg_device_copy_out(dev[0], h0, p0.data, brg_tensor_bytes(&p0)));
            CHECK_OK(brg_device_copy_out(dev[1], h1, p1.data, brg_tensor_bytes(&p1)));
            CHECK_MSG(memcmp(h0, h1, brg_tensor_bytes(&p0)) == 0, "parameter %d of %s differs after recompute", i,
                      bns[k]);
        }
    }
done:
    for (int r = 0; r < 2; r++) {
        brg_stage_destroy(st[r][0]);
        brg_stage_destroy(st[r][1]);
        brg_device_destroy(dev[r]);
    }
    free(images);
    brg_model_destroy(m);
}

/* ---- (b) recompute lowers the peak; (c) GPipe grows with m, 1F1B does not ---- */

static size_t dry_peak(const brg_model *m, brg_schedule_kind kind, int p, int v, int mbs, int n, int d,
                       int recompute, size_t capacity)
{
    brg_schedule *s = NULL;
    brg_memory_report rep;
    memset(&rep, 0, sizeof rep);
    const brg_device_spec spec = cpu_spec(capacity);
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    CHECK_OK(brg_schedule_build(kind, p, mbs, v, &s));
    if (!s) return 0;
    brg_device_part part = even_part_of(m, s, d, recompute);
    CHECK_OK(brg_program_dry_run(m, s, d, &part, n, &opt, &spec, &rep));
    brg_schedule_destroy(s);
    return rep.peak_bytes;
}

static void test_memory_shapes(void)
{
    brg_model *m = zoo_model("fmnist-cnn");
    if (m) {
        /* fmnist-cnn on 2 devices, 1F1B, micro-batch 64: the first device
         * stashes two micro-batches of two conv blocks' activations. */
        size_t plain = dry_peak(m, BRG_SCHEDULE_1F1B, 2, 1, 8, 64, 0, 0, 4 * GiB);
        size_t recomp = dry_peak(m, BRG_SCHEDULE_1F1B, 2, 1, 8, 64, 0, 1, 4 * GiB);
        fprintf(stderr, "fmnist-cnn 1f1b p=2 m=8 n=64 device 0: peak %.2f MiB, with recompute %.2f MiB\n",
                (double)plain / MiB, (double)recomp / MiB);
        CHECK_MSG(recomp < plain, "recompute: %zu, without: %zu", recomp, plain);
        brg_model_destroy(m);
    }
    m = skip_model();
    if (m) {
        size_t gpipe[3], f1b[3], zb[3];
        const int ms[3] = {4, 8, 16};
        fprintf(stderr, "long-skip p=4 n=16 device 0 peak by m:");
        for (int i = 0; i < 3; i++) {
            gpipe[i] = dry_peak(m, BRG_SCHEDULE_GPIPE, 4, 1, ms[i], 16, 0, 0, 1 * GiB);
            f1b[i] = dry_peak(m, BRG_SCHEDULE_1F1B, 4, 1, ms[i], 16, 0, 0, 1 * GiB);
            zb[i] = dry_peak(m, BRG_SCHEDULE_ZB_H1, 4, 1, ms[i], 16, 0, 0, 1 * GiB);
            fprintf(stderr, " m=%d gpipe %zu 1f1b %zu zb-h1 %zu;", ms[i], gpipe[i], f1b[i], zb[i]);
        }
        fputc('\n', stderr);
        CHECK(gpipe[0] < gpipe[1] && gpipe[1] < gpipe[2]);
        CHECK(f1b[0] == f1b[1] && f1b[1] == f1b[2]);
        CHECK(zb[0] == zb[1] && zb[1] == zb[2]);
        CHECK(f1b[0] == gpipe[0]); /* m = p: both hold all p micro-batches on device 0 */
        /* The last device holds one micro-batch in 1F1B, all m in GPipe. */
        CHECK(dry_peak(m, BRG_SCHEDULE_1F1B, 4, 1, 16, 16, 3, 0, 1 * GiB) <
              dry_peak(m, BRG_SCHEDULE_GPIPE, 4, 1, 16, 16, 3, 0, 1 * GiB));
        brg_model_destroy(m);
    }
}

/* ---- (d) out of memory ---- */

static void test_out_of_memory(void)
{
    brg_model *m = zoo_model("fmnist-cnn");
    if (!m) return;
    brg_schedule *s = NULL;
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 1, 2, 1, &s));
    if (!s) {
        brg_model_destroy(m);
        return;
    }
    brg_device_part part = even_part(m, 1, 1, 0, 0);
    brg_memory_report big, small;
    brg_device_spec spec = cpu_spec(1 * GiB);
    CHECK_OK(brg_program_dry_run(m, s, 0, &part, 32, &opt, &spec, &big));
    /* Room for the weights and the input, not for the first convolution's
     * output (32 x 32 x 28 x 28 floats = 3.06 MiB). */
    spec.capacity = big.persistent_bytes + 1 * MiB;
    CHECK_STATUS(brg_program_dry_run(m, s, 0, &part, 32, &opt, &spec, &small), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("device 0, action 0 (F0)");
    CHECK_ERROR_HAS("stage 0, layer 'conv1.conv' (block 'conv1')");
    CHECK_ERROR_HAS("out of memory");
    CHECK_ERROR_HAS("plan:0");
    fprintf(stderr, "out of memory: %s\n", brg_last_error());
    CHECK(small.persistent_bytes == big.persistent_bytes);
    CHECK(small.peak_bytes > small.persistent_bytes && small.peak_bytes <= spec.capacity);
    /* One unit short of the peak fails too, with the peak so far reported. */
    spec.capacity = big.peak_bytes - BRG_ARENA_ALIGN;
    CHECK_STATUS(brg_program_dry_run(m, s, 0, &part, 32, &opt, &spec, &small), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("stage 0");
    CHECK(small.peak_bytes <= spec.capacity && small.peak_bytes > big.persistent_bytes);
    /* The peak counts bytes in use, not the arena's fragmentation: at a
     * capacity of exactly the peak this run does not fit (a 1.53 MiB
     * gradient finds 1.53 MiB free in two pieces), which only a dry run at
     * the target's capacity can tell. */
    spec.capacity = big.peak_bytes;
    brg_status st = brg_program_dry_run(m, s, 0, &part, 32, &opt, &spec, &small);
    CHECK(st == BRG_OK || st == BRG_ERR_OUT_OF_MEMORY);
    CHECK(small.peak_bytes <= big.peak_bytes);
    /* Not even the weights fit: the failing block is named. */
    spec.capacity = 256 * 1024;
    CHECK_STATUS(brg_program_dry_run(m, s, 0, &part, 32, &opt, &spec, &small), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("weights");
    CHECK(small.peak_bytes > 0 && small.peak_bytes <= spec.capacity);
    brg_schedule_destroy(s);
    brg_model_destroy(m);
}

/* A custom one-device list that backs micro-batches out of order puts two
 * in flight in the same slot (mb mod slots); the program reports it. */
static void test_slot_collision(void)
{
    brg_model *m = zoo_model("fmnist-cnn");
    if (!m) return;
    const brg_action list[6] = {
        {BRG_ACTION_FORWARD, 0, 0, -1},  {BRG_ACTION_FORWARD, 1, 0, -1}, {BRG_ACTION_BACKWARD, 1, 0, -1},
        {BRG_ACTION_FORWARD, 2, 0, -1},  {BRG_ACTION_BACKWARD, 0, 0, -1}, {BRG_ACTION_BACKWARD, 2, 0, -1},
    };
    const brg_action *lists[1] = {list};
    const int counts[1] = {6};
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_create(1, 3, 1, counts, lists, &s));
    if (s) {
        CHECK_OK(brg_schedule_verify(s, 1, NULL, 0));
        CHECK(brg_schedule_max_in_flight(s, 0, 0) == 2);
        brg_device_part part = even_part(m, 1, 1, 0, 0);
        brg_memory_report rep;
        const brg_device_spec spec = cpu_spec(1 * GiB);
        const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
        CHECK_STATUS(brg_program_dry_run(m, s, 0, &part, 4, &opt, &spec, &rep), BRG_ERR_INTERNAL);
        CHECK_ERROR_HAS("action 3 (F2)");
        CHECK_ERROR_HAS("micro-batch 2 needs slot 0, which micro-batch 0 still holds");
    }
    brg_schedule_destroy(s);
    /* A part that does not fit the schedule is refused. */
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 2, 2, 1, &s));
    if (s) {
        brg_device_part part = even_part(m, 1, 1, 0, 0); /* all blocks, on device 1 of 2 */
        brg_memory_report rep;
        const brg_device_spec spec = cpu_spec(1 * GiB);
        const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
        CHECK_STATUS(brg_program_dry_run(m, s, 1, &part, 4, &opt, &spec, &rep), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("block 0 belongs to virtual stage 0");
    }
    brg_schedule_destroy(s);
    brg_model_destroy(m);
}

/* ---- (e) a planning device commits nothing and is fast; (f) it reads zeros ---- */

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss; /* KiB on Linux */
}

static void test_planning_device(void)
{
    const brg_device_spec spec = cpu_spec(12 * GiB);
    brg_device *plan = NULL, *cpu = NULL;
    CHECK_OK(brg_device_create_planning(&spec, 3, &plan));
    CHECK_OK(test_cpu_device(1 * MiB, 0, &cpu));
    if (plan && cpu) {
        CHECK(brg_device_is_planning(plan) && !brg_device_is_planning(cpu));
        CHECK(strcmp(brg_device_name(plan), "plan:3") == 0);
        CHECK(brg_device_backend(plan) == BRG_BACKEND_CPU);
        CHECK(brg_device_capacity(plan) == 12 * GiB);
        void *p = NULL, *q = NULL;
        CHECK_OK(brg_device_alloc(plan, 10 * GiB, "big", &p));
        CHECK_OK(brg_device_alloc(cpu, 4096, "small", &q));
        float host[64];
        memset(host, 0xab, sizeof host);
        CHECK_OK(brg_device_copy_in(plan, p, host, sizeof host));
        CHECK_OK(brg_device_memset_zero(plan, p, 10 * GiB));
        CHECK_OK(brg_device_copy_out(plan, host, p, sizeof host));
        int zeros = 1;
        for (int i = 0; i < 64; i++) zeros &= host[i] == 0.0f;
        CHECK(zeros);
        /* No copies between a planning device and a real one. */
        CHECK_STATUS(brg_device_copy_between(cpu, q, plan, p, 256), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("planning device");
        CHECK_STATUS(brg_device_copy_between(plan, p, cpu, q, 256), BRG_ERR_INVALID_ARGUMENT);
        CHECK(brg_device_in_use(plan) == 10 * GiB && brg_device_peak(plan) == 10 * GiB);
        CHECK_OK(brg_device_free(plan, p));
        CHECK_OK(brg_device_free(cpu, q));
        CHECK(brg_device_in_use(plan) == 0);
    }
    brg_device_destroy(plan);
    brg_device_destroy(cpu);

    brg_device_spec cuda = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 1 * GiB};
    CHECK_OK(brg_device_create_planning(&cuda, 0, &plan));
    if (plan) CHECK(brg_device_backend(plan) == BRG_BACKEND_CUDA && brg_device_is_planning(plan));
    brg_device_destroy(plan);
}

/* Two training steps of device d's program on dev (as brg_program_dry_run
 * runs one), after the warm-up of ranks where warm; the device's peak, and
 * wider[0], wider[1] the workspaces it lent wider in each step. */
static size_t two_steps(const brg_model *m, const brg_schedule *s, int d, const brg_device_part *part, int micro,
                        int warm, brg_device *dev, uint64_t *wider)
{
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    brg_program *g = NULL;
    CHECK_OK(brg_program_create(m, s, d, part, micro, &opt, 0, 0, dev, &g));
    if (g && warm) CHECK_OK(brg_program_warm_up(g));
    uint64_t before = brg_device_wider_workspaces(dev);
    for (int step = 1; step <= 2 && g; step++) {
        CHECK_OK(brg_program_begin(g, step));
        for (int i = 0; i < brg_schedule_action_count(s, d); i++)
            CHECK_OK(brg_program_run_action(g, brg_schedule_action(s, d, i), NULL));
        CHECK_OK(brg_program_finish(g));
        CHECK_OK(brg_program_step(g, 0.0f, 1));
        wider[step - 1] = brg_device_wider_workspaces(dev) - before;
        before = brg_device_wider_workspaces(dev);
    }
    brg_program_destroy(g);
    return brg_device_peak(dev);
}

/* two_steps on a fresh planning device of card d (made with
 * BRG_CUDA_CONV_WORKSPACE_GROW=1 when grow), with the workspace ceiling
 * `ceiling` (0: none), after a warm-up where warm; *warmed: the shapes
 * the warm-up widened. The device's peak, 0 when it was not made. */
static size_t steps_on_card(const brg_model *m, const brg_schedule *s, int d, const brg_device_part *part,
                            const brg_device_spec *card, int grow, size_t ceiling, int warm, uint64_t *wider,
                            int *warmed)
{
    if (grow)
        setenv("BRG_CUDA_CONV_WORKSPACE_GROW", "1", 1);
    else
        unsetenv("BRG_CUDA_CONV_WORKSPACE_GROW");
    CHECK(brg_cuda_conv_workspace_grows() == grow);
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create_planning(card, d, &dev));
    unsetenv("BRG_CUDA_CONV_WORKSPACE_GROW");
    if (!dev) return 0;
    brg_device_set_workspace_ceiling(dev, ceiling);
    const size_t peak = two_steps(m, s, d, part, 16, warm, dev, wider);
    *warmed = brg_device_warmed_wider(dev);
    brg_device_destroy(dev);
    return peak;
}

/* The same after the warm-up of ranks, with the backward split (ZB-H1:
 * the warm-up runs each chunk's input and weight gradients apart, as the
 * steps do): device 0's steps widen the same gradients with and without
 * a warm-up before them, at the plan's peak. */
static void test_wider_workspace_split(void)
{
    brg_model *m = zoo_model("resnet50");
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_ZB_H1, 2, 4, 1, &s));
    if (!m || !s) goto out;
    const brg_device_spec card = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 12 * GiB};
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    brg_device_part part = even_part(m, 2, 1, 0, 0);
    brg_memory_report rep;
    CHECK_OK(brg_program_dry_run(m, s, 0, &part, 16, &opt, &card, &rep));
    size_t peak[2] = {0, 0};
    uint64_t wider[2][2] = {{0, 0}, {0, 0}};
    int warmed = 0;
    for (int warm = 0; warm < 2; warm++)
        peak[warm] = steps_on_card(m, s, 0, &part, &card, 1, rep.peak_bytes, warm, wider[warm], &warmed);
    printf("resnet50 zb-h1 p=2 m=4 n=16 device 0: %llu and %llu gradients widened, after a warm-up %llu and %llu\n",
           (unsigned long long)wider[0][0], (unsigned long long)wider[0][1], (unsigned long long)wider[1][0],
           (unsigned long long)wider[1][1]);
    CHECK(peak[0] == rep.peak_bytes && peak[1] == rep.peak_bytes);
    CHECK(wider[0][0] >= 10 && wider[0][0] == wider[0][1] && wider[1][0] == wider[0][0] && wider[1][1] == wider[0][1]);
out:
    brg_schedule_destroy(s);
    brg_model_destroy(m);
}

/* With BRG_CUDA_CONV_WORKSPACE_GROW=1 and the plan's peak as its workspace
 * ceiling, a CUDA device lends a convolution gradient its whole bound
 * where its bytes in use stay within the ceiling, so the peak is the
 * budget's, to the byte: ResNet-50 in two halves, each on a 12 GiB card's
 * planning device, 1F1B with four micro-batches (gradients before and
 * after the peak), two steps without the setting, with it but no ceiling
 * (nothing widens), with both, and with both after the warm-up of ranks
 * (brg_program_warm_up). The same gradients widen in both steps, as a
 * resumed run's first step would widen them, and after the warm-up too
 * (it widens every shape they widen, and after it only those widen); the
 * plan (the dry run, one step, without) gives the same peak.
 * tests/test_cuda_kernels checks the rules at their edges. */
static void test_wider_workspace(void)
{
    brg_model *m = zoo_model("resnet50");
    brg_schedule *s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 2, 4, 1, &s));
    if (!m || !s) goto out;
    const brg_device_spec card = {.backend = BRG_BACKEND_CUDA, .gpu = 0, .capacity = 12 * GiB};
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    for (int d = 0; d < 2; d++) {
        brg_device_part part = even_part(m, 2, 1, d, 0);
        brg_memory_report rep;
        CHECK_OK(brg_program_dry_run(m, s, d, &part, 16, &opt, &card, &rep));
        size_t peak[4] = {0, 0, 0, 0};
        uint64_t wider[4][2] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
        int warmed = -1;
        /* without, with but no ceiling, with the plan's peak as ceiling, and that after the warm-up of ranks */
        for (int run = 0; run < 4; run++)
            peak[run] = steps_on_card(m, s, d, &part, &card, run > 0, run >= 2 ? rep.peak_bytes : 0, run == 3,
                                      wider[run], &warmed);
        CHECK_MSG(peak[0] > 0 && peak[1] == peak[0] && peak[2] == peak[0] && peak[3] == peak[0] &&
                      rep.peak_bytes == peak[0],
                  "device %d: peak %zu with the budget alone, %zu, %zu and %zu with wider workspaces, %zu planned",
                  d, peak[0], peak[1], peak[2], peak[3], rep.peak_bytes);
        printf("resnet50 1f1b p=2 m=4 n=16 device %d on a 12 GiB card: peak %zu; with the plan's peak as ceiling "
               "%llu and %llu gradients widened in steps 1 and 2, after a warm-up that widened %d shapes %llu and "
               "%llu\n", d, peak[2], (unsigned long long)wider[2][0], (unsigned long long)wider[2][1], warmed,
               (unsigned long long)wider[3][0], (unsigned long long)wider[3][1]);
        CHECK(wider[0][0] + wider[0][1] + wider[1][0] + wider[1][1] == 0);
        /* The warm-up widens every shape the steps widen, so they widen as without it. */
        CHECK(wider[3][0] == wider[2][0] && wider[3][1] == wider[2][1]);
        if (d == 0)
            CHECK_MSG(wider[2][0] >= 10 && wider[2][0] == wider[2][1] && warmed > 0,
                      "device 0, ceiling at the plan's peak: %llu and %llu widened, not the same in both steps, or "
                      "%d shapes in the warm-up", (unsigned long long)wider[2][0], (unsigned long long)wider[2][1],
                      warmed);
        else /* its convolutions (maps of 14x14 and 7x7) all fit the 64 MiB budget */
            CHECK(wider[2][0] + wider[2][1] == 0 && warmed == 0);
    }
out:
    brg_schedule_destroy(s);
    brg_model_destroy(m);
}

/* Inception-v3 at micro-batch 32, m = 8, on seven 12 GiB devices (1F1B),
 * and on one (GPipe, the whole model): every dry run fast, no memory
 * committed. */
static void test_inception_dry_run(void)
{
    brg_model *m = zoo_model("inception-v3");
    if (!m) return;
    const brg_device_spec spec = cpu_spec(12 * GiB);
    const brg_optimizer_config opt = brg_optimizer_config_init(BRG_OPTIMIZER_ADAM);
    brg_schedule *s = NULL;
    const long rss0 = max_rss_kib();
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 7, 8, 1, &s));
    double worst = 0.0, total = 0.0;
    for (int d = 0; d < 7 && s; d++) {
        brg_device_part part = even_part(m, 7, 1, d, 0);
        brg_memory_report rep;
        double t0 = now_seconds();
        brg_status st = brg_program_dry_run(m, s, d, &part, 32, &opt, &spec, &rep);
        double t = now_seconds() - t0;
        CHECK_MSG(st == BRG_OK, "inception-v3 device %d: %s", d, brg_last_error());
        if (t > worst) worst = t;
        total += t;
        fprintf(stderr, "inception-v3 1f1b p=7 m=8 n=32 device %d (blocks %d..%d): peak %.2f GiB (persistent %.1f "
                "MiB, %d in flight), %.1f ms\n", d, part.first_block[0], part.last_block[0],
                (double)rep.peak_bytes / GiB, (double)rep.persistent_bytes / MiB, rep.max_in_flight, t * 1e3);
    }
    brg_schedule_destroy(s);
    s = NULL;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 1, 8, 1, &s));
    if (s) {
        brg_device_part part = even_part(m, 1, 1, 0, 0);
        brg_memory_report rep;
        brg_device_spec huge = cpu_spec(32 * GiB);
        double t0 = now_seconds();
        CHECK_OK(brg_program_dry_run(m, s, 0, &part, 32, &opt, &huge, &rep));
        double t = now_seconds() - t0;
        if (t > worst) worst = t;
        fprintf(stderr, "inception-v3 whole model, one device, gpipe m=8 n=32: peak %.2f GiB, %.1f ms\n",
                (double)rep.peak_bytes / GiB, t * 1e3);
    }
    brg_schedule_destroy(s);
    const long grown = max_rss_kib() - rss0;
    fprintf(stderr, "seven devices in %.1f ms, slowest dry run %.1f ms; max RSS grew by %ld KiB\n", total * 1e3,
            worst * 1e3, grown);
    /* Generous against a loaded machine; the report above shows the real
     * figure (a few ms). */
    CHECK_MSG(worst < 0.5, "slowest dry run took %.1f ms", worst * 1e3);
    CHECK_MSG(grown < 50 * 1024, "max RSS grew by %ld KiB", grown);
    brg_model_destroy(m);
}

/* ---- the layer clock times the device by its events, without waiting ---- */

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A stage of the whole model on a cpu-async device whose compute stream
 * sleeps up to 3 ms before each op (seeded): the backward, whose layers
 * read nothing back to the host, is queued long before the stream has run
 * it, so a clock that waited between layers would hold the host there; and
 * the layers' times add up to the stream's time, which a clock of the host
 * would not see. The forward (it reads the loss back) is timed too. */
static void test_layer_clock(void)
{
    brg_model *m = skip_model();
    if (!m) return;
    enum { N = 3 };
    const int L = brg_model_layer_count(m);
    const int64_t sample = sample_floats(m);
    float *images = malloc((size_t)(N * sample) * sizeof *images);
    int32_t labels[N];
    double *times = calloc((size_t)3 * L, sizeof *times);
    brg_device *dev = NULL;
    brg_stage *st = NULL;
    CHECK(images && times);
    if (!images || !times) goto done;
    fill_data(m, N, images, labels);
    setenv("BRG_DEBUG_DELAYS", "3000:11", 1);
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = 64 * MiB, .async = 1};
    CHECK_OK(brg_device_create(&spec, 0, &dev));
    unsetenv("BRG_DEBUG_DELAYS");
    if (!dev) goto done;
    brg_stage_config c;
    memset(&c, 0, sizeof c);
    c.last_block = brg_model_block_count(m) - 1;
    c.max_batch = N;
    c.slots = 1;
    c.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
    c.seed = 5;
    CHECK_OK(brg_stage_create(m, dev, &c, &st));
    if (!st) goto done;
    brg_layer_clock clock = {times, times + L, times + 2 * L};
    brg_stage_set_layer_clock(st, &clock);
    brg_tensor x, y;
    const brg_pass pass = {BRG_PASS_TRAIN, 1, 0};
    brg_stage_result res;
    CHECK_OK(brg_stage_input(st, 0, 0, N, &x));
    CHECK_OK(brg_device_copy_in(dev, x.data, images, brg_tensor_bytes(&x)));
    CHECK_OK(brg_stage_labels(st, 0, N, &y));
    CHECK_OK(brg_device_copy_in(dev, y.data, labels, brg_tensor_bytes(&y)));
    CHECK_OK(brg_device_synchronize(dev));

    double t0 = wall_seconds();
    CHECK_OK(brg_stage_forward(st, 0, &pass, &res));
    CHECK_OK(brg_stage_read_layer_clock(st));
    const double forward_wall = wall_seconds() - t0;
    double forward = 0.0;
    for (int l = 0; l < L; l++) {
        CHECK_MSG(times[l] > 0.0, "layer %d's forward took %g s", l, times[l]);
        forward += times[l];
    }
    CHECK_MSG(forward > 0.5 * forward_wall && forward <= forward_wall, "the forward's layers took %.1f ms of %.1f ms",
              1e3 * forward, 1e3 * forward_wall);

    t0 = wall_seconds();
    CHECK_OK(brg_stage_backward(st, 0, 1.0f / N));
    const double queued = wall_seconds() - t0;
    CHECK_OK(brg_stage_read_layer_clock(st));
    const double backward_wall = wall_seconds() - t0;
    double backward = 0.0;
    for (int l = 0; l < L; l++) backward += times[L + l] + times[2 * L + l];
    CHECK_MSG(backward > 0.5 * backward_wall && backward <= backward_wall,
              "the backward's layers took %.1f ms of %.1f ms", 1e3 * backward, 1e3 * backward_wall);
    CHECK_MSG(queued < 0.5 * backward_wall, "queueing the backward took %.1f ms of its %.1f ms", 1e3 * queued,
              1e3 * backward_wall);
    /* read: nothing is left to add */
    const double before = times[0];
    CHECK_OK(brg_stage_read_layer_clock(st));
    CHECK(times[0] == before);
    brg_stage_set_layer_clock(st, NULL);
done:
    brg_stage_destroy(st);
    brg_device_destroy(dev);
    free(times);
    free(images);
    brg_model_destroy(m);
}

int main(void)
{
    /* First, while the process is small: its max RSS must not grow. */
    test_inception_dry_run();
    test_planning_device();
    test_recompute_and_split_exact();
    test_dry_equals_real();
    test_memory_shapes();
    test_out_of_memory();
    test_slot_collision();
    test_layer_clock();
    test_wider_workspace();
    test_wider_workspace_split();
    TEST_EXIT();
}
