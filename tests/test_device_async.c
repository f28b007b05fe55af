/* cpu-async devices: list parsing and names, ops that give the sync CPU
 * device's numbers, the event protocol between two devices under random
 * stream delays (BRG_DEBUG_DELAYS), waits that see only the records made
 * before them, sticky errors that name the queuing action, event times,
 * and communicators (the CPU twin of NCCL's) over an in-process wire. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A cpu-async device created with BRG_DEBUG_DELAYS set to delays (NULL:
 * none). */
static brg_device *async_device(size_t capacity, int index, const char *delays)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = capacity, .async = 1};
    brg_device *dev = NULL;
    if (delays) setenv("BRG_DEBUG_DELAYS", delays, 1);
    else unsetenv("BRG_DEBUG_DELAYS");
    CHECK_OK(brg_device_create(&spec, index, &dev));
    unsetenv("BRG_DEBUG_DELAYS");
    return dev;
}

static void test_parse_and_names(void)
{
    brg_device_spec specs[16];
    char name[32];
    int n = 0;
    CHECK_OK(brg_device_spec_parse("cpu-async:4x10MiB", specs, 16, &n));
    CHECK(n == 4);
    for (int i = 0; i < n; i++)
        CHECK(specs[i].backend == BRG_BACKEND_CPU && specs[i].async == 1 && specs[i].capacity == 10 * MiB);
    CHECK(strcmp(brg_device_spec_name(&specs[2], 2, name, sizeof name), "cpu-async:2") == 0);

    /* Plain sizes and cpu: stay synchronous; the kinds mix in one list. */
    CHECK_OK(brg_device_spec_parse("4x8MiB", specs, 16, &n));
    CHECK(n == 4 && specs[0].async == 0 && specs[3].async == 0);
    CHECK_OK(brg_device_spec_parse("cpu:1MiB,cpu-async:2x2MiB,3MiB", specs, 16, &n));
    CHECK(n == 4 && !specs[0].async && specs[1].async && specs[2].async && !specs[3].async);
    CHECK(specs[2].capacity == 2 * MiB && specs[3].capacity == 3 * MiB);
    CHECK(strcmp(brg_device_spec_name(&specs[0], 0, name, sizeof name), "cpu:0") == 0);
    CHECK(strcmp(brg_device_spec_name(&specs[1], 1, name, sizeof name), "cpu-async:1") == 0);

    struct {
        const char *text, *mention;
    } bad[] = {
        {"cpu-async:", "cpu-async:"},
        {"cpu-async:0x8MiB", "between 1 and 1024"},
        {"cpu-async:4xMiB", "not a size"},
        {"cpu-asink:4x8MiB", "known: cpu, cpu-async, cuda"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(brg_device_spec_parse(bad[i].text, specs, 16, &n), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS(bad[i].mention);
    }

    brg_device *dev = async_device(MiB, 3, NULL);
    if (dev) {
        CHECK(strcmp(brg_device_name(dev), "cpu-async:3") == 0);
        CHECK(brg_device_backend(dev) == BRG_BACKEND_CPU && brg_device_capacity(dev) == MiB);
        CHECK(brg_device_is_async(dev));
    }
    brg_device_destroy(dev);

    /* A malformed delay setting is refused when the device is made. */
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = MiB, .async = 1};
    const char *bad_delays[] = {"abc", "200:", "200:x", "-5", "99999999"};
    for (size_t i = 0; i < sizeof bad_delays / sizeof bad_delays[0]; i++) {
        setenv("BRG_DEBUG_DELAYS", bad_delays[i], 1);
        dev = NULL;
        CHECK_STATUS(brg_device_create(&spec, 0, &dev), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("BRG_DEBUG_DELAYS");
        CHECK(dev == NULL);
        brg_device_destroy(dev);
    }
    unsetenv("BRG_DEBUG_DELAYS");
}

static float frand(uint64_t *s) /* uniform in [-1, 1) */
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

enum { N = 2, C = 3, H = 9, W = 7, K = 4, CLASSES = 5 };

/* A 3x3 convolution (with workspace) and a softmax cross-entropy on dev
 * from the same seeded data: y[N,K,H,W], then loss[1] and probs[N,CLASSES]
 * of y's first N x CLASSES numbers. The tensors on the stack are wiped
 * after each run: a backend that kept pointers to them would read junk. */
static void run_ops(brg_device *dev, float *y_out, float *loss_out, float *probs_out)
{
    uint64_t seed = 12345;
    float x[N * C * H * W], w[K * C * 3 * 3], b[K];
    int32_t labels[N] = {1, 4};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = frand(&seed);
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) b[i] = frand(&seed);
    const int64_t xs[4] = {N, C, H, W}, ws[4] = {K, C, 3, 3}, bs[1] = {K}, ys[4] = {N, K, H, W};
    const int64_t ls[2] = {N, CLASSES}, labs[1] = {N}, one[1] = {1};
    brg_tensor tx, tw, tb, ty, tl, tlab, tloss, tp;
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, xs, "x", &tx));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, ws, "w", &tw));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 1, bs, "b", &tb));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, ys, "y", &ty));
    CHECK_OK(brg_tensor_alloc(dev, BRG_I32, 1, labs, "labels", &tlab));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 1, one, "loss", &tloss));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, ls, "probs", &tp));
    CHECK_OK(brg_tensor_init(&tl, ty.data, BRG_F32, 2, ls, dev)); /* y's first numbers as logits */
    if (!tx.data || !tw.data || !tb.data || !ty.data || !tlab.data || !tloss.data || !tp.data) return;
    CHECK_OK(brg_device_copy_in(dev, tx.data, x, sizeof x));
    CHECK_OK(brg_device_copy_in(dev, tw.data, w, sizeof w));
    CHECK_OK(brg_device_copy_in(dev, tb.data, b, sizeof b));
    CHECK_OK(brg_device_copy_in(dev, tlab.data, labels, sizeof labels));

    brg_op conv = {.kind = BRG_OP_CONV2D_FORWARD, .n_in = 3, .n_out = 1, .in = {&tx, &tw, &tb}, .out = {&ty}};
    conv.p.conv = (brg_conv2d_params){1, 1, 1, 1};
    size_t ws_bytes = 0;
    CHECK_OK(brg_device_workspace_bytes(dev, &conv, &ws_bytes));
    CHECK(ws_bytes > 0); /* the workspace path is covered */
    CHECK_OK(brg_device_run(dev, &conv));
    brg_tensor saved_y = ty, saved_x = tx, saved_w = tw, saved_b = tb;
    memset(&ty, 0xff, sizeof ty);
    memset(&tx, 0xff, sizeof tx);
    memset(&tw, 0xff, sizeof tw);
    memset(&tb, 0xff, sizeof tb);

    brg_op xent = {.kind = BRG_OP_SOFTMAX_XENT_FORWARD, .n_in = 2, .n_out = 2, .in = {&tl, &tlab},
                   .out = {&tloss, &tp}};
    CHECK_OK(brg_device_run(dev, &xent));
    brg_tensor saved_loss = tloss, saved_p = tp;
    memset(&tloss, 0xff, sizeof tloss);
    memset(&tp, 0xff, sizeof tp);

    CHECK_OK(brg_device_copy_out(dev, y_out, saved_y.data, brg_tensor_bytes(&saved_y)));
    CHECK_OK(brg_device_copy_out(dev, loss_out, saved_loss.data, sizeof(float)));
    CHECK_OK(brg_device_copy_out(dev, probs_out, saved_p.data, brg_tensor_bytes(&saved_p)));
    CHECK_OK(brg_device_synchronize(dev));
    brg_tensor *all[] = {&saved_x, &saved_w, &saved_b, &saved_y, &tlab, &saved_loss, &saved_p};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) brg_tensor_free(all[i]);
    CHECK(brg_device_in_use(dev) == 0);
}

static void test_ops_match_cpu(void)
{
    brg_device *cpu = NULL;
    CHECK_OK(brg_device_create_cpu(MiB, 0, &cpu));
    brg_device *dev = async_device(MiB, 1, "300:3");
    if (!cpu || !dev) goto done;
    float y_cpu[N * K * H * W], y_async[N * K * H * W], loss_cpu = 0, loss_async = -1;
    float p_cpu[N * CLASSES], p_async[N * CLASSES];
    memset(y_async, 0, sizeof y_async);
    run_ops(cpu, y_cpu, &loss_cpu, p_cpu);
    run_ops(dev, y_async, &loss_async, p_async);
    double worst = 0.0;
    for (int i = 0; i < N * K * H * W; i++) worst = fmax(worst, fabs((double)y_cpu[i] - (double)y_async[i]));
    for (int i = 0; i < N * CLASSES; i++) worst = fmax(worst, fabs((double)p_cpu[i] - (double)p_async[i]));
    CHECK_MSG(worst <= 1e-6, "cpu-async differs from cpu by %g", worst);
    CHECK_NEAR(loss_async, loss_cpu, 1e-6);
    CHECK(loss_cpu > 0.0f); /* a real loss, not an untouched buffer */
    CHECK(fabs((double)y_cpu[5]) > 0.0);

    /* A planning device for a cpu-async target sizes workspaces as the CPU's. */
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = MiB, .async = 1};
    brg_device *plan = NULL;
    CHECK_OK(brg_device_create_planning(&spec, 0, &plan));
    if (plan) {
        const int64_t xs[4] = {N, C, H, W}, ws[4] = {K, C, 3, 3}, ys[4] = {N, K, H, W};
        brg_tensor tx, tw, ty;
        CHECK_OK(brg_tensor_init(&tx, dev->base, BRG_F32, 4, xs, dev));
        CHECK_OK(brg_tensor_init(&tw, dev->base, BRG_F32, 4, ws, dev));
        CHECK_OK(brg_tensor_init(&ty, dev->base, BRG_F32, 4, ys, dev));
        brg_op conv = {.kind = BRG_OP_CONV2D_FORWARD, .n_in = 2, .n_out = 1, .in = {&tx, &tw}, .out = {&ty}};
        conv.p.conv = (brg_conv2d_params){1, 1, 1, 1};
        size_t on_plan = 0, on_async = 0, on_cpu = 0;
        CHECK_OK(brg_device_workspace_bytes(plan, &conv, &on_plan));
        CHECK_OK(brg_device_workspace_bytes(dev, &conv, &on_async));
        CHECK_OK(brg_device_workspace_bytes(cpu, &conv, &on_cpu));
        CHECK(on_plan == on_cpu && on_async == on_cpu && on_cpu > 0);
    }
    brg_device_destroy(plan);
done:
    brg_device_destroy(cpu);
    brg_device_destroy(dev);
}

/* The protocol the executor uses to send a buffer from A to B: A computes
 * it, A's copy stream waits for that and copies to B, B's compute waits
 * for the copy. Random delays before every operation make a missing or
 * misplaced wait read stale data (and ThreadSanitizer see a race). */
static void test_send_between_devices(void)
{
    enum { COUNT = 4096, ROUNDS = 24 };
    brg_device *a = async_device(MiB, 0, "2000:7"), *b = async_device(MiB, 1, "2000:7");
    brg_event *computed = NULL, *copied = NULL;
    float *host = malloc(COUNT * sizeof *host), *back = malloc(COUNT * sizeof *back);
    void *staged = NULL, *pa = NULL, *pb = NULL, *pb2 = NULL;
    if (!a || !b || !host || !back) goto done;
    const size_t bytes = COUNT * sizeof(float);
    CHECK_OK(brg_device_alloc(a, bytes, "staged", &staged));
    CHECK_OK(brg_device_alloc(a, bytes, "sent", &pa));
    CHECK_OK(brg_device_alloc(b, bytes, "received", &pb));
    CHECK_OK(brg_device_alloc(b, bytes, "used", &pb2));
    CHECK_OK(brg_event_create(a, &computed));
    CHECK_OK(brg_event_create(a, &copied));
    if (!staged || !pa || !pb || !pb2 || !computed || !copied) goto done;
    CHECK_OK(brg_device_memset_zero(a, pa, bytes));
    int wrong = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < COUNT; i++) host[i] = (float)(r * COUNT + i);
        CHECK_OK(brg_device_copy_in(a, staged, host, bytes));
        brg_device_set_activity(a, "send: compute");
        CHECK_OK(brg_device_copy_between(a, pa, a, staged, bytes)); /* A's compute writes pa */
        CHECK_OK(brg_event_record(computed, BRG_STREAM_COMPUTE));
        CHECK_OK(brg_device_wait_event(a, BRG_STREAM_COPY, computed));
        CHECK_OK(brg_device_copy_async(b, pb, a, pa, bytes));
        CHECK_OK(brg_event_record(copied, BRG_STREAM_COPY));
        CHECK_OK(brg_device_wait_event(b, BRG_STREAM_COMPUTE, copied));
        CHECK_OK(brg_device_copy_between(b, pb2, b, pb, bytes)); /* B's compute reads pb */
        /* A's compute moves on at once: the next round's data must not reach this one. */
        CHECK_OK(brg_device_memset_zero(a, staged, bytes));
        memset(back, 0, bytes);
        CHECK_OK(brg_device_copy_out(b, back, pb2, bytes));
        wrong += memcmp(back, host, bytes) != 0;
    }
    CHECK_MSG(wrong == 0, "%d of %d rounds received the wrong data", wrong, ROUNDS);
    CHECK_OK(brg_device_synchronize(a));
    CHECK_OK(brg_device_synchronize(b));
    CHECK(computed->recorded == ROUNDS && copied->recorded == ROUNDS);

    /* Between a cpu-async and a sync CPU device: the copy waits for the queued work. */
    brg_device *cpu = NULL;
    void *pc = NULL;
    CHECK_OK(brg_device_create_cpu(MiB, 2, &cpu));
    if (cpu) CHECK_OK(brg_device_alloc(cpu, bytes, "on the sync device", &pc));
    if (pc) {
        for (int i = 0; i < COUNT; i++) host[i] = (float)(7 * i);
        CHECK_OK(brg_device_copy_in(a, staged, host, bytes));
        CHECK_OK(brg_device_copy_between(a, pa, a, staged, bytes));
        CHECK_OK(brg_device_copy_between(cpu, pc, a, pa, bytes));
        CHECK_OK(brg_device_copy_out(cpu, back, pc, bytes));
        CHECK(memcmp(back, host, bytes) == 0);
        CHECK_OK(brg_device_memset_zero(b, pb, bytes));
        CHECK_OK(brg_device_copy_between(b, pb, cpu, pc, bytes)); /* after b's memset */
        CHECK_OK(brg_device_copy_out(b, back, pb, bytes));
        CHECK(memcmp(back, host, bytes) == 0);
        CHECK_OK(brg_device_memset_zero(b, pb, bytes));
        CHECK_OK(brg_device_copy_async(b, pb, cpu, pc, bytes)); /* across ifaces: staged */
        CHECK_OK(brg_device_copy_out(b, back, pb, bytes));
        CHECK(memcmp(back, host, bytes) == 0);
    }
    if (pc) brg_device_free(cpu, pc);
    brg_device_destroy(cpu);
done:
    brg_event_destroy(computed);
    brg_event_destroy(copied);
    free(host);
    free(back);
    brg_device_destroy(a);
    brg_device_destroy(b);
}

/* A wait sees the records made before it, never later ones: B's wait for
 * A's first record ends long before A's slow second record. */
static void test_wait_captures_records(void)
{
    brg_device *a = async_device(MiB, 0, "20000:5"), *b = async_device(MiB, 1, NULL);
    brg_event *ev = NULL, *after_wait = NULL;
    void *p = NULL;
    if (!a || !b) goto done;
    CHECK_OK(brg_event_create(a, &ev));
    CHECK_OK(brg_event_create(b, &after_wait));
    CHECK_OK(brg_device_alloc(a, 4096, "scratch", &p));
    if (!ev || !after_wait || !p) goto done;
    CHECK_OK(brg_event_record(ev, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_device_wait_event(b, BRG_STREAM_COMPUTE, ev));
    CHECK_OK(brg_event_record(after_wait, BRG_STREAM_COMPUTE));
    for (int i = 0; i < 16; i++) CHECK_OK(brg_device_memset_zero(a, p, 4096)); /* about 160 ms */
    CHECK_OK(brg_event_record(ev, BRG_STREAM_COMPUTE));
    CHECK(ev->recorded == 2);
    CHECK_OK(brg_event_synchronize(after_wait));
    const double waited = now_seconds();
    CHECK_OK(brg_event_synchronize(ev));
    const double second = now_seconds();
    CHECK_MSG(second - waited > 0.02, "B's wait ended only %.3f s before A's second record: it waited for it",
              second - waited);
    /* A record on the copy stream, after a slow one on compute: the event
     * is complete only when both are. */
    for (int i = 0; i < 8; i++) CHECK_OK(brg_device_memset_zero(a, p, 4096));
    CHECK_OK(brg_event_record(ev, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_event_record(ev, BRG_STREAM_COPY));
    CHECK_OK(brg_event_synchronize(ev));
    double t = -1;
    CHECK_OK(brg_event_elapsed(ev, ev, &t));
    CHECK(t == 0.0);
done:
    if (p) brg_device_free(a, p);
    brg_event_destroy(ev);
    brg_event_destroy(after_wait);
    brg_device_destroy(a);
    brg_device_destroy(b);
}

static void test_event_times(void)
{
    brg_device *a = async_device(MiB, 0, "3000:11");
    brg_event *ev[3] = {NULL};
    void *p = NULL;
    if (!a) return;
    CHECK_OK(brg_device_alloc(a, 4096, "scratch", &p));
    for (int i = 0; i < 3; i++) CHECK_OK(brg_event_create(a, &ev[i]));
    if (!p || !ev[0] || !ev[1] || !ev[2]) goto done;
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 4; k++) CHECK_OK(brg_device_memset_zero(a, p, 4096));
        CHECK_OK(brg_event_record(ev[i], BRG_STREAM_COMPUTE));
    }
    CHECK_OK(brg_event_synchronize(ev[2]));
    double t01 = -1, t02 = -1, t12 = -1;
    CHECK_OK(brg_event_elapsed(ev[0], ev[1], &t01));
    CHECK_OK(brg_event_elapsed(ev[0], ev[2], &t02));
    CHECK_OK(brg_event_elapsed(ev[1], ev[2], &t12));
    CHECK(t01 >= 0.0 && t12 >= 0.0 && t02 >= t01 && t02 >= t12);
    CHECK_NEAR(t02, t01 + t12, 1e-9);
    CHECK(t02 < 1.0);
done:
    for (int i = 0; i < 3; i++) brg_event_destroy(ev[i]);
    if (p) brg_device_free(a, p);
    brg_device_destroy(a);
}

/* A kernel that fails on a stream: its error sticks to the device, names
 * the device and the action that queued the work, and is returned by every
 * call until synchronize has returned it; event records still complete. */
static void test_sticky_error(void)
{
    brg_device *gate = async_device(MiB, 0, "20000:3"), *dev = async_device(MiB, 1, NULL),
               *other = async_device(MiB, 2, NULL);
    brg_event *opened = NULL, *failed = NULL, *other_done = NULL;
    brg_tensor logits = {0}, labels = {0}, loss = {0}, probs = {0};
    void *g = NULL;
    if (!gate || !dev || !other) goto done;
    CHECK_OK(brg_event_create(gate, &opened));
    CHECK_OK(brg_event_create(dev, &failed));
    CHECK_OK(brg_event_create(other, &other_done));
    CHECK_OK(brg_device_alloc(gate, 4096, "gate", &g));
    const int64_t ls[2] = {2, 3}, labs[1] = {2}, one[1] = {1};
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, ls, "logits", &logits));
    CHECK_OK(brg_tensor_alloc(dev, BRG_I32, 1, labs, "labels", &labels));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 1, one, "loss", &loss));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, ls, "probs", &probs));
    if (!opened || !failed || !other_done || !g || !logits.data || !labels.data || !loss.data || !probs.data)
        goto done;
    const float z[6] = {0.5f, 1, 2, -1, 0, 3};
    const int32_t bad[2] = {1, 99}, good[2] = {1, 2};
    CHECK_OK(brg_device_copy_in(dev, logits.data, z, sizeof z));
    CHECK_OK(brg_device_copy_in(dev, labels.data, bad, sizeof bad));

    /* dev's compute is held by the slow gate, so all of this is queued
     * before the kernel fails. */
    for (int i = 0; i < 8; i++) CHECK_OK(brg_device_memset_zero(gate, g, 4096));
    CHECK_OK(brg_event_record(opened, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_device_wait_event(dev, BRG_STREAM_COMPUTE, opened));
    brg_op xent = {.kind = BRG_OP_SOFTMAX_XENT_FORWARD, .n_in = 2, .n_out = 2, .in = {&logits, &labels},
                   .out = {&loss, &probs}};
    brg_device_set_activity(dev, "action 17 (F3.1)");
    CHECK_OK(brg_device_run(dev, &xent));
    brg_device_set_activity(dev, "action 18 (B3.1)");
    CHECK_OK(brg_device_memset_zero(dev, probs.data, brg_tensor_bytes(&probs))); /* dropped */
    CHECK_OK(brg_event_record(failed, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_device_wait_event(other, BRG_STREAM_COMPUTE, failed));
    CHECK_OK(brg_event_record(other_done, BRG_STREAM_COMPUTE));

    /* The record after the failure completes: waiting on it ends, with the error. */
    CHECK_STATUS(brg_event_synchronize(failed), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("cpu-async:1");
    CHECK_ERROR_HAS("action 17 (F3.1)");
    CHECK_ERROR_HAS("label 99");
    CHECK_OK(brg_event_synchronize(other_done)); /* the other device is not broken */

    float out[6];
    CHECK_STATUS(brg_device_copy_out(dev, out, probs.data, sizeof out), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("action 17 (F3.1)");
    CHECK_STATUS(brg_device_memset_zero(dev, probs.data, sizeof out), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_event_record(failed, BRG_STREAM_COPY), BRG_ERR_INVALID_ARGUMENT);
    CHECK(failed->recorded == 1); /* a refused record is not counted */
    CHECK_STATUS(brg_device_run(dev, &xent), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("label 99");

    /* synchronize returns it once and the device is clean again. */
    CHECK_STATUS(brg_device_synchronize(dev), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("'cpu-async:1' (in action 17 (F3.1))");
    CHECK_OK(brg_device_synchronize(dev));
    CHECK_OK(brg_device_copy_in(dev, labels.data, good, sizeof good));
    brg_device_set_activity(dev, "action 19 (F3.2)");
    CHECK_OK(brg_device_run(dev, &xent));
    float l = -1;
    CHECK_OK(brg_device_copy_out(dev, &l, loss.data, sizeof l));
    /* rows (0.5, 1, 2) label 1 and (-1, 0, 3) label 2 */
    const double row0 = 2.0 + log(exp(-1.5) + exp(-1.0) + 1.0) - 1.0,
                 row1 = 3.0 + log(exp(-4.0) + exp(-3.0) + 1.0) - 3.0;
    CHECK_NEAR(l, (row0 + row1) / 2.0, 1e-5);
    CHECK_OK(brg_device_synchronize(dev));
done:
    if (g) brg_device_free(gate, g);
    brg_tensor *all[] = {&logits, &labels, &loss, &probs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) brg_tensor_free(all[i]);
    brg_event_destroy(opened);
    brg_event_destroy(failed);
    brg_event_destroy(other_done);
    brg_device_destroy(gate);
    brg_device_destroy(dev);
    brg_device_destroy(other);
}

/* Failing work queued on one device by two threads (an executor's worker
 * and its gradient reducer) is named by what the queuing thread was doing,
 * whatever the other thread set meanwhile. */
typedef struct activity_job {
    brg_device *dev;
    const brg_op *op; /* queued under the activity when not NULL */
    brg_status st;    /* the op's launch, then its synchronize */
    char error[512];
} activity_job;

static void *activity_main(void *arg)
{
    activity_job *j = arg;
    brg_device_set_activity(j->dev, "summing gradient bucket 3 over the replicas");
    if (j->op) {
        j->st = brg_device_run(j->dev, j->op);
        if (j->st == BRG_OK) j->st = brg_device_synchronize(j->dev);
        snprintf(j->error, sizeof j->error, "%s", brg_last_error());
    }
    return NULL;
}

static int run_activity_job(activity_job *j)
{
    pthread_t t;
    if (pthread_create(&t, NULL, activity_main, j) != 0) return 0;
    pthread_join(t, NULL);
    return 1;
}

static void test_activity_per_thread(void)
{
    brg_device *dev = async_device(MiB, 0, NULL);
    brg_tensor logits = {0}, labels = {0}, loss = {0}, probs = {0};
    if (!dev) goto done;
    const int64_t ls[2] = {2, 3}, labs[1] = {2}, one[1] = {1};
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, ls, "logits", &logits));
    CHECK_OK(brg_tensor_alloc(dev, BRG_I32, 1, labs, "labels", &labels));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 1, one, "loss", &loss));
    CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 2, ls, "probs", &probs));
    if (!logits.data || !labels.data || !loss.data || !probs.data) goto done;
    const float z[6] = {0.5f, 1, 2, -1, 0, 3};
    const int32_t bad[2] = {1, 99};
    CHECK_OK(brg_device_copy_in(dev, logits.data, z, sizeof z));
    CHECK_OK(brg_device_copy_in(dev, labels.data, bad, sizeof bad));
    brg_op xent = {.kind = BRG_OP_SOFTMAX_XENT_FORWARD, .n_in = 2, .n_out = 2, .in = {&logits, &labels},
                   .out = {&loss, &probs}};

    /* This thread's work, after the other thread named its own. */
    brg_device_set_activity(dev, "action 17 (F3.1)");
    activity_job other = {.dev = dev};
    CHECK(run_activity_job(&other));
    CHECK_OK(brg_device_run(dev, &xent));
    CHECK_STATUS(brg_device_synchronize(dev), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("(in action 17 (F3.1))");
    CHECK_MSG(!strstr(brg_last_error(), "bucket"), "this thread's failure names the other's activity: %s",
              brg_last_error());

    /* The other thread's work, while this one is still on action 17. */
    activity_job reducer = {.dev = dev, .op = &xent};
    CHECK(run_activity_job(&reducer));
    CHECK(reducer.st == BRG_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(reducer.error, "(in summing gradient bucket 3 over the replicas)") != NULL,
              "the reducer's failure: %s", reducer.error);
    CHECK(strcmp(brg_device_activity(dev), "action 17 (F3.1)") == 0);
    brg_device_set_activity(dev, NULL);
    CHECK(brg_device_activity(dev)[0] == '\0');
done:;
    brg_tensor *all[] = {&logits, &labels, &loss, &probs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) brg_tensor_free(all[i]);
    brg_device_destroy(dev);
}

/* ---- communicators (the CPU twin of NCCL's) over an in-process wire ---- */

/* The wire between two members: a queue of messages to each (a send
 * leaves a copy and returns), and a sum that meets the other member's. */
typedef struct wire_msg {
    struct wire_msg *next;
    size_t bytes;
    unsigned char data[];
} wire_msg;

typedef struct mailbox {
    pthread_mutex_t m;
    pthread_cond_t c;
    wire_msg *head[2], *tail[2];
    float *at[2];
    size_t n[2];
    int arrived, generation;
} mailbox;

typedef struct member {
    mailbox *box;
    int me;
} member;

static void mailbox_init(mailbox *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->m, NULL);
    pthread_cond_init(&b->c, NULL);
}

/* Its lock, and the messages no one received. */
static void mailbox_close(mailbox *b)
{
    for (int k = 0; k < 2; k++)
        while (b->head[k]) {
            wire_msg *m = b->head[k];
            b->head[k] = m->next;
            free(m);
        }
    pthread_cond_destroy(&b->c);
    pthread_mutex_destroy(&b->m);
}

static brg_status box_send(void *ctx, int peer, const void *buf, size_t bytes)
{
    member *w = ctx;
    wire_msg *msg = malloc(sizeof *msg + bytes);
    if (!msg) return BRG_ERR_HOST_MEMORY;
    msg->next = NULL;
    msg->bytes = bytes;
    memcpy(msg->data, buf, bytes);
    pthread_mutex_lock(&w->box->m);
    if (w->box->tail[peer]) w->box->tail[peer]->next = msg;
    else w->box->head[peer] = msg;
    w->box->tail[peer] = msg;
    pthread_cond_broadcast(&w->box->c);
    pthread_mutex_unlock(&w->box->m);
    return BRG_OK;
}

static brg_status box_recv(void *ctx, int peer, void *buf, size_t bytes)
{
    member *w = ctx;
    (void)peer;
    pthread_mutex_lock(&w->box->m);
    while (!w->box->head[w->me]) pthread_cond_wait(&w->box->c, &w->box->m);
    wire_msg *msg = w->box->head[w->me];
    w->box->head[w->me] = msg->next;
    if (!msg->next) w->box->tail[w->me] = NULL;
    pthread_mutex_unlock(&w->box->m);
    const size_t got = msg->bytes;
    if (got == bytes) memcpy(buf, msg->data, bytes);
    free(msg);
    return got == bytes ? BRG_OK : brg_error(BRG_ERR_INTERNAL, "a message of %zu bytes, %zu expected", got, bytes);
}

static brg_status box_sum(void *ctx, float *values, size_t n)
{
    member *w = ctx;
    mailbox *b = w->box;
    pthread_mutex_lock(&b->m);
    const int generation = b->generation;
    b->at[w->me] = values;
    b->n[w->me] = n;
    if (++b->arrived == 2) {
        for (size_t i = 0; i < n && b->n[0] == b->n[1]; i++) b->at[0][i] = b->at[1][i] = b->at[0][i] + b->at[1][i];
        b->arrived = 0;
        b->generation++;
        pthread_cond_broadcast(&b->c);
    } else {
        while (b->generation == generation) pthread_cond_wait(&b->c, &b->m);
    }
    const int same = b->n[0] == b->n[1];
    pthread_mutex_unlock(&b->m);
    return same ? BRG_OK : brg_error(BRG_ERR_INTERNAL, "a sum of %zu values met one of another size", n);
}

/* Two devices with one communicator, under random stream delays: messages
 * of two pieces from a to b by the executor's protocol across processes
 * (exec/transfer.c: a's copy stream sends once a's compute has made the
 * tensors; b's communicator stream receives into its slot once b's
 * compute has read the slot's last message, b's compute copies out after
 * msg_ready), round after round with a's compute moving on; then a sum of
 * the two devices' values on their communicator streams, after their
 * compute streams' events. A missing wait gives wrong data here, or a
 * race under ThreadSanitizer (tests/test_sanitizers.sh). */
static void test_communicators(void)
{
    enum { COUNT = 3000, ROUNDS = 16 };
    brg_device *a = async_device(MiB, 0, "2000:11"), *b = async_device(MiB, 1, "2000:12");
    mailbox box;
    mailbox_init(&box);
    member ma = {&box, 0}, mb = {&box, 1};
    const brg_wire wa = {&ma, box_send, box_recv, box_sum}, wb = {&mb, box_send, box_recv, box_sum};
    brg_comm *ca = NULL, *cb = NULL;
    brg_event *made = NULL, *made_b = NULL, *msg_ready = NULL, *slot_free = NULL, *summed_a = NULL, *summed_b = NULL;
    float *host = malloc(2 * COUNT * sizeof *host), *back = malloc(2 * COUNT * sizeof *back);
    void *staged = NULL, *x1 = NULL, *x2 = NULL, *slot = NULL, *y = NULL, *staged_b = NULL;
    if (!a || !b || !host || !back) goto done;
    CHECK(brg_device_has_comm(a));
    unsigned char id[BRG_COMM_ID_BYTES];
    CHECK_OK(brg_comm_make_id(a, id));
    CHECK_STATUS(brg_comm_create(a, id, 2, 0, BRG_COMM_MESSAGES, NULL, &ca), BRG_ERR_INTERNAL); /* no wire */
    CHECK_STATUS(brg_comm_create(a, id, 3, 0, BRG_COMM_MESSAGES, &wa, &ca), BRG_ERR_INTERNAL); /* two members */
    CHECK_ERROR_HAS("member 0 of 3, for messages");
    CHECK_OK(brg_comm_create(a, id, 2, 0, BRG_COMM_MESSAGES, &wa, &ca));
    CHECK_OK(brg_comm_create(b, id, 2, 1, BRG_COMM_MESSAGES, &wb, &cb));
    const size_t half = COUNT * sizeof(float), bytes = 2 * half;
    CHECK_OK(brg_device_alloc(a, bytes, "staged", &staged));
    CHECK_OK(brg_device_alloc(a, half, "sent, first piece", &x1));
    CHECK_OK(brg_device_alloc(a, half, "sent, second piece", &x2));
    CHECK_OK(brg_device_alloc(b, bytes, "slot", &slot));
    CHECK_OK(brg_device_alloc(b, bytes, "received", &y));
    CHECK_OK(brg_device_alloc(b, bytes, "staged", &staged_b));
    CHECK_OK(brg_event_create(a, &made));
    CHECK_OK(brg_event_create(b, &made_b));
    CHECK_OK(brg_event_create(b, &msg_ready));
    CHECK_OK(brg_event_create(b, &slot_free));
    CHECK_OK(brg_event_create(a, &summed_a));
    CHECK_OK(brg_event_create(b, &summed_b));
    if (!ca || !cb || !staged || !x1 || !x2 || !slot || !y || !staged_b || !made || !made_b || !msg_ready ||
        !slot_free || !summed_a || !summed_b)
        goto done;
    int wrong = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < 2 * COUNT; i++) host[i] = (float)(r * 2 * COUNT + i);
        CHECK_OK(brg_device_copy_in(a, staged, host, bytes));
        CHECK_OK(brg_device_copy_between(a, x1, a, staged, half)); /* a's compute makes the pieces */
        CHECK_OK(brg_device_copy_between(a, x2, a, (char *)staged + half, half));
        CHECK_OK(brg_event_record(made, BRG_STREAM_COMPUTE));
        CHECK_OK(brg_device_wait_event(a, BRG_STREAM_COPY, made));
        void *sent[2] = {x1, x2}, *into[2] = {slot, (char *)slot + half};
        const size_t sizes[2] = {half, half};
        CHECK_OK(brg_comm_send(ca, BRG_STREAM_COPY, 1, sent, sizes, 2));
        CHECK_OK(brg_device_memset_zero(a, staged, bytes)); /* a's compute moves on at once */
        CHECK_OK(brg_comm_wait_event(cb, slot_free));
        CHECK_OK(brg_comm_recv(cb, 0, into, sizes, 2));
        CHECK_OK(brg_comm_record_event(cb, msg_ready));
        CHECK_OK(brg_device_wait_event(b, BRG_STREAM_COMPUTE, msg_ready));
        CHECK_OK(brg_device_copy_between(b, y, b, slot, bytes)); /* b's compute reads the slot */
        CHECK_OK(brg_event_record(slot_free, BRG_STREAM_COMPUTE));
        memset(back, 0, bytes);
        CHECK_OK(brg_device_copy_out(b, back, y, bytes));
        wrong += memcmp(back, host, bytes) != 0;
    }
    CHECK_MSG(wrong == 0, "%d of %d rounds received the wrong data", wrong, ROUNDS);
    /* The sum: each device's values made by its compute stream first. */
    for (int i = 0; i < 2 * COUNT; i++) host[i] = (float)i;
    CHECK_OK(brg_device_copy_in(a, staged, host, bytes));
    CHECK_OK(brg_device_copy_between(a, x1, a, staged, half));
    for (int i = 0; i < 2 * COUNT; i++) host[i] = 0.5f * (float)i;
    CHECK_OK(brg_device_copy_in(b, staged_b, host, bytes));
    CHECK_OK(brg_device_copy_between(b, y, b, staged_b, half));
    CHECK_OK(brg_event_record(made, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_event_record(made_b, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_comm_wait_event(ca, made));
    CHECK_OK(brg_comm_wait_event(cb, made_b));
    CHECK_OK(brg_comm_sum(ca, x1, COUNT));
    CHECK_OK(brg_comm_sum(cb, y, COUNT));
    CHECK_OK(brg_comm_record_event(ca, summed_a));
    CHECK_OK(brg_comm_record_event(cb, summed_b));
    CHECK_OK(brg_event_synchronize(summed_a));
    CHECK_OK(brg_event_synchronize(summed_b));
    int bad = 0;
    CHECK_OK(brg_device_copy_out(a, back, x1, half));
    CHECK_OK(brg_device_copy_out(b, back + COUNT, y, half));
    for (int i = 0; i < COUNT; i++) bad += back[i] != 1.5f * (float)i || back[COUNT + i] != 1.5f * (float)i;
    CHECK_MSG(bad == 0, "%d of %d sums wrong", bad, 2 * COUNT);
    CHECK_OK(brg_device_synchronize(a));
    CHECK_OK(brg_device_synchronize(b));
done:
    brg_comm_destroy(ca);
    brg_comm_destroy(cb);
    brg_event_destroy(made);
    brg_event_destroy(made_b);
    brg_event_destroy(msg_ready);
    brg_event_destroy(slot_free);
    brg_event_destroy(summed_a);
    brg_event_destroy(summed_b);
    free(host);
    free(back);
    brg_device_destroy(a);
    brg_device_destroy(b);
    mailbox_close(&box);
}

/* ---- BRG_DEBUG_LOADS: the twin of CUDA's lazy kernel loading ---- */

/* Whether flag is set within seconds (a thread's work done). */
static int set_within(atomic_int *flag, double seconds)
{
    const double end = now_seconds() + seconds;
    while (!atomic_load(flag) && now_seconds() < end) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(flag);
}

typedef struct launch {
    brg_device *dev;
    const brg_op *op;
    brg_status st;
    atomic_int done; /* st is set */
} launch;

static void *launch_main(void *arg)
{
    launch *l = arg;
    l->st = brg_device_run(l->dev, l->op);
    atomic_store(&l->done, 1);
    return NULL;
}

/* The first launch of a relu of one shape on b waits while b's
 * communicator has a receive that no one has sent to (an NCCL kernel
 * spinning on its peer), and goes on once the peer sends; a second
 * launch of that relu does not wait, one of another shape does, and so
 * does the first relu of that shape on another device. Set last: the
 * setting stays on in the process. */
static void test_lazy_loading(void)
{
    setenv("BRG_DEBUG_LOADS", "1", 1);
    brg_device *a = async_device(MiB, 0, NULL), *b = async_device(MiB, 1, NULL);
    unsetenv("BRG_DEBUG_LOADS");
    mailbox box;
    mailbox_init(&box);
    member ma = {&box, 0}, mb = {&box, 1};
    const brg_wire wb = {&mb, box_send, box_recv, box_sum};
    brg_comm *cb = NULL;
    unsigned char id[BRG_COMM_ID_BYTES];
    const int64_t four[1] = {4}, eight[1] = {8};
    brg_tensor x = {0}, y = {0}, x8 = {0}, y8 = {0}, xa = {0}, ya = {0};
    float sent[4] = {1, 2, 3, 4};
    void *into = NULL;
    brg_event *received = NULL;
    if (!a || !b) goto done;
    CHECK_OK(brg_event_create(b, &received));
    CHECK_OK(brg_comm_make_id(b, id));
    CHECK_OK(brg_comm_create(b, id, 2, 1, BRG_COMM_MESSAGES, &wb, &cb));
    CHECK_OK(brg_device_alloc(b, sizeof sent, "received", &into));
    CHECK_OK(brg_tensor_alloc(b, BRG_F32, 1, four, "x", &x));
    CHECK_OK(brg_tensor_alloc(b, BRG_F32, 1, four, "y", &y));
    CHECK_OK(brg_tensor_alloc(b, BRG_F32, 1, eight, "x8", &x8));
    CHECK_OK(brg_tensor_alloc(b, BRG_F32, 1, eight, "y8", &y8));
    CHECK_OK(brg_tensor_alloc(a, BRG_F32, 1, four, "xa", &xa));
    CHECK_OK(brg_tensor_alloc(a, BRG_F32, 1, four, "ya", &ya));
    if (!cb || !received || !into || !x.data || !y.data || !x8.data || !y8.data || !xa.data || !ya.data) goto done;
    CHECK_OK(brg_device_memset_zero(b, x.data, brg_tensor_bytes(&x)));
    CHECK_OK(brg_device_memset_zero(b, x8.data, brg_tensor_bytes(&x8)));
    CHECK_OK(brg_device_memset_zero(a, xa.data, brg_tensor_bytes(&xa)));
    CHECK_OK(brg_device_synchronize(a));
    CHECK_OK(brg_device_synchronize(b));
    const brg_op relu = {.kind = BRG_OP_RELU_FORWARD, .n_in = 1, .n_out = 1, .in = {&x}, .out = {&y}};
    const brg_op relu8 = {.kind = BRG_OP_RELU_FORWARD, .n_in = 1, .n_out = 1, .in = {&x8}, .out = {&y8}};
    const brg_op relu_a = {.kind = BRG_OP_RELU_FORWARD, .n_in = 1, .n_out = 1, .in = {&xa}, .out = {&ya}};
    const size_t bytes = sizeof sent;
    const struct {
        const brg_op *op;
        int waits;
        const char *what;
    } cases[] = {
        {&relu, 1, "the first relu of 4 on b"},
        {&relu, 0, "the same relu again"},
        {&relu8, 1, "the first relu of 8 on b"},
        {&relu_a, 1, "the first relu of 4 on a (a context of its own)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(brg_comm_recv(cb, 0, &into, &bytes, 1)); /* spins: nothing sent yet */
        CHECK_OK(brg_comm_record_event(cb, received));
        launch l = {.dev = cases[i].op == &relu_a ? a : b, .op = cases[i].op};
        atomic_init(&l.done, 0);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, launch_main, &l) == 0);
        const int finished_alone = set_within(&l.done, cases[i].waits ? 0.2 : 5.0);
        CHECK_MSG(finished_alone == !cases[i].waits, "%s: the launch %s while a receive was pending", cases[i].what,
                  finished_alone ? "went on" : "waited");
        sent[0] = (float)i;
        CHECK_OK(box_send(&ma, 1, sent, bytes)); /* the peer sends */
        CHECK_MSG(set_within(&l.done, 5.0), "%s: still waiting after the peer sent", cases[i].what);
        pthread_join(t, NULL);
        CHECK_OK(l.st);
        CHECK_OK(brg_event_synchronize(received));
        CHECK_OK(brg_device_synchronize(a));
        CHECK_OK(brg_device_synchronize(b));
        float got[4];
        CHECK_OK(brg_device_copy_out(b, got, into, bytes));
        CHECK_MSG(got[0] == (float)i, "%s: received %g, sent %zu", cases[i].what, got[0], i);
    }
done:
    brg_comm_destroy(cb);
    brg_event_destroy(received);
    if (b && into) (void)brg_device_free(b, into);
    brg_tensor *all[] = {&x, &y, &x8, &y8, &xa, &ya};
    for (size_t i = 0; a && b && i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) brg_tensor_free(all[i]);
    brg_device_destroy(a);
    brg_device_destroy(b);
    mailbox_close(&box);
}

/* ---- BRG_DEBUG_CONNECT: the twin of NCCL's lazy connections ---- */

/* A member made in a thread of its own: making it waits for its peer. */
typedef struct making {
    brg_device *dev;
    int rank;
    brg_comm_use use;
    const brg_wire *wire;
    brg_comm *comm;
    brg_status st;
    atomic_int done;
} making;

static void *make_main(void *arg)
{
    making *m = arg;
    unsigned char id[BRG_COMM_ID_BYTES] = {0};
    m->st = brg_comm_create(m->dev, id, 2, m->rank, m->use, m->wire, &m->comm);
    atomic_store(&m->done, 1);
    return NULL;
}

/* A message from a to b, sent and received on this thread: only when
 * the communicators connected as they were made, since a first call
 * would otherwise wait for the peer's. */
typedef struct first_message {
    brg_comm *ca, *cb;
    void *from, *into;
    atomic_int done;
} first_message;

static void *first_message_main(void *arg)
{
    first_message *f = arg;
    const size_t bytes = 4 * sizeof(float);
    CHECK_OK(brg_comm_send(f->ca, BRG_STREAM_COPY, 1, &f->from, &bytes, 1));
    CHECK_OK(brg_comm_recv(f->cb, 0, &f->into, &bytes, 1));
    atomic_store(&f->done, 1);
    return NULL;
}

/* With BRG_DEBUG_CONNECT=1, making a communicator's member waits for its
 * peer, as NCCL's first message does (the CUDA backend makes that first
 * message while the communicator is made: nccl.c); after that, messages
 * and sums flow from one thread, and the handshake's bytes never reach a
 * receive. A bad value is refused. Set last: the setting stays on. */
static void test_lazy_connections(void)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CPU, .gpu = -1, .capacity = MiB, .async = 1};
    brg_device *bad = NULL;
    setenv("BRG_DEBUG_CONNECT", "yes", 1);
    CHECK_STATUS(brg_device_create(&spec, 0, &bad), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("BRG_DEBUG_CONNECT='yes'");
    setenv("BRG_DEBUG_CONNECT", "1", 1);
    brg_device *a = async_device(MiB, 0, "300:5"), *b = async_device(MiB, 1, "300:6");
    unsetenv("BRG_DEBUG_CONNECT");
    mailbox box;
    mailbox_init(&box);
    member ma = {&box, 0}, mb = {&box, 1};
    const brg_wire wa = {&ma, box_send, box_recv, box_sum}, wb = {&mb, box_send, box_recv, box_sum};
    making mk[2][2]; /* [use][member] */
    memset(mk, 0, sizeof mk);
    void *from = NULL, *into = NULL, *va = NULL, *vb = NULL;
    float four[4] = {1.5f, -2.0f, 3.25f, 4.0f}, got[4] = {0};
    if (!a || !b) goto done;
    for (int u = 0; u < 2; u++) {
        const brg_comm_use use = u ? BRG_COMM_SUMS : BRG_COMM_MESSAGES;
        for (int r = 0; r < 2; r++) {
            mk[u][r] = (making){.dev = r ? b : a, .rank = r, .use = use, .wire = r ? &wb : &wa};
            atomic_init(&mk[u][r].done, 0);
        }
        pthread_t t0, t1;
        CHECK(pthread_create(&t1, NULL, make_main, &mk[u][1]) == 0);
        CHECK_MSG(!set_within(&mk[u][1].done, 0.2), "%s: member 1 was made without its peer",
                  u ? "sums" : "messages");
        CHECK(pthread_create(&t0, NULL, make_main, &mk[u][0]) == 0);
        if (!set_within(&mk[u][0].done, 5.0) || !set_within(&mk[u][1].done, 5.0)) {
            CHECK_MSG(0, "%s: the members were not made together", u ? "sums" : "messages");
            pthread_detach(t0); /* left waiting: the process ends with the failure */
            pthread_detach(t1);
            return;
        }
        pthread_join(t0, NULL);
        pthread_join(t1, NULL);
        CHECK_OK(mk[u][0].st);
        CHECK_OK(mk[u][1].st);
    }
    brg_comm *ca = mk[0][0].comm, *cb = mk[0][1].comm, *sa = mk[1][0].comm, *sb = mk[1][1].comm;
    if (!ca || !cb || !sa || !sb) goto done;
    CHECK_OK(brg_device_alloc(a, sizeof four, "sent", &from));
    CHECK_OK(brg_device_alloc(b, sizeof four, "received", &into));
    CHECK_OK(brg_device_alloc(a, sizeof four, "summed on a", &va));
    CHECK_OK(brg_device_alloc(b, sizeof four, "summed on b", &vb));
    if (!from || !into || !va || !vb) goto done;
    CHECK_OK(brg_device_copy_in(a, from, four, sizeof four));
    CHECK_OK(brg_device_copy_in(a, va, four, sizeof four));
    CHECK_OK(brg_device_copy_in(b, vb, four, sizeof four));
    CHECK_OK(brg_device_synchronize(a));
    CHECK_OK(brg_device_synchronize(b));
    first_message f = {.ca = ca, .cb = cb, .from = from, .into = into};
    atomic_init(&f.done, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, first_message_main, &f) == 0);
    if (!set_within(&f.done, 5.0)) {
        CHECK_MSG(0, "the first message waited on the host for its peer: not connected when made");
        pthread_detach(t);
        goto done; /* left waiting: the process ends with the failure */
    }
    pthread_join(t, NULL);
    CHECK_OK(brg_comm_sum(sa, va, 4));
    CHECK_OK(brg_comm_sum(sb, vb, 4));
    /* A device's synchronize leaves its communicators' streams alone. */
    brg_comm *const all[3] = {cb, sa, sb};
    for (int i = 0; i < 3; i++) {
        brg_event *ended = NULL;
        CHECK_OK(brg_event_create(i == 1 ? a : b, &ended));
        if (!ended) continue;
        CHECK_OK(brg_comm_record_event(all[i], ended));
        CHECK_OK(brg_event_synchronize(ended));
        brg_event_destroy(ended);
    }
    CHECK_OK(brg_device_copy_out(b, got, into, sizeof got));
    CHECK_MSG(memcmp(got, four, sizeof got) == 0, "received %g %g %g %g", got[0], got[1], got[2], got[3]);
    for (int k = 0; k < 2; k++) {
        CHECK_OK(brg_device_copy_out(k ? b : a, got, k ? vb : va, sizeof got));
        CHECK_MSG(got[0] == 3.0f && got[1] == -4.0f && got[2] == 6.5f && got[3] == 8.0f, "summed on %s: %g %g %g %g",
                  k ? "b" : "a", got[0], got[1], got[2], got[3]);
    }
    for (int u = 0; u < 2; u++)
        for (int r = 0; r < 2; r++) brg_comm_destroy(mk[u][r].comm);
    if (from) CHECK_OK(brg_device_free(a, from));
    if (va) CHECK_OK(brg_device_free(a, va));
    if (into) CHECK_OK(brg_device_free(b, into));
    if (vb) CHECK_OK(brg_device_free(b, vb));
    brg_device_destroy(a);
    brg_device_destroy(b);
    mailbox_close(&box);
    return;
done:
    CHECK_MSG(0, "the lazy-connection case did not run to its end");
}

int main(void)
{
    test_parse_and_names();
    test_ops_match_cpu();
    test_send_between_devices();
    test_wait_captures_records();
    test_event_times();
    test_sticky_error();
    test_activity_per_thread();
    test_communicators();
    test_lazy_loading();
    test_lazy_connections();
    TEST_EXIT();
}
