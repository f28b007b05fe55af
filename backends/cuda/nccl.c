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

#include <sched.h>
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
    void *scratch;    /* the connection's buffer, kept after a failed connect until the communicator is gone */
    int rank, ranks;  /* this member, of how many */
};

/* How long a communicator being destroyed waits for its work to end. */
#define DESTROY_WAIT_NS (5 * 1000000000LL)

/* How long a member waits for the others to join its communicator
 * (ncclCommInitRankConfig) and then to connect (the first message or
 * sum, brg_nccl_connect). Every rank makes its communicators in one
 * order, and the id reached this member only once its creator was making
 * the same one, so a healthy join takes NCCL's bootstrap, seconds. Under
 * mpirun a stopped or dead rank is caught sooner (the watchdog's
 * heartbeat, docs/distributed.md, "Failure"); this bounds what the
 * watchdog cannot tell from a slow setup (its hour): a live peer that
 * never joins (a network NCCL cannot cross), and a member outside mpirun.
 * BRG_NCCL_JOIN_TIMEOUT (seconds) sets another. */
#define JOIN_WAIT_S 120

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int join_wait_s(void)
{
    const char *s = getenv("BRG_NCCL_JOIN_TIMEOUT");
    const int v = s && *s ? atoi(s) : 0;
    return v > 0 ? v : JOIN_WAIT_S;
}

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

/* brigade's communicators are nonblocking (ncclConfig_t.blocking = 0),
 * so that a member whose peers never join can give up. A call that
 * answers ncclInProgress goes on in a thread of NCCL's (the join, a
 * group's launch with the connections it makes, a finalize), and until
 * the communicator's state (ncclCommGetAsyncError) leaves ncclInProgress
 * no other call may use the communicator and no kernel may be queued on
 * its streams. This waits for that, until deadline (now_ns(); 0: none),
 * and returns the outcome: ncclSuccess, NCCL's error, or ncclInProgress
 * when the deadline passed. Yields first (a group's launch takes
 * microseconds), then sleeps (a join takes seconds). */
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r, long long deadline)
{
    for (int polls = 0; r == ncclInProgress; polls++) {
        if (deadline && now_ns() > deadline) return ncclInProgress;
        if (polls < 1000) {
            sched_yield();
        } else {
            const struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
        }
        const ncclResult_t q = ncclCommGetAsyncError(comm, &r);
        if (q != ncclSuccess) return q;
    }
    return r;
}

/* A call on a communicator, settled (no deadline: under mpirun the
 * watchdog bounds a step's wait), as a status naming the call. */
static brg_status settled(brg_nccl *n, ncclResult_t r, const char *what)
{
    r = settle(n->comm, r, 0);
    return r == ncclSuccess ? BRG_OK : nccl_fail(what, r, n->comm);
}

/* The failure of a member whose peers did not come in time. */
static brg_status not_joined(const brg_nccl *n, const char *what, int seconds)
{
    if (n->ranks == 2)
        return brg_error(BRG_ERR_BACKEND,
                         "%s: member %d of the NCCL communicator waited %d s, but its peer (member %d) did not join "
                         "within that time (stopped, hung, or unreachable through NCCL's network; "
                         "BRG_NCCL_JOIN_TIMEOUT sets the wait, NCCL_DEBUG=WARN tells NCCL's account)",
                         what, n->rank, seconds, 1 - n->rank);
    return brg_error(BRG_ERR_BACKEND,
                     "%s: member %d of the NCCL communicator of %d waited %d s, but another member did not join "
                     "within that time (stopped, hung, or unreachable through NCCL's network; "
                     "BRG_NCCL_JOIN_TIMEOUT sets the wait, NCCL_DEBUG=WARN tells NCCL's account)",
                     what, n->rank, n->ranks, seconds);
}

/* A joining call settled within the join's wait. */
static brg_status joined(brg_nccl *n, ncclResult_t r, const char *what)
{
    const int seconds = join_wait_s();
    r = settle(n->comm, r, now_ns() + (long long)seconds * 1000000000LL);
    if (r == ncclInProgress) return not_joined(n, what, seconds);
    return r == ncclSuccess ? BRG_OK : nccl_fail(what, r, n->comm);
}

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
    n->rank = rank;
    n->ranks = ranks;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* the join is waited for below, with a deadline */
    const ncclResult_t r = ncclCommInitRankConfig(&n->comm, ranks, u, rank, &config);
    /* NCCL may return the communicator with an error: it goes by abort,
     * which also stops a join still under way. */
    const brg_status st =
        n->comm ? joined(n, r, "ncclCommInitRankConfig") : nccl_fail("ncclCommInitRankConfig", r, NULL);
    if (st != BRG_OK) {
        if (n->comm) (void)ncclCommAbort(n->comm);
        (void)cudaEventDestroy(n->sent);
        (void)cudaStreamDestroy(n->stream);
        (void)cudaGetLastError();
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

/* Whether the communicator's receives and sums (its stream) and its last
 * send (the event after it) end before deadline, without an error of
 * NCCL's. NCCL's kernels never time out: a receive from a peer that is
 * gone would hold a plain synchronize for ever. The communicator's state
 * comes first: a call still ncclInProgress (a connect given up at its
 * deadline, whose launch has queued nothing yet) leaves the streams idle,
 * and finalizing it then is a misuse NCCL answers with an error of its
 * own; abort is what stops such a call. */
static int work_ended(brg_nccl *n, long long deadline)
{
    for (;;) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(n->comm, &async) != ncclSuccess || async != ncclSuccess) return 0;
        const cudaError_t s = stream_query(n->stream);
        const cudaError_t e = event_query(n->sent); /* cudaSuccess if never recorded */
        if (s == cudaSuccess && e == cudaSuccess) return 1;
        if ((s != cudaSuccess && s != cudaErrorNotReady) || (e != cudaSuccess && e != cudaErrorNotReady)) return 0;
        if (now_ns() > deadline) return 0;
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

/* A communicator whose work ended is finalized (flushed) before it goes,
 * and the finalize, nonblocking, waited for within the same time; one
 * whose work or finalize failed or does not end (a peer gone) is aborted,
 * which waits for no peer and stops its kernels. Only then is a failed
 * connect's scratch buffer freed: cudaFree waits for the GPU, and the
 * connect's message might never have ended. */
void brg_nccl_destroy(brg_nccl *n)
{
    if (!n) return;
    const long long deadline = now_ns() + DESTROY_WAIT_NS;
    if (work_ended(n, deadline) && settle(n->comm, ncclCommFinalize(n->comm), deadline) == ncclSuccess)
        (void)ncclCommDestroy(n->comm);
    else
        (void)ncclCommAbort(n->comm);
    if (n->scratch) (void)cudaFree(n->scratch);
    (void)cudaEventDestroy(n->sent);
    (void)cudaStreamDestroy(n->stream);
    (void)cudaGetLastError();
    free(n);
}

/* One group of sends or receives of the pieces (empty ones skipped);
 * *end: what ncclGroupEnd answered, for the caller to settle. */
static brg_status grouped(brg_nccl *n, int send, cudaStream_t stream, int peer, void *const *pieces,
                          const size_t *bytes, int count, ncclResult_t *end)
{
    NCCL_TRY(ncclGroupStart(), n->comm);
    /* Inside a group a call only queues; on a nonblocking communicator it
     * answers the communicator's state, settled before the group began. */
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < count && (r == ncclSuccess || r == ncclInProgress); i++) {
        if (bytes[i] == 0) continue;
        r = send ? ncclSend(pieces[i], bytes[i], ncclUint8, peer, n->comm, stream)
                 : ncclRecv(pieces[i], bytes[i], ncclUint8, peer, n->comm, stream);
    }
    *end = ncclGroupEnd(); /* ncclInProgress while NCCL's thread launches it: the caller settles it */
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(send ? "ncclSend" : "ncclRecv", r, n->comm);
    return BRG_OK;
}

/* NCCL connects two members at the first message between them (and a
 * sum's algorithm at its first sum, since 2.22: NCCL_RUNTIME_CONNECT),
 * inside that call (on a nonblocking communicator, in the group launch
 * that NCCL's thread runs), in a handshake that waits for the peer's
 * first call. In a step that wait can deadlock the pipeline: a
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

/* Wait for the communicator's stream until deadline, polling NCCL's
 * asynchronous error too: a peer that is gone fails the wait, one that
 * never takes part ends it at the deadline. */
static brg_status stream_done(brg_nccl *n, const char *what, long long deadline, int seconds)
{
    for (;;) {
        const cudaError_t s = stream_query(n->stream);
        if (s == cudaSuccess) return BRG_OK;
        if (s != cudaErrorNotReady) return brg_cuda_fail(what, s, __FILE__, __LINE__);
        ncclResult_t async = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(n->comm, &async);
        if (r != ncclSuccess) return nccl_fail("ncclCommGetAsyncError", r, n->comm);
        if (async != ncclSuccess && async != ncclInProgress) return nccl_fail(what, async, n->comm);
        if (now_ns() > deadline) return not_joined(n, what, seconds);
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

/* The scratch buffer is the communicator's until the message has ended:
 * after a failure the stream may still hold it, so brg_nccl_destroy frees
 * it, once the communicator's abort has stopped NCCL's kernels. */
brg_status brg_nccl_connect(brg_nccl *n, int rank, int sums)
{
    void *scratch = NULL;
    BRG_CUDA_CHECK(cudaMalloc(&scratch, 256));
    n->scratch = scratch;
    const int seconds = join_wait_s();
    const long long deadline = now_ns() + (long long)seconds * 1000000000LL;
    ncclResult_t launched = ncclSuccess;
    brg_status st = BRG_OK;
    if (sums) {
        launched = ncclAllReduce(n->scratch, n->scratch, 1, ncclFloat, ncclSum, n->comm, n->stream);
    } else {
        void *pieces[1] = {n->scratch};
        const size_t bytes[1] = {1};
        st = grouped(n, rank == 0, n->stream, 1 - rank, pieces, bytes, 1, &launched);
    }
    if (st == BRG_OK) {
        launched = settle(n->comm, launched, deadline);
        if (launched == ncclInProgress) st = not_joined(n, "connecting to the peer", seconds);
        else if (launched != ncclSuccess)
            st = nccl_fail(sums ? "ncclAllReduce (connecting)" : "ncclGroupEnd (connecting)", launched, n->comm);
    }
    if (st == BRG_OK) st = stream_done(n, "connecting to the peer", deadline, seconds);
    if (st != BRG_OK) return st;
    const cudaError_t err = cudaFree(n->scratch);
    n->scratch = NULL;
    if (err != cudaSuccess) return brg_cuda_fail("cudaFree(scratch)", err, __FILE__, __LINE__);
    return BRG_OK;
}

brg_status brg_nccl_send(brg_nccl *n, cudaStream_t stream, int peer, void *const *pieces, const size_t *bytes,
                         int count)
{
    ncclResult_t end = ncclSuccess;
    BRG_CHECK(grouped(n, 1, stream, peer, pieces, bytes, count, &end));
    /* Launched (settled) before the event is recorded behind it. */
    BRG_CHECK(settled(n, end, "ncclGroupEnd (sending)"));
    /* Sends run on the caller's stream: what destroy waits for. Streams
     * run in order, so the latest send's event covers the earlier ones. */
    BRG_CUDA_CHECK(cudaEventRecord(n->sent, stream));
    return BRG_OK;
}

brg_status brg_nccl_recv(brg_nccl *n, int peer, void *const *pieces, const size_t *bytes, int count)
{
    ncclResult_t end = ncclSuccess;
    BRG_CHECK(grouped(n, 0, n->stream, peer, pieces, bytes, count, &end));
    return settled(n, end, "ncclGroupEnd (receiving)");
}

brg_status brg_nccl_sum(brg_nccl *n, float *values, size_t count)
{
    return settled(n, ncclAllReduce(values, values, count, ncclFloat, ncclSum, n->comm, n->stream), "ncclAllReduce");
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
