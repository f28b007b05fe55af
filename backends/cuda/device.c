/* The CUDA backend: a device is one capped slab of memory on a GPU.
 *
 * Memory: the slab is ONE cudaMalloc of the device's capacity, made when
 * the device is created; the arena (base/device.c) suballocates it, so a
 * device never holds more than its cap and the planner's numbers are the
 * ones the GPU sees. Several devices may share a GPU ("cuda:0:7x12GiB"),
 * each with its own slab, streams and library handles.
 *
 * Streams: each device has a compute stream and a copy stream, both
 * non-blocking (base/device-impl.h says what goes where). Ops, memsets,
 * copies within the device and copies from and to the host run on the
 * compute stream, in order with each other. Copies to other devices
 * (copy_async) run on the source's copy stream, ordered by the caller's
 * events (event_record, stream_wait); brg_device_alloc makes the compute
 * stream wait for the copy stream before it reuses memory a copy may still
 * read (base/device.c, brg_copy_reads).
 *
 * Events: a brg_event's impl is a cudaEvent_t made on its device's GPU,
 * with timing (event_elapsed needs it), recorded only on its own device's
 * streams (cudaEventRecord wants the event and the stream in one context).
 * Any device's stream may wait for it, on any GPU (cudaStreamWaitEvent
 * allows an event of another device). A wait sees the records made before
 * it was queued: the caller orders record and wait across threads.
 *
 * Copies between devices, asynchronous (copy_async, on the source's copy
 * stream): one GPU -> cudaMemcpyAsync device to device; two GPUs with peer
 * access -> cudaMemcpyPeerAsync, peer access enabled once per pair;
 * otherwise staged through two pinned host buffers of the source device in
 * chunks, double-buffered and ordered by events alone, with no host wait
 * (staged_async below). copy_peer between two devices is the slow,
 * synchronous path: it waits for both devices' queued work, copies the
 * same way and waits for the copy; within one device it is a
 * cudaMemcpyAsync on the compute stream.
 *
 * Every CUDA call is checked (cuda-check.h) and its message gets the
 * device's name; failures found when waiting (synchronize,
 * event_synchronize) also name what the calling thread was doing on the
 * device (brg_device_activity).
 * Every entry point makes the device's GPU current first and gives the
 * calling thread its own current GPU back on the way out: the executor
 * calls a device from its own worker thread.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "cuda-device.h"

#if defined(BRG_HAVE_CUDA) && defined(BRG_HAVE_CUDNN)

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "cuda-check.h"
#include "cuda-exec.h"
#include "cuda-kernels.h"
#include "cuda-ops.h"
#include "stage-ring.h"
#ifdef BRG_HAVE_NCCL
#include "nccl-comm.h"
#endif

/* Pinned staging of copy_in, in chunks of STAGE_BYTES: made with the
 * device, never during a step, since pinning (and unpinning) host memory
 * synchronizes the GPU, and NCCL's kernels may be waiting for a peer
 * then (docs/distributed.md, "Lazy kernel loading"). A ring: each copy
 * takes the next free bytes, and the host waits only when it comes round
 * to bytes a DMA still reads (or BRG_STAGE_RING_SLOTS chunks are in
 * flight), not for every copy before it; the small copies of a step
 * (BatchNorm's statistics, a loss scale) never wait. stage-ring.h is the
 * schedule. */
#define STAGE_BYTES ((size_t)32 << 20)
/* Staged copies between GPUs: two pinned buffers of XFER_CHUNK each. */
#define XFER_CHUNK ((size_t)8 << 20)
#define MAX_GPUS 64

/* Where a staged copy to one GPU runs its host -> device halves: a stream
 * on that GPU and an event per buffer recorded on it after the chunk that
 * read the buffer. The source device's own, so that no other device's
 * streams carry its work (made on the destination GPU, as
 * cudaEventRecord needs the event in the stream's context). */
typedef struct xfer_lane {
    cudaStream_t stream;
    cudaEvent_t read[2];
} xfer_lane;

typedef struct cuda_context {
    int gpu;
    size_t conv_budget;
    int conv_grow; /* brg_cuda_conv_workspace_grows() when made */
    cudaStream_t compute, copy;
    brg_cuda_exec *exec;
    /* Pinned host buffer for copy_in, a ring (under stage_lock): the
     * chunks in flight (stage-ring.h), the one in slot k reading its bytes
     * until staged_done[k], recorded on the compute stream after its DMA,
     * has passed. */
    pthread_mutex_t stage_lock;
    void *stage;
    brg_stage_ring ring;
    cudaEvent_t staged_done[BRG_STAGE_RING_SLOTS];
    /* Host memory from brg_device_host_alloc (under stage_lock): copy_in
     * DMAs from it directly, with no staging and no wait. */
    struct pinned_range {
        const char *p;
        size_t n;
    } *pinned;
    int n_pinned, cap_pinned;
    /* Staged copies from this device to GPUs without peer access: two
     * pinned buffers (cudaHostAlloc, host memory outside the arena),
     * made at the first staged copy; xfer_out is recorded on the copy
     * stream after each device -> host chunk; lanes[g] serves GPU g. Only
     * this device's driver thread calls copy_async for it, but copy_peer may
     * come from any thread, hence the lock. */
    pthread_mutex_t xfer_lock;
    void *xfer[2];
    cudaEvent_t xfer_out;
    xfer_lane *lanes[MAX_GPUS];
} cuda_context;

static const brg_device_iface cuda_iface;

brg_cuda_exec *brg_cuda_exec_of(brg_device *dev) { return ((cuda_context *)dev->context)->exec; }

/* Peer access between GPU pairs, for the whole process: 0 not asked yet,
 * 1 direct (enabled both ways), 2 staged through the host. force_staged
 * (-1: not read from BRG_CUDA_FORCE_STAGED yet) makes every pair, one GPU
 * with itself included, staged. Both under peer_lock. */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static signed char peer_mode_table[MAX_GPUS][MAX_GPUS];
static int force_staged = -1;

/* Caller holds peer_lock. */
static int staged_forced_locked(void)
{
    if (force_staged < 0) {
        const char *v = getenv("BRG_CUDA_FORCE_STAGED");
        force_staged = v && strcmp(v, "1") == 0;
    }
    return force_staged;
}

void brg_cuda_force_staged(int on)
{
    pthread_mutex_lock(&peer_lock);
    force_staged = on != 0;
    pthread_mutex_unlock(&peer_lock);
}

/* Put the device's name in front of a failure's message. */
static brg_status named(const brg_device *dev, brg_status st)
{
    return st == BRG_OK ? st : brg_error_context(st, "device '%s'", dev->name);
}

/* A failure returned by a wait (cudaStreamSynchronize,
 * cudaEventSynchronize) belongs to work queued before it, maybe long
 * before: name the device and what it was doing. */
static brg_status async_fail(const brg_device *dev, const char *call, cudaError_t err)
{
    (void)cudaGetLastError();
    const char *activity = brg_device_activity(dev);
    if (activity[0])
        return brg_error(BRG_ERR_BACKEND, "device '%s': an asynchronous CUDA error in or before %.96s: %s (%s), "
                         "reported by %s", dev->name, activity, cudaGetErrorString(err), cudaGetErrorName(err),
                         call);
    return brg_error(BRG_ERR_BACKEND, "device '%s': an asynchronous CUDA error in the work queued so far: %s (%s), "
                     "reported by %s", dev->name, cudaGetErrorString(err), cudaGetErrorName(err), call);
}

/* Every entry point below leaves the calling thread's current GPU as it
 * found it, so a caller's own CUDA code (or PyTorch's) keeps working on its
 * device after a brigade call: current_gpu at entry, restore_gpu on the way
 * out, whatever the status. A thread that had no GPU (an executor's
 * worker, a rank's main thread) keeps the device's: setting GPU 0 back
 * would give every rank of a node a context on GPU 0. */
static int current_gpu(void)
{
    return brg_cuda_thread_gpu();
}

static brg_status restore_gpu(int gpu, brg_status st)
{
    if (gpu >= 0 && cudaSetDevice(gpu) != cudaSuccess) (void)cudaGetLastError();
    return st;
}

static brg_status use_gpu(int gpu)
{
    BRG_CUDA_CHECK(cudaSetDevice(gpu));
    return BRG_OK;
}

static cudaStream_t stream_of(const cuda_context *c, brg_stream stream)
{
    return stream == BRG_STREAM_COPY ? c->copy : c->compute;
}

/* Room for n bytes (at most STAGE_BYTES) in the ring, at *at: the head,
 * or the start when the head has no room left; waits (oldest first) only
 * for the chunks still reading that room, or for the oldest when every
 * slot is in flight (stage-ring.h). Caller holds stage_lock and made c's
 * GPU current. */
static brg_status stage_reserve(cuda_context *c, size_t n, size_t *at)
{
    *at = brg_stage_ring_place(&c->ring, n);
    while (brg_stage_ring_busy(&c->ring, *at, n))
        BRG_CUDA_CHECK(cudaEventSynchronize(c->staged_done[brg_stage_ring_retire(&c->ring)]));
    return BRG_OK;
}

/* Host -> device through the staging ring, on the compute stream (in
 * order with the ops around it): the host buffer may be reused as soon as
 * this returns. Caller holds stage_lock. */
static brg_status staged_in(cuda_context *c, char *dst, const char *src, size_t bytes)
{
    for (size_t done = 0; done < bytes;) {
        const size_t n = bytes - done < STAGE_BYTES ? bytes - done : STAGE_BYTES;
        size_t at = 0;
        BRG_CHECK(stage_reserve(c, n, &at));
        char *ring = (char *)c->stage + at;
        memcpy(ring, src + done, n);
        BRG_CUDA_CHECK(cudaMemcpyAsync(dst + done, ring, n, cudaMemcpyHostToDevice, c->compute));
        const cudaError_t recorded = cudaEventRecord(c->staged_done[brg_stage_ring_next(&c->ring)], c->compute);
        if (recorded != cudaSuccess) {
            /* The ring cannot know when this DMA is done: wait it out, so
             * that no later copy writes over the bytes it still reads. */
            (void)cudaStreamSynchronize(c->compute);
            return brg_cuda_fail("cudaEventRecord(staged_done)", recorded, __FILE__, __LINE__);
        }
        brg_stage_ring_push(&c->ring, at, n);
        done += n;
    }
    return BRG_OK;
}

/* Whether [src, src + bytes) lies in pinned memory of brg_device_host_alloc.
 * Caller holds stage_lock. */
static int from_pinned(const cuda_context *c, const char *src, size_t bytes)
{
    for (int i = 0; i < c->n_pinned; i++)
        if (src >= c->pinned[i].p && bytes <= c->pinned[i].n &&
            (size_t)(src - c->pinned[i].p) <= c->pinned[i].n - bytes)
            return 1;
    return 0;
}

static brg_status copy_in_impl(cuda_context *c, void *dst, const void *src, size_t bytes)
{
    BRG_CHECK(use_gpu(c->gpu));
    pthread_mutex_lock(&c->stage_lock);
    brg_status st = BRG_OK;
    if (from_pinned(c, src, bytes)) {
        /* In order with the compute stream; the caller keeps the source
         * as it is until the device synchronizes (brigade/device.h). */
        cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->compute);
        if (err != cudaSuccess)
            st = brg_cuda_fail("cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->compute)", err, __FILE__,
                               __LINE__);
    } else {
        st = staged_in(c, dst, src, bytes);
    }
    pthread_mutex_unlock(&c->stage_lock);
    return st;
}

static brg_status cuda_host_alloc(brg_device *dev, size_t bytes, void **ptr)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    brg_status st = named(dev, use_gpu(c->gpu));
    pthread_mutex_lock(&c->stage_lock);
    if (st == BRG_OK && c->n_pinned == c->cap_pinned) {
        const int cap = c->cap_pinned ? 2 * c->cap_pinned : 8;
        struct pinned_range *grown = realloc(c->pinned, (size_t)cap * sizeof *grown);
        if (!grown) st = brg_error(BRG_ERR_HOST_MEMORY, "%s: the list of pinned host memory", dev->name);
        else {
            c->pinned = grown;
            c->cap_pinned = cap;
        }
    }
    if (st == BRG_OK) {
        cudaError_t err = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable);
        if (err != cudaSuccess) {
            char b[32];
            (void)cudaGetLastError();
            *ptr = NULL;
            st = brg_error(BRG_ERR_HOST_MEMORY, "%s: cannot pin %s of host memory (%s)", dev->name,
                           brg_format_bytes(bytes, b, sizeof b), cudaGetErrorString(err));
        } else {
            c->pinned[c->n_pinned].p = *ptr;
            c->pinned[c->n_pinned].n = bytes;
            c->n_pinned++;
        }
    }
    pthread_mutex_unlock(&c->stage_lock);
    return restore_gpu(caller, st);
}

static void cuda_host_free(brg_device *dev, void *ptr)
{
    cuda_context *c = dev->context;
    pthread_mutex_lock(&c->stage_lock);
    for (int i = 0; i < c->n_pinned; i++)
        if (c->pinned[i].p == ptr) {
            c->pinned[i] = c->pinned[--c->n_pinned];
            break;
        }
    pthread_mutex_unlock(&c->stage_lock);
    /* A DMA from it may still be queued: let the device finish first. */
    const int caller = current_gpu();
    if (use_gpu(c->gpu) == BRG_OK) (void)cudaStreamSynchronize(c->compute);
    (void)cudaFreeHost(ptr);
    (void)cudaGetLastError();
    (void)restore_gpu(caller, BRG_OK);
}

static brg_status cuda_copy_in(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    const int caller = current_gpu();
    return restore_gpu(caller, named(dev, copy_in_impl(dev->context, dst, src, bytes)));
}

/* Device -> host on the compute stream, after the ops queued so far:
 * complete when it returns, the host reads it next. Messages name the
 * device. */
static brg_status copy_out_impl(const brg_device *dev, void *dst, const void *src, size_t bytes)
{
    cuda_context *c = dev->context;
    BRG_CHECK(named(dev, use_gpu(c->gpu)));
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->compute);
    if (err != cudaSuccess)
        return named(dev, brg_cuda_fail("cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->compute)", err,
                                        __FILE__, __LINE__));
    err = cudaStreamSynchronize(c->compute);
    if (err != cudaSuccess) return async_fail(dev, "cudaStreamSynchronize(compute) after a copy out", err);
    return BRG_OK;
}

static brg_status cuda_copy_out(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    const int caller = current_gpu();
    return restore_gpu(caller, copy_out_impl(dev, dst, src, bytes));
}

/* Enable access from GPU `from` to GPU `to`'s memory. */
static brg_status enable_peer(int from, int to)
{
    BRG_CUDA_CHECK(cudaSetDevice(from));
    cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError(); /* not an error for us; clear it */
        return BRG_OK;
    }
    if (err != cudaSuccess) return brg_cuda_fail("cudaDeviceEnablePeerAccess(to, 0)", err, __FILE__, __LINE__);
    return BRG_OK;
}

static brg_status probe_peer(int a, int b, int *mode)
{
    int ab = 0, ba = 0;
    BRG_CUDA_CHECK(cudaDeviceCanAccessPeer(&ab, a, b));
    BRG_CUDA_CHECK(cudaDeviceCanAccessPeer(&ba, b, a));
    if (!ab || !ba) {
        *mode = 2;
        return BRG_OK;
    }
    /* Enabling can still fail (too many peers for the hardware): then the
     * pair is staged through the host like one without peer access. */
    *mode = enable_peer(a, b) == BRG_OK && enable_peer(b, a) == BRG_OK ? 1 : 2;
    return BRG_OK;
}

/* How a copy from GPU s to GPU d goes. */
typedef enum xfer_mode { XFER_SAME_GPU, XFER_PEER, XFER_STAGED } xfer_mode;

/* The first call for a pair of two GPUs enables peer access both ways
 * (it changes the current GPU: callers restore it). */
static brg_status pair_mode(int s, int d, xfer_mode *mode)
{
    brg_status st = BRG_OK;
    pthread_mutex_lock(&peer_lock);
    if (staged_forced_locked()) {
        *mode = XFER_STAGED;
    } else if (s == d) {
        *mode = XFER_SAME_GPU;
    } else {
        int m = peer_mode_table[s][d];
        if (m == 0) {
            st = probe_peer(s, d, &m);
            if (st == BRG_OK) peer_mode_table[s][d] = peer_mode_table[d][s] = (signed char)m;
        }
        *mode = m == 1 ? XFER_PEER : XFER_STAGED;
    }
    pthread_mutex_unlock(&peer_lock);
    return st;
}

/* s's staging buffers and its lane to GPU gpu, made the first time.
 * Caller holds s->xfer_lock. */
static brg_status xfer_lane_of(cuda_context *s, int gpu, xfer_lane **out)
{
    *out = NULL;
    if (!s->xfer[0]) {
        BRG_CHECK(use_gpu(s->gpu));
        if (!s->xfer_out) BRG_CUDA_CHECK(cudaEventCreateWithFlags(&s->xfer_out, cudaEventDisableTiming));
        for (int b = 0; b < 2; b++) {
            cudaError_t err = cudaHostAlloc(&s->xfer[b], XFER_CHUNK, cudaHostAllocPortable);
            if (err != cudaSuccess) {
                char mb[32];
                (void)cudaGetLastError();
                s->xfer[b] = NULL;
                if (b == 1) {
                    (void)cudaFreeHost(s->xfer[0]);
                    s->xfer[0] = NULL;
                }
                return brg_error(BRG_ERR_HOST_MEMORY, "cannot pin 2 x %s of host memory to stage copies between "
                                 "GPUs (%s)", brg_format_bytes(XFER_CHUNK, mb, sizeof mb), cudaGetErrorString(err));
            }
        }
    }
    if (!s->lanes[gpu]) {
        xfer_lane *lane = brg_calloc(1, sizeof *lane, "a staging lane");
        if (!lane) return BRG_ERR_HOST_MEMORY;
        brg_status st = use_gpu(gpu);
        cudaError_t err = cudaSuccess;
        if (st == BRG_OK) err = cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking);
        for (int b = 0; b < 2 && st == BRG_OK && err == cudaSuccess; b++)
            err = cudaEventCreateWithFlags(&lane->read[b], cudaEventDisableTiming);
        if (st == BRG_OK && err != cudaSuccess)
            st = brg_cuda_fail("creating a staging stream and its events", err, __FILE__, __LINE__);
        if (st != BRG_OK) {
            for (int b = 0; b < 2; b++)
                if (lane->read[b]) (void)cudaEventDestroy(lane->read[b]);
            if (lane->stream) (void)cudaStreamDestroy(lane->stream);
            free(lane);
            return st;
        }
        s->lanes[gpu] = lane;
    }
    *out = s->lanes[gpu];
    return BRG_OK;
}

/* GPU to GPU through s's two pinned buffers, queued with no host wait.
 * Chunk i: s's copy stream copies it out into buffer i % 2 (after waiting
 * for the lane to have read chunk i - 2 from that buffer) and records
 * xfer_out; the lane on d's GPU waits for xfer_out, copies the buffer in
 * and records read[i % 2]. At the end s's copy stream waits for the last
 * chunk's read, so work queued on it afterwards (an event for the
 * consumer, the next staged copy reusing the buffers, for any GPU) comes
 * after the whole copy: lanes run their chunks in order. Caller holds
 * s->xfer_lock; d's GPU may be s's (BRG_CUDA_FORCE_STAGED). */
static brg_status staged_async(cuda_context *d, char *dst, cuda_context *s, const char *src, size_t bytes)
{
    xfer_lane *lane = NULL;
    BRG_CHECK(xfer_lane_of(s, d->gpu, &lane));
    brg_status st = BRG_OK;
    int last = -1;
    for (size_t at = 0, i = 0; at < bytes; i++) {
        size_t n = bytes - at < XFER_CHUNK ? bytes - at : XFER_CHUNK;
        int b = (int)(i & 1);
        BRG_CHECK_GOTO(use_gpu(s->gpu), st, done);
        if (i >= 2) BRG_CUDA_CHECK_GOTO(cudaStreamWaitEvent(s->copy, lane->read[b], 0), st, done);
        BRG_CUDA_CHECK_GOTO(cudaMemcpyAsync(s->xfer[b], src + at, n, cudaMemcpyDeviceToHost, s->copy), st, done);
        BRG_CUDA_CHECK_GOTO(cudaEventRecord(s->xfer_out, s->copy), st, done);
        BRG_CHECK_GOTO(use_gpu(d->gpu), st, done);
        BRG_CUDA_CHECK_GOTO(cudaStreamWaitEvent(lane->stream, s->xfer_out, 0), st, done);
        BRG_CUDA_CHECK_GOTO(cudaMemcpyAsync(dst + at, s->xfer[b], n, cudaMemcpyHostToDevice, lane->stream), st,
                            done);
        BRG_CUDA_CHECK_GOTO(cudaEventRecord(lane->read[b], lane->stream), st, done);
        last = b;
        at += n;
    }
done:
    /* Even after a failure, what was queued on the lane is covered. */
    if (last >= 0) {
        cudaError_t err = cudaSetDevice(s->gpu);
        if (err == cudaSuccess) err = cudaStreamWaitEvent(s->copy, lane->read[last], 0);
        if (err != cudaSuccess && st == BRG_OK)
            st = brg_cuda_fail("cudaStreamWaitEvent(s->copy, lane->read[last], 0)", err, __FILE__, __LINE__);
        else if (err != cudaSuccess)
            (void)cudaGetLastError(); /* the first failure is the one reported; leave no other behind */
    }
    return st;
}

/* Queue the copy on s's copy stream, the way the pair of GPUs allows. */
static brg_status queue_copy(cuda_context *d, void *dst, cuda_context *s, const void *src, size_t bytes,
                             xfer_mode *used)
{
    xfer_mode mode = XFER_SAME_GPU;
    BRG_CHECK(pair_mode(s->gpu, d->gpu, &mode));
    *used = mode;
    if (mode == XFER_STAGED) {
        pthread_mutex_lock(&s->xfer_lock);
        brg_status st = staged_async(d, dst, s, src, bytes);
        pthread_mutex_unlock(&s->xfer_lock);
        return st;
    }
    BRG_CHECK(use_gpu(s->gpu));
    if (mode == XFER_SAME_GPU)
        BRG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->copy));
    else
        BRG_CUDA_CHECK(cudaMemcpyPeerAsync(dst, d->gpu, src, s->gpu, bytes, s->copy));
    return BRG_OK;
}

static brg_status copy_failed(brg_device *dst_dev, brg_device *src_dev, brg_status st)
{
    if (st == BRG_OK) return st;
    return brg_error_context(st, "copy from device '%s' to device '%s'", src_dev->name, dst_dev->name);
}

/* The asynchronous copy between devices (base/device.c,
 * brg_device_copy_async): queued on the source's copy stream after what it
 * waits for. A staged copy counts both of its trips through the host on
 * the source device, whose thread is the only one that touches its
 * counter (the destination's thread may be running). */
static brg_status cuda_copy_async(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    const int caller = current_gpu();
    xfer_mode used = XFER_SAME_GPU;
    brg_status st = queue_copy(dst_dev->context, dst, src_dev->context, src, bytes, &used);
    if (st == BRG_OK && used == XFER_STAGED) src_dev->host_bytes += 2 * (uint64_t)bytes;
    return restore_gpu(caller, copy_failed(dst_dev, src_dev, st));
}

/* Before the steps: peer access for the pair of GPUs, or the source's
 * pinned staging buffers and its lane to the destination's GPU, which a
 * first copy would otherwise make in the middle of a step, synchronizing
 * the GPUs while NCCL's kernels may be waiting for a peer. */
static brg_status cuda_copy_prepare(brg_device *dst_dev, brg_device *src_dev)
{
    cuda_context *d = dst_dev->context, *s = src_dev->context;
    const int caller = current_gpu();
    xfer_mode mode = XFER_SAME_GPU;
    brg_status st = pair_mode(s->gpu, d->gpu, &mode);
    if (st == BRG_OK && mode == XFER_STAGED) {
        xfer_lane *lane = NULL;
        pthread_mutex_lock(&s->xfer_lock);
        st = xfer_lane_of(s, d->gpu, &lane);
        pthread_mutex_unlock(&s->xfer_lock);
    }
    return restore_gpu(caller, copy_failed(dst_dev, src_dev, st));
}

/* Wait for both streams of a device (the lanes of its staged copies
 * too: its copy stream waited for their last chunks). Messages name the
 * device and its activity. */
static brg_status drain(const brg_device *dev)
{
    const cuda_context *c = dev->context;
    /* A sticky error of the GPU's context may show here already. */
    cudaError_t err = cudaSetDevice(c->gpu);
    if (err != cudaSuccess) return async_fail(dev, "cudaSetDevice", err);
    err = cudaStreamSynchronize(c->compute);
    if (err != cudaSuccess) return async_fail(dev, "cudaStreamSynchronize(compute)", err);
    err = cudaStreamSynchronize(c->copy);
    if (err != cudaSuccess) return async_fail(dev, "cudaStreamSynchronize(copy)", err);
    return BRG_OK;
}

/* Between two devices: the slow path, synchronous. It waits for the work
 * queued on both devices so far (the source's results are there, nothing
 * queued still reads or writes the destination), queues the copy on the
 * source's copy stream as copy_async does, and waits for it: no event of
 * either device is touched, so the devices' own threads may be queueing
 * meanwhile (the caller orders this copy with them on the host). */
static brg_status copy_between_sync(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src,
                                    size_t bytes)
{
    BRG_CHECK(drain(src_dev));
    BRG_CHECK(drain(dst_dev));
    xfer_mode used = XFER_SAME_GPU;
    BRG_CHECK(copy_failed(dst_dev, src_dev, queue_copy(dst_dev->context, dst, src_dev->context, src, bytes, &used)));
    return drain(src_dev);
}

/* A copy inside one device (a stage's own buffers) stays on its compute
 * stream, in order with the ops around it. */
static brg_status copy_within(cuda_context *c, void *dst, const void *src, size_t bytes)
{
    BRG_CHECK(use_gpu(c->gpu));
    BRG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->compute));
    return BRG_OK;
}

static brg_status cuda_copy_peer(brg_device *dst_dev, void *dst, brg_device *src_dev, const void *src, size_t bytes)
{
    const int caller = current_gpu();
    if (dst_dev == src_dev) return restore_gpu(caller, named(dst_dev, copy_within(dst_dev->context, dst, src, bytes)));
    return restore_gpu(caller, copy_between_sync(dst_dev, dst, src_dev, src, bytes));
}

static brg_status memset_impl(cuda_context *c, void *dst, size_t bytes)
{
    BRG_CHECK(use_gpu(c->gpu));
    BRG_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, c->compute));
    return BRG_OK;
}

static brg_status cuda_memset_zero(brg_device *dev, void *dst, size_t bytes)
{
    const int caller = current_gpu();
    return restore_gpu(caller, named(dev, memset_impl(dev->context, dst, bytes)));
}

/* The exec's messages name the device already (it was given the name).
 * The op starts with the thread's last CUDA error cleared: our launchers
 * check their launch with cudaGetLastError, and a convolution decides on
 * retrying with cudaPeekAtLastError, so an error some library left there
 * unread (as NCCL's and others' benign cudaErrorPeerAccessAlreadyEnabled
 * or a query's cudaErrorNotReady can be) would pass for the op's own. A
 * sticky error of the context is not lost: the launch fails with it. */
static brg_status cuda_run(brg_device *dev, const brg_op *op)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    brg_status st = named(dev, use_gpu(c->gpu));
    if (st == BRG_OK) {
        (void)cudaGetLastError();
        st = brg_kernel_run(brg_cuda_kernels, dev, op);
        if (st != BRG_OK) brg_error_context(st, "%s on %s", brg_op_kind_name(op->kind), dev->name);
    }
    return restore_gpu(caller, st);
}

static size_t cuda_workspace_bytes(brg_device *dev, const brg_op *op)
{
    cuda_context *c = dev->context;
    return brg_cuda_workspace_bytes(op, c->conv_budget);
}

static size_t cuda_workspace_wanted(brg_device *dev, const brg_op *op)
{
    const cuda_context *c = dev->context;
    return c->conv_grow ? brg_cuda_workspace_wanted(op) : 0;
}

/* Both streams, then the errors the kernels found on the device. drain's
 * messages name the device and its activity. */
static brg_status cuda_synchronize(brg_device *dev)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    brg_status st = drain(dev);
    if (st == BRG_OK) st = brg_cuda_exec_check(c->exec);
    return restore_gpu(caller, st);
}

/* ---- events ---- */

static brg_status event_create_impl(cuda_context *c, brg_event *ev)
{
    cudaEvent_t e = NULL;
    BRG_CHECK(use_gpu(c->gpu));
    BRG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault)); /* timed: event_elapsed */
    ev->impl = e;
    return BRG_OK;
}

static brg_status cuda_event_create(brg_device *dev, brg_event *ev)
{
    const int caller = current_gpu();
    return restore_gpu(caller, named(dev, event_create_impl(dev->context, ev)));
}

/* cudaEventDestroy of an event still pending returns at once and frees it
 * when the device reaches it. */
static void cuda_event_destroy(brg_device *dev, brg_event *ev)
{
    const cuda_context *c = dev->context;
    const int caller = current_gpu();
    if (ev->impl && cudaSetDevice(c->gpu) == cudaSuccess) (void)cudaEventDestroy((cudaEvent_t)ev->impl);
    (void)cudaGetLastError();
    ev->impl = NULL;
    (void)restore_gpu(caller, BRG_OK);
}

static brg_status event_record_impl(cuda_context *c, brg_event *ev, brg_stream stream)
{
    BRG_CHECK(use_gpu(c->gpu));
    BRG_CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev->impl, stream_of(c, stream)));
    return BRG_OK;
}

static brg_status cuda_event_record(brg_device *dev, brg_event *ev, brg_stream stream)
{
    const int caller = current_gpu();
    return restore_gpu(caller, named(dev, event_record_impl(dev->context, ev, stream)));
}

/* ev may be another CUDA device's, on another GPU: cudaStreamWaitEvent
 * takes an event of any device. */
static brg_status stream_wait_impl(cuda_context *c, brg_stream stream, const brg_event *ev)
{
    BRG_CHECK(use_gpu(c->gpu));
    BRG_CUDA_CHECK(cudaStreamWaitEvent(stream_of(c, stream), (cudaEvent_t)ev->impl, 0));
    return BRG_OK;
}

static brg_status cuda_stream_wait(brg_device *dev, brg_stream stream, const brg_event *ev)
{
    const int caller = current_gpu();
    brg_status st = stream_wait_impl(dev->context, stream, ev);
    if (st != BRG_OK && ev->dev != dev)
        st = brg_error_context(st, "device '%s' waiting for an event of device '%s'", dev->name, ev->dev->name);
    else
        st = named(dev, st);
    return restore_gpu(caller, st);
}

static brg_status event_synchronize_impl(const brg_device *dev, const brg_event *ev)
{
    const cuda_context *c = dev->context;
    cudaError_t err = cudaSetDevice(c->gpu);
    if (err != cudaSuccess) return async_fail(dev, "cudaSetDevice", err);
    err = cudaEventSynchronize((cudaEvent_t)ev->impl);
    if (err != cudaSuccess) return async_fail(dev, "cudaEventSynchronize", err);
    return BRG_OK;
}

static brg_status cuda_event_synchronize(brg_device *dev, brg_event *ev)
{
    const int caller = current_gpu();
    return restore_gpu(caller, event_synchronize_impl(dev, ev));
}

/* Both events are waited for first (a no-op when they have completed, as
 * the interface asks), so that a failure of the work before them is
 * reported as such rather than as cudaErrorNotReady. */
static brg_status event_elapsed_impl(const brg_device *dev, const brg_event *from, const brg_event *to,
                                     double *seconds)
{
    BRG_CHECK(event_synchronize_impl(dev, from));
    BRG_CHECK(event_synchronize_impl(dev, to));
    float ms = 0.0f;
    cudaError_t err = cudaEventElapsedTime(&ms, (cudaEvent_t)from->impl, (cudaEvent_t)to->impl);
    if (err != cudaSuccess) return named(dev, brg_cuda_fail("cudaEventElapsedTime", err, __FILE__, __LINE__));
    *seconds = (double)ms / 1000.0;
    return BRG_OK;
}

static brg_status cuda_event_elapsed(brg_device *dev, const brg_event *from, const brg_event *to, double *seconds)
{
    const int caller = current_gpu();
    return restore_gpu(caller, event_elapsed_impl(dev, from, to, seconds));
}

/* Release whatever setup made; the device may be half built. Errors are
 * ignored: there is nobody left to tell. */
static void cuda_destroy(brg_device *dev)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    if (c) {
        if (cudaSetDevice(c->gpu) == cudaSuccess) {
            if (c->compute) (void)cudaStreamSynchronize(c->compute);
            if (c->copy) (void)cudaStreamSynchronize(c->copy);
        }
        for (int g = 0; g < MAX_GPUS; g++) {
            xfer_lane *lane = c->lanes[g];
            if (!lane) continue;
            if (cudaSetDevice(g) == cudaSuccess) {
                (void)cudaStreamSynchronize(lane->stream);
                for (int b = 0; b < 2; b++) (void)cudaEventDestroy(lane->read[b]);
                (void)cudaStreamDestroy(lane->stream);
            }
            free(lane);
        }
        if (cudaSetDevice(c->gpu) == cudaSuccess) {
            if (c->exec) brg_cuda_exec_destroy(c->exec);
            for (int k = 0; k < BRG_STAGE_RING_SLOTS; k++)
                if (c->staged_done[k]) (void)cudaEventDestroy(c->staged_done[k]);
            if (c->xfer_out) (void)cudaEventDestroy(c->xfer_out);
            if (c->compute) (void)cudaStreamDestroy(c->compute);
            if (c->copy) (void)cudaStreamDestroy(c->copy);
            if (dev->base) (void)cudaFree(dev->base);
        }
        /* Pinned host memory belongs to no one GPU: freed whatever the
         * device's GPU says, so a failed cudaSetDevice leaks no pinning. */
        if (c->stage) (void)cudaFreeHost(c->stage);
        for (int b = 0; b < 2; b++)
            if (c->xfer[b]) (void)cudaFreeHost(c->xfer[b]);
        (void)cudaGetLastError();
        pthread_mutex_destroy(&c->stage_lock);
        pthread_mutex_destroy(&c->xfer_lock);
        free(c->pinned);
        free(c);
    }
    free(dev);
    (void)restore_gpu(caller, BRG_OK);
}

/* The slab, streams, events and library handles of a new device. */
static brg_status setup(brg_device *dev)
{
    cuda_context *c = dev->context;
    BRG_CUDA_CHECK(cudaSetDevice(c->gpu));
    size_t bytes = brg_arena_capacity(dev->arena);
    void *base = NULL;
    cudaError_t err = cudaMalloc(&base, bytes);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes = 0, total = 0;
        char b1[32], b2[32], b3[32];
        (void)cudaGetLastError();
        if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) (void)cudaGetLastError();
        return brg_error(BRG_ERR_OUT_OF_MEMORY,
                         "cannot allocate its arena of %s on GPU %d: %s of the GPU's %s are free; give the device "
                         "less memory or stop what else is using the GPU",
                         brg_format_bytes(bytes, b1, sizeof b1), c->gpu, brg_format_bytes(free_bytes, b2, sizeof b2),
                         brg_format_bytes(total, b3, sizeof b3));
    }
    if (err != cudaSuccess) return brg_cuda_fail("cudaMalloc(&base, bytes)", err, __FILE__, __LINE__);
    dev->base = base;
    BRG_CUDA_CHECK(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    BRG_CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    for (int k = 0; k < BRG_STAGE_RING_SLOTS; k++)
        BRG_CUDA_CHECK(cudaEventCreateWithFlags(&c->staged_done[k], cudaEventDisableTiming));
    err = cudaMallocHost(&c->stage, STAGE_BYTES);
    if (err != cudaSuccess) {
        char b[32];
        (void)cudaGetLastError();
        c->stage = NULL;
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot pin %s of host memory to stage copies to the GPU (%s)",
                         brg_format_bytes(STAGE_BYTES, b, sizeof b), cudaGetErrorString(err));
    }
    return brg_cuda_exec_create(c->gpu, (void *)c->compute, dev->name, c->conv_budget, &c->exec);
}

static brg_status cuda_pci_bus_id(const brg_device *dev, char *buf, size_t size)
{
    return brg_cuda_gpu_pci_bus_id(((const cuda_context *)dev->context)->gpu, buf, size);
}

/* ---- communicators between processes (NCCL) ---- */

#ifdef BRG_HAVE_NCCL
static brg_status cuda_comm_id(brg_device *dev, unsigned char *id)
{
    const int caller = current_gpu();
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_id(id);
    return restore_gpu(caller, named(dev, st));
}

static brg_status cuda_comm_create(brg_device *dev, const unsigned char *id, int ranks, int rank,
                                   const brg_wire *wire, void **comm)
{
    (void)wire; /* NCCL moves the bytes itself */
    const int caller = current_gpu();
    brg_nccl *n = NULL;
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_create(id, ranks, rank, &n);
    *comm = n;
    return restore_gpu(caller, named(dev, st));
}

static brg_status cuda_comm_connect(brg_device *dev, void *comm, int rank, brg_comm_use use)
{
    const int caller = current_gpu();
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_connect(comm, rank, use == BRG_COMM_SUMS);
    return restore_gpu(caller, named(dev, st));
}

static void cuda_comm_destroy(brg_device *dev, void *comm)
{
    const int caller = current_gpu();
    /* Destroyed even where the GPU cannot be made current (a lost GPU):
     * NCCL's abort makes the communicator's own GPU current, and skipping
     * it would leave the communicator, its stream and NCCL's thread. */
    (void)use_gpu(((cuda_context *)dev->context)->gpu);
    brg_nccl_destroy(comm);
    (void)restore_gpu(caller, BRG_OK);
}

static brg_status cuda_comm_send(brg_device *dev, void *comm, brg_stream stream, int peer, void *const *pieces,
                                 const size_t *bytes, int count)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    brg_status st = use_gpu(c->gpu);
    if (st == BRG_OK) st = brg_nccl_send(comm, stream_of(c, stream), peer, pieces, bytes, count);
    return restore_gpu(caller, named(dev, st));
}

static brg_status cuda_comm_recv(brg_device *dev, void *comm, int peer, void *const *pieces, const size_t *bytes,
                                 int count)
{
    const int caller = current_gpu();
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_recv(comm, peer, pieces, bytes, count);
    return restore_gpu(caller, named(dev, st));
}

static brg_status cuda_comm_sum(brg_device *dev, void *comm, float *values, size_t n)
{
    const int caller = current_gpu();
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_sum(comm, values, n);
    return restore_gpu(caller, named(dev, st));
}

static brg_status cuda_comm_wait(brg_device *dev, void *comm, const brg_event *ev)
{
    const int caller = current_gpu();
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_wait(comm, (cudaEvent_t)ev->impl);
    return restore_gpu(caller, named(dev, st));
}

static brg_status cuda_comm_record(brg_device *dev, void *comm, brg_event *ev)
{
    const int caller = current_gpu();
    brg_status st = use_gpu(((cuda_context *)dev->context)->gpu);
    if (st == BRG_OK) st = brg_nccl_record(comm, (cudaEvent_t)ev->impl);
    return restore_gpu(caller, named(dev, st));
}
#define CUDA_COMM(fn) fn
#else
#define CUDA_COMM(fn) NULL /* built without NCCL: messages between processes refuse CUDA devices */
#endif

static const brg_device_iface cuda_iface = {
    /* .backend           = */ BRG_BACKEND_CUDA,
    /* .destroy           = */ cuda_destroy,
    /* .copy_in           = */ cuda_copy_in,
    /* .copy_out          = */ cuda_copy_out,
    /* .copy_peer         = */ cuda_copy_peer,
    /* .memset_zero       = */ cuda_memset_zero,
    /* .run               = */ cuda_run,
    /* .workspace_bytes   = */ cuda_workspace_bytes,
    /* .workspace_wanted  = */ cuda_workspace_wanted,
    /* .synchronize       = */ cuda_synchronize,
    /* .pci_bus_id        = */ cuda_pci_bus_id,
    /* .share_cores       = */ NULL,
    /* .restore_cores     = */ NULL,
    /* .event_create      = */ cuda_event_create,
    /* .event_destroy     = */ cuda_event_destroy,
    /* .event_record      = */ cuda_event_record,
    /* .stream_wait       = */ cuda_stream_wait,
    /* .event_synchronize = */ cuda_event_synchronize,
    /* .event_elapsed     = */ cuda_event_elapsed,
    /* .copy_async        = */ cuda_copy_async,
    /* .copy_prepare      = */ cuda_copy_prepare,
    /* .host_alloc        = */ cuda_host_alloc,
    /* .host_free         = */ cuda_host_free,
    /* .channel_block     = */ NULL,
    /* .comm_id           = */ CUDA_COMM(cuda_comm_id),
    /* .comm_create       = */ CUDA_COMM(cuda_comm_create),
    /* .comm_connect      = */ CUDA_COMM(cuda_comm_connect),
    /* .comm_destroy      = */ CUDA_COMM(cuda_comm_destroy),
    /* .comm_send         = */ CUDA_COMM(cuda_comm_send),
    /* .comm_recv         = */ CUDA_COMM(cuda_comm_recv),
    /* .comm_sum          = */ CUDA_COMM(cuda_comm_sum),
    /* .comm_wait         = */ CUDA_COMM(cuda_comm_wait),
    /* .comm_record       = */ CUDA_COMM(cuda_comm_record),
};

int brg_cuda_gpu_count(char *why, size_t why_size)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) snprintf(why, why_size, "no GPU visible: %s", cudaGetErrorString(err));
        return 0;
    }
    if (n == 0 && why) snprintf(why, why_size, "no GPU visible");
    return n;
}

/* A GPU ordinal that is not visible, as a clear error. */
static brg_status absent_gpu(int gpu)
{
    char why[160];
    int n = brg_cuda_gpu_count(why, sizeof why);
    if (n == 0) return brg_error(BRG_ERR_UNSUPPORTED, "GPU %d: %s", gpu, why);
    return brg_error(BRG_ERR_UNSUPPORTED, "there is no GPU %d here; the GPUs visible are cuda:0 to cuda:%d", gpu,
                     n - 1);
}

brg_status brg_cuda_gpu_memory(int gpu, size_t *bytes)
{
    *bytes = 0;
    if (gpu < 0 || gpu >= brg_cuda_gpu_count(NULL, 0)) return absent_gpu(gpu);
    struct cudaDeviceProp p;
    BRG_CUDA_CHECK(cudaGetDeviceProperties(&p, gpu));
    *bytes = p.totalGlobalMem;
    return BRG_OK;
}

int brg_cuda_can_access_peer(int a, int b)
{
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return can;
}

brg_status brg_cuda_gpu_pci_bus_id(int gpu, char *buf, size_t size)
{
    if (size) buf[0] = '\0';
    if (gpu < 0 || gpu >= brg_cuda_gpu_count(NULL, 0)) return absent_gpu(gpu);
    BRG_CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)size, gpu));
    return BRG_OK;
}

int brg_cuda_device_gpu(const brg_device *dev)
{
    if (!dev || dev->iface != &cuda_iface) return -1;
    return ((const cuda_context *)dev->context)->gpu;
}

brg_status brg_cuda_device_create(const brg_device_spec *spec, brg_device **out)
{
    *out = NULL;
    char name[32], why[160];
    brg_device_spec_name(spec, 0, name, sizeof name);
    int count = brg_cuda_gpu_count(why, sizeof why);
    if (count == 0)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "device '%s': %s; without a GPU, brigade plan can still plan for GPUs of a given card "
                         "(e.g. --devices cuda:0-6@12GiB) or virtual devices (cuda:0:7x12GiB)", name, why);
    if (spec->gpu < 0 || spec->gpu >= count || spec->gpu >= MAX_GPUS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': there is no GPU %d here; the GPUs visible are cuda:0 "
                         "to cuda:%d", name, spec->gpu, count - 1);
    size_t capacity = spec->capacity;
    if (spec->card) { /* a whole GPU taken as a card (cuda:0@12GiB): the GPU must hold that card */
        size_t total = 0;
        brg_status st = brg_cuda_gpu_memory(spec->gpu, &total);
        if (st != BRG_OK) return brg_error_context(st, "device '%s'", name);
        BRG_CHECK(brg_cuda_card_fits(spec, total));
    }
    if (capacity == 0) { /* a whole GPU not sized by brg_device_spec_parse */
        size_t total = spec->card; /* a card (checked above) is sized by its name, as the registry does */
        brg_status st = total ? BRG_OK : brg_cuda_gpu_memory(spec->gpu, &total);
        if (st != BRG_OK) return brg_error_context(st, "device '%s'", name);
        BRG_CHECK(brg_cuda_whole_arena(spec, total, &capacity));
    }
    brg_device *dev;
    brg_status st = brg_device_new(&cuda_iface, sizeof(cuda_context), name, capacity, &dev);
    if (st != BRG_OK) return st;
    cuda_context *c = dev->context;
    c->gpu = spec->gpu;
    c->conv_budget = spec->conv_workspace ? spec->conv_workspace : BRG_CUDA_CONV_WORKSPACE_DEFAULT;
    c->conv_grow = brg_cuda_conv_workspace_grows();
    pthread_mutex_init(&c->stage_lock, NULL);
    pthread_mutex_init(&c->xfer_lock, NULL);
    brg_stage_ring_init(&c->ring, STAGE_BYTES, BRG_STAGE_RING_SLOTS);
    const int caller = current_gpu();
    st = restore_gpu(caller, named(dev, setup(dev)));
    if (st != BRG_OK) {
        brg_arena *arena = dev->arena;
        cuda_destroy(dev);
        brg_arena_destroy(arena);
        return st;
    }
    *out = dev;
    return BRG_OK;
}

#else /* no CUDA backend in this build */

void brg_cuda_force_staged(int on)
{
    (void)on;
}

#define NO_BACKEND "this build has no CUDA backend (configure needs the CUDA toolkit and cuDNN)"

int brg_cuda_gpu_count(char *why, size_t why_size)
{
    if (why) snprintf(why, why_size, "%s", NO_BACKEND);
    return 0;
}

brg_status brg_cuda_gpu_memory(int gpu, size_t *bytes)
{
    *bytes = 0;
    return brg_error(BRG_ERR_UNSUPPORTED, "GPU %d: %s", gpu, NO_BACKEND);
}

int brg_cuda_can_access_peer(int a, int b)
{
    (void)a;
    (void)b;
    return 0;
}

brg_status brg_cuda_gpu_pci_bus_id(int gpu, char *buf, size_t size)
{
    if (size) buf[0] = '\0';
    return brg_error(BRG_ERR_UNSUPPORTED, "GPU %d: %s", gpu, NO_BACKEND);
}

int brg_cuda_device_gpu(const brg_device *dev)
{
    (void)dev;
    return -1;
}

brg_status brg_cuda_device_create(const brg_device_spec *spec, brg_device **out)
{
    char name[32];
    *out = NULL;
    return brg_error(BRG_ERR_UNSUPPORTED,
                     "device '%s': %s; use CPU devices such as 4x8MiB, or plan for GPU devices of a given size "
                     "(brigade plan --devices cuda:0:7x12GiB)",
                     brg_device_spec_name(spec, 0, name, sizeof name), NO_BACKEND);
}

#endif
