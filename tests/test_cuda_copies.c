/* Asynchronous copies and events of the CUDA backend (base/device-impl.h):
 * copy_async between two virtual devices of GPU 0, within one device, the
 * staged path through pinned host buffers (forced on one GPU with
 * brg_cuda_force_staged), peer copies where there are two GPUs; sizes of
 * one byte to several staging chunks at odd offsets; the message protocol
 * the executor follows (ready on the sender's compute stream, its copy
 * stream waits for it and for the receiver's slot_free, msg_ready after the
 * copy, the receiver's compute waits for msg_ready) against a kernel still
 * running, with the source freed and reused under the copy, and between two
 * threads through one receive slot; event times in order; copy_in's
 * staging ring behind DMAs held on the GPU (only the copies that come
 * round to held bytes or slots wait; none lands on bytes still to be
 * read); a communicator
 * between processes (NCCL) of one member; and last, an asynchronous fault
 * reported with the device's activity.
 * Exits 77 (skip) where no CUDA backend is compiled in or no GPU is visible. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdint.h>

#include "testutil.h"

#if defined(BRG_HAVE_CUDA) && defined(BRG_HAVE_CUDNN)
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda-device.h"
#include "backends/cuda/cuda-kernels.h"
#include "base/device-impl.h"

#define MiB ((size_t)1 << 20)
/* The staged path's chunk (backends/cuda/device.c, XFER_CHUNK). */
#define CHUNK (8 * MiB)

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(x >> 56);
    }
}

static brg_device *make(int gpu, int vdev, size_t capacity, int index)
{
    brg_device_spec spec = {.backend = BRG_BACKEND_CUDA, .gpu = gpu, .capacity = capacity, .vdev = vdev};
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create(&spec, index, &dev));
    return dev;
}

/* One message from a to b by the executor's protocol: b's slot is free
 * once b's compute has passed slot_free, a's data once a's compute has
 * passed ready; b reads it after msg_ready. */
static void send(brg_device *b, void *dst, brg_device *a, const void *src, size_t n, brg_event *ready,
                 brg_event *slot_free, brg_event *msg_ready)
{
    CHECK_OK(brg_event_record(ready, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_device_wait_event(a, BRG_STREAM_COPY, ready));
    CHECK_OK(brg_device_wait_event(a, BRG_STREAM_COPY, slot_free));
    CHECK_OK(brg_device_copy_async(b, dst, a, src, n));
    CHECK_OK(brg_event_record(msg_ready, BRG_STREAM_COPY));
    CHECK_OK(brg_device_wait_event(b, BRG_STREAM_COMPUTE, msg_ready));
}

/* Bytes from a to b (b may be a) at odd offsets, sizes from one byte to
 * several staging chunks and a bit, come back exactly. */
static void copies(brg_device *a, brg_device *b, const char *what)
{
    const size_t sizes[] = {1, 1000, CHUNK, 3 * CHUNK + 12345, 2 * CHUNK - 7};
    brg_event *ready = NULL, *slot_free = NULL, *msg_ready = NULL;
    CHECK_OK(brg_event_create(a, &ready));
    CHECK_OK(brg_event_create(b, &slot_free));
    CHECK_OK(brg_event_create(a, &msg_ready));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && ready && slot_free && msg_ready; k++) {
        size_t n = sizes[k];
        unsigned char *want = malloc(n), *back = malloc(n);
        void *pa = NULL, *pb = NULL;
        CHECK_OK(brg_device_alloc(a, n + 64, "test / source", &pa));
        CHECK_OK(brg_device_alloc(b, n + 64, "test / slot", &pb));
        if (pa && pb && want && back) {
            char *src = (char *)pa + 1, *dst = (char *)pb + 3;
            fill(want, n, 31 + k);
            CHECK_OK(brg_device_copy_in(a, src, want, n));
            /* The slot is cleared on b's compute stream: the copy must come after. */
            CHECK_OK(brg_device_memset_zero(b, pb, n + 64));
            CHECK_OK(brg_event_record(slot_free, BRG_STREAM_COMPUTE));
            send(b, dst, a, src, n, ready, slot_free, msg_ready);
            memset(back, 0, n);
            CHECK_OK(brg_device_copy_out(b, back, dst, n));
            CHECK_MSG(memcmp(want, back, n) == 0, "%s: %zu bytes differ", what, n);
        }
        CHECK_OK(brg_device_synchronize(a));
        CHECK_OK(brg_device_synchronize(b));
        CHECK_OK(brg_device_free(a, pa));
        CHECK_OK(brg_device_free(b, pb));
        free(want);
        free(back);
    }
    brg_event_destroy(ready);
    brg_event_destroy(slot_free);
    brg_event_destroy(msg_ready);
}

static brg_op relu_op(const brg_tensor *x, const brg_tensor *y)
{
    brg_op op;
    memset(&op, 0, sizeof op);
    op.kind = BRG_OP_RELU_FORWARD;
    op.n_in = op.n_out = 1;
    op.in[0] = x;
    op.out[0] = y;
    return op;
}

/* A kernel still running when the copy is queued: the copy waits for it
 * (ready), the source is freed and overwritten right after the copy is
 * queued (the arena's fence keeps the overwrite behind the copy), and the
 * times of the events are in order. */
static void ordering(brg_device *a, brg_device *b, const char *what)
{
    const int64_t n = 16 << 20; /* 64 MiB of floats */
    const size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *back = malloc(bytes), *minus = malloc(bytes);
    brg_tensor tx, ty;
    void *slot = NULL;
    CHECK_OK(brg_tensor_alloc(a, BRG_F32, 1, &n, "test / x", &tx));
    CHECK_OK(brg_tensor_alloc(a, BRG_F32, 1, &n, "test / y", &ty));
    CHECK_OK(brg_device_alloc(b, bytes, "test / slot", &slot));
    brg_event *t0 = NULL, *t1 = NULL, *t2 = NULL, *msg_ready = NULL, *slot_free = NULL;
    CHECK_OK(brg_event_create(a, &t0));
    CHECK_OK(brg_event_create(a, &t1));
    CHECK_OK(brg_event_create(a, &t2));
    CHECK_OK(brg_event_create(a, &msg_ready));
    CHECK_OK(brg_event_create(b, &slot_free));
    if (!x || !back || !minus || !tx.data || !ty.data || !slot || !t0 || !t1 || !t2 || !msg_ready || !slot_free)
        goto out;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)((i * 7919) % 2001 - 1000) / 100.0f;
        minus[i] = -1.0f;
    }
    CHECK_OK(brg_device_copy_in(a, tx.data, x, bytes));
    CHECK_OK(brg_device_copy_in(a, ty.data, minus, bytes));
    CHECK_OK(brg_device_copy_in(b, slot, minus, bytes));
    CHECK_OK(brg_event_record(slot_free, BRG_STREAM_COMPUTE));
    CHECK_OK(brg_event_record(t0, BRG_STREAM_COMPUTE));
    brg_op op = relu_op(&tx, &ty);
    for (int r = 0; r < 20; r++) CHECK_OK(brg_device_run(a, &op)); /* long enough to be caught running */
    CHECK_OK(brg_event_record(t1, BRG_STREAM_COMPUTE));
    send(b, slot, a, ty.data, bytes, t1, slot_free, msg_ready);
    CHECK_OK(brg_event_record(t2, BRG_STREAM_COPY));
    /* Free y and write over its memory at once: the new buffer's writes
     * (on a's compute stream) wait for the copy reading it. */
    void *again = NULL;
    brg_tensor_free(&ty);
    CHECK_OK(brg_device_alloc(a, bytes, "test / reuse", &again));
    if (again) CHECK_OK(brg_device_copy_in(a, again, minus, bytes));
    CHECK_OK(brg_device_copy_out(b, back, slot, bytes));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += back[i] != (x[i] > 0.0f ? x[i] : 0.0f);
    CHECK_MSG(bad == 0, "%s: %lld of %lld elements are not relu(x) after the ordered copy", what, (long long)bad,
              (long long)n);
    CHECK_OK(brg_device_synchronize(a));
    CHECK_OK(brg_device_synchronize(b));
    double run = -1, all = -1;
    CHECK_OK(brg_event_elapsed(t0, t1, &run));
    CHECK_OK(brg_event_elapsed(t0, t2, &all));
    CHECK_MSG(run > 0 && all >= run, "%s: event times %g s (kernels), %g s (kernels and copy)", what, run, all);
    fprintf(stderr, "%s: 20 relus of 64 MiB in %.3f ms, then the copy, %.3f ms in all\n", what, run * 1e3, all * 1e3);
    if (again) CHECK_OK(brg_device_free(a, again));
out:
    brg_event_destroy(t0);
    brg_event_destroy(t1);
    brg_event_destroy(t2);
    brg_event_destroy(msg_ready);
    brg_event_destroy(slot_free);
    brg_tensor_free(&tx);
    brg_tensor_free(&ty);
    if (slot) CHECK_OK(brg_device_free(b, slot));
    free(x);
    free(back);
    free(minus);
}

/* Two threads, one device each, MESSAGES messages through one receive
 * slot: the sender waits (on the host) until the receiver has recorded
 * slot_free for the previous message before it queues the next copy. */
#define MESSAGES 12
typedef struct channel {
    brg_device *a, *b;
    size_t bytes;
    void *out, *slot, *stage;
    brg_event *ready, *msg_ready, *slot_free;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int sent, freed; /* messages queued by the sender; slots freed by the receiver */
    int failures;
} channel;

static void *sender(void *p)
{
    channel *ch = p;
    unsigned char *data = malloc(ch->bytes);
    for (int i = 0; i < MESSAGES && data; i++) {
        pthread_mutex_lock(&ch->lock);
        while (ch->freed < i) pthread_cond_wait(&ch->cond, &ch->lock);
        pthread_mutex_unlock(&ch->lock);
        fill(data, ch->bytes, 1000 + (uint64_t)i);
        /* out is read by the previous message's copy: compute waits for it. */
        if (brg_device_wait_event(ch->a, BRG_STREAM_COMPUTE, ch->msg_ready) != BRG_OK ||
            brg_device_copy_in(ch->a, ch->out, data, ch->bytes) != BRG_OK ||
            brg_event_record(ch->ready, BRG_STREAM_COMPUTE) != BRG_OK ||
            brg_device_wait_event(ch->a, BRG_STREAM_COPY, ch->ready) != BRG_OK ||
            brg_device_wait_event(ch->a, BRG_STREAM_COPY, ch->slot_free) != BRG_OK ||
            brg_device_copy_async(ch->b, ch->slot, ch->a, ch->out, ch->bytes) != BRG_OK) {
            fprintf(stderr, "sender, message %d: %s\n", i, brg_last_error());
            ch->failures++;
        }
        pthread_mutex_lock(&ch->lock);
        if (brg_event_record(ch->msg_ready, BRG_STREAM_COPY) != BRG_OK) ch->failures++;
        ch->sent = i + 1;
        pthread_cond_broadcast(&ch->cond);
        pthread_mutex_unlock(&ch->lock);
    }
    if (brg_device_synchronize(ch->a) != BRG_OK) ch->failures++;
    free(data);
    return NULL;
}

static void *receiver(void *p)
{
    channel *ch = p;
    unsigned char *want = malloc(ch->bytes), *back = malloc(ch->bytes);
    for (int i = 0; i < MESSAGES && want && back; i++) {
        pthread_mutex_lock(&ch->lock);
        while (ch->sent <= i) pthread_cond_wait(&ch->cond, &ch->lock);
        brg_status st = brg_device_wait_event(ch->b, BRG_STREAM_COMPUTE, ch->msg_ready);
        pthread_mutex_unlock(&ch->lock);
        /* The slot into the stage's buffer on b's compute stream, then the
         * slot is free again. */
        if (st == BRG_OK) st = brg_device_copy_between(ch->b, ch->stage, ch->b, ch->slot, ch->bytes);
        pthread_mutex_lock(&ch->lock);
        if (st == BRG_OK) st = brg_event_record(ch->slot_free, BRG_STREAM_COMPUTE);
        ch->freed = i + 1;
        pthread_cond_broadcast(&ch->cond);
        pthread_mutex_unlock(&ch->lock);
        if (st == BRG_OK) st = brg_device_copy_out(ch->b, back, ch->stage, ch->bytes);
        fill(want, ch->bytes, 1000 + (uint64_t)i);
        if (st != BRG_OK || memcmp(want, back, ch->bytes) != 0) {
            fprintf(stderr, "receiver, message %d: %s\n", i, st != BRG_OK ? brg_last_error() : "wrong bytes");
            ch->failures++;
        }
    }
    if (brg_device_synchronize(ch->b) != BRG_OK) ch->failures++;
    free(want);
    free(back);
    return NULL;
}

static void threads(brg_device *a, brg_device *b, const char *what)
{
    channel ch;
    memset(&ch, 0, sizeof ch);
    ch.a = a;
    ch.b = b;
    ch.bytes = 2 * CHUNK + 4097;
    pthread_mutex_init(&ch.lock, NULL);
    pthread_cond_init(&ch.cond, NULL);
    CHECK_OK(brg_device_alloc(a, ch.bytes, "test / out", &ch.out));
    CHECK_OK(brg_device_alloc(b, ch.bytes, "test / slot", &ch.slot));
    CHECK_OK(brg_device_alloc(b, ch.bytes, "test / stage", &ch.stage));
    CHECK_OK(brg_event_create(a, &ch.ready));
    CHECK_OK(brg_event_create(a, &ch.msg_ready));
    CHECK_OK(brg_event_create(b, &ch.slot_free));
    if (ch.out && ch.slot && ch.stage && ch.ready && ch.msg_ready && ch.slot_free) {
        pthread_t ts, tr;
        CHECK(pthread_create(&ts, NULL, sender, &ch) == 0);
        CHECK(pthread_create(&tr, NULL, receiver, &ch) == 0);
        pthread_join(ts, NULL);
        pthread_join(tr, NULL);
        CHECK_MSG(ch.failures == 0, "%s: %d failures over %d messages between threads", what, ch.failures, MESSAGES);
    }
    brg_event_destroy(ch.ready);
    brg_event_destroy(ch.msg_ready);
    brg_event_destroy(ch.slot_free);
    if (ch.out) CHECK_OK(brg_device_free(a, ch.out));
    if (ch.slot) CHECK_OK(brg_device_free(b, ch.slot));
    if (ch.stage) CHECK_OK(brg_device_free(b, ch.stage));
    pthread_mutex_destroy(&ch.lock);
    pthread_cond_destroy(&ch.cond);
}

/* Everything between a and b, both ways, and within a. */
static void pair(brg_device *a, brg_device *b, const char *what)
{
    char label[96];
    snprintf(label, sizeof label, "%s, %s -> %s", what, a->name, b->name);
    copies(a, b, label);
    snprintf(label, sizeof label, "%s, %s -> %s", what, b->name, a->name);
    copies(b, a, label);
    snprintf(label, sizeof label, "%s, %s -> itself", what, a->name);
    copies(a, a, label);
    snprintf(label, sizeof label, "%s, %s -> %s after a kernel", what, a->name, b->name);
    ordering(a, b, label);
    snprintf(label, sizeof label, "%s, %s -> %s from two threads", what, a->name, b->name);
    threads(a, b, label);
}

/* A gate on GPU 0: a stream of the test's own, held by a host function
 * until another thread opens the gate HOLD_S after it was shut, with an
 * event recorded behind it. A device's compute stream that waits for the
 * event holds every DMA queued on it until then. */
#define HOLD_S 1.0
typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
    double opened; /* seconds_now() when it opened */
    cudaStream_t stream;
} gate;

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void CUDART_CB gate_hold(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->open) pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void *gate_open_later(void *arg)
{
    gate *g = arg;
    const struct timespec hold = {(time_t)HOLD_S, (long)((HOLD_S - (double)(time_t)HOLD_S) * 1e9)};
    nanosleep(&hold, NULL);
    pthread_mutex_lock(&g->lock);
    g->opened = seconds_now();
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* Copies in of sizes[0..count) behind a shut gate, on a fresh device (an
 * empty staging ring), each from one host buffer written over as soon as
 * the call returns, into regions side by side. Every copy before
 * first_wait must return while the gate is shut (the ring had room: no
 * wait for the DMAs before it), copy first_wait only once it has opened
 * (the ring came round to bytes, or a slot, of a DMA still held), and
 * every region must come back as it was sent: a ring that did not wait
 * would have written over bytes a held DMA had still to read. */
static void gated_copies(const size_t *sizes, int count, int first_wait, const char *what)
{
    brg_device *dev = make(0, 2, 128 * MiB, 2);
    size_t total = 0, largest = 0;
    for (int i = 0; i < count; i++) {
        total += sizes[i];
        largest = sizes[i] > largest ? sizes[i] : largest;
    }
    unsigned char *host = malloc(largest), *want = malloc(total), *back = malloc(total);
    double *returned = calloc((size_t)count, sizeof *returned);
    void *region = NULL;
    brg_event *passed = NULL;
    gate g = {.open = 0};
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.cond, NULL);
    if (dev) CHECK_OK(brg_device_alloc(dev, total, "test / staged regions", &region));
    if (dev) CHECK_OK(brg_event_create(dev, &passed));
    CHECK(cudaSetDevice(0) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking) == cudaSuccess);
    if (!dev || !host || !want || !back || !returned || !region || !passed || !g.stream) goto out;
    CHECK(cudaLaunchHostFunc(g.stream, gate_hold, &g) == cudaSuccess);
    CHECK(cudaEventRecord((cudaEvent_t)passed->impl, g.stream) == cudaSuccess);
    passed->recorded++; /* recorded outside brg_event_record: a wait for it is not skipped */
    CHECK_OK(brg_device_wait_event(dev, BRG_STREAM_COMPUTE, passed));
    pthread_t opener;
    const int started = pthread_create(&opener, NULL, gate_open_later, &g) == 0;
    CHECK(started);
    if (!started) {
        gate_open_later(&g);
        goto out;
    }
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        fill(want + at, sizes[i], 7000 + (uint64_t)i);
        memcpy(host, want + at, sizes[i]);
        CHECK_OK(brg_device_copy_in(dev, (char *)region + at, host, sizes[i]));
        returned[i] = seconds_now();
        memset(host, 0xa5, sizes[i]); /* the caller's buffer is its own again */
        at += sizes[i];
    }
    pthread_join(opener, NULL);
    memset(back, 0, total);
    CHECK_OK(brg_device_copy_out(dev, back, region, total));
    at = 0;
    for (int i = 0; i < count; i++) {
        CHECK_MSG(memcmp(want + at, back + at, sizes[i]) == 0, "%s: copy %d of %d (%zu bytes) came back changed",
                  what, i, count, sizes[i]);
        at += sizes[i];
    }
    for (int i = 0; i <= first_wait && i < count; i++) {
        if (i < first_wait)
            CHECK_MSG(returned[i] < g.opened, "%s: copy %d of %d waited for the held DMAs before it (%.3f s after "
                      "the gate opened)", what, i, count, returned[i] - g.opened);
        else
            CHECK_MSG(returned[i] >= g.opened, "%s: copy %d of %d returned %.3f s before the gate opened, with the "
                      "DMAs it comes round to still held", what, i, count, g.opened - returned[i]);
    }
    fprintf(stderr, "%s: %d copies in behind a gate, the first %d without waiting\n", what, count, first_wait);
out:
    if (g.stream) {
        pthread_mutex_lock(&g.lock);
        g.open = 1; /* nothing is held past a failure */
        pthread_cond_broadcast(&g.cond);
        pthread_mutex_unlock(&g.lock);
        CHECK(cudaStreamSynchronize(g.stream) == cudaSuccess);
        (void)cudaStreamDestroy(g.stream);
    }
    if (dev) CHECK_OK(brg_device_synchronize(dev));
    brg_event_destroy(passed);
    if (region) CHECK_OK(brg_device_free(dev, region));
    brg_device_destroy(dev);
    pthread_cond_destroy(&g.cond);
    pthread_mutex_destroy(&g.lock);
    free(host);
    free(want);
    free(back);
    free(returned);
}

/* copy_in's staging ring (backends/cuda/device.c over stage-ring.h; its
 * schedule is checked without a GPU in test_cuda_kernels), against DMAs
 * really still pending: 32 MiB and 32 slots. Ten copies of 3 MiB and a
 * bit fit side by side, the eleventh goes round to the start and must
 * wait for the first; 32 tiny copies take every slot, the 33rd must wait
 * for the oldest. */
static void staging_ring(void)
{
    size_t sizes[40];
    for (int i = 0; i < 12; i++) sizes[i] = 3 * MiB + 4321;
    gated_copies(sizes, 12, 10, "staging ring, coming round");
    for (int i = 0; i < 40; i++) sizes[i] = 100 + (size_t)i;
    gated_copies(sizes, 40, 32, "staging ring, every slot taken");
}

/* A communicator between processes (NCCL) of one member, which one GPU
 * can make: its stream waits for the compute stream's event, sums in
 * place (one member: the values stay), and the compute stream reads them
 * after the communicator's event. Two members need two processes
 * (tests/test_mpi.sh's NCCL case). Without NCCL the device says it has
 * none. */
static void communicator(brg_device *a)
{
#ifdef BRG_HAVE_NCCL
    CHECK(brg_device_has_comm(a));
    unsigned char id[BRG_COMM_ID_BYTES];
    brg_comm *comm = NULL;
    CHECK_OK(brg_comm_make_id(a, id));
    CHECK_OK(brg_comm_create(a, id, 1, 0, BRG_COMM_SUMS, NULL, &comm));
    const size_t n = (size_t)3 << 20;
    float *host = malloc(n * sizeof *host), *back = malloc(n * sizeof *back);
    void *p = NULL;
    brg_event *made = NULL, *summed = NULL;
    CHECK_OK(brg_device_alloc(a, n * sizeof(float), "test / sum", &p));
    CHECK_OK(brg_event_create(a, &made));
    CHECK_OK(brg_event_create(a, &summed));
    if (comm && host && back && p && made && summed) {
        for (size_t i = 0; i < n; i++) host[i] = (float)(i % 1000) * 0.25f - 7.0f;
        CHECK_OK(brg_device_copy_in(a, p, host, n * sizeof(float)));
        CHECK_OK(brg_event_record(made, BRG_STREAM_COMPUTE));
        CHECK_OK(brg_comm_wait_event(comm, made));
        CHECK_OK(brg_comm_sum(comm, p, n));
        CHECK_OK(brg_comm_record_event(comm, summed));
        CHECK_OK(brg_device_wait_event(a, BRG_STREAM_COMPUTE, summed));
        CHECK_OK(brg_device_copy_out(a, back, p, n * sizeof(float)));
        CHECK_OK(brg_device_synchronize(a));
        CHECK_MSG(memcmp(host, back, n * sizeof(float)) == 0, "a sum over one member changed the values");
        /* A range outside the arena is refused before NCCL sees it. */
        CHECK_STATUS(brg_comm_sum(comm, host, 16), BRG_ERR_INVALID_ARGUMENT);
    }
    brg_comm_destroy(comm);
    brg_event_destroy(made);
    brg_event_destroy(summed);
    if (p) CHECK_OK(brg_device_free(a, p));
    free(host);
    free(back);
#else
    CHECK(!brg_device_has_comm(a));
    brg_comm *comm = NULL;
    unsigned char id[BRG_COMM_ID_BYTES] = {0};
    CHECK_STATUS(brg_comm_create(a, id, 1, 0, BRG_COMM_SUMS, NULL, &comm), BRG_ERR_UNSUPPORTED);
    CHECK_ERROR_HAS("NCCL");
#endif
}

/* A kernel reading an address that is not mapped: the failure shows at the
 * next synchronize, which names the device and its activity. The GPU's
 * context is then broken for good, so this runs last. */
static void fault(brg_device *a)
{
    const int64_t n = 1 << 20;
    brg_tensor x, y;
    void *p = NULL;
    CHECK_OK(brg_device_alloc(a, (size_t)n * sizeof(float), "test / y", &p));
    if (!p) return;
    CHECK_OK(brg_tensor_init(&x, (void *)(uintptr_t)0x1000, BRG_F32, 1, &n, a));
    CHECK_OK(brg_tensor_init(&y, p, BRG_F32, 1, &n, a));
    brg_op op = relu_op(&x, &y);
    brg_device_set_activity(a, "action 17 (F3.1)");
    /* Past brg_device_run's checks, which would refuse the pointer. */
    brg_status st = a->iface->run(a, &op);
    if (st == BRG_OK) st = brg_device_synchronize(a);
    CHECK_STATUS(st, BRG_ERR_BACKEND);
    CHECK_ERROR_HAS(a->name);
    CHECK_ERROR_HAS("action 17 (F3.1)");
    fprintf(stderr, "the fault, as reported: %s\n", brg_last_error());
}
#endif

int main(void)
{
#if !defined(BRG_HAVE_CUDA) || !defined(BRG_HAVE_CUDNN)
    fprintf(stderr, "CUDA backend not compiled in: skipped\n");
    return 77;
#else
    int gpus = 0;
    int err = brg_cuda_device_count(&gpus);
    if (err != 0 || gpus == 0) {
        fprintf(stderr, "no GPU visible (%s): skipped\n", err ? brg_cuda_error_string(err) : "0 devices");
        return 77;
    }
    if (!brg_backend_available(BRG_BACKEND_CUDA)) {
        fprintf(stderr, "GPU visible but no CUDA backend: skipped\n");
        return 77;
    }
    brg_device *a = make(0, 0, 384 * MiB, 0), *b = make(0, 1, 384 * MiB, 1);
    if (a && b) {
        pair(a, b, "same GPU");
        brg_cuda_force_staged(1);
        /* What the channels do when they are made: the staging buffers
         * and lanes, ready before the first copy. */
        CHECK_OK(brg_device_copy_prepare(b, a));
        CHECK_OK(brg_device_copy_prepare(a, b));
        pair(a, b, "staged on one GPU");
        brg_cuda_force_staged(0);
        if (gpus >= 2) {
            brg_device *c = make(1, 0, 384 * MiB, 2);
            if (c) {
                fprintf(stderr, "GPUs 0 and 1: %s\n", brg_cuda_can_access_peer(0, 1) && brg_cuda_can_access_peer(1, 0)
                                                          ? "peer access" : "no peer access, copies are staged");
                CHECK_OK(brg_device_copy_prepare(c, a)); /* enables peer access, or stages */
                pair(a, c, "two GPUs");
                brg_cuda_force_staged(1);
                pair(c, a, "staged between GPUs");
                brg_cuda_force_staged(0);
            }
            brg_device_destroy(c);
        } else {
            fprintf(stderr, "one GPU: peer copies need two, skipped\n");
        }
        staging_ring();
        communicator(a);
        const char *no_fault = getenv("BRG_TEST_NO_FAULT");
        if (!(no_fault && strcmp(no_fault, "1") == 0)) fault(a);
    }
    brg_device_destroy(a);
    brg_device_destroy(b);
    TEST_EXIT();
#endif
}
