/* The processes of a run (brigade/distributed.h) and the links of channels
 * between them (exec/world-impl.h): the only file that speaks MPI. */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BRG_HAVE_MPI
#include <mpi.h>
#endif

#include "base/internal.h"
#include "world-impl.h"

struct brg_world {
    int rank, size, local_rank, local_size; /* local: the ranks on this node */
    int mpi;  /* MPI was initialized here */
    int refs; /* brg_world_init calls not yet finalized */
    int tag_limit;
    /* A replica's world (brg_world_split_replicas): its ranks among all,
     * which replica of how many, and the job's rank and size for messages. */
    const brg_world *parent;
    int replica, replicas;
    int job_rank, job_size;
#ifdef BRG_HAVE_MPI
    MPI_Comm control;
    MPI_Comm across; /* the ranks holding the same devices in every replica (replica order) */
    MPI_Comm beats;  /* the heartbeat's (brg_world_heartbeat_start) */
#endif
};

static brg_world the_world;

int brg_world_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static int env_int(const char *name, int fallback)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : fallback;
}

#ifdef BRG_HAVE_MPI
/* MPI's words for an error code. */
static brg_status mpi_error(int code, const char *what, int peer)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, text, &len);
    if (peer >= 0) return brg_error(BRG_ERR_BACKEND, "%s with rank %d: MPI error: %s", what, peer, text);
    return brg_error(BRG_ERR_BACKEND, "%s: MPI error: %s", what, text);
}
#define MPI_TRY(call, what, peer)                                                                                     \
    do {                                                                                                              \
        const int rc_ = (call);                                                                                       \
        if (rc_ != MPI_SUCCESS) return mpi_error(rc_, what, peer);                                                    \
    } while (0)
#endif

brg_status brg_world_init(int *argc, char ***argv, brg_world **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_world_init: out is NULL");
    *out = NULL;
    brg_world *w = &the_world;
    if (w->refs > 0) {
        w->refs++;
        *out = w;
        return BRG_OK;
    }
    memset(w, 0, sizeof *w);
    w->size = 1;
    w->tag_limit = INT_MAX;
    w->replicas = 1;
    if (brg_world_launched()) {
        /* Before anything starts CUDA, which reads it once: every kernel
         * loaded when CUDA starts, none on its first launch. A lazy load
         * synchronizes the whole GPU, NCCL's kernels included, and those
         * may be waiting for a peer that waits for this very launch
         * (docs/distributed.md, "Lazy kernel loading"). A setting the
         * user made stays; brg_nccl_create refuses a lazy one. */
        if (env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 2)) > 1) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
#ifdef BRG_HAVE_MPI
        int provided = 0;
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return brg_error(BRG_ERR_IO, "launched by mpirun, but MPI_Init_thread failed");
        w->mpi = 1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &w->size);
        if (provided < MPI_THREAD_MULTIPLE) {
            MPI_Finalize();
            memset(w, 0, sizeof *w);
            return brg_error(BRG_ERR_UNSUPPORTED,
                             "this MPI gives thread level %d, but brigade's device threads each send and receive, "
                             "which takes MPI_THREAD_MULTIPLE (%d); use an MPI built with thread support",
                             provided, MPI_THREAD_MULTIPLE);
        }
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &w->control);
        if (rc != MPI_SUCCESS) {
            MPI_Finalize();
            memset(w, 0, sizeof *w);
            return brg_error(BRG_ERR_IO, "MPI_Comm_dup of the world failed");
        }
        MPI_Comm_set_errhandler(w->control, MPI_ERRORS_RETURN);
        /* Made here, where every rank comes, so that starting the beats
         * is not collective. */
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &w->beats);
        if (rc != MPI_SUCCESS) {
            MPI_Comm_free(&w->control);
            MPI_Finalize();
            memset(w, 0, sizeof *w);
            return brg_error(BRG_ERR_IO, "MPI_Comm_dup of the world failed");
        }
        MPI_Comm_set_errhandler(w->beats, MPI_ERRORS_RETURN);
        int *ub = NULL, found = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
        w->tag_limit = found && ub && *ub > 0 ? *ub : 32767;
        /* The ranks sharing this node's memory, from MPI itself (the
         * launcher's variables as a fallback). */
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, &w->local_rank);
            MPI_Comm_size(node, &w->local_size);
            MPI_Comm_free(&node);
        } else {
            w->local_rank =
                env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", env_int("SLURM_LOCALID", 0)));
            w->local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("SLURM_NTASKS_PER_NODE", 1));
        }
        w->across = MPI_COMM_SELF;
#else
        (void)argc;
        (void)argv;
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "started by an MPI launcher, but this brigade was built without MPI; install "
                         "libopenmpi-dev and build it again (configure reports \"MPI: yes\")");
#endif
    }
    w->job_rank = w->rank;
    w->job_size = w->size;
    w->refs = 1;
    *out = w;
    return BRG_OK;
}

brg_status brg_world_split_replicas(const brg_world *w, int replicas, brg_world **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_world_split_replicas: out is NULL");
    *out = NULL;
    const int R = brg_world_size(w);
    if (!w || w->parent)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_world_split_replicas: give the world of brg_world_init");
    if (replicas < 1 || R % replicas != 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "%d replicas on %d rank%s: each replica takes the same number of ranks, so give a number "
                         "of replicas that divides %d (or start a multiple of %d ranks)", replicas, R,
                         R == 1 ? "" : "s", R, replicas);
    brg_world *sub = brg_calloc(1, sizeof *sub, "a replica's world");
    if (!sub) return BRG_ERR_HOST_MEMORY;
    const int per = R / replicas;
    sub->parent = w;
    sub->refs = 1;
    sub->replicas = replicas;
    sub->replica = w->rank / per;
    sub->rank = w->rank % per;
    sub->size = per;
    sub->local_rank = w->local_rank;
    sub->local_size = w->local_size;
    sub->tag_limit = w->tag_limit;
    sub->job_rank = w->rank;
    sub->job_size = w->size;
#ifdef BRG_HAVE_MPI
    if (w->mpi) {
        int rc = MPI_Comm_split(w->control, sub->replica, sub->rank, &sub->control);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_split(w->control, sub->rank, sub->replica, &sub->across);
        if (rc != MPI_SUCCESS) {
            free(sub);
            return mpi_error(rc, "splitting the ranks into replicas", -1);
        }
        MPI_Comm_set_errhandler(sub->control, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(sub->across, MPI_ERRORS_RETURN);
    }
#endif
    *out = sub;
    return BRG_OK;
}

int brg_world_replicas(const brg_world *w) { return w && w->replicas > 0 ? w->replicas : 1; }
int brg_world_replica(const brg_world *w) { return w ? w->replica : 0; }

/* ---- heartbeat ---- */

/* A live rank's beat thread runs whatever its other threads do (a long
 * import, a scan, a wait in MPI), so the beats stop only when the
 * process is stopped or gone. The ring (beat to the next rank, listen to
 * the previous) costs one message per rank and period: of any set of
 * stopped ranks short of all, one has a live listener. One beat at most
 * is in flight: a stopped rank's queue does not fill. */
#define BEAT_PERIOD_NS 250000000L
#define BEAT_TAG 1
#define BEAT_ALIVE 1
#define BEAT_GOODBYE 0

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, stop;
    int next, previous; /* beat to, listen to */
    double last;        /* brg_now_seconds() of the previous rank's latest beat (or of the start) */
    double tick;        /* brg_now_seconds() of the beat thread's latest round */
    int gone;           /* the previous rank said goodbye */
} beat = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* A beat thread that has not run for this long was itself stopped (the
 * whole job suspended and resumed, as Slurm's suspend does) or starved:
 * it could not have heard the beats, so the silence counts afresh. */
#define BEAT_SELF_GAP 1.0

#ifdef BRG_HAVE_MPI
/* Waits up to a second for a request (a beat to a stopped rank may
 * never complete); one left active is freed, which MPI allows of sends. */
static void finish_send(MPI_Request *req)
{
    const double until = brg_now_seconds() + 1.0;
    int done = 0;
    while (*req != MPI_REQUEST_NULL && MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           brg_now_seconds() < until) {
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    if (*req != MPI_REQUEST_NULL) MPI_Request_free(req);
}

static void *beat_main(void *arg)
{
    MPI_Comm comm = *(MPI_Comm *)arg;
    const int alive = BEAT_ALIVE, goodbye = BEAT_GOODBYE;
    int heard = 0;
    MPI_Request out = MPI_REQUEST_NULL, in = MPI_REQUEST_NULL;
    int ok = MPI_Irecv(&heard, 1, MPI_INT, beat.previous, BEAT_TAG, comm, &in) == MPI_SUCCESS;
    pthread_mutex_lock(&beat.mu);
    while (!beat.stop && ok) {
        const double now = brg_now_seconds();
        if (now - beat.tick > BEAT_SELF_GAP) beat.last = now;
        beat.tick = now;
        pthread_mutex_unlock(&beat.mu);
        int done = 1;
        if (out != MPI_REQUEST_NULL) ok = MPI_Test(&out, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        if (ok && done) ok = MPI_Isend(&alive, 1, MPI_INT, beat.next, BEAT_TAG, comm, &out) == MPI_SUCCESS;
        /* Every beat that came, until the goodbye. */
        while (ok && in != MPI_REQUEST_NULL) {
            ok = MPI_Test(&in, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS;
            if (!ok || !done) break;
            pthread_mutex_lock(&beat.mu);
            beat.last = brg_now_seconds();
            beat.gone = heard == BEAT_GOODBYE;
            pthread_mutex_unlock(&beat.mu);
            if (heard != BEAT_GOODBYE)
                ok = MPI_Irecv(&heard, 1, MPI_INT, beat.previous, BEAT_TAG, comm, &in) == MPI_SUCCESS;
        }
        pthread_mutex_lock(&beat.mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += BEAT_PERIOD_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (!beat.stop) pthread_cond_timedwait(&beat.cv, &beat.mu, &until);
    }
    pthread_mutex_unlock(&beat.mu);
    /* A rank that ends says so, so that the next one does not take it for
     * stopped; then nothing of the beats is left pending for MPI_Finalize. */
    finish_send(&out);
    if (ok && MPI_Isend(&goodbye, 1, MPI_INT, beat.next, BEAT_TAG, comm, &out) == MPI_SUCCESS) finish_send(&out);
    if (in != MPI_REQUEST_NULL) {
        MPI_Cancel(&in);
        MPI_Wait(&in, MPI_STATUS_IGNORE);
    }
    return NULL;
}
#endif

brg_status brg_world_heartbeat_start(brg_world *w)
{
    if (w && w->parent) w = (brg_world *)w->parent;
    if (!brg_world_is_distributed(w) || beat.running) return BRG_OK;
#ifdef BRG_HAVE_MPI
    pthread_mutex_lock(&beat.mu);
    beat.next = (w->rank + 1) % w->size;
    beat.previous = (w->rank + w->size - 1) % w->size;
    beat.last = beat.tick = brg_now_seconds();
    beat.gone = 0;
    beat.stop = 0;
    beat.running = pthread_create(&beat.thread, NULL, beat_main, &w->beats) == 0;
    pthread_mutex_unlock(&beat.mu);
    if (!beat.running) return brg_error(BRG_ERR_HOST_MEMORY, "cannot start the heartbeat's thread");
#endif
    return BRG_OK;
}

double brg_world_heartbeat_silence(const brg_world *w, int *rank)
{
    (void)w; /* one world per process */
    pthread_mutex_lock(&beat.mu);
    const double now = brg_now_seconds();
    /* No judgement while this rank's own beat thread is behind (BEAT_SELF_GAP). */
    const int listening = beat.running && !beat.gone && now - beat.tick <= BEAT_SELF_GAP;
    const double silence = listening ? now - beat.last : 0.0;
    if (rank) *rank = beat.previous;
    pthread_mutex_unlock(&beat.mu);
    return silence;
}

static void heartbeat_stop(void)
{
    pthread_mutex_lock(&beat.mu);
    const int running = beat.running;
    beat.stop = 1;
    pthread_cond_signal(&beat.cv);
    pthread_mutex_unlock(&beat.mu);
    if (running) pthread_join(beat.thread, NULL);
    pthread_mutex_lock(&beat.mu);
    beat.running = 0;
    pthread_mutex_unlock(&beat.mu);
}

void brg_world_finalize(brg_world *w)
{
    if (w && w->parent) { /* a replica's world */
#ifdef BRG_HAVE_MPI
        if (w->parent->mpi) {
            MPI_Comm_free(&w->control);
            MPI_Comm_free(&w->across);
        }
#endif
        free(w);
        return;
    }
    if (!w || w->refs <= 0 || --w->refs > 0) return;
    heartbeat_stop();
#ifdef BRG_HAVE_MPI
    if (w->mpi) {
        MPI_Comm_free(&w->beats);
        MPI_Comm_free(&w->control);
        MPI_Finalize();
    }
#endif
    memset(w, 0, sizeof *w);
}

int brg_world_rank(const brg_world *w) { return w ? w->rank : 0; }
int brg_world_size(const brg_world *w) { return w && w->size > 0 ? w->size : 1; }
int brg_world_local_rank(const brg_world *w) { return w ? w->local_rank : 0; }
int brg_world_local_size(const brg_world *w) { return w && w->local_size > 0 ? w->local_size : 1; }

void brg_world_node_share(const brg_world *w, int device, int n, int *index, int *count)
{
    const int R = brg_world_size(w), locals = brg_world_local_size(w);
    if ((R == 1 && locals == 1) || n < R || n % R != 0) {
        *index = device;
        *count = n;
        return;
    }
    const int per = n / R;
    *index = brg_world_local_rank(w) * per + device % per;
    *count = locals * per;
}
int brg_world_is_distributed(const brg_world *w) { return brg_world_size(w) > 1; }

int brg_world_job_rank(const brg_world *w, int rank)
{
    if (!w) return 0;
    if (rank < 0) return w->job_rank;
    return w->parent ? w->replica * w->size + rank : rank; /* replicas take the ranks in order */
}
int brg_world_tag_limit(const brg_world *w) { return w ? w->tag_limit : INT_MAX; }

brg_status brg_world_check_devices(const brg_world *w, int n)
{
    const int R = brg_world_size(w);
    if (n >= R && n % R == 0) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "%d device%s for %d ranks: the ranks take the devices in order, each the same number, so "
                     "give a multiple of %d devices, or start a number of ranks that divides %d", n, n == 1 ? "" : "s",
                     R, R, n);
}

brg_status brg_world_expand_devices(const brg_world *w, brg_device_spec *specs, int max, int *count)
{
    const int n = *count, R = brg_world_size(w);
    if (n < 1 || specs[0].gpu != BRG_GPU_LOCAL || R == 1) return BRG_OK;
    if ((long long)n * R > max)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "cuda:local: %d device%s on each of %d ranks make %lld, more than "
                         "the %d a pipeline may have", n, n == 1 ? "" : "s", R, (long long)n * R, max);
    for (int r = 1; r < R; r++) memcpy(specs + (size_t)r * (size_t)n, specs, (size_t)n * sizeof *specs);
    *count = n * R;
    return BRG_OK;
}

void brg_world_device_spec(const brg_world *w, const brg_device_spec *spec, brg_device_spec *out)
{
    *out = *spec;
    if (spec->backend == BRG_BACKEND_CUDA && spec->gpu == BRG_GPU_LOCAL) out->gpu = brg_world_local_rank(w);
}

int brg_world_device_rank(const brg_world *w, int device, int n)
{
    const int R = brg_world_size(w);
    if (R == 1 || n < R || n % R != 0) return 0;
    return device / (n / R);
}

int brg_world_holds(const brg_world *w, int device, int n)
{
    return brg_world_device_rank(w, device, n) == brg_world_rank(w);
}

brg_status brg_world_agree(const brg_world *w, const void *bytes, size_t n, const char *what)
{
    /* A replica's world agrees with every replica: over the whole job. */
    if (w && w->parent) w = w->parent;
    if (!brg_world_is_distributed(w)) return BRG_OK;
#ifdef BRG_HAVE_MPI
    const uint64_t mine = brg_fnv1a(BRG_FNV1A_START, bytes, n);
    uint64_t *all = brg_calloc((size_t)w->size, sizeof *all, "the ranks' hashes");
    if (!all) return BRG_ERR_HOST_MEMORY;
    const int rc = MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, w->control);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_error(rc, "comparing the ranks' hashes", -1);
    }
    char differ[256] = "";
    size_t at = 0;
    int count = 0;
    for (int r = 1; r < w->size; r++) {
        if (all[r] == all[0]) continue;
        if (count++ < 16 && at < sizeof differ)
            at += (size_t)snprintf(differ + at, sizeof differ - at, "%s%d", at ? ", " : "", r);
    }
    free(all);
    if (count == 0) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARGUMENT,
                     "the ranks disagree on %s: rank%s %s%s differ%s from rank 0's; start every rank with the same "
                     "arguments, files and build", what, count == 1 ? "" : "s", differ, count > 16 ? ", ..." : "",
                     count == 1 ? "s" : "");
#else
    (void)bytes;
    (void)n;
    (void)what;
    return BRG_OK;
#endif
}

static void (*abort_hook)(void);

void brg_world_set_abort_hook(void (*hook)(void)) { abort_hook = hook; }

void brg_world_abort(const brg_world *w, int code, const char *message)
{
    if (abort_hook) abort_hook();
    if (w && w->replicas > 1)
        fprintf(stderr, "brigade: rank %d of %d (replica %d of %d): %s\n", w->job_rank, w->job_size, w->replica,
                w->replicas, message);
    else
        fprintf(stderr, "brigade: rank %d of %d: %s\n", w ? w->job_rank : 0, w ? w->job_size : 1, message);
    fflush(stderr);
#ifdef BRG_HAVE_MPI
    if (w && (w->mpi || (w->parent && w->parent->mpi))) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    exit(code);
}

int brg_world_end_together(const brg_world *w, int code, double seconds)
{
    if (w && w->parent) w = w->parent;
    if (!brg_world_is_distributed(w)) return 1;
#ifdef BRG_HAVE_MPI
    int mine = code, any = 0;
    MPI_Request req;
    if (MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req) != MPI_SUCCESS) return 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int done = 0;;) {
        /* The time first, then the test: a rank that arrives just as the
         * time is up still counts, so no rank finalizes while one aborts. */
        clock_gettime(CLOCK_MONOTONIC, &now);
        const int late = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > seconds;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
        if (done) return 1;
        if (late) return 0; /* the request stays: the abort ends it with the job */
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
#else
    (void)code;
    (void)seconds;
    return 1;
#endif
}

int brg_world_any(const brg_world *w, int flag)
{
    if (w && w->parent) w = w->parent; /* a replica's world: over the whole job */
    if (!brg_world_is_distributed(w)) return flag != 0;
#ifdef BRG_HAVE_MPI
    int any = flag != 0;
    if (MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, w->control) != MPI_SUCCESS)
        brg_world_abort(w, 1, "comparing a flag over the ranks failed");
    return any;
#else
    return flag != 0;
#endif
}

/* ---- control ---- */

/* MPI counts are ints: big buffers go in pieces of 1 GiB. */
#define PIECE ((size_t)1 << 30)

brg_status brg_world_send(const brg_world *w, int to, const void *buf, size_t bytes)
{
#ifdef BRG_HAVE_MPI
    const unsigned char *b = buf;
    size_t at = 0;
    do { /* at least one message, even of 0 bytes */
        const size_t k = bytes - at < PIECE ? bytes - at : PIECE;
        MPI_TRY(MPI_Send(b + at, (int)k, MPI_BYTE, to, 0, w->control), "sending", to);
        at += k;
    } while (at < bytes);
    return BRG_OK;
#else
    (void)w;
    (void)buf;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a message to rank %d without MPI", to);
#endif
}

brg_status brg_world_recv(const brg_world *w, int from, void *buf, size_t bytes)
{
#ifdef BRG_HAVE_MPI
    unsigned char *b = buf;
    size_t at = 0;
    do {
        const size_t k = bytes - at < PIECE ? bytes - at : PIECE;
        MPI_Status status;
        MPI_TRY(MPI_Recv(b + at, (int)k, MPI_BYTE, from, 0, w->control, &status), "receiving", from);
        int got = 0;
        MPI_Get_count(&status, MPI_BYTE, &got);
        if ((size_t)got != k)
            return brg_error(BRG_ERR_INTERNAL, "rank %d sent %d bytes where %zu were expected (ranks out of step)",
                             from, got, k);
        at += k;
    } while (at < bytes);
    return BRG_OK;
#else
    (void)w;
    (void)buf;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a message from rank %d without MPI", from);
#endif
}

brg_status brg_world_bcast(const brg_world *w, int root, void *buf, size_t bytes)
{
    if (!brg_world_is_distributed(w)) return BRG_OK;
#ifdef BRG_HAVE_MPI
    unsigned char *b = buf;
    for (size_t at = 0; at < bytes; at += PIECE) {
        const size_t k = bytes - at < PIECE ? bytes - at : PIECE;
        MPI_TRY(MPI_Bcast(b + at, (int)k, MPI_BYTE, root, w->control), "broadcasting", root);
    }
    return BRG_OK;
#else
    (void)root;
    (void)buf;
    (void)bytes;
    return BRG_OK;
#endif
}

/* values[0..n) summed in place over the ranks of the world's control
 * communicator (across = 0) or of its replicas' (across = 1). */
static brg_status sum_doubles(const brg_world *w, int across, double *values, int n)
{
#ifdef BRG_HAVE_MPI
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, across ? w->across : w->control),
            across ? "summing over the replicas" : "summing over the ranks", -1);
#else
    (void)w;
    (void)across;
    (void)values;
    (void)n;
#endif
    return BRG_OK;
}

brg_status brg_world_sum(const brg_world *w, double *values, int n)
{
    return brg_world_is_distributed(w) ? sum_doubles(w, 0, values, n) : BRG_OK;
}

/* ---- links ---- */

#ifdef BRG_HAVE_MPI
/* Wait for req, polled with pauses: a blocking MPI call spins on a core
 * while it waits for the other replicas, and that core is the one the
 * work it overlaps needs. status may be MPI_STATUS_IGNORE; peer (or -1)
 * names the other end in errors. */
static brg_status wait_polled_from(MPI_Request *req, MPI_Status *status, const char *what, int peer)
{
    for (int done = 0;;) {
        const int rc = MPI_Test(req, &done, status);
        if (rc != MPI_SUCCESS) return mpi_error(rc, what, peer);
        if (done) return BRG_OK;
        const struct timespec pause = {0, 20000};
        nanosleep(&pause, NULL);
    }
}

static brg_status wait_polled(MPI_Request *req, const char *what)
{
    return wait_polled_from(req, MPI_STATUS_IGNORE, what, -1);
}
#endif

struct brg_link {
    int peer, slots;
#ifdef BRG_HAVE_MPI
    MPI_Comm comm;
    MPI_Request req[8];
#endif
    int posted[8];
};

brg_status brg_link_create(const brg_world *w, int peer, int slots, brg_link **out)
{
    *out = NULL;
#ifdef BRG_HAVE_MPI
    if (slots < 1 || slots > 8) return brg_error(BRG_ERR_INTERNAL, "a link of %d slots", slots);
    MPI_Comm comm;
    MPI_TRY(MPI_Comm_dup(w->control, &comm), "making a channel's communicator", -1);
    if (peer < 0) {
        MPI_Comm_free(&comm);
        return BRG_OK;
    }
    brg_link *l = brg_calloc(1, sizeof *l, "a link between processes");
    if (!l) {
        MPI_Comm_free(&comm);
        return BRG_ERR_HOST_MEMORY;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    l->peer = peer;
    l->slots = slots;
    l->comm = comm;
    *out = l;
    return BRG_OK;
#else
    (void)w;
    (void)slots;
    return peer < 0 ? BRG_OK : brg_error(BRG_ERR_INTERNAL, "a link to rank %d without MPI", peer);
#endif
}

void brg_link_destroy(brg_link *l)
{
    if (!l) return;
#ifdef BRG_HAVE_MPI
    for (int k = 0; k < l->slots; k++)
        if (l->posted[k]) {
            MPI_Cancel(&l->req[k]);
            MPI_Wait(&l->req[k], MPI_STATUS_IGNORE);
        }
    MPI_Comm_free(&l->comm);
#endif
    free(l);
}

brg_status brg_link_post(brg_link *l, int slot, void *buf, size_t bytes)
{
#ifdef BRG_HAVE_MPI
    if (bytes > INT_MAX)
        return brg_error(BRG_ERR_UNSUPPORTED, "a receive buffer of %zu bytes from rank %d: messages between "
                         "processes hold at most %d bytes", bytes, l->peer, INT_MAX);
    MPI_TRY(MPI_Irecv(buf, (int)bytes, MPI_BYTE, l->peer, MPI_ANY_TAG, l->comm, &l->req[slot]),
            "posting a receive", l->peer);
    l->posted[slot] = 1;
    return BRG_OK;
#else
    (void)l;
    (void)slot;
    (void)buf;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a link without MPI");
#endif
}

brg_status brg_link_wait(brg_link *l, int slot, int *tag, size_t *bytes)
{
#ifdef BRG_HAVE_MPI
    if (!l->posted[slot]) return brg_error(BRG_ERR_INTERNAL, "waiting on slot %d, which has no receive posted", slot);
    MPI_Status status;
    memset(&status, 0, sizeof status);
    /* A single-request wait reports in its return code, not the status. */
    const int rc = MPI_Wait(&l->req[slot], &status);
    l->posted[slot] = 0;
    if (rc != MPI_SUCCESS) {
        int cls = rc;
        MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_TRUNCATE)
            return brg_error(BRG_ERR_INTERNAL, "a message from rank %d is larger than the receive buffer it was "
                             "planned for (do the ranks run the same plan?)", l->peer);
        return mpi_error(rc, "receiving a message", l->peer);
    }
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    *tag = status.MPI_TAG;
    *bytes = (size_t)got;
    return BRG_OK;
#else
    (void)l;
    (void)slot;
    (void)tag;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a link without MPI");
#endif
}

brg_status brg_link_send(brg_link *l, void *const *pieces, const size_t *bytes, int count, int tag)
{
#ifdef BRG_HAVE_MPI
    if (count < 1 || count > 64) return brg_error(BRG_ERR_INTERNAL, "a message of %d pieces", count);
    int lengths[64];
    MPI_Aint displs[64];
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        total += bytes[i];
        if (bytes[i] > INT_MAX || total > INT_MAX)
            return brg_error(BRG_ERR_UNSUPPORTED, "a message of %zu bytes or more to rank %d: messages between "
                             "processes hold at most %d bytes", total, l->peer, INT_MAX);
        lengths[i] = (int)bytes[i];
        MPI_Get_address(pieces[i], &displs[i]);
    }
    /* One message from the tensors where they lie: no staging copy. */
    MPI_Datatype type;
    MPI_TRY(MPI_Type_create_hindexed(count, lengths, displs, MPI_BYTE, &type), "describing a message", l->peer);
    int rc = MPI_Type_commit(&type);
    if (rc == MPI_SUCCESS) rc = MPI_Send(MPI_BOTTOM, 1, type, l->peer, tag, l->comm);
    MPI_Type_free(&type);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "sending a message", l->peer);
    return BRG_OK;
#else
    (void)l;
    (void)pieces;
    (void)bytes;
    (void)count;
    (void)tag;
    return brg_error(BRG_ERR_INTERNAL, "a link without MPI");
#endif
}

brg_status brg_link_exchange(brg_link *l, const void *mine, void *theirs, size_t bytes)
{
#ifdef BRG_HAVE_MPI
    if (bytes > 4096) return brg_error(BRG_ERR_INTERNAL, "a link's exchange of %zu bytes", bytes);
    /* Tag 1: no channel message has been sent yet, and none carries it
     * then (messages are tagged from 0, and their receives come later). */
    MPI_TRY(MPI_Sendrecv(mine, (int)bytes, MPI_BYTE, l->peer, 1, theirs, (int)bytes, MPI_BYTE, l->peer, 1, l->comm,
                         MPI_STATUS_IGNORE),
            "setting up a channel", l->peer);
    return BRG_OK;
#else
    (void)l;
    (void)mine;
    (void)theirs;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a link without MPI");
#endif
}

/* The wire of a link (brg_wire, for communicators of devices that move
 * bytes through host memory): messages of their own tag on the link's
 * communicator, in pieces of at most INT_MAX bytes, waited for with
 * pauses (the caller is a device's stream thread). */
#define WIRE_TAG 2
#define WIRE_PIECE ((size_t)1 << 30)

/* Send or receive bytes in pieces; a receive must get exactly as many. */
static brg_status wire_move(void *ctx, int send, void *buf, size_t bytes)
{
#ifdef BRG_HAVE_MPI
    brg_link *l = ctx;
    const char *what = send ? "sending a message" : "receiving a message";
    for (size_t at = 0; at < bytes; at += WIRE_PIECE) {
        const size_t k = bytes - at < WIRE_PIECE ? bytes - at : WIRE_PIECE;
        char *piece = (char *)buf + at;
        MPI_Request req;
        MPI_Status status;
        MPI_TRY(send ? MPI_Isend(piece, (int)k, MPI_BYTE, l->peer, WIRE_TAG, l->comm, &req)
                     : MPI_Irecv(piece, (int)k, MPI_BYTE, l->peer, WIRE_TAG, l->comm, &req),
                what, l->peer);
        BRG_CHECK(wait_polled_from(&req, &status, what, l->peer));
        int got = (int)k;
        if (!send) MPI_Get_count(&status, MPI_BYTE, &got);
        if ((size_t)got != k)
            return brg_error(BRG_ERR_INTERNAL, "a message from rank %d holds %d bytes, its receiver expects %zu (do "
                             "the ranks run the same plan?)", l->peer, got, k);
    }
    return BRG_OK;
#else
    (void)ctx;
    (void)send;
    (void)buf;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a link without MPI");
#endif
}

static brg_status wire_send(void *ctx, int peer, const void *buf, size_t bytes)
{
    (void)peer; /* the link's other end */
    return wire_move(ctx, 1, (void *)buf, bytes);
}

static brg_status wire_recv(void *ctx, int peer, void *buf, size_t bytes)
{
    (void)peer;
    return wire_move(ctx, 0, buf, bytes);
}

static brg_status wire_no_sum(void *ctx, float *values, size_t n)
{
    (void)ctx;
    (void)values;
    (void)n;
    return brg_error(BRG_ERR_INTERNAL, "a sum over a channel's link");
}

brg_wire brg_link_wire(brg_link *l)
{
    return (brg_wire){.ctx = l, .send = wire_send, .recv = wire_recv, .sum = wire_no_sum};
}

/* ---- replicas ---- */

brg_status brg_world_replicas_sum(const brg_world *w, double *values, int n)
{
    return brg_world_replicas(w) > 1 ? sum_doubles(w, 1, values, n) : BRG_OK;
}

struct brg_replica_comm {
#ifdef BRG_HAVE_MPI
    MPI_Comm comm;
#endif
    int replicas;
};

brg_status brg_replica_comm_create(const brg_world *w, brg_replica_comm **out)
{
    *out = NULL;
    if (brg_world_replicas(w) == 1) return BRG_OK;
#ifdef BRG_HAVE_MPI
    brg_replica_comm *c = brg_calloc(1, sizeof *c, "a communicator between replicas");
    if (!c) return BRG_ERR_HOST_MEMORY;
    const int rc = MPI_Comm_dup(w->across, &c->comm);
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_error(rc, "making a communicator between replicas", -1);
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    c->replicas = w->replicas;
    *out = c;
    return BRG_OK;
#else
    return brg_error(BRG_ERR_INTERNAL, "replicas without MPI");
#endif
}

void brg_replica_comm_destroy(brg_replica_comm *c)
{
    if (!c) return;
#ifdef BRG_HAVE_MPI
    MPI_Comm_free(&c->comm);
#endif
    free(c);
}


int brg_replica_comm_size(const brg_replica_comm *c) { return c->replicas; }

int brg_replica_comm_rank(const brg_replica_comm *c)
{
#ifdef BRG_HAVE_MPI
    int rank = 0;
    MPI_Comm_rank(c->comm, &rank);
    return rank;
#else
    (void)c;
    return 0;
#endif
}

brg_status brg_replica_comm_bcast(brg_replica_comm *c, void *buf, size_t bytes)
{
#ifdef BRG_HAVE_MPI
    if (bytes > 4096) return brg_error(BRG_ERR_INTERNAL, "a broadcast of %zu bytes between replicas", bytes);
    MPI_TRY(MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, c->comm), "setting up the sums between replicas", -1);
    return BRG_OK;
#else
    (void)c;
    (void)buf;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "replicas without MPI");
#endif
}

/* Counts are ints: in pieces of 2^28 floats (1 GiB). */
brg_status brg_replica_comm_sum(brg_replica_comm *c, float *values, size_t n)
{
#ifdef BRG_HAVE_MPI
    const size_t piece = (size_t)1 << 28;
    for (size_t at = 0; at < n; at += piece) {
        const size_t k = n - at < piece ? n - at : piece;
        MPI_Request req;
        MPI_TRY(MPI_Iallreduce(MPI_IN_PLACE, values + at, (int)k, MPI_FLOAT, MPI_SUM, c->comm, &req),
                "summing gradients over the replicas", -1);
        BRG_CHECK(wait_polled(&req, "summing gradients over the replicas"));
    }
    return BRG_OK;
#else
    (void)c;
    (void)values;
    (void)n;
    return brg_error(BRG_ERR_INTERNAL, "replicas without MPI");
#endif
}

static brg_status wire_sum(void *ctx, float *values, size_t n) { return brg_replica_comm_sum(ctx, values, n); }

static brg_status wire_no_message(void *ctx, int peer, const void *buf, size_t bytes)
{
    (void)ctx;
    (void)buf;
    (void)bytes;
    return brg_error(BRG_ERR_INTERNAL, "a message to member %d over the replicas' wire", peer);
}

static brg_status wire_no_recv(void *ctx, int peer, void *buf, size_t bytes)
{
    return wire_no_message(ctx, peer, buf, bytes);
}

brg_wire brg_replica_comm_wire(brg_replica_comm *c)
{
    return (brg_wire){.ctx = c, .send = wire_no_message, .recv = wire_no_recv, .sum = wire_sum};
}

/* The across communicator orders its ranks by replica (brg_world_split_replicas). */
brg_status brg_replica_comm_gather(brg_replica_comm *c, const double *mine, double *all, size_t n)
{
#ifdef BRG_HAVE_MPI
    if (n > (size_t)INT_MAX) return brg_error(BRG_ERR_INVALID_ARGUMENT, "a gather of %zu values", n);
    MPI_Request req;
    MPI_TRY(MPI_Iallgather(mine, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, c->comm, &req),
            "gathering BatchNorm statistics over the replicas", -1);
    return wait_polled(&req, "gathering BatchNorm statistics over the replicas");
#else
    (void)c;
    (void)mine;
    (void)all;
    (void)n;
    return brg_error(BRG_ERR_INTERNAL, "replicas without MPI");
#endif
}
