/* The CUDA backend: a device is one capped slab of memory on a GPU.
 *
 * Memory: the slab is ONE cudaMalloc of the device's capacity, made when
 * the device is created; the arena (base/device.c) suballocates it, so a
 * device never holds more than its cap and the planner's numbers are the
 * ones the GPU sees. Several devices may share a GPU ("cuda:0:7x12GiB"),
 * each with its own slab, streams and library handles.
 *
 * Streams: each device has a compute stream (ops, memsets) and a copy
 * stream (copies). Two events order them, each recorded on one stream only:
 * `computed` on the compute stream, `copied` on the copy stream. A copy
 * first waits for `computed` (it reads what compute produced and overwrites
 * nothing compute still reads); compute then waits for `copied`. Because an
 * event is only ever recorded on its own stream, a wait that catches a later
 * record than the caller's own only waits longer, never shorter, so threads
 * may share a device's events safely.
 *
 * Copies: copy_out returns when the host buffer holds the data. copy_in
 * goes through a pinned staging buffer, so it returns as soon as the host
 * buffer has been read, while the DMA runs on. Between devices: one GPU ->
 * cudaMemcpyAsync device to device; two GPUs -> cudaMemcpyPeerAsync with
 * peer access enabled once per pair, or a synchronous copy staged through
 * pinned host memory where the pair has no peer access.
 *
 * Every CUDA call is checked (cuda-check.h) and its message
 * gets the device's name. Every entry point makes the device's GPU current
 * first: the executor calls a device from its own worker thread.
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
#include "cuda-ops.h"

/* Pinned staging: small copies use a small buffer, large ones go through
 * in chunks of STAGE_LARGE. */
#define STAGE_SMALL ((size_t)1 << 20)
#define STAGE_LARGE ((size_t)32 << 20)
#define MAX_GPUS 64

typedef struct cuda_context {
    int gpu;
    size_t conv_budget;
    cudaStream_t compute, copy;
    cudaEvent_t computed; /* recorded only on compute */
    cudaEvent_t copied;   /* recorded only on copy */
    brg_cuda_exec *exec;
    /* Pinned host buffer for copy_in and staged peer copies; stage_free is
     * recorded on the copy stream after the last DMA that reads it. Other
     * devices' threads use it for staged peer copies, hence the lock. */
    pthread_mutex_t stage_lock;
    void *stage;
    size_t stage_bytes;
    cudaEvent_t stage_free;
} cuda_context;

static const brg_device_iface cuda_iface;

brg_cuda_exec *brg_cuda_exec_of(brg_device *dev) { return ((cuda_context *)dev->context)->exec; }

/* Peer access between GPU pairs, for the whole process: 0 not asked yet,
 * 1 direct (enabled both ways), 2 staged through the host. */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static signed char peer_mode_table[MAX_GPUS][MAX_GPUS];

/* Put the device's name in front of a failure's message. */
static brg_status named(const brg_device *dev, brg_status st)
{
    return st == BRG_OK ? st : brg_error_context(st, "device '%s'", dev->name);
}

/* Every entry point below leaves the calling thread's current GPU as it
 * found it, so a caller's own CUDA code (or PyTorch's) keeps working on its
 * device after a brigade call: current_gpu at entry, restore_gpu on the way
 * out, whatever the status. */
static int current_gpu(void)
{
    int gpu = -1;
    if (cudaGetDevice(&gpu) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return gpu;
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

/* Make stream wait for the compute work queued on c so far. */
static brg_status after_compute(cuda_context *c, cudaStream_t stream)
{
    BRG_CUDA_CHECK(cudaSetDevice(c->gpu));
    BRG_CUDA_CHECK(cudaEventRecord(c->computed, c->compute));
    BRG_CUDA_CHECK(cudaStreamWaitEvent(stream, c->computed, 0));
    return BRG_OK;
}

/* Make the compute streams of a and b (b may be NULL or a) wait for the
 * copies queued on c's copy stream so far. */
static brg_status compute_after_copies(cuda_context *c, cuda_context *a, cuda_context *b)
{
    BRG_CUDA_CHECK(cudaSetDevice(c->gpu));
    BRG_CUDA_CHECK(cudaEventRecord(c->copied, c->copy));
    BRG_CUDA_CHECK(cudaSetDevice(a->gpu));
    BRG_CUDA_CHECK(cudaStreamWaitEvent(a->compute, c->copied, 0));
    if (b && b != a) {
        BRG_CUDA_CHECK(cudaSetDevice(b->gpu));
        BRG_CUDA_CHECK(cudaStreamWaitEvent(b->compute, c->copied, 0));
    }
    return BRG_OK;
}

/* A staging buffer of at least bytes (at most STAGE_LARGE), free to write:
 * the last DMA out of it has finished. Caller holds stage_lock. */
static brg_status stage_reserve(cuda_context *c, size_t bytes)
{
    BRG_CUDA_CHECK(cudaSetDevice(c->gpu));
    BRG_CUDA_CHECK(cudaEventSynchronize(c->stage_free)); /* cudaSuccess if never recorded */
    if (c->stage_bytes >= bytes) return BRG_OK;
    if (c->stage) BRG_CUDA_CHECK(cudaFreeHost(c->stage));
    c->stage = NULL;
    c->stage_bytes = 0;
    size_t want = bytes <= STAGE_SMALL ? STAGE_SMALL : STAGE_LARGE;
    cudaError_t err = cudaMallocHost(&c->stage, want);
    if (err != cudaSuccess) {
        char b[32];
        (void)cudaGetLastError();
        c->stage = NULL;
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot pin %s of host memory to stage copies (%s)",
                         brg_format_bytes(want, b, sizeof b), cudaGetErrorString(err));
    }
    c->stage_bytes = want;
    return BRG_OK;
}

/* Host -> device through the staging buffer: the host buffer may be reused
 * as soon as this returns. Caller holds stage_lock. */
static brg_status staged_in(cuda_context *c, char *dst, const char *src, size_t bytes)
{
    for (size_t at = 0; at < bytes;) {
        size_t n = bytes - at < STAGE_LARGE ? bytes - at : STAGE_LARGE;
        BRG_CHECK(stage_reserve(c, n));
        memcpy(c->stage, src + at, n);
        BRG_CUDA_CHECK(cudaMemcpyAsync(dst + at, c->stage, n, cudaMemcpyHostToDevice, c->copy));
        BRG_CUDA_CHECK(cudaEventRecord(c->stage_free, c->copy));
        at += n;
    }
    return BRG_OK;
}

static brg_status copy_in_impl(cuda_context *c, void *dst, const void *src, size_t bytes)
{
    BRG_CHECK(after_compute(c, c->copy));
    pthread_mutex_lock(&c->stage_lock);
    brg_status st = staged_in(c, dst, src, bytes);
    pthread_mutex_unlock(&c->stage_lock);
    BRG_CHECK(st);
    return compute_after_copies(c, c, NULL);
}

static brg_status cuda_copy_in(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    const int caller = current_gpu();
    return restore_gpu(caller, named(dev, copy_in_impl(dev->context, dst, src, bytes)));
}

/* Device -> host: complete when it returns, the host reads it next. */
static brg_status copy_out_impl(cuda_context *c, void *dst, const void *src, size_t bytes)
{
    BRG_CHECK(after_compute(c, c->copy));
    BRG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->copy));
    BRG_CUDA_CHECK(cudaStreamSynchronize(c->copy));
    return BRG_OK;
}

static brg_status cuda_copy_out(brg_device *dev, void *dst, const void *src, size_t bytes)
{
    const int caller = current_gpu();
    return restore_gpu(caller, named(dev, copy_out_impl(dev->context, dst, src, bytes)));
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

/* Whether GPUs a != b copy directly (1) or through the host (0); the first
 * call for a pair enables peer access both ways. */
static brg_status peer_direct(int a, int b, int *direct)
{
    brg_status st = BRG_OK;
    pthread_mutex_lock(&peer_lock);
    int mode = peer_mode_table[a][b];
    if (mode == 0) {
        st = probe_peer(a, b, &mode);
        if (st == BRG_OK) peer_mode_table[a][b] = peer_mode_table[b][a] = (signed char)mode;
    }
    pthread_mutex_unlock(&peer_lock);
    *direct = mode == 1;
    return st;
}

/* GPU to GPU through s's pinned staging buffer, chunk by chunk, each chunk
 * complete before the next: the fallback where the pair has no peer access.
 * s's copy stream already waits for both devices' compute. Returns with
 * everything done, so neither compute stream needs to wait. */
static brg_status staged_peer(cuda_context *d, char *dst, cuda_context *s, const char *src, size_t bytes)
{
    for (size_t at = 0; at < bytes;) {
        size_t n = bytes - at < STAGE_LARGE ? bytes - at : STAGE_LARGE;
        BRG_CHECK(stage_reserve(s, n));
        BRG_CUDA_CHECK(cudaMemcpyAsync(s->stage, src + at, n, cudaMemcpyDeviceToHost, s->copy));
        BRG_CUDA_CHECK(cudaStreamSynchronize(s->copy));
        BRG_CUDA_CHECK(cudaSetDevice(d->gpu));
        BRG_CUDA_CHECK(cudaMemcpyAsync(dst + at, s->stage, n, cudaMemcpyHostToDevice, d->copy));
        BRG_CUDA_CHECK(cudaStreamSynchronize(d->copy));
        at += n;
    }
    return BRG_OK;
}

static brg_status copy_peer_impl(cuda_context *d, void *dst, cuda_context *s, const void *src, size_t bytes)
{
    int direct = 1;
    if (s->gpu != d->gpu) BRG_CHECK(peer_direct(s->gpu, d->gpu, &direct));
    /* The copy runs on the source's copy stream after the compute queued on
     * both devices: the data is there, and the destination is no longer read. */
    BRG_CUDA_CHECK(cudaSetDevice(d->gpu));
    BRG_CUDA_CHECK(cudaEventRecord(d->computed, d->compute));
    BRG_CHECK(after_compute(s, s->copy));
    BRG_CUDA_CHECK(cudaStreamWaitEvent(s->copy, d->computed, 0)); /* may be another GPU's event */
    if (!direct) {
        pthread_mutex_lock(&s->stage_lock);
        brg_status st = staged_peer(d, dst, s, src, bytes);
        pthread_mutex_unlock(&s->stage_lock);
        return st;
    }
    if (s->gpu == d->gpu)
        BRG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->copy));
    else
        BRG_CUDA_CHECK(cudaMemcpyPeerAsync(dst, d->gpu, src, s->gpu, bytes, s->copy));
    /* The destination's compute reads the data after the copy; the source's
     * compute overwrites the source only after it. */
    return compute_after_copies(s, d, s);
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
    brg_status st = dst_dev == src_dev ? copy_within(dst_dev->context, dst, src, bytes)
                                       : copy_peer_impl(dst_dev->context, dst, src_dev->context, src, bytes);
    if (st != BRG_OK && dst_dev != src_dev)
        return restore_gpu(caller, brg_error_context(st, "copy from device '%s' to device '%s'", src_dev->name,
                                                     dst_dev->name));
    return restore_gpu(caller, named(dst_dev, st));
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

/* The exec's messages name the device already (it was given the name). */
static brg_status cuda_run(brg_device *dev, const brg_op *op)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    brg_status st = named(dev, use_gpu(c->gpu));
    if (st == BRG_OK) {
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

static brg_status synchronize_impl(cuda_context *c)
{
    BRG_CHECK(use_gpu(c->gpu));
    BRG_CUDA_CHECK(cudaStreamSynchronize(c->compute));
    BRG_CUDA_CHECK(cudaStreamSynchronize(c->copy));
    return BRG_OK;
}

static brg_status cuda_synchronize(brg_device *dev)
{
    cuda_context *c = dev->context;
    const int caller = current_gpu();
    brg_status st = named(dev, synchronize_impl(c));
    if (st == BRG_OK) st = brg_cuda_exec_check(c->exec);
    return restore_gpu(caller, st);
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
            if (c->exec) brg_cuda_exec_destroy(c->exec);
            if (c->computed) (void)cudaEventDestroy(c->computed);
            if (c->copied) (void)cudaEventDestroy(c->copied);
            if (c->stage_free) (void)cudaEventDestroy(c->stage_free);
            if (c->compute) (void)cudaStreamDestroy(c->compute);
            if (c->copy) (void)cudaStreamDestroy(c->copy);
            if (dev->base) (void)cudaFree(dev->base);
            if (c->stage) (void)cudaFreeHost(c->stage);
        }
        (void)cudaGetLastError();
        pthread_mutex_destroy(&c->stage_lock);
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
    BRG_CUDA_CHECK(cudaEventCreateWithFlags(&c->computed, cudaEventDisableTiming));
    BRG_CUDA_CHECK(cudaEventCreateWithFlags(&c->copied, cudaEventDisableTiming));
    BRG_CUDA_CHECK(cudaEventCreateWithFlags(&c->stage_free, cudaEventDisableTiming));
    return brg_cuda_exec_create(c->gpu, (void *)c->compute, dev->name, c->conv_budget, &c->exec);
}

static brg_status cuda_pci_bus_id(const brg_device *dev, char *buf, size_t size)
{
    return brg_cuda_gpu_pci_bus_id(((const cuda_context *)dev->context)->gpu, buf, size);
}

static const brg_device_iface cuda_iface = {
    /* .backend         = */ BRG_BACKEND_CUDA,
    /* .destroy         = */ cuda_destroy,
    /* .copy_in         = */ cuda_copy_in,
    /* .copy_out        = */ cuda_copy_out,
    /* .copy_peer       = */ cuda_copy_peer,
    /* .memset_zero     = */ cuda_memset_zero,
    /* .run             = */ cuda_run,
    /* .workspace_bytes = */ cuda_workspace_bytes,
    /* .synchronize     = */ cuda_synchronize,
    /* .pci_bus_id      = */ cuda_pci_bus_id,
    /* .share_cores     = */ NULL,
    /* .restore_cores   = */ NULL,
    /* .event_create      = */ NULL,
    /* .event_destroy     = */ NULL,
    /* .event_record      = */ NULL,
    /* .stream_wait       = */ NULL,
    /* .event_synchronize = */ NULL,
    /* .event_elapsed     = */ NULL,
    /* .copy_async        = */ NULL,
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
    return brg_error(BRG_ERR_UNSUPPORTED, "there is no GPU %d here; the GPUs visible are cuda:0 to cuda:%d", gpu, n - 1);
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
    char name[32], why[160], b1[32], b2[32];
    brg_device_spec_name(spec, 0, name, sizeof name);
    int count = brg_cuda_gpu_count(why, sizeof why);
    if (count == 0)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "device '%s': %s; without a GPU, brigade plan can still plan for GPU devices of a given "
                         "size (e.g. --devices cuda:0:7x12GiB)", name, why);
    if (spec->gpu < 0 || spec->gpu >= count || spec->gpu >= MAX_GPUS)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': there is no GPU %d here; the GPUs visible are cuda:0 "
                         "to cuda:%d", name, spec->gpu, count - 1);
    size_t capacity = spec->capacity;
    if (capacity == 0) { /* a whole GPU not sized by brg_device_spec_parse */
        size_t total = 0;
        brg_status st = brg_cuda_gpu_memory(spec->gpu, &total);
        if (st != BRG_OK) return brg_error_context(st, "device '%s'", name);
        size_t reserve = brg_cuda_reserve_bytes(total);
        if (total <= reserve)
            return brg_error(BRG_ERR_INVALID_ARGUMENT, "device '%s': the GPU's %s are less than the %s kept for the "
                             "CUDA context and libraries", name, brg_format_bytes(total, b1, sizeof b1),
                             brg_format_bytes(reserve, b2, sizeof b2));
        capacity = total - reserve;
    }
    brg_device *dev;
    brg_status st = brg_device_new(&cuda_iface, sizeof(cuda_context), name, capacity, &dev);
    if (st != BRG_OK) return st;
    cuda_context *c = dev->context;
    c->gpu = spec->gpu;
    c->conv_budget = spec->conv_workspace ? spec->conv_workspace : BRG_CUDA_CONV_WORKSPACE_DEFAULT;
    pthread_mutex_init(&c->stage_lock, NULL);
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
