/* The backend-independent half of devices: suballocation from the arena,
 * argument checks, workspace handling and the syntax of device lists.
 * Creating a device of a backend is the registry's (backends/registry.c). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device-impl.h"
#include "internal.h"

const char *brg_backend_name(brg_backend backend)
{
    switch (backend) {
    case BRG_BACKEND_CPU: return "cpu";
    case BRG_BACKEND_CUDA: return "cuda";
    }
    return "unknown";
}

const char *brg_device_spec_name(const brg_device_spec *spec, int index, char *buf, size_t size)
{
    if (spec->backend == BRG_BACKEND_CUDA && spec->gpu == BRG_GPU_LOCAL && spec->vdev < 0)
        snprintf(buf, size, "cuda:local");
    else if (spec->backend == BRG_BACKEND_CUDA && spec->gpu == BRG_GPU_LOCAL)
        snprintf(buf, size, "cuda:local.%d", spec->vdev);
    else if (spec->backend == BRG_BACKEND_CUDA && spec->vdev < 0)
        snprintf(buf, size, "cuda:%d", spec->gpu);
    else if (spec->backend == BRG_BACKEND_CUDA)
        snprintf(buf, size, "cuda:%d.%d", spec->gpu, spec->vdev);
    else
        snprintf(buf, size, "%s:%d", spec->async ? "cpu-async" : "cpu", index);
    return buf;
}

brg_status brg_device_new(const brg_device_iface *iface, size_t context_bytes, const char *name, size_t capacity,
                          brg_device **out)
{
    *out = NULL;
    char what[64];
    snprintf(what, sizeof what, "device '%s'", name);
    brg_device *dev = brg_calloc(1, sizeof *dev, what);
    snprintf(what, sizeof what, "the backend context of device '%s'", name);
    void *context = dev ? brg_calloc(1, context_bytes, what) : NULL;
    if (!context) {
        free(dev);
        return BRG_ERR_HOST_MEMORY;
    }
    dev->iface = iface;
    dev->context = context;
    snprintf(dev->name, sizeof dev->name, "%s", name);
    brg_status st = brg_arena_create(dev->name, capacity, &dev->arena);
    if (st != BRG_OK) {
        free(context);
        free(dev);
        return st;
    }
    *out = dev;
    return BRG_OK;
}

/* The calling thread's activity and the device it is for (compared, never
 * dereferenced). */
static _Thread_local struct {
    const brg_device *dev;
    char text[BRG_ACTIVITY_MAX];
} thread_activity;

void brg_device_destroy(brg_device *dev)
{
    if (!dev) return;
    brg_arena *arena = dev->arena;
    (void)brg_device_synchronize(dev);
    if (thread_activity.dev == dev) brg_device_set_activity(dev, NULL); /* a later device may get its address */
    brg_event_destroy(dev->copy_reads.fence);
    free(dev->wide_keys);
    dev->iface->destroy(dev); /* frees dev itself */
    brg_arena_destroy(arena);
}

const char *brg_device_name(const brg_device *dev) { return dev->name; }
int brg_device_is_planning(const brg_device *dev) { return dev && dev->planning; }
brg_backend brg_device_backend(const brg_device *dev) { return dev->iface->backend; }
brg_arena *brg_device_arena(brg_device *dev) { return dev->arena; }
size_t brg_device_capacity(const brg_device *dev) { return brg_arena_capacity(dev->arena); }
size_t brg_device_in_use(const brg_device *dev) { return brg_arena_in_use(dev->arena); }
size_t brg_device_peak(const brg_device *dev) { return brg_arena_peak(dev->arena); }

/* Count one call against an armed fault: 1 when this is the one to fail. */
static int fault_due(int64_t *countdown, uint64_t *counter)
{
    ++*counter;
    if (*countdown <= 0) return 0;
    return --*countdown == 0;
}

void brg_device_counts(const brg_device *dev, uint64_t *allocs, uint64_t *copies, uint64_t *runs)
{
    *allocs = dev->n_alloc;
    *copies = dev->n_copy;
    *runs = dev->n_run;
}

uint64_t brg_device_wider_workspaces(const brg_device *dev) { return dev->n_wider; }

void brg_device_set_workspace_ceiling(brg_device *dev, size_t bytes)
{
    if (dev) dev->workspace_ceiling = bytes;
}

size_t brg_device_workspace_ceiling(const brg_device *dev) { return dev ? dev->workspace_ceiling : 0; }

void brg_device_set_fault(brg_device *dev, int64_t alloc, int64_t copy, int64_t run)
{
    dev->fault_alloc = alloc > 0 ? alloc : 0;
    dev->fault_copy = copy > 0 ? copy : 0;
    dev->fault_run = run > 0 ? run : 0;
}

static brg_status injected(const brg_device *dev, brg_status st, const char *what)
{
    return brg_error(st, "device '%s': injected fault in %s", dev->name, what);
}

/* The compute stream waits for every copy queued on the copy stream so
 * far; the ranges those copies read are then free to reuse. */
static brg_status fence_copy_reads(brg_device *dev)
{
    brg_copy_reads *r = &dev->copy_reads;
    if (r->n == 0) return BRG_OK;
    if (!r->fence) BRG_CHECK(brg_event_create(dev, &r->fence));
    BRG_CHECK(brg_event_record(r->fence, BRG_STREAM_COPY));
    BRG_CHECK(brg_device_wait_event(dev, BRG_STREAM_COMPUTE, r->fence));
    r->n = 0;
    return BRG_OK;
}

static int overlaps(size_t a, size_t an, size_t b, size_t bn) { return a < b + bn && b < a + an; }

/* Before a copy-stream read of dev's memory: room to remember its range. */
static brg_status make_room_for_copy_read(brg_device *dev)
{
    return dev->copy_reads.n == BRG_COPY_READS_MAX ? fence_copy_reads(dev) : BRG_OK;
}

/* After it: the range, so that an allocation over it waits for the copy. */
static void note_copy_read(brg_device *dev, const void *src, size_t bytes)
{
    brg_copy_reads *r = &dev->copy_reads;
    r->offset[r->n] = (size_t)((const char *)src - dev->base);
    r->bytes[r->n++] = bytes;
}

/* A block just taken from the arena at offset: once no copy may still
 * read it (the compute stream waits for the copy stream if one may), its
 * address; on failure the block is given back. */
static brg_status claim_block(brg_device *dev, size_t offset, size_t bytes, void **ptr)
{
    const brg_copy_reads *r = &dev->copy_reads;
    for (int i = 0; i < r->n; i++)
        if (overlaps(offset, bytes, r->offset[i], r->bytes[i])) {
            brg_status st = fence_copy_reads(dev);
            if (st != BRG_OK) {
                brg_arena_free(dev->arena, offset);
                return st;
            }
            break;
        }
    *ptr = dev->base + offset;
    return BRG_OK;
}

/* Counts an allocation, and fails it where brg_device_set_fault says. */
static brg_status allocation_due(brg_device *dev, const char *tag)
{
    if (!fault_due(&dev->fault_alloc, &dev->n_alloc)) return BRG_OK;
    char what[96];
    snprintf(what, sizeof what, "the allocation of %s", tag ? tag : "a buffer");
    return injected(dev, BRG_ERR_OUT_OF_MEMORY, what);
}

brg_status brg_device_alloc(brg_device *dev, size_t bytes, const char *tag, void **ptr)
{
    size_t offset = 0;
    *ptr = NULL;
    BRG_CHECK(allocation_due(dev, tag));
    BRG_CHECK(brg_arena_alloc(dev->arena, bytes, tag, &offset));
    return claim_block(dev, offset, bytes, ptr);
}

/* The workspace the backend would like op to have, where that is more than
 * the `need` it plans and the device has a ceiling to lend it under; else 0. */
static size_t wider_wanted(brg_device *dev, const brg_op *op, size_t need)
{
    const size_t wanted = dev->iface->workspace_wanted ? dev->iface->workspace_wanted(dev, op) : 0;
    return wanted > need && dev->workspace_ceiling ? wanted : 0;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211u;
    return h;
}

static uint64_t fnv1a_int(uint64_t h, int64_t v) { return fnv1a(h, &v, sizeof v); }

/* What a backend's choices for op depend on: its kind, whether it adds
 * into its output, its tensors' types, shapes, strides and blocking, and a
 * convolution's stride and padding (the only kinds lent wider today; a
 * kind that comes to be lent wider adds its parameters here). */
static uint64_t op_shape_key(const brg_op *op)
{
    uint64_t h = 14695981039346656037u;
    const int64_t head[] = {op->kind, op->accumulate, op->n_in, op->n_out};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) h = fnv1a_int(h, head[i]);
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < (side ? op->n_out : op->n_in); i++) {
            const brg_tensor *t = side ? op->out[i] : op->in[i];
            if (!t) {
                h = fnv1a_int(h, -1);
                continue;
            }
            h = fnv1a_int(fnv1a_int(fnv1a_int(h, t->dtype), t->ndim), t->block);
            for (int d = 0; d < t->ndim; d++) h = fnv1a_int(fnv1a_int(h, t->shape[d]), t->stride[d]);
        }
    if (op->kind == BRG_OP_CONV2D_FORWARD || op->kind == BRG_OP_CONV2D_BACKWARD_DATA ||
        op->kind == BRG_OP_CONV2D_BACKWARD_FILTER) {
        const brg_conv2d_params *c = &op->p.conv;
        const int64_t conv[] = {c->stride_h, c->stride_w, c->pad_h, c->pad_w};
        for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) h = fnv1a_int(h, conv[i]);
    }
    return h;
}

static int warmed_wide(const brg_device *dev, uint64_t key)
{
    for (int i = 0; i < dev->n_wide_keys; i++)
        if (dev->wide_keys[i] == key) return 1;
    return 0;
}

/* Remember that the warm-up lent key's shape wider. Without host memory
 * for it, the shape is just never lent wider after the warm-up: slower,
 * never wrong. */
static void remember_wide(brg_device *dev, uint64_t key)
{
    if (warmed_wide(dev, key)) return;
    if (dev->n_wide_keys == dev->wide_keys_cap) {
        const int cap = dev->wide_keys_cap ? 2 * dev->wide_keys_cap : 64;
        uint64_t *grown = realloc(dev->wide_keys, (size_t)cap * sizeof *grown);
        if (!grown) return;
        dev->wide_keys = grown;
        dev->wide_keys_cap = cap;
    }
    dev->wide_keys[dev->n_wide_keys++] = key;
}

void brg_device_set_warming(brg_device *dev, int on)
{
    if (!dev) return;
    if (dev->warming && !on) dev->warmed = 1;
    dev->warming = on != 0;
}

int brg_device_warmed_wider(const brg_device *dev) { return dev ? dev->n_wide_keys : 0; }

/* The workspace for op that brg_device_run lends: when `widen`, what the
 * backend would like (wider_wanted) where the bytes in use stay within the
 * device's workspace ceiling (the plan's peak, brg_device_set_workspace_ceiling;
 * none set: never) and a free extent holds it, and, after a warm-up, only
 * for shapes the warm-up lent wider (brg_device_set_warming); else what it
 * needs. *first_wide: lent wider while warming up, the shape's first time.
 * A wider one never raises the peak past the plan's, so plans hold either
 * way, as long as nothing else allocates from the arena while the op holds
 * it: today a device's allocations in a step all come from its one worker
 * thread (exec/executor.c; receive slots are made up front). */
static brg_status lend_workspace(brg_device *dev, const brg_op *op, size_t need, int widen, brg_op *with_ws,
                                 int *first_wide)
{
    char tag[64];
    snprintf(tag, sizeof tag, "%s workspace", brg_op_kind_name(op->kind));
    *with_ws = *op;
    *first_wide = 0;
    BRG_CHECK(allocation_due(dev, tag));
    const size_t wanted = widen ? wider_wanted(dev, op, need) : 0;
    const uint64_t key = wanted && (dev->warming || dev->warmed) ? op_shape_key(op) : 0;
    const int known = key && warmed_wide(dev, key);
    size_t offset = 0;
    int granted = 0;
    if (wanted && (!dev->warmed || dev->warming || known))
        BRG_CHECK(brg_arena_alloc_within(dev->arena, wanted, dev->workspace_ceiling, tag, &offset, &granted));
    if (granted && dev->warming && !known) {
        *first_wide = 1;
        remember_wide(dev, key);
    }
    if (!granted) BRG_CHECK(brg_arena_alloc(dev->arena, need, tag, &offset));
    with_ws->workspace_bytes = granted ? wanted : need;
    BRG_CHECK(claim_block(dev, offset, with_ws->workspace_bytes, &with_ws->workspace));
    dev->n_wider += (uint64_t)granted;
    return BRG_OK;
}

/* op on a workspace lent by lend_workspace, freed after. */
static brg_status run_lent(brg_device *dev, const brg_op *op, size_t need, int widen, int *first_wide)
{
    brg_op with_ws;
    BRG_CHECK(lend_workspace(dev, op, need, widen, &with_ws, first_wide));
    const brg_status st = dev->iface->run(dev, &with_ws);
    brg_device_free(dev, with_ws.workspace);
    return st;
}

brg_status brg_device_free(brg_device *dev, void *ptr)
{
    if (!ptr) return BRG_OK;
    char *p = ptr;
    if (p < dev->base || p >= dev->base + brg_arena_capacity(dev->arena))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': pointer %p does not belong to its arena",
                         dev->name, ptr);
    return brg_arena_free(dev->arena, (size_t)(p - dev->base));
}

/* A pointer range must lie inside the device's slab. Host pointers passed as
 * device memory are the commonest misuse, and on a GPU they would fault. */
static brg_status check_range(const brg_device *dev, const void *ptr, size_t bytes, const char *what)
{
    const char *p = ptr;
    size_t cap = brg_arena_capacity(dev->arena);
    if (!ptr || p < dev->base || p > dev->base + cap || bytes > (size_t)(dev->base + cap - p))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': %s range %p + %zu bytes is not in its memory",
                         dev->name, what, ptr, bytes);
    return BRG_OK;
}

brg_status brg_device_host_alloc(brg_device *dev, size_t bytes, void **ptr)
{
    if (!ptr) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_device_host_alloc: ptr is NULL");
    *ptr = NULL;
    if (!dev) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_device_host_alloc: no device");
    const size_t size = bytes ? bytes : 1;
    if (dev->iface->host_alloc) return dev->iface->host_alloc(dev, size, ptr);
    const size_t rounded = (size + BRG_ARENA_ALIGN - 1) / BRG_ARENA_ALIGN * BRG_ARENA_ALIGN;
    *ptr = aligned_alloc(BRG_ARENA_ALIGN, rounded);
    if (!*ptr)
        return brg_error(BRG_ERR_HOST_MEMORY, "%s: %zu bytes of host memory for copies", dev->name, bytes);
    return BRG_OK;
}

void brg_device_host_free(brg_device *dev, void *ptr)
{
    if (!ptr || !dev) return;
    if (dev->iface->host_free) dev->iface->host_free(dev, ptr);
    else free(ptr);
}

int brg_device_host_pinned(const brg_device *dev) { return dev && dev->iface->host_alloc != NULL; }

brg_status brg_device_copy_in(brg_device *dev, void *dst, const void *host_src, size_t bytes)
{
    if (bytes == 0) return BRG_OK;
    BRG_CHECK(check_range(dev, dst, bytes, "copy destination"));
    if (fault_due(&dev->fault_copy, &dev->n_copy)) return injected(dev, BRG_ERR_BACKEND, "a copy in");
    dev->host_bytes += bytes;
    return dev->iface->copy_in(dev, dst, host_src, bytes);
}

brg_status brg_device_copy_out(brg_device *dev, void *host_dst, const void *src, size_t bytes)
{
    if (bytes == 0) return BRG_OK;
    BRG_CHECK(check_range(dev, src, bytes, "copy source"));
    if (fault_due(&dev->fault_copy, &dev->n_copy)) return injected(dev, BRG_ERR_BACKEND, "a copy out");
    dev->host_bytes += bytes;
    return dev->iface->copy_out(dev, host_dst, src, bytes);
}

static brg_status check_copy_between(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                                     size_t bytes)
{
    BRG_CHECK(check_range(dst_dev, dst, bytes, "copy destination"));
    BRG_CHECK(check_range(src_dev, src, bytes, "copy source"));
    if (dst_dev->planning != src_dev->planning)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "cannot copy from device '%s' to device '%s': a planning device has no memory to copy "
                         "to or from a real one", src_dev->name, dst_dev->name);
    if (fault_due(&src_dev->fault_copy, &src_dev->n_copy))
        return injected(src_dev, BRG_ERR_BACKEND, "a copy between devices");
    return BRG_OK;
}

/* Across backends: through host memory, finished on return. */
static brg_status copy_staged(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    void *host = brg_malloc(bytes, "a staged copy between backends");
    if (!host) return BRG_ERR_HOST_MEMORY;
    src_dev->host_bytes += bytes;
    dst_dev->host_bytes += bytes;
    brg_status st = src_dev->iface->copy_out(src_dev, host, src, bytes);
    if (st == BRG_OK) st = dst_dev->iface->copy_in(dst_dev, dst, host, bytes);
    free(host);
    return st;
}

brg_status brg_device_copy_between(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                                   size_t bytes)
{
    if (bytes == 0) return BRG_OK;
    BRG_CHECK(check_copy_between(dst_dev, dst, src_dev, src, bytes));
    if (dst_dev->iface->backend == src_dev->iface->backend)
        return dst_dev->iface->copy_peer(dst_dev, dst, src_dev, src, bytes);
    return copy_staged(dst_dev, dst, src_dev, src, bytes);
}

brg_status brg_device_copy_async(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                                 size_t bytes)
{
    if (bytes == 0) return BRG_OK;
    BRG_CHECK(check_copy_between(dst_dev, dst, src_dev, src, bytes));
    if (dst_dev->iface != src_dev->iface) return copy_staged(dst_dev, dst, src_dev, src, bytes);
    if (!src_dev->iface->copy_async) return src_dev->iface->copy_peer(dst_dev, dst, src_dev, src, bytes);
    BRG_CHECK(make_room_for_copy_read(src_dev));
    BRG_CHECK(src_dev->iface->copy_async(dst_dev, dst, src_dev, src, bytes));
    note_copy_read(src_dev, src, bytes);
    return BRG_OK;
}

brg_status brg_device_copy_prepare(brg_device *dst_dev, brg_device *src_dev)
{
    if (dst_dev == src_dev || dst_dev->iface != src_dev->iface || !src_dev->iface->copy_prepare) return BRG_OK;
    return src_dev->iface->copy_prepare(dst_dev, src_dev);
}

/* ---- communicators between processes ---- */

struct brg_comm {
    brg_device *dev;
    void *impl;
};

int brg_device_has_comm(const brg_device *dev) { return dev && dev->iface->comm_create != NULL; }

static brg_status no_comm(const brg_device *dev)
{
    return brg_error(BRG_ERR_UNSUPPORTED, "device '%s' has no communicators between processes (cpu-async devices "
                     "have them, and CUDA devices where brigade was built with NCCL)", dev->name);
}

brg_status brg_comm_make_id(brg_device *dev, unsigned char *id)
{
    if (!brg_device_has_comm(dev)) return no_comm(dev);
    return dev->iface->comm_id(dev, id);
}

brg_status brg_comm_create(brg_device *dev, const unsigned char *id, int ranks, int rank, brg_comm_use use,
                           const brg_wire *wire, brg_comm **out)
{
    *out = NULL;
    if (!brg_device_has_comm(dev)) return no_comm(dev);
    if (ranks < 1 || rank < 0 || rank >= ranks || (use != BRG_COMM_MESSAGES && use != BRG_COMM_SUMS) ||
        (use == BRG_COMM_MESSAGES && ranks != 2))
        return brg_error(BRG_ERR_INTERNAL, "a communicator's member %d of %d, for %s", rank, ranks,
                         use == BRG_COMM_MESSAGES ? "messages" : "sums");
    brg_comm *c = brg_calloc(1, sizeof *c, "a communicator");
    if (!c) return BRG_ERR_HOST_MEMORY;
    c->dev = dev;
    brg_status st = dev->iface->comm_create(dev, id, ranks, rank, wire, &c->impl);
    if (st != BRG_OK) {
        free(c);
        return st;
    }
    /* Connected now, while every rank makes its communicators in one
     * order, not at the first message, in a step (docs/distributed.md,
     * "Connections"). */
    if (ranks > 1) st = dev->iface->comm_connect(dev, c->impl, rank, use);
    if (st != BRG_OK) {
        brg_comm_destroy(c);
        return st;
    }
    *out = c;
    return BRG_OK;
}

void brg_comm_destroy(brg_comm *c)
{
    if (!c) return;
    c->dev->iface->comm_destroy(c->dev, c->impl);
    free(c);
}

/* Sends and receives count as copies for the fault hooks. */
static brg_status comm_copy_fault(brg_device *dev, const char *what)
{
    return fault_due(&dev->fault_copy, &dev->n_copy) ? injected(dev, BRG_ERR_BACKEND, what) : BRG_OK;
}

brg_status brg_comm_send(brg_comm *c, brg_stream stream, int peer, void *const *pieces, const size_t *bytes,
                         int count)
{
    brg_device *dev = c->dev;
    for (int i = 0; i < count; i++) BRG_CHECK(check_range(dev, pieces[i], bytes[i], "a message's piece"));
    BRG_CHECK(comm_copy_fault(dev, "a send to another process"));
    if (stream == BRG_STREAM_COPY) BRG_CHECK(make_room_for_copy_read(dev));
    BRG_CHECK(dev->iface->comm_send(dev, c->impl, stream, peer, pieces, bytes, count));
    if (stream != BRG_STREAM_COPY || count < 1) return BRG_OK;
    /* One range over every piece: an allocation in the gaps between them
     * waits for the send too, which costs at most that wait. */
    const char *lo = pieces[0], *hi = (const char *)pieces[0] + bytes[0];
    for (int i = 1; i < count; i++) {
        const char *p = pieces[i];
        if (p < lo) lo = p;
        if (p + bytes[i] > hi) hi = p + bytes[i];
    }
    note_copy_read(dev, lo, (size_t)(hi - lo));
    return BRG_OK;
}

brg_status brg_comm_recv(brg_comm *c, int peer, void *const *pieces, const size_t *bytes, int count)
{
    brg_device *dev = c->dev;
    for (int i = 0; i < count; i++) BRG_CHECK(check_range(dev, pieces[i], bytes[i], "a message's piece"));
    BRG_CHECK(comm_copy_fault(dev, "a receive from another process"));
    return dev->iface->comm_recv(dev, c->impl, peer, pieces, bytes, count);
}

brg_status brg_comm_sum(brg_comm *c, float *values, size_t n)
{
    BRG_CHECK(check_range(c->dev, values, n * sizeof *values, "a sum's values"));
    return c->dev->iface->comm_sum(c->dev, c->impl, values, n);
}

brg_status brg_comm_wait_event(brg_comm *c, const brg_event *ev)
{
    if (!ev->recorded) return BRG_OK; /* nothing to wait for, as in CUDA */
    if (ev->dev->iface != c->dev->iface) return brg_event_synchronize((brg_event *)ev);
    return c->dev->iface->comm_wait(c->dev, c->impl, ev);
}

brg_status brg_comm_record_event(brg_comm *c, brg_event *ev)
{
    if (ev->dev != c->dev)
        return brg_error(BRG_ERR_INTERNAL, "recording an event of device '%s' on a communicator of '%s'",
                         ev->dev->name, c->dev->name);
    BRG_CHECK(c->dev->iface->comm_record(c->dev, c->impl, ev));
    ev->recorded++;
    return BRG_OK;
}

uint64_t brg_device_host_bytes(const brg_device *dev) { return dev->host_bytes; }

void brg_device_set_activity(const brg_device *dev, const char *what)
{
    thread_activity.dev = what && what[0] ? dev : NULL;
    snprintf(thread_activity.text, sizeof thread_activity.text, "%s", what ? what : "");
}

const char *brg_device_activity(const brg_device *dev)
{
    return dev && thread_activity.dev == dev ? thread_activity.text : "";
}

/* ---- events ---- */

int brg_device_is_async(const brg_device *dev) { return dev->iface->event_record != NULL; }

brg_status brg_event_create(brg_device *dev, brg_event **out)
{
    *out = NULL;
    brg_event *ev = brg_calloc(1, sizeof *ev, "an event");
    if (!ev) return BRG_ERR_HOST_MEMORY;
    ev->dev = dev;
    if (dev->iface->event_create) {
        brg_status st = dev->iface->event_create(dev, ev);
        if (st != BRG_OK) {
            free(ev);
            return st;
        }
    }
    *out = ev;
    return BRG_OK;
}

void brg_event_destroy(brg_event *ev)
{
    if (!ev) return;
    if (ev->dev->iface->event_destroy) ev->dev->iface->event_destroy(ev->dev, ev);
    free(ev);
}

brg_status brg_event_record(brg_event *ev, brg_stream stream)
{
    brg_device *dev = ev->dev;
    if (dev->iface->event_record) BRG_CHECK(dev->iface->event_record(dev, ev, stream));
    else ev->host_time = brg_now_seconds();
    ev->recorded++;
    return BRG_OK;
}

brg_status brg_device_wait_event(brg_device *dev, brg_stream stream, const brg_event *ev)
{
    if (!ev->recorded) return BRG_OK; /* nothing to wait for, as in CUDA */
    if (ev->dev->iface == dev->iface) {
        if (!dev->iface->stream_wait) return BRG_OK;
        return dev->iface->stream_wait(dev, stream, ev);
    }
    return brg_event_synchronize((brg_event *)ev);
}

brg_status brg_event_synchronize(brg_event *ev)
{
    if (!ev->recorded || !ev->dev->iface->event_synchronize) return BRG_OK;
    return ev->dev->iface->event_synchronize(ev->dev, ev);
}

brg_status brg_event_elapsed(const brg_event *from, const brg_event *to, double *seconds)
{
    *seconds = 0.0;
    if (from->dev != to->dev || !from->recorded || !to->recorded)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "event times: two recorded events of one device are needed");
    if (from->dev->iface->event_elapsed) return from->dev->iface->event_elapsed(from->dev, from, to, seconds);
    *seconds = to->host_time - from->host_time;
    return BRG_OK;
}

brg_status brg_device_memset_zero(brg_device *dev, void *dst, size_t bytes)
{
    if (bytes == 0) return BRG_OK;
    BRG_CHECK(check_range(dev, dst, bytes, "memset destination"));
    return dev->iface->memset_zero(dev, dst, bytes);
}

/* Every tensor of an op must live in dev's memory. */
static brg_status check_op_tensors(const brg_device *dev, const brg_op *op)
{
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const brg_tensor *t = i < op->n_in ? op->in[i] : op->out[i - op->n_in];
        if (!t) continue;
        if (t->block && !dev->iface->channel_block)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s on device '%s': %s tensor %d is blocked by %d channels, and this "
                             "device reads plain NCHW only", brg_op_kind_name(op->kind), dev->name,
                             i < op->n_in ? "input" : "output", i < op->n_in ? i : i - op->n_in, t->block);
        const char *p = t->data;
        size_t bytes = brg_tensor_bytes(t);
        size_t cap = brg_arena_capacity(dev->arena);
        if (bytes && (p < dev->base || p > dev->base + cap || bytes > (size_t)(dev->base + cap - p)))
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s on device '%s': %s tensor %d is not in its memory",
                             brg_op_kind_name(op->kind), dev->name, i < op->n_in ? "input" : "output",
                             i < op->n_in ? i : i - op->n_in);
    }
    return BRG_OK;
}

brg_status brg_device_workspace_bytes(brg_device *dev, const brg_op *op, size_t *bytes)
{
    *bytes = 0;
    BRG_CHECK(brg_op_validate(op));
    if (dev->iface->workspace_bytes) *bytes = dev->iface->workspace_bytes(dev, op);
    return BRG_OK;
}

int brg_device_channel_block(brg_device *dev)
{
    return dev && dev->iface->channel_block ? dev->iface->channel_block(dev) : 0;
}

brg_status brg_device_run(brg_device *dev, const brg_op *op)
{
    BRG_CHECK(brg_op_validate(op));
    BRG_CHECK(check_op_tensors(dev, op));
    if (fault_due(&dev->fault_run, &dev->n_run)) {
        char what[96];
        snprintf(what, sizeof what, "the launch of %s", brg_op_kind_name(op->kind));
        return injected(dev, BRG_ERR_BACKEND, what);
    }
    size_t need = dev->iface->workspace_bytes ? dev->iface->workspace_bytes(dev, op) : 0;
    if (need == 0 || (op->workspace && op->workspace_bytes >= need)) return dev->iface->run(dev, op);
    if (op->workspace)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "%s on device '%s' needs %zu bytes of workspace, given %zu",
                         brg_op_kind_name(op->kind), dev->name, need, op->workspace_bytes);
    int first_wide = 0;
    BRG_CHECK(run_lent(dev, op, need, 1, &first_wide));
    /* Warming up, a shape lent wider for the first time runs at the planned
     * size too, which a step may lend it (brg_device_set_warming). */
    if (first_wide) BRG_CHECK(run_lent(dev, op, need, 0, &first_wide));
    return BRG_OK;
}

brg_status brg_device_synchronize(brg_device *dev)
{
    brg_status st = dev->iface->synchronize ? dev->iface->synchronize(dev) : BRG_OK;
    if (st == BRG_OK) dev->copy_reads.n = 0; /* every copy has finished */
    return st;
}

void brg_devices_share_cores(brg_device *const *devs, int n, brg_core_share *saved)
{
    saved->n = 0;
    for (int i = 0; i < n; i++) {
        const brg_device_iface *iface = devs[i]->iface;
        if (!iface->share_cores || devs[i]->planning) continue;
        int seen = 0, count = 0;
        for (int k = 0; k < i; k++) seen |= devs[k]->iface->share_cores == iface->share_cores && !devs[k]->planning;
        if (seen || saved->n == BRG_CORE_SHARE_MAX) continue;
        for (int k = i; k < n; k++) count += devs[k]->iface->share_cores == iface->share_cores && !devs[k]->planning;
        saved->restore[saved->n] = iface->restore_cores;
        saved->saved[saved->n++] = iface->share_cores(count);
    }
}

void brg_devices_restore_cores(const brg_core_share *saved)
{
    for (int i = 0; i < saved->n; i++) saved->restore[i](saved->saved[i]);
}

/* ---- device lists ---- */


/* "[Nx]SIZE" at p (inside item, which messages quote). */
static brg_status parse_count_size(const char *item, const char *p, size_t *capacity, long *count)
{
    *count = 1;
    const char *x = strchr(p, 'x');
    if (x) {
        char *end = NULL;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end != x || errno || p == x)
            return brg_error(BRG_ERR_INVALID_ARGUMENT,
                             "device '%s': expected COUNTxSIZE such as 4x8MiB, or a single SIZE", item);
        if (n <= 0 || n > 1024)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': the count must be between 1 and 1024", item);
        *count = n;
        p = x + 1;
    }
    brg_status st = brg_parse_bytes(p, capacity);
    if (st != BRG_OK) return brg_error_context(st, "device '%s'", item);
    if (*capacity < BRG_ARENA_ALIGN)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': a device needs at least %zu bytes", item,
                         BRG_ARENA_ALIGN);
    return BRG_OK;
}

/* A GPU ordinal: decimal digits only, at most BRG_DEVICE_MAX_GPU. Returns the ordinal
 * and sets *end past it, or -1 when p does not start with a digit. */
static int parse_ordinal(const char *p, const char **end)
{
    if (!isdigit((unsigned char)*p)) return -1;
    long g = 0;
    while (isdigit((unsigned char)*p) && g <= BRG_DEVICE_MAX_GPU) g = g * 10 + (*p++ - '0');
    while (isdigit((unsigned char)*p)) p++;
    *end = p;
    return g > BRG_DEVICE_MAX_GPU ? BRG_DEVICE_MAX_GPU + 1 : (int)g;
}

/* "@CARD" at p, after a whole GPU (inside item, which messages quote): the
 * memory of the card it stands for, as CUDA counts it, so that a
 * machine without the GPU can size it (the registry takes the reserve off). */
static brg_status parse_card(const char *item, const char *p, size_t *card)
{
    if (strchr(p, ':'))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': nothing may follow the card's memory (@CARD): a "
                         "card is a whole GPU; carve virtual devices with cuda:GPU:[Nx]SIZE instead", item);
    brg_status st = brg_parse_bytes(p + 1, card);
    if (st != BRG_OK) return brg_error_context(st, "device '%s': after '@', the card's memory (e.g. @12GiB)", item);
    return BRG_OK;
}

/* Whole GPUs at p, with p at an ordinal: "G", a range "A-B", either with
 * "@CARD". Sets the first ordinal, the count and the card; *end past the
 * ordinals (at '\0', or at ':' where virtual devices follow a single one). */
static brg_status parse_whole(const char *item, const char *p, int *first, long *count, size_t *card,
                              const char **end)
{
    int a = parse_ordinal(p, end), b = a;
    if (**end == '-') {
        b = parse_ordinal(*end + 1, end);
        if (b < 0)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': expected a range of GPUs such as cuda:0-6", item);
    }
    /* Before the direction: an ordinal over the top reads as the top + 1 ("cuda:99-3" is not "64 to 3"). */
    if (a > BRG_DEVICE_MAX_GPU || b > BRG_DEVICE_MAX_GPU)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': GPU ordinals go from 0 to %d", item,
                         BRG_DEVICE_MAX_GPU);
    if (b < a)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': the range of GPUs runs backwards (%d to %d)", item,
                         a, b);
    *first = a;
    *count = b - a + 1;
    *card = 0;
    if (**end == '@') {
        BRG_CHECK(parse_card(item, *end, card));
        *end += strlen(*end);
    }
    return BRG_OK;
}

/* The message for a "cuda:" item of no known form. */
static brg_status not_cuda_item(const char *item)
{
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "device '%s': expected cuda:GPU (a whole GPU, e.g. cuda:0) or cuda:A-B (GPUs A to B), either "
                     "with @CARD for cards of that memory (e.g. cuda:0-6@12GiB), cuda:GPU:[Nx]SIZE (virtual devices, "
                     "e.g. cuda:0:7x12GiB) or cuda:local[:[Nx]SIZE|@CARD] (each rank's own GPU)",
                     item);
}

/* Whether a bare item after a whole GPU names more whole GPUs ("1", "2-4",
 * "5@24GiB"), rather than CPU devices ("4x8MiB"). */
static int continues_whole(const char *p)
{
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == '-' && isdigit((unsigned char)p[1]))
        for (p++; isdigit((unsigned char)*p);) p++;
    return *p == '\0' || *p == '@';
}

/* One item of a list. *whole_list says whether the previous item was a
 * whole GPU, after which a bare ordinal (or range) names more whole GPUs;
 * it is updated for the next item. *gpu_step is 1 where the item's *count
 * devices are whole GPUs one ordinal apart (a range), 0 where they are
 * copies. Whole GPUs get capacity 0 here (their card, if named, in card),
 * virtual devices vdev 0 and CUDA devices no convolution workspace budget:
 * the registry completes them (backends/registry.c). */
static brg_status parse_item(const char *item, int *whole_list, brg_device_spec *spec, long *count, int *gpu_step)
{
    const char *p = item, *end = NULL;
    memset(spec, 0, sizeof *spec);
    spec->backend = BRG_BACKEND_CPU;
    spec->gpu = -1;
    *gpu_step = 0;
    int was_whole = *whole_list;
    *whole_list = 0;
    int g = -1;
    *count = 1;
    if (strncmp(p, "cuda:local", 10) == 0 && (p[10] == '\0' || p[10] == ':' || p[10] == '@')) {
        g = BRG_GPU_LOCAL;
        end = p + 10;
        if (*end == '@') {
            BRG_CHECK(parse_card(item, end, &spec->card));
            end += strlen(end);
        }
    } else if (strncmp(p, "cuda:", 5) == 0 || (was_whole && continues_whole(p))) {
        /* "cuda:0,1,2": a bare ordinal continues the list of whole GPUs. */
        const int bare = strncmp(p, "cuda:", 5) != 0;
        const char *q = bare ? p : p + 5;
        if (!isdigit((unsigned char)*q)) return not_cuda_item(item);
        BRG_CHECK(parse_whole(item, q, &g, count, &spec->card, &end));
        if (*end != '\0' && (*end != ':' || bare || *count > 1 || spec->card))
            return not_cuda_item(item);
        *gpu_step = 1;
    } else {
        if (continues_whole(p) && strpbrk(p, "@-")) /* "4x8MiB,1-3": no whole GPU before it to continue */
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': a bare GPU ordinal or range continues only a "
                             "list of whole GPUs (cuda:0,1-3@12GiB); write cuda:%s", item, item);
        if (strncmp(p, "cpu:", 4) == 0) {
            p += 4;
        } else if (strncmp(p, "cpu-async:", 10) == 0) {
            p += 10;
            spec->async = 1;
        } else if (isalpha((unsigned char)p[0]) && strchr(p, ':')) {
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': unknown backend (known: cpu, cpu-async, cuda)",
                             item);
        }
        return parse_count_size(item, p, &spec->capacity, count);
    }
    spec->backend = BRG_BACKEND_CUDA;
    spec->gpu = g;
    if (*end == '\0') {
        spec->vdev = -1;
        *whole_list = 1;
        return BRG_OK;
    }
    *gpu_step = 0;
    return parse_count_size(item, end + 1, &spec->capacity, count);
}

brg_status brg_device_spec_parse_syntax(const char *text, brg_device_spec *specs, int max, int *count)
{
    *count = 0;
    if (!text || !*text)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "empty device list: expected e.g. 4x8MiB, 2x24GiB,5x12GiB, cuda:0,1 or cuda:0:7x12GiB");
    char *copy = brg_malloc(strlen(text) + 1, "a device list");
    if (!copy) return BRG_ERR_HOST_MEMORY;
    strcpy(copy, text);
    brg_status st = BRG_OK;
    int n = 0, whole_list = 0, index = 0;
    /* Split by hand, not with strtok_r, which would skip an empty item: a
     * doubled or trailing comma is a typo to report, not to drop. */
    for (char *item = copy, *next; item; item = next) {
        next = strchr(item, ',');
        if (next) *next++ = '\0';
        index++;
        while (isspace((unsigned char)*item)) item++;
        size_t len = strlen(item);
        while (len && isspace((unsigned char)item[len - 1])) item[--len] = '\0';
        if (!*item) {
            st = brg_error(BRG_ERR_INVALID_ARGUMENT,
                           "device list '%s': item %d is empty (a doubled, leading or trailing comma?)", text, index);
            goto fail;
        }
        brg_device_spec spec;
        long k = 0;
        int gpu_step = 0;
        BRG_CHECK_GOTO(parse_item(item, &whole_list, &spec, &k, &gpu_step), st, fail);
        if (n + k > max) {
            st = brg_error(BRG_ERR_INVALID_ARGUMENT, "device list '%s' names more than %d device%s", text, max,
                           max == 1 ? "" : "s");
            goto fail;
        }
        for (long i = 0; i < k; i++, spec.gpu += gpu_step) specs[n++] = spec;
    }
    if (n == 0) {
        st = brg_error(BRG_ERR_INVALID_ARGUMENT, "device list '%s' names no device", text);
        goto fail;
    }
    if (index > 1) /* cuda:local names one rank's devices, not a list's */
        for (int i = 0; i < n; i++)
            if (specs[i].gpu == BRG_GPU_LOCAL) {
                st = brg_error(BRG_ERR_INVALID_ARGUMENT, "device list '%s': cuda:local names each rank's own GPU and "
                               "stands alone (e.g. --devices cuda:local or cuda:local:2x12GiB)", text);
                goto fail;
            }
    *count = n;
exit:
    free(copy);
    return st;
fail:
    goto exit;
}

brg_status brg_kernel_run(const brg_kernel *table, brg_device *dev, const brg_op *op)
{
    const brg_kernel k = (int)op->kind >= 0 && op->kind < BRG_OP_KIND_COUNT ? table[op->kind] : NULL;
    if (!k)
        return brg_error(BRG_ERR_UNSUPPORTED, "device '%s': the %s backend has no kernel for %s", dev->name,
                         brg_backend_name(dev->iface->backend), brg_op_kind_name(op->kind));
    return k(dev, op);
}

/* Tensors whose memory comes from a device's arena (brigade/tensor.h):
 * here, beside the allocator, so that tensors stay plain values. */
brg_status brg_tensor_alloc(brg_device *dev, brg_dtype dtype, int ndim, const int64_t *shape, const char *tag,
                            brg_tensor *out)
{
    BRG_CHECK(brg_tensor_init(out, NULL, dtype, ndim, shape, dev));
    void *p = NULL;
    brg_status st = brg_device_alloc(dev, brg_tensor_bytes(out), tag, &p);
    if (st != BRG_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    out->data = p;
    return BRG_OK;
}

void brg_tensor_free(brg_tensor *t)
{
    if (!t) return;
    if (t->device && t->data) brg_device_free(t->device, t->data);
    t->data = NULL;
}
