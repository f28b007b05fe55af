/* NCCL communicators of CUDA devices: see nccl-comm.h.
 *
 * A message of several pieces is one NCCL group of sends (or receives),
 * one per piece, matched in order by the peer's group of the same sizes:
 * NCCL has no tags, and on one communicator the messages between two
 * members arrive in the order they were sent. Every call is checked; a
 * failure names the call and NCCL's own last words.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "base/device-impl.h"
#include "base/internal.h"
#include "cuda-check.h"
#include "cuda-kernels.h"
#include "nccl-comm.h"

_Static_assert(sizeof(ncclUniqueId) == BRG_COMM_ID_BYTES, "BRG_COMM_ID_BYTES is NCCL's id size");

struct brg_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t sent; /* recorded after each send, on the stream the send was queued on */
};

/* How long a communicator being destroyed waits for its work to end. */
#define DESTROY_WAIT_NS (5 * 1000000000LL)

static brg_status nccl_fail(const char *what, ncclResult_t r, ncclComm_t comm)
{
    const char *last = ncclGetLastError(comm);
    return brg_error(BRG_ERR_BACKEND, "%s failed: %s%s%s (set NCCL_DEBUG=WARN for NCCL's account)", what,
                     ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

#define NCCL_TRY(call, comm)                                                                       \
    do {                                                                                           \
        ncclResult_t brg_nccl_r_ = (call);                                                         \
        if (brg_nccl_r_ != ncclSuccess) return nccl_fail(#call, brg_nccl_r_, (comm));              \
    } while (0)

brg_status brg_nccl_id(unsigned char *id)
{
    ncclUniqueId u;
    NCCL_TRY(ncclGetUniqueId(&u), NULL);
    memcpy(id, &u, sizeof u);
    return BRG_OK;
}

brg_status brg_nccl_create(const unsigned char *id, int ranks, int rank, brg_nccl **out)
{
    *out = NULL;
    /* Loading a kernel on its first launch synchronizes the GPU: with a
     * receive of this communicator spinning on a peer that waits for that
     * launch's results, the pipeline would hang (docs/distributed.md,
     * "Lazy kernel loading"). CUDA reads the setting once, when it starts
     * (brg_world_init sets it under mpirun), so the driver's mode is what
     * counts: a program that started CUDA before setting it loads lazily.
     * Where the driver cannot say, the setting stands in for it. */
    const char *loading = getenv("CUDA_MODULE_LOADING");
    int lazy = brg_cuda_lazy_loading();
    if (lazy < 0) lazy = !(loading && strcmp(loading, "EAGER") == 0);
    if (ranks > 1 && lazy)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "NCCL communicators need every CUDA kernel loaded up front, but this process loads them "
                         "lazily (CUDA_MODULE_LOADING=%s%s): a kernel's first launch would wait for NCCL's kernels, "
                         "which may wait for a peer that waits for it. Start the ranks with mpirun, which sets "
                         "CUDA_MODULE_LOADING=EAGER, or set it yourself before anything in the process starts CUDA",
                         loading ? loading : "unset, LAZY since CUDA 12.2",
                         loading && strcmp(loading, "EAGER") == 0 ? ", set after CUDA had started" : "");
    brg_nccl *n = brg_calloc(1, sizeof *n, "an NCCL communicator");
    if (!n) return BRG_ERR_HOST_MEMORY;
    cudaError_t err = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        free(n);
        return brg_cuda_fail("cudaStreamCreateWithFlags", err, __FILE__, __LINE__);
    }
    err = cudaEventCreateWithFlags(&n->sent, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        (void)cudaStreamDestroy(n->stream);
        free(n);
        return brg_cuda_fail("cudaEventCreateWithFlags", err, __FILE__, __LINE__);
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    const ncclResult_t r = ncclCommInitRank(&n->comm, ranks, u, rank);
    if (r != ncclSuccess) {
        const brg_status st = nccl_fail("ncclCommInitRank", r, NULL);
        (void)cudaEventDestroy(n->sent);
        (void)cudaStreamDestroy(n->stream);
        free(n);
        return st;
    }
    *out = n;
    return BRG_OK;
}

/* cudaStreamQuery and cudaEventQuery: cudaSuccess when the work has
 * ended, cudaErrorNotReady while it runs, anything else a failure. A
 * query that answers cudaErrorNotReady leaves it as the thread's last
 * error, which the next kernel launch's check (cudaGetLastError, as
 * ops_kernels.cu's launchers end) would take for its own failure: cleared
 * here, as PyTorch does after its queries. */
static cudaError_t stream_query(cudaStream_t stream)
{
    const cudaError_t err = cudaStreamQuery(stream);
    if (err == cudaErrorNotReady) (void)cudaGetLastError();
    return err;
}

static cudaError_t event_query(cudaEvent_t ev)
{
    const cudaError_t err = cudaEventQuery(ev);
    if (err == cudaErrorNotReady) (void)cudaGetLastError();
    return err;
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Whether the communicator's receives and sums (its stream) and its last
 * send (the event after it) end within DESTROY_WAIT_NS, without an error
 * of NCCL's. NCCL's kernels never time out: a receive from a peer that is
 * gone would hold a plain synchronize for ever. */
static int work_ended(brg_nccl *n)
{
    const long long deadline = now_ns() + DESTROY_WAIT_NS;
    for (;;) {
        const cudaError_t s = stream_query(n->stream);
        const cudaError_t e = event_query(n->sent); /* cudaSuccess if never recorded */
        if (s == cudaSuccess && e == cudaSuccess) return 1;
        if ((s != cudaSuccess && s != cudaErrorNotReady) || (e != cudaSuccess && e != cudaErrorNotReady)) return 0;
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(n->comm, &async) != ncclSuccess || async != ncclSuccess) return 0;
        if (now_ns() > deadline) return 0;
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

/* A communicator whose work ended is finalized (flushed) before it goes;
 * one whose work failed or does not end (a peer gone) is aborted, which
 * does not wait for the peers. */
void brg_nccl_destroy(brg_nccl *n)
{
    if (!n) return;
    if (work_ended(n) && ncclCommFinalize(n->comm) == ncclSuccess)
        (void)ncclCommDestroy(n->comm);
    else
        (void)ncclCommAbort(n->comm);
    (void)cudaEventDestroy(n->sent);
    (void)cudaStreamDestroy(n->stream);
    (void)cudaGetLastError();
    free(n);
}

/* One group of sends or receives of the pieces (empty ones skipped). */
static brg_status grouped(brg_nccl *n, int send, cudaStream_t stream, int peer, void *const *pieces,
                          const size_t *bytes, int count)
{
    NCCL_TRY(ncclGroupStart(), n->comm);
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < count && r == ncclSuccess; i++) {
        if (bytes[i] == 0) continue;
        r = send ? ncclSend(pieces[i], bytes[i], ncclUint8, peer, n->comm, stream)
                 : ncclRecv(pieces[i], bytes[i], ncclUint8, peer, n->comm, stream);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_fail(send ? "ncclSend" : "ncclRecv", r, n->comm);
    if (end != ncclSuccess) return nccl_fail("ncclGroupEnd", end, n->comm);
    return BRG_OK;
}

/* NCCL connects two members at the first message between them (and a
 * sum's algorithm at its first sum, since 2.22: NCCL_RUNTIME_CONNECT),
 * inside that call, on the host, in a handshake that waits for the
 * peer's first call. In a step that wait can deadlock the pipeline: a
 * worker whose first receive waits for its peer's first send, while that
 * peer's worker waits on the host for its own compute stream, which waits
 * for a message from the first (the cpu-async twin, BRG_DEBUG_CONNECT=1,
 * hangs so in ZB-V on four devices of two ranks). So brg_comm_create
 * connects here, while the communicator is made, in the order every rank
 * makes its communicators: one byte from member 0 to member 1, or a sum
 * of one value, on a scratch buffer outside the arena, freed at once
 * (cudaFree waits for the GPU: nothing of a step runs yet). A sum of
 * gradient buckets may still pick another of NCCL's algorithms than the
 * one-value sum did and connect it then, on the gradient reducer's
 * thread, which waits for nothing of the pipeline's. */
/* Wait for the communicator's stream, polling NCCL's asynchronous error
 * too: a peer that is gone fails the wait instead of holding it for ever
 * (under mpirun the watchdog bounds a peer that is only stopped). */
static brg_status stream_done(brg_nccl *n, const char *what)
{
    for (;;) {
        const cudaError_t s = stream_query(n->stream);
        if (s == cudaSuccess) return BRG_OK;
        if (s != cudaErrorNotReady) return brg_cuda_fail(what, s, __FILE__, __LINE__);
        ncclResult_t async = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(n->comm, &async);
        if (r != ncclSuccess) return nccl_fail("ncclCommGetAsyncError", r, n->comm);
        if (async != ncclSuccess && async != ncclInProgress) return nccl_fail(what, async, n->comm);
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

brg_status brg_nccl_connect(brg_nccl *n, int rank, int sums)
{
    void *scratch = NULL;
    BRG_CUDA_CHECK(cudaMalloc(&scratch, 256));
    brg_status st = BRG_OK;
    if (sums) {
        const ncclResult_t r = ncclAllReduce(scratch, scratch, 1, ncclFloat, ncclSum, n->comm, n->stream);
        if (r != ncclSuccess) st = nccl_fail("ncclAllReduce (connecting)", r, n->comm);
    } else {
        void *pieces[1] = {scratch};
        const size_t bytes[1] = {1};
        st = grouped(n, rank == 0, n->stream, 1 - rank, pieces, bytes, 1);
    }
    if (st == BRG_OK) st = stream_done(n, "connecting to the peer");
    /* After a failure the stream may still hold the message: freeing the
     * scratch would wait for it. A small leak on a path that ends the job. */
    if (st == BRG_OK) (void)cudaFree(scratch);
    return st;
}

brg_status brg_nccl_send(brg_nccl *n, cudaStream_t stream, int peer, void *const *pieces, const size_t *bytes,
                         int count)
{
    BRG_CHECK(grouped(n, 1, stream, peer, pieces, bytes, count));
    /* Sends run on the caller's stream: what destroy waits for. Streams
     * run in order, so the latest send's event covers the earlier ones. */
    BRG_CUDA_CHECK(cudaEventRecord(n->sent, stream));
    return BRG_OK;
}

brg_status brg_nccl_recv(brg_nccl *n, int peer, void *const *pieces, const size_t *bytes, int count)
{
    return grouped(n, 0, n->stream, peer, pieces, bytes, count);
}

brg_status brg_nccl_sum(brg_nccl *n, float *values, size_t count)
{
    NCCL_TRY(ncclAllReduce(values, values, count, ncclFloat, ncclSum, n->comm, n->stream), n->comm);
    return BRG_OK;
}

brg_status brg_nccl_wait(brg_nccl *n, cudaEvent_t ev)
{
    BRG_CUDA_CHECK(cudaStreamWaitEvent(n->stream, ev, 0));
    return BRG_OK;
}

brg_status brg_nccl_record(brg_nccl *n, cudaEvent_t ev)
{
    BRG_CUDA_CHECK(cudaEventRecord(ev, n->stream));
    return BRG_OK;
}
