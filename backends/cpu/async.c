/* The asynchronous CPU backend ("cpu-async"): the CPU twin of a GPU's
 * streams, so that the event protocol between devices runs, and fails
 * where a wait is missing, on a machine without a GPU.
 *
 * The slab is the CPU device's. Each of the two streams (compute, copy) is
 * a thread that runs a FIFO queue of work: kernels, memsets, copies, event
 * records and waits, in the order they were queued, as CUDA does. The
 * calls that queue work return at once. Copies from and to the host are
 * synchronous for the caller: they wait for the compute stream, then copy.
 *
 * Communicators with other processes (the CPU twin of NCCL's): each one
 * another stream thread, whose sends, receives and sums go through the
 * wire exec gave it (MPI); sends queue on the compute or copy stream, as
 * NCCL's on the stream the caller names. Events count their records per
 * stream, the communicators' included.
 *
 * One mutex per device guards its queues, its sticky error and the state
 * of its events; one condition variable per device announces any change.
 * A stream waiting on another device's event takes that device's mutex,
 * never two at once.
 *
 * A kernel that fails on a stream thread leaves a sticky error naming the
 * device and the action that queued it (brg_device_activity); later work is
 * dropped, except event records, which still complete so that nothing
 * waiting on them hangs. Every call returns the error until synchronize
 * has returned it with the queues empty.
 *
 * BRG_DEBUG_LOADS=1 plays CUDA's lazy kernel loading: the first launch on
 * a device of each kind of op on each shape (a kernel of its own, as
 * cuDNN picks one per shape, in a context of its own, as each GPU has)
 * waits, holding every other host thread's launches back, until every
 * stream of every cpu-async device of the process has run all it was
 * given, the communicators' included. That is the context
 * synchronization a GPU makes to load a kernel while NCCL's kernels may
 * be spinning on a peer (docs/distributed.md, "Lazy kernel loading"): a
 * transport that deadlocks under it deadlocks here too.
 *
 * BRG_DEBUG_CONNECT=1 plays NCCL's lazy connections: a communicator's
 * first send, receive or sum (comm_connect's included) connects its
 * members on the calling host thread, and returns only when the peers
 * have made their first call on it too (NCCL's connection handshake
 * inside ncclGroupEnd, at the first message to or from a peer). */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu-device.h"
#include "cpu-kernels.h"
#include "base/device-impl.h"
#include "base/internal.h"
#include "base/rng.h"

#define STREAMS 2 /* compute and copy */
/* Communicators with other processes (comm_create): each a stream of its
 * own, after the two, whose work sends, receives and sums through the
 * wire exec gave it (MPI): the twin of an NCCL communicator's stream. */
/* a device's channels to other ranks (8 at most: both sides, both directions), its replicas' sums */
#define COMMS_MAX 16
#define STREAMS_MAX (STREAMS + COMMS_MAX)
#define MESSAGE_MAX 1024

typedef struct async_device async_device;

/* ev->impl. Records complete in order within a stream, not across the two,
 * so completion is counted per stream: a wait captures, when it is queued,
 * how many records each stream had been given, and is released when both
 * have done that many. */
typedef struct async_event {
    async_device *owner;   /* the device whose mutex guards the fields below */
    int queued[STREAMS_MAX]; /* records queued on each stream */
    int done[STREAMS_MAX];   /* records completed on each stream */
    int latest_queued;     /* number of the latest record queued (1, 2, ...) */
    int latest_done;       /* number of the latest record completed */
    double time;           /* stream clock when record latest_done completed */
    int refs;              /* the brg_event and each queued record or wait */
} async_event;

typedef enum work_kind {
    WORK_RUN, WORK_MEMSET, WORK_COPY, WORK_RECORD, WORK_WAIT,
    WORK_SEND, WORK_RECV, WORK_SUM /* through a communicator's wire */
} work_kind;

typedef struct work {
    struct work *next;
    work_kind kind;
    char activity[BRG_ACTIVITY_MAX]; /* the queuing thread's brg_device_activity */
    void *dst;        /* memset, copy */
    const void *src;  /* copy */
    size_t bytes;
    async_event *event; /* record, wait */
    int seq;            /* record: its number on the event */
    int target[STREAMS_MAX]; /* wait: the event's records to wait for, per stream */
    const brg_wire *wire;    /* send, receive, sum */
    int peer, count;         /* send, receive: `count` pieces, after the op's tensors */
    void **pieces;
    size_t *piece_bytes;
    brg_op op;           /* run: its tensors point into `tensors` */
    brg_tensor tensors[2 * BRG_OP_MAX_TENSORS];
} work;

typedef struct async_stream {
    async_device *dev;
    int which;       /* its index: BRG_STREAM_COMPUTE, BRG_STREAM_COPY, then communicators' */
    work *head, *tail;
    int pending;     /* queued and not yet finished (the running one included) */
    pthread_t thread;
    int started;
    int stop;        /* a communicator's stream: run what is queued, then end */
    uint64_t rng;    /* debug delays */
} async_stream;

/* A communicator: its stream and a copy of its wire. */
typedef struct async_comm {
    int stream;
    brg_wire wire;
    int connected; /* BRG_DEBUG_CONNECT: its first call has met the peers' */
} async_comm;

struct async_device {
    brg_device *dev;
    pthread_mutex_t mutex;
    pthread_cond_t changed; /* work queued or finished, an event completed, stop */
    async_stream streams[STREAMS_MAX]; /* [STREAMS..): communicators', where started */
    int stopping;
    brg_status error; /* sticky asynchronous failure */
    char message[MESSAGE_MAX];
    unsigned delay_max_us; /* BRG_DEBUG_DELAYS; 0: none */
    uint64_t delay_seed;   /* its seed, and the device's index: each stream's delays from both */
    int index;
    async_device *next_loaded; /* BRG_DEBUG_LOADS: the process's devices, under loads.mutex */
    uint64_t context;          /* BRG_DEBUG_LOADS: the device's number, its kernels' context */
    int connect_lazily;        /* BRG_DEBUG_CONNECT, when the device was made */
};

static async_device *ctx_of(const brg_device *dev) { return dev->context; }

/* ---- BRG_DEBUG_LOADS: the twin of lazy kernel loading ---- */

/* The process's cpu-async devices and the ops they have launched (a set
 * of hashes of kind and shapes). A first launch holds mutex while it
 * drains every device: the GPU's context lock, which keeps other host
 * threads from launching meanwhile (loads_gate). */
static struct {
    pthread_mutex_t mutex;
    async_device *devices;
    uint64_t *seen;
    size_t n_seen, cap_seen;
    uint64_t contexts; /* devices registered so far */
} loads = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, 0};

/* Set from BRG_DEBUG_LOADS when a device is created; read on every launch
 * without the mutex. */
static atomic_int loads_enabled;

static int loads_on(void) { return atomic_load_explicit(&loads_enabled, memory_order_acquire); }

/* A host thread's launch waits while another loads. */
static void loads_gate(void)
{
    if (!loads_on()) return;
    pthread_mutex_lock(&loads.mutex);
    pthread_mutex_unlock(&loads.mutex);
}

/* The kernel op runs on dev: its kind and shapes, on that device. */
static uint64_t op_kernel_key(const brg_device *dev, const brg_op *op)
{
    const uint64_t on = ctx_of(dev)->context;
    uint64_t h = brg_fnv1a(BRG_FNV1A_START, &on, sizeof on);
    h = brg_fnv1a(h, &op->kind, sizeof op->kind);
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const brg_tensor *t = i < op->n_in ? op->in[i] : op->out[i - op->n_in];
        if (!t) continue;
        h = brg_fnv1a(h, &t->ndim, sizeof t->ndim);
        h = brg_fnv1a(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
    }
    return h;
}

/* With loads.mutex held: whether key is new, remembering it. */
static int first_launch_locked(uint64_t key)
{
    for (size_t i = 0; i < loads.n_seen; i++)
        if (loads.seen[i] == key) return 0;
    if (loads.n_seen == loads.cap_seen) {
        const size_t cap = loads.cap_seen ? 2 * loads.cap_seen : 64;
        uint64_t *grown = realloc(loads.seen, cap * sizeof *grown);
        if (!grown) return 1; /* drain again next time: slower, still right */
        loads.seen = grown;
        loads.cap_seen = cap;
    }
    loads.seen[loads.n_seen++] = key;
    return 1;
}

static void loads_register(async_device *a, int on)
{
    pthread_mutex_lock(&loads.mutex);
    if (on) atomic_store_explicit(&loads_enabled, 1, memory_order_release);
    if (loads_on()) {
        a->context = ++loads.contexts;
        a->next_loaded = loads.devices;
        loads.devices = a;
    }
    pthread_mutex_unlock(&loads.mutex);
}

static void loads_unregister(async_device *a)
{
    pthread_mutex_lock(&loads.mutex);
    for (async_device **p = &loads.devices; *p; p = &(*p)->next_loaded)
        if (*p == a) {
            *p = a->next_loaded;
            break;
        }
    pthread_mutex_unlock(&loads.mutex);
}

/* Re-raise the sticky error on the calling thread (the message is
 * thread-local). With the mutex held. */
static brg_status raise_sticky(const async_device *a) { return brg_error(a->error, "%s", a->message); }

static void debug_delay(async_stream *s)
{
    const unsigned max = s->dev->delay_max_us;
    if (!max) return;
    s->rng = brg_splitmix64(s->rng);
    const long us = (long)(s->rng % ((uint64_t)max + 1));
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Drop a reference to an event; the last one frees it. With the owner's
 * mutex held. */
static void event_unref(async_event *e)
{
    if (--e->refs == 0) free(e);
}

/* Run one piece of work outside the mutex; BRG_OK or a failure whose
 * message is this thread's brg_last_error(). Records and the sticky
 * error's skipping are the caller's. */
static brg_status execute(async_stream *s, work *w)
{
    switch (w->kind) {
    case WORK_RUN: return brg_kernel_run(brg_cpu_kernels, s->dev->dev, &w->op);
    case WORK_MEMSET: memset(w->dst, 0, w->bytes); return BRG_OK;
    case WORK_COPY: memmove(w->dst, w->src, w->bytes); return BRG_OK;
    case WORK_WAIT: {
        async_device *owner = w->event->owner;
        pthread_mutex_lock(&owner->mutex);
        for (int k = 0; k < STREAMS_MAX; k++)
            while (w->event->done[k] < w->target[k]) pthread_cond_wait(&owner->changed, &owner->mutex);
        event_unref(w->event);
        pthread_mutex_unlock(&owner->mutex);
        return BRG_OK;
    }
    case WORK_RECORD: return BRG_OK;
    case WORK_SEND:
    case WORK_RECV:
        for (int i = 0; i < w->count; i++) {
            if (w->piece_bytes[i] == 0) continue; /* as NCCL: empty pieces are not sent */
            const brg_wire *x = w->wire;
            BRG_CHECK(w->kind == WORK_SEND ? x->send(x->ctx, w->peer, w->pieces[i], w->piece_bytes[i])
                                           : x->recv(x->ctx, w->peer, w->pieces[i], w->piece_bytes[i]));
        }
        return BRG_OK;
    case WORK_SUM: return w->wire->sum(w->wire->ctx, w->dst, w->bytes);
    }
    return BRG_OK;
}

static void *stream_main(void *arg)
{
    async_stream *s = arg;
    async_device *a = s->dev;
    pthread_mutex_lock(&a->mutex);
    for (;;) {
        while (!s->head && !a->stopping && !s->stop) pthread_cond_wait(&a->changed, &a->mutex);
        work *w = s->head;
        if (!w) break; /* stopping, and nothing left */
        s->head = w->next;
        if (!s->head) s->tail = NULL;
        const int broken = a->error != BRG_OK;
        pthread_mutex_unlock(&a->mutex);

        debug_delay(s);
        brg_status st = BRG_OK;
        if (!broken || w->kind == WORK_RECORD) {
            st = execute(s, w);
        } else if (w->kind == WORK_WAIT) { /* dropped: let the event go */
            pthread_mutex_lock(&w->event->owner->mutex);
            event_unref(w->event);
            pthread_mutex_unlock(&w->event->owner->mutex);
        }
        char message[MESSAGE_MAX];
        if (st != BRG_OK)
            snprintf(message, sizeof message, "device '%s'%s%s%s: %s", a->dev->name, w->activity[0] ? " (in " : "",
                     w->activity, w->activity[0] ? ")" : "", brg_last_error());
        const double now = brg_now_seconds();

        pthread_mutex_lock(&a->mutex);
        if (st != BRG_OK && a->error == BRG_OK) {
            a->error = st;
            snprintf(a->message, sizeof a->message, "%s", message);
        }
        if (w->kind == WORK_RECORD) {
            async_event *e = w->event;
            e->done[s->which]++;
            if (w->seq > e->latest_done) {
                e->latest_done = w->seq;
                e->time = now;
            }
            event_unref(e);
        }
        s->pending--;
        pthread_cond_broadcast(&a->changed);
        free(w);
    }
    pthread_mutex_unlock(&a->mutex);
    return NULL;
}

/* A new piece of work stamped with the queuing thread's activity, with room for
 * `pieces` pieces of a message after it, or NULL (host memory, message
 * set). */
static work *new_work_pieces(brg_device *dev, work_kind kind, int pieces)
{
    const size_t extra = (size_t)pieces * (sizeof(void *) + sizeof(size_t));
    work *w = brg_malloc(sizeof *w + extra, "a queued operation of a cpu-async device");
    if (!w) return NULL;
    memset(w, 0, offsetof(work, op));
    w->kind = kind;
    snprintf(w->activity, sizeof w->activity, "%s", brg_device_activity(dev));
    w->pieces = (void **)(w + 1);
    w->piece_bytes = (size_t *)(w->pieces + pieces);
    return w;
}

static work *new_work(brg_device *dev, work_kind kind) { return new_work_pieces(dev, kind, 0); }

/* With the mutex held: append w to a stream, or free it and return the
 * sticky error. */
static brg_status enqueue_locked(async_device *a, int which, work *w)
{
    if (a->error != BRG_OK) {
        free(w);
        return raise_sticky(a);
    }
    async_stream *s = &a->streams[which];
    w->next = NULL;
    if (s->tail) s->tail->next = w;
    else s->head = w;
    s->tail = w;
    s->pending++;
    pthread_cond_broadcast(&a->changed);
    return BRG_OK;
}

static brg_status enqueue(brg_device *dev, int which, work *w)
{
    async_device *a = ctx_of(dev);
    loads_gate();
    pthread_mutex_lock(&a->mutex);
    brg_status st = enqueue_locked(a, which, w);
    pthread_mutex_unlock(&a->mutex);
    return st;
}

/* With the mutex held: wait until the given streams (a bit mask of
 * indices, communicators' included) have run everything queued on them. */
static void wait_idle_locked(async_device *a, unsigned streams)
{
    for (int k = 0; k < STREAMS_MAX; k++)
        while ((streams >> k & 1) && a->streams[k].pending) pthread_cond_wait(&a->changed, &a->mutex);
}

/* wait_idle_locked, then the sticky error if any. */
static brg_status drain_locked(async_device *a, unsigned streams)
{
    wait_idle_locked(a, streams);
    return a->error != BRG_OK ? raise_sticky(a) : BRG_OK;
}

static brg_status drain(brg_device *dev, unsigned streams)
{
    async_device *a = ctx_of(dev);
    pthread_mutex_lock(&a->mutex);
    brg_status st = drain_locked(a, streams);
    pthread_mutex_unlock(&a->mutex);
    return st;
}

#define COMPUTE_ONLY (1u << BRG_STREAM_COMPUTE)
#define BOTH_STREAMS (COMPUTE_ONLY | 1u << BRG_STREAM_COPY)
#define EVERY_STREAM ((1u << STREAMS_MAX) - 1)

/* The first launch of op's kernel on dev: every stream of every device
 * runs dry first, as a GPU's context synchronizes to load a module. */
static void load_kernel(const brg_device *dev, const brg_op *op)
{
    if (!loads_on()) return;
    pthread_mutex_lock(&loads.mutex);
    if (first_launch_locked(op_kernel_key(dev, op)))
        for (async_device *d = loads.devices; d; d = d->next_loaded) {
            pthread_mutex_lock(&d->mutex);
            wait_idle_locked(d, EVERY_STREAM);
            pthread_mutex_unlock(&d->mutex);
        }
    pthread_mutex_unlock(&loads.mutex);
}

static void stop_streams(async_device *a)
{
    pthread_mutex_lock(&a->mutex);
    a->stopping = 1;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->mutex);
    for (int k = 0; k < STREAMS_MAX; k++)
        if (a->streams[k].started) pthread_join(a->streams[k].thread, NULL);
}

static void async_destroy(brg_device *dev)
{
    async_device *a = ctx_of(dev);
    loads_unregister(a);
    stop_streams(a); /* the threads run what is left before they stop */
    pthread_cond_destroy(&a->changed);
    pthread_mutex_destroy(&a->mutex);
    brg_cpu_device_release(dev);
}

/* Host copies: the host buffer is read or filled when the call returns, so
 * the compute stream is drained first and the copy made here. */
static brg_status async_copy_host(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    BRG_CHECK(drain(dev, COMPUTE_ONLY));
    memmove(dst, src, bytes);
    return BRG_OK;
}

/* Queue a copy of bytes from src to dst on dev's stream. */
static brg_status enqueue_copy(brg_device *dev, brg_stream stream, void *dst, const void *src, size_t bytes)
{
    work *w = new_work(dev, WORK_COPY);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->dst = dst;
    w->src = src;
    w->bytes = bytes;
    return enqueue(dev, stream, w);
}

static brg_status async_copy_peer(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    if (dst_dev == src_dev) /* a hand-over between buffers: in order on compute */
        return enqueue_copy(dst_dev, BRG_STREAM_COMPUTE, dst, src, bytes);
    /* Between devices (rare: the executor sends with copy_async): both
     * finish what they have, then the caller copies. */
    BRG_CHECK(brg_cpu_async_drain(dst_dev));
    BRG_CHECK(brg_cpu_async_drain(src_dev));
    memmove(dst, src, bytes);
    return BRG_OK;
}

static brg_status async_memset_zero(brg_device *dev, void *dst, size_t bytes)
{
    work *w = new_work(dev, WORK_MEMSET);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->dst = dst;
    w->bytes = bytes;
    return enqueue(dev, BRG_STREAM_COMPUTE, w);
}

/* The op's tensors live on the caller's stack: the queued op gets copies. */
static brg_status async_run(brg_device *dev, const brg_op *op)
{
    load_kernel(dev, op);
    work *w = new_work(dev, WORK_RUN);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->op = *op;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i]) {
            w->tensors[i] = *op->in[i];
            w->op.in[i] = &w->tensors[i];
        }
    for (int i = 0; i < op->n_out; i++)
        if (op->out[i]) {
            w->tensors[BRG_OP_MAX_TENSORS + i] = *op->out[i];
            w->op.out[i] = &w->tensors[BRG_OP_MAX_TENSORS + i];
        }
    return enqueue(dev, BRG_STREAM_COMPUTE, w);
}

static size_t async_workspace_bytes(brg_device *dev, const brg_op *op)
{
    (void)dev;
    return brg_cpu_workspace_bytes(op);
}

/* Both streams drained; the sticky error is returned once and cleared,
 * so the next step starts clean. */
static brg_status async_synchronize(brg_device *dev)
{
    async_device *a = ctx_of(dev);
    pthread_mutex_lock(&a->mutex);
    brg_status st = drain_locked(a, BOTH_STREAMS);
    if (st != BRG_OK) {
        a->error = BRG_OK;
        a->message[0] = '\0';
    }
    pthread_mutex_unlock(&a->mutex);
    return st;
}

brg_status brg_cpu_async_drain(brg_device *dev)
{
    if (dev->iface->synchronize != async_synchronize) return BRG_OK;
    return drain(dev, BOTH_STREAMS);
}

/* ---- events ---- */

static brg_status async_event_create(brg_device *dev, brg_event *ev)
{
    async_event *e = brg_calloc(1, sizeof *e, "an event of a cpu-async device");
    if (!e) return BRG_ERR_HOST_MEMORY;
    e->owner = ctx_of(dev);
    e->refs = 1;
    ev->impl = e;
    return BRG_OK;
}

/* Work still queued that names the event keeps it alive. */
static void async_event_destroy(brg_device *dev, brg_event *ev)
{
    async_device *a = ctx_of(dev);
    pthread_mutex_lock(&a->mutex);
    event_unref(ev->impl);
    pthread_mutex_unlock(&a->mutex);
    ev->impl = NULL;
}

/* Record ev on stream `stream` of dev (an index: compute, copy or a
 * communicator's). */
static brg_status record_on(brg_device *dev, brg_event *ev, int stream)
{
    async_device *a = ctx_of(dev);
    async_event *e = ev->impl;
    work *w = new_work(dev, WORK_RECORD);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->event = e;
    loads_gate();
    pthread_mutex_lock(&a->mutex);
    /* base counts the record (ev->recorded) only once this returns BRG_OK:
     * the event's own counts are kept here, under the mutex, and move only
     * when the record is queued. */
    w->seq = e->latest_queued + 1;
    brg_status st = enqueue_locked(a, stream, w);
    if (st == BRG_OK) {
        e->latest_queued++;
        e->queued[stream]++;
        e->refs++;
    }
    pthread_mutex_unlock(&a->mutex);
    return st;
}

static brg_status async_event_record(brg_device *dev, brg_event *ev, brg_stream stream)
{
    return record_on(dev, ev, (int)stream);
}

/* Stream `stream` of dev waits for ev. */
static brg_status wait_on(brg_device *dev, int stream, const brg_event *ev)
{
    async_event *e = ev->impl;
    work *w = new_work(dev, WORK_WAIT);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->event = e;
    /* The records queued so far, not later ones (CUDA's rule). */
    pthread_mutex_lock(&e->owner->mutex);
    for (int k = 0; k < STREAMS_MAX; k++) w->target[k] = e->queued[k];
    e->refs++;
    pthread_mutex_unlock(&e->owner->mutex);
    brg_status st = enqueue(dev, stream, w); /* frees w on failure */
    if (st != BRG_OK) {
        pthread_mutex_lock(&e->owner->mutex);
        event_unref(e);
        pthread_mutex_unlock(&e->owner->mutex);
    }
    return st;
}

static brg_status async_stream_wait(brg_device *dev, brg_stream stream, const brg_event *ev)
{
    return wait_on(dev, (int)stream, ev);
}

static int event_complete_locked(const async_event *e)
{
    for (int k = 0; k < STREAMS_MAX; k++)
        if (e->done[k] < e->queued[k]) return 0;
    return 1;
}

static brg_status async_event_synchronize(brg_device *dev, brg_event *ev)
{
    async_device *a = ctx_of(dev);
    async_event *e = ev->impl;
    pthread_mutex_lock(&a->mutex);
    while (!event_complete_locked(e)) pthread_cond_wait(&a->changed, &a->mutex);
    brg_status st = a->error != BRG_OK ? raise_sticky(a) : BRG_OK;
    pthread_mutex_unlock(&a->mutex);
    return st;
}

/* As CUDA: both events must have completed (event_synchronize first). */
static brg_status async_event_elapsed(brg_device *dev, const brg_event *from, const brg_event *to, double *seconds)
{
    async_device *a = ctx_of(dev);
    const async_event *f = from->impl, *t = to->impl;
    pthread_mutex_lock(&a->mutex);
    const int complete = event_complete_locked(f) && event_complete_locked(t);
    const double dt = t->time - f->time;
    pthread_mutex_unlock(&a->mutex);
    if (!complete)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "device '%s': event times asked before the events completed; synchronize on them first",
                         dev->name);
    *seconds = dt;
    return BRG_OK;
}

static brg_status async_copy_async(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    (void)dst_dev; /* a cpu-async device too (same iface): its memory is host memory */
    return enqueue_copy(src_dev, BRG_STREAM_COPY, dst, src, bytes);
}

/* ---- communicators: the CPU twin of NCCL's ---- */

static uint64_t stream_seed(const async_device *a, int k)
{
    return a->delay_seed ^ brg_splitmix64((uint64_t)a->index * STREAMS + (uint64_t)k);
}

static int start_stream(async_device *a, int k, uint64_t seed)
{
    async_stream *s = &a->streams[k];
    s->dev = a;
    s->which = k;
    s->stop = 0;
    /* Each stream its own sequence of delays, repeatable from the seed. */
    s->rng = brg_splitmix64(seed);
    const int err = pthread_create(&s->thread, NULL, stream_main, s);
    s->started = !err;
    return err;
}

/* Nothing to make: the wire (one MPI communicator per channel or per
 * device's replicas) already joins the members. */
static brg_status async_comm_id(brg_device *dev, unsigned char *id)
{
    (void)dev;
    memset(id, 0, BRG_COMM_ID_BYTES);
    return BRG_OK;
}

static brg_status async_comm_create(brg_device *dev, const unsigned char *id, int ranks, int rank,
                                    const brg_wire *wire, void **comm)
{
    (void)id;
    (void)ranks;
    (void)rank;
    *comm = NULL;
    if (!wire) return brg_error(BRG_ERR_INTERNAL, "device '%s': a communicator without a wire", dev->name);
    async_device *a = ctx_of(dev);
    async_comm *c = brg_calloc(1, sizeof *c, "a communicator of a cpu-async device");
    if (!c) return BRG_ERR_HOST_MEMORY;
    c->wire = *wire;
    pthread_mutex_lock(&a->mutex);
    int k = STREAMS;
    while (k < STREAMS_MAX && a->streams[k].started) k++;
    int err = k < STREAMS_MAX ? start_stream(a, k, stream_seed(a, k)) : -1;
    pthread_mutex_unlock(&a->mutex);
    if (err) {
        free(c);
        return err < 0 ? brg_error(BRG_ERR_UNSUPPORTED, "device '%s': more than %d communicators", dev->name,
                                   COMMS_MAX)
                       : brg_error(BRG_ERR_HOST_MEMORY, "device '%s': cannot start a communicator's stream (%s)",
                                   dev->name, strerror(err));
    }
    c->stream = k;
    *comm = c;
    return BRG_OK;
}

/* Its stream runs what is queued, then ends. */
static void async_comm_destroy(brg_device *dev, void *comm)
{
    async_device *a = ctx_of(dev);
    async_comm *c = comm;
    async_stream *s = &a->streams[c->stream];
    pthread_mutex_lock(&a->mutex);
    s->stop = 1;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->mutex);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&a->mutex);
    s->started = 0;
    pthread_mutex_unlock(&a->mutex);
    free(c);
}

/* ---- BRG_DEBUG_CONNECT: the twin of NCCL's lazy connections ---- */

/* Before a communicator's first message or sum, with BRG_DEBUG_CONNECT=1:
 * a handshake over its wire on the calling thread. A message's two ends
 * trade a byte, the one sending first (so two first sends, or a send and
 * a receive, meet whatever they are); a sum's members sum a zero. Nothing
 * is on the communicator's stream yet, so the handshake is the first
 * thing on the wire both ways, matched before any message. One host
 * thread calls a communicator, as NCCL requires. */
static brg_status connect_late(brg_device *dev, async_comm *c, int sends, int peer, int sum)
{
    if (c->connected || !ctx_of(dev)->connect_lazily) return BRG_OK;
    unsigned char mine = 1, theirs = 0;
    float zero = 0.0f;
    brg_status st;
    if (sum) {
        st = c->wire.sum(c->wire.ctx, &zero, 1);
    } else if (sends) {
        st = c->wire.send(c->wire.ctx, peer, &mine, 1);
        if (st == BRG_OK) st = c->wire.recv(c->wire.ctx, peer, &theirs, 1);
    } else {
        st = c->wire.recv(c->wire.ctx, peer, &theirs, 1);
        if (st == BRG_OK) st = c->wire.send(c->wire.ctx, peer, &mine, 1);
    }
    if (st != BRG_OK) return brg_error_context(st, "device '%s': connecting a communicator", dev->name);
    c->connected = 1;
    return BRG_OK;
}

static brg_status enqueue_message(brg_device *dev, async_comm *c, work_kind kind, int stream, int peer,
                                  void *const *pieces, const size_t *bytes, int count)
{
    work *w = new_work_pieces(dev, kind, count);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->wire = &c->wire;
    w->peer = peer;
    w->count = count;
    for (int i = 0; i < count; i++) {
        w->pieces[i] = pieces[i];
        w->piece_bytes[i] = bytes[i];
    }
    return enqueue(dev, stream, w);
}

/* What the CUDA backend does with a first message or sum of its own
 * (nccl.c), the twin does with its handshake; without BRG_DEBUG_CONNECT
 * there is nothing to connect. */
static brg_status async_comm_connect(brg_device *dev, void *comm, int rank, brg_comm_use use)
{
    return connect_late(dev, comm, rank == 0, 1 - rank, use == BRG_COMM_SUMS);
}

static brg_status async_comm_send(brg_device *dev, void *comm, brg_stream stream, int peer, void *const *pieces,
                                  const size_t *bytes, int count)
{
    BRG_CHECK(connect_late(dev, comm, 1, peer, 0));
    return enqueue_message(dev, comm, WORK_SEND, (int)stream, peer, pieces, bytes, count);
}

static brg_status async_comm_recv(brg_device *dev, void *comm, int peer, void *const *pieces, const size_t *bytes,
                                  int count)
{
    async_comm *c = comm;
    BRG_CHECK(connect_late(dev, c, 0, peer, 0));
    return enqueue_message(dev, c, WORK_RECV, c->stream, peer, pieces, bytes, count);
}

static brg_status async_comm_sum(brg_device *dev, void *comm, float *values, size_t n)
{
    async_comm *c = comm;
    BRG_CHECK(connect_late(dev, c, 0, 0, 1));
    work *w = new_work(dev, WORK_SUM);
    if (!w) return BRG_ERR_HOST_MEMORY;
    w->wire = &c->wire;
    w->dst = values;
    w->bytes = n;
    return enqueue(dev, c->stream, w);
}

static brg_status async_comm_wait(brg_device *dev, void *comm, const brg_event *ev)
{
    return wait_on(dev, ((async_comm *)comm)->stream, ev);
}

static brg_status async_comm_record(brg_device *dev, void *comm, brg_event *ev)
{
    return record_on(dev, ev, ((async_comm *)comm)->stream);
}

static const brg_device_iface async_iface = {
    /* .backend           = */ BRG_BACKEND_CPU,
    /* .destroy           = */ async_destroy,
    /* .copy_in           = */ async_copy_host,
    /* .copy_out          = */ async_copy_host,
    /* .copy_peer         = */ async_copy_peer,
    /* .memset_zero       = */ async_memset_zero,
    /* .run               = */ async_run,
    /* .workspace_bytes   = */ async_workspace_bytes,
    /* .workspace_wanted  = */ NULL,
    /* .synchronize       = */ async_synchronize,
    /* .pci_bus_id        = */ NULL,
    /* .share_cores       = */ brg_cpu_threads_share,
    /* .restore_cores     = */ brg_cpu_threads_restore,
    /* .event_create      = */ async_event_create,
    /* .event_destroy     = */ async_event_destroy,
    /* .event_record      = */ async_event_record,
    /* .stream_wait       = */ async_stream_wait,
    /* .event_synchronize = */ async_event_synchronize,
    /* .event_elapsed     = */ async_event_elapsed,
    /* .copy_async        = */ async_copy_async,
    /* .copy_prepare      = */ NULL,
    /* .host_alloc        = */ NULL,
    /* .host_free         = */ NULL,
    /* .channel_block     = */ brg_cpu_channel_block,
    /* .comm_id           = */ async_comm_id,
    /* .comm_create       = */ async_comm_create,
    /* .comm_connect      = */ async_comm_connect,
    /* .comm_destroy      = */ async_comm_destroy,
    /* .comm_send         = */ async_comm_send,
    /* .comm_recv         = */ async_comm_recv,
    /* .comm_sum          = */ async_comm_sum,
    /* .comm_wait         = */ async_comm_wait,
    /* .comm_record       = */ async_comm_record,
};

/* A debug switch NAME=1 (or 0, or unset) into *on; what it does, for the
 * message about a bad value. */
static brg_status parse_switch(const char *name, const char *does, int *on)
{
    const char *text = getenv(name);
    *on = text && strcmp(text, "1") == 0;
    if (!text || !*text || *on || strcmp(text, "0") == 0) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s='%s': expected 1 (%s) or 0", name, text, does);
}

/* BRG_DEBUG_DELAYS=MAX_US[:SEED] into *max_us and *seed (0 and 0 when unset). */
static brg_status parse_delays(unsigned *max_us, uint64_t *seed)
{
    *max_us = 0;
    *seed = 0;
    const char *text = getenv("BRG_DEBUG_DELAYS");
    if (!text || !*text) return BRG_OK;
    char *end = NULL;
    errno = 0;
    unsigned long max = strtoul(text, &end, 10);
    int bad = end == text || errno || max > 10000000 || text[0] == '-';
    if (!bad && *end == ':') {
        const char *s = end + 1;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        bad = end == s || errno || s[0] == '-';
        *seed = v;
    }
    if (bad || *end != '\0')
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "BRG_DEBUG_DELAYS='%s': expected MAX_US[:SEED], the most microseconds (at most 10000000) a "
                         "cpu-async stream sleeps before each operation and the seed of its delays, e.g. 200:7",
                         text);
    *max_us = (unsigned)max;
    return BRG_OK;
}

brg_status brg_cpu_async_device_create(size_t capacity, int index, brg_device **out)
{
    *out = NULL;
    unsigned max_us = 0;
    uint64_t seed = 0;
    int drain_on_load = 0;
    BRG_CHECK(parse_delays(&max_us, &seed));
    BRG_CHECK(parse_switch("BRG_DEBUG_LOADS",
                           "the first launch of each op on each shape drains every cpu-async device of the "
                           "process, as CUDA's lazy kernel loading does",
                           &drain_on_load));
    int connect_lazily = 0;
    BRG_CHECK(parse_switch("BRG_DEBUG_CONNECT",
                           "a communicator's first message or sum waits on the host for the peers' first, as "
                           "NCCL's lazy connections do",
                           &connect_lazily));
    char name[32];
    snprintf(name, sizeof name, "cpu-async:%d", index);
    brg_device *dev;
    BRG_CHECK(brg_cpu_device_new(&async_iface, sizeof(async_device), name, capacity, &dev));
    async_device *a = dev->context;
    a->dev = dev;
    a->delay_max_us = max_us;
    int err = pthread_mutex_init(&a->mutex, NULL);
    const int have_mutex = !err;
    if (!err) err = pthread_cond_init(&a->changed, NULL);
    const int have_cond = have_mutex && !err;
    a->delay_seed = seed;
    a->index = index;
    a->connect_lazily = connect_lazily;
    for (int k = 0; k < STREAMS && !err; k++) err = start_stream(a, k, stream_seed(a, k));
    if (err) {
        brg_arena *arena = dev->arena;
        if (have_cond) {
            stop_streams(a);
            pthread_cond_destroy(&a->changed);
        }
        if (have_mutex) pthread_mutex_destroy(&a->mutex);
        brg_cpu_device_release(dev);
        brg_arena_destroy(arena);
        return brg_error(BRG_ERR_HOST_MEMORY, "device '%s': cannot start its streams (%s)", name, strerror(err));
    }
    loads_register(a, drain_on_load);
    *out = dev;
    return BRG_OK;
}
