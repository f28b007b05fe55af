/* The pipeline executor: one worker thread per device, bounded channels
 * between them. See executor-impl.h. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/device-impl.h"
#include "executor-impl.h"
#include "base/internal.h"
#include "replicas.h"
#include "transfer.h"
#include "world-impl.h"

#define EX_MSG_MAX 1024

typedef struct ex_worker {
    struct brg_executor *ex;
    int device;
    pthread_t thread;
    int started;              /* the thread runs, waiting for steps until the executor goes */
    int64_t seen;             /* under the lock: the latest run it started */
    /* under the executor's lock */
    int done;
    int pc;                   /* the action being run */
    const brg_channel *wait_ch; /* the channel waited on, or NULL */
    int wait_send;            /* 1: waiting for room, 0: for a message */
    brg_event *t_base;        /* recorded when the worker starts (times) */
    double t_base_host;       /* the run clock when it was recorded */
    brg_event **ev_start, **ev_end; /* per action, when times are recorded */
    brg_event **ev_copy_begin, **ev_copy_end; /* per send action: its copy on the copy stream */
    brg_grad_reducer *reducer; /* replicas: sums the device's gradients over them */
    brg_replica_comm *bn_comm; /* replicas, synchronized BatchNorm: the worker's gathers */
    int last_backward[BRG_PROGRAM_MAX_CHUNKS]; /* per chunk: the action that completes its gradients */
} ex_worker;

/* What a run of the workers does (brg_executor_run, _update, _call). */
typedef enum { RUN_STEP, RUN_UPDATE, RUN_CALL } run_kind;

struct brg_executor {
    int p, v, m, V, micro_batch;
    int64_t counted; /* labels the latest run's loss counted */
    const brg_model *model;
    const brg_schedule *schedule;
    brg_program **programs; /* [p]: NULL where another rank holds the device */
    brg_device **devices; /* [p]: device d runs programs[d] */
    const brg_world *world;
    int distributed;      /* several ranks: some devices are elsewhere */
    int replicas;         /* of the pipeline (brg_world_split_replicas); 1: none */
    int collective;       /* other processes wait on this one: a failure ends the job */
    int warmed;           /* warm_up_once has run */
    int first_rank, last_rank; /* the ranks of virtual stage 0 and of the last */
    int32_t *labels_here; /* the labels, received from the first stage's rank */
    size_t labels_here_bytes;
    brg_device **here;    /* this rank's devices, n_here of them */
    int n_here;
    ex_worker *workers;
    brg_channel **channels; /* [grad][src][dst] (exec/transfer.h), NULL where nothing flows */
    pthread_cond_t *cvs;    /* one per channel slot: one sender and one receiver, broadcast on any change;
                               then go and finished */
    pthread_cond_t *go;     /* a run starts (run_id) or the executor goes (quit) */
    pthread_cond_t *finished; /* a worker finished its step */
    int64_t run_id;
    int quit;
    run_kind running;       /* under the lock: what the workers' latest run is */
    float lr;               /* RUN_UPDATE's learning rate */
    brg_executor_work call; /* RUN_CALL's work, and its argument */
    void *call_arg;
    int call_alone;         /* RUN_CALL: one device works, with every core */
    int capacity;
    uint64_t host_bytes;    /* of the latest successful run */
    int64_t step;
    int fault_armed;
    brg_executor_fault fault;
    /* the run in progress */
    const float *images;
    const int32_t *labels;
    pthread_mutex_t lock;
    int cancel;
    brg_status err;
    char err_msg[EX_MSG_MAX];
    int sync_ready;
    /* per-action times of the latest run (record_times) */
    int record_times;
    double t0;           /* the run's start, CLOCK_MONOTONIC seconds */
    int times_valid;     /* the latest run succeeded with times recorded */
    double **t_start, **t_end; /* [device][action] */
    /* [device][action] of send actions: how long its copy ran, and how much
     * of that the device computed meanwhile (the copy was hidden) */
    double **copy_s, **copy_hidden_s;
};

static pthread_cond_t *cv_of(brg_executor *ex, const brg_channel *ch)
{
    const size_t i = ((size_t)brg_channel_is_grad(ch) * (size_t)ex->p + (size_t)brg_channel_source(ch)) *
                         (size_t)ex->p + (size_t)brg_channel_destination(ch);
    return &ex->cvs[i];
}

/* ---- errors and cancellation (lock held) ---- */

static void broadcast_all(brg_executor *ex)
{
    for (int i = 0; i < 2 * ex->p * ex->p; i++) pthread_cond_broadcast(&ex->cvs[i]);
}

/* Record the first error (msg is the full message) and cancel everyone. */
static void record_locked(brg_executor *ex, brg_status st, const char *msg)
{
    if (ex->err == BRG_OK) {
        ex->err = st;
        snprintf(ex->err_msg, sizeof ex->err_msg, "%s", msg);
    }
    ex->cancel = 1;
    broadcast_all(ex);
}

static int can_move(const brg_executor *ex, const ex_worker *w)
{
    if (w->wait_send) return brg_channel_count(w->wait_ch) < ex->capacity;
    return brg_channel_count(w->wait_ch) > 0;
}

/* Every unfinished worker waits on a channel that cannot move. */
static int deadlocked(const brg_executor *ex)
{
    int alive = 0;
    for (int d = 0; d < ex->p; d++) {
        const ex_worker *w = &ex->workers[d];
        if (w->done) continue;
        alive++;
        if (!w->wait_ch || can_move(ex, w)) return 0;
    }
    return alive > 0;
}

static void report_deadlock_locked(brg_executor *ex)
{
    char msg[EX_MSG_MAX];
    size_t at = (size_t)snprintf(msg, sizeof msg,
                                 "pipeline step %lld: the schedule stopped (channel capacity %d):",
                                 (long long)ex->step, ex->capacity);
    int first = 1;
    for (int d = 0; d < ex->p && at < sizeof msg; d++) {
        const ex_worker *w = &ex->workers[d];
        if (w->done || !w->wait_ch) continue;
        char token[48];
        brg_action_format(brg_schedule_action(ex->schedule, d, w->pc), ex->v, token, sizeof token);
        at += (size_t)snprintf(msg + at, sizeof msg - at, "%s device %d waits at action %d (%s) %s device %d",
                               first ? "" : ";", d, w->pc, token,
                               w->wait_send ? "for room to send to" : "for a message from",
                               w->wait_send ? brg_channel_destination(w->wait_ch) : brg_channel_source(w->wait_ch));
        first = 0;
    }
    record_locked(ex, BRG_ERR_INTERNAL, msg);
}

/* Wait on ch (lock held) for room (send) or a message; BRG_ERR_CANCELLED
 * if the step was cancelled or is deadlocked. */
static brg_status wait_channel_locked(brg_executor *ex, ex_worker *w, brg_channel *ch, int send)
{
    for (;;) {
        if (ex->cancel) return brg_error(BRG_ERR_CANCELLED, "device %d: cancelled", w->device);
        if (send ? brg_channel_count(ch) < ex->capacity : brg_channel_count(ch) > 0) return BRG_OK;
        w->wait_ch = ch;
        w->wait_send = send;
        if (deadlocked(ex)) {
            report_deadlock_locked(ex);
            w->wait_ch = NULL;
            return brg_error(BRG_ERR_CANCELLED, "device %d: deadlock", w->device);
        }
        pthread_cond_wait(cv_of(ex, ch), &ex->lock);
        w->wait_ch = NULL;
    }
}

/* ---- the io callbacks (ctx: the worker) ---- */

static brg_status ex_send(void *ctx, brg_program *g, const brg_action *a, brg_tensor *t, int count)
{
    ex_worker *w = ctx;
    brg_executor *ex = w->ex;
    int boundary = 0;
    brg_channel *ch = brg_transfer_channel(ex->channels, ex->p, g, a, &boundary);
    if (!ch) return brg_error(BRG_ERR_INTERNAL, "a send across no boundary");
    if (brg_channel_is_remote(ch)) return brg_channel_send_remote(ch, t, count, a->micro_batch, boundary);
    pthread_mutex_lock(&ex->lock);
    brg_status st = wait_channel_locked(ex, w, ch, 1);
    const int slot = brg_channel_reserve(ch);
    pthread_mutex_unlock(&ex->lock);
    if (st != BRG_OK) return st;
    /* The slot after the full ones is this thread's until it is pushed. */
    const int i = w->pc;
    BRG_CHECK(brg_channel_write(ch, slot, t, count, a->micro_batch, boundary,
                                ex->record_times ? w->ev_copy_begin[i] : NULL,
                                ex->record_times ? w->ev_copy_end[i] : NULL));
    pthread_mutex_lock(&ex->lock);
    brg_channel_push(ch);
    pthread_cond_broadcast(cv_of(ex, ch));
    pthread_mutex_unlock(&ex->lock);
    return BRG_OK;
}

static brg_status ex_recv(void *ctx, brg_program *g, const brg_action *a, brg_tensor *t, int count)
{
    ex_worker *w = ctx;
    brg_executor *ex = w->ex;
    int boundary = 0;
    brg_channel *ch = brg_transfer_channel(ex->channels, ex->p, g, a, &boundary);
    if (!ch) return brg_error(BRG_ERR_INTERNAL, "a receive across no boundary");
    if (brg_channel_is_remote(ch)) return brg_channel_recv_remote(ch, t, count, a->micro_batch, boundary);
    pthread_mutex_lock(&ex->lock);
    brg_status st = wait_channel_locked(ex, w, ch, 0);
    const int slot = brg_channel_peek(ch);
    pthread_mutex_unlock(&ex->lock);
    if (st != BRG_OK) return st;
    /* The oldest slot stays full, and so untouched by the sender, until popped. */
    BRG_CHECK(brg_channel_read(ch, slot, t, count, a->micro_batch, boundary));
    pthread_mutex_lock(&ex->lock);
    brg_channel_pop(ch);
    pthread_cond_broadcast(cv_of(ex, ch));
    pthread_mutex_unlock(&ex->lock);
    return BRG_OK;
}

/* ---- workers ---- */

static int fault_hits(const brg_executor *ex, int device, const brg_action *a)
{
    const brg_executor_fault *f = &ex->fault;
    return ex->fault_armed && f->device == device && f->micro_batch == a->micro_batch && f->type == a->type &&
           (f->chunk < 0 || f->chunk == a->chunk);
}

static void worker_fail(ex_worker *w, const brg_action *a, brg_status st)
{
    brg_executor *ex = w->ex;
    char msg[EX_MSG_MAX];
    if (a)
        snprintf(msg, sizeof msg, "pipeline step %lld: device %d (virtual stage %d), micro-batch %d: %s",
                 (long long)ex->step, w->device, brg_schedule_stage_of(ex->schedule, w->device, a->chunk),
                 a->micro_batch, brg_last_error());
    else
        snprintf(msg, sizeof msg, "pipeline step %lld: %s", (long long)ex->step, brg_last_error());
    /* The other ranks wait in receives this one will never match: the
     * job ends, saying where and why. */
    if (ex->collective && st != BRG_ERR_CANCELLED) {
        char where[EX_MSG_MAX + 64];
        snprintf(where, sizeof where, "device %d (%s): %s", w->device,
                 brg_device_name(ex->devices[w->device]), msg);
        brg_world_abort(ex->world, 1, where);
    }
    pthread_mutex_lock(&ex->lock);
    /* A cancelled worker's status is a consequence, not the cause. */
    if (st != BRG_ERR_CANCELLED) record_locked(ex, st, msg);
    else {
        ex->cancel = 1;
        broadcast_all(ex);
    }
    pthread_mutex_unlock(&ex->lock);
}

/* An action to run, for brg_grad_reducer_run_last. */
typedef struct action_call {
    brg_program *g;
    const brg_action *a;
    const brg_program_io *io;
} action_call;

static brg_status run_action_call(void *arg)
{
    const action_call *c = arg;
    return brg_program_run_action(c->g, c->a, c->io);
}

/* The device of the last virtual stage, which has the loss (the
 * schedule's placement: device 0 under the V). */
static int last_device(const brg_executor *ex) { return brg_schedule_device_of(ex->schedule, ex->V - 1); }

/* The condition variables: one per channel slot, then go and finished. */
static int n_cvs(int p) { return 2 * p * p + 2; }

/* One pipeline step of the worker's device. */
static void worker_step(ex_worker *w)
{
    brg_executor *ex = w->ex;
    brg_program *g = ex->programs[w->device];
    const brg_program_io io = {.ctx = w,
                               .recv_act = ex_recv,
                               .send_act = ex_send,
                               .recv_grad = ex_recv,
                               .send_grad = ex_send,
                               .images = ex->images,
                               .labels = ex->labels};
    const int count = brg_schedule_action_count(ex->schedule, w->device);
    brg_device *dev = brg_program_device(g);
    const int timed = ex->record_times;
    int ok = 1;
    if (timed) {
        brg_status st = brg_event_record(w->t_base, BRG_STREAM_COMPUTE);
        w->t_base_host = brg_now_seconds() - ex->t0;
        if (st != BRG_OK) {
            worker_fail(w, NULL, st);
            ok = 0;
        }
    }
    for (int i = 0; i < count && ok; i++) {
        pthread_mutex_lock(&ex->lock);
        const int cancel = ex->cancel;
        w->pc = i;
        pthread_mutex_unlock(&ex->lock);
        if (cancel) break;
        const brg_action *a = brg_schedule_action(ex->schedule, w->device, i);
        char token[48], activity[96];
        brg_action_format(a, ex->v, token, sizeof token);
        snprintf(activity, sizeof activity, "action %d (%s) of pipeline step %lld", i, token, (long long)ex->step);
        brg_device_set_activity(dev, activity);
        /* Times come from the device: on an asynchronous one the events
         * complete when the work ran, not when it was queued. */
        brg_status st = timed ? brg_event_record(w->ev_start[i], BRG_STREAM_COMPUTE) : BRG_OK;
        if (st != BRG_OK) {
        } else if (fault_hits(ex, w->device, a)) {
            st = brg_error(ex->fault.status, "device %d, action %d (%s): injected fault", w->device, i, token);
        } else if (w->reducer && i == w->last_backward[a->chunk]) {
            action_call call = {g, a, &io};
            st = brg_grad_reducer_run_last(w->reducer, a->chunk, run_action_call, &call);
        } else {
            st = brg_program_run_action(g, a, &io);
        }
        if (st == BRG_OK && timed) st = brg_event_record(w->ev_end[i], BRG_STREAM_COMPUTE);
        if (st != BRG_OK) {
            worker_fail(w, a, st);
            ok = 0;
        }
    }
    /* The step ends when the device has done its work: an asynchronous
     * failure surfaces here, named by the action that queued it. */
    brg_status sync = brg_device_synchronize(dev);
    brg_device_set_activity(dev, NULL);
    if (ok && sync != BRG_OK) {
        worker_fail(w, NULL, sync);
        ok = 0;
    }
    if (ok) {
        pthread_mutex_lock(&ex->lock);
        const int cancel = ex->cancel;
        pthread_mutex_unlock(&ex->lock);
        if (!cancel) {
            brg_status st = brg_program_finish(g);
            if (st != BRG_OK) worker_fail(w, NULL, st);
        }
    }
    pthread_mutex_lock(&ex->lock);
    w->done = 1;
    if (!ex->cancel && deadlocked(ex)) report_deadlock_locked(ex);
    pthread_cond_broadcast(ex->finished);
    pthread_mutex_unlock(&ex->lock);
}

/* The worker's run is over: st and its message (the full one) are the
 * run's error unless an earlier one is. */
static void worker_done(ex_worker *w, brg_status st, const char *msg)
{
    brg_executor *ex = w->ex;
    pthread_mutex_lock(&ex->lock);
    if (st != BRG_OK) record_locked(ex, st, msg);
    w->done = 1;
    pthread_cond_broadcast(ex->finished);
    pthread_mutex_unlock(&ex->lock);
}

/* The optimizer step of the worker's device, on its own thread and share
 * of the cores like its actions, and synchronized like a step, so that an
 * asynchronous failure is the update's. On the calling thread with every
 * core, the update left an OpenMP team there spinning into the next step's
 * first actions (libgomp keeps a pool per calling thread): fmnist-cnn's
 * two-device steps were 6% slower, the simulator's replay 0.93 of them. */
static void worker_update(ex_worker *w)
{
    brg_executor *ex = w->ex;
    brg_program *g = ex->programs[w->device];
    brg_device *dev = brg_program_device(g);
    char activity[96];
    snprintf(activity, sizeof activity, "the optimizer step after pipeline step %lld", (long long)ex->step);
    brg_device_set_activity(dev, activity);
    brg_status st = brg_program_step(g, ex->lr, ex->step);
    if (st == BRG_OK) st = brg_device_synchronize(dev);
    brg_device_set_activity(dev, NULL);
    char msg[EX_MSG_MAX] = "";
    if (st != BRG_OK)
        snprintf(msg, sizeof msg, "pipeline step %lld, device %d: %s", (long long)ex->step, w->device,
                 brg_last_error());
    worker_done(w, st, msg);
}

/* Bind the worker's thread near its device's cores: a share of this
 * node's among the devices its ranks hold, or (whole) all of the node's;
 * best effort, so a failure is no failure. The threads of an OpenMP pool
 * the thread starts take the binding it has then. */
static void bind_worker(const ex_worker *w, int whole)
{
    const brg_executor *ex = w->ex;
    int share = 0, shares = 1;
    if (!whole) brg_world_node_share(ex->world, w->device, ex->p, &share, &shares);
    (void)brg_device_bind_thread(ex->devices[w->device], share, shares);
}

/* The caller's work for the worker's device (brg_executor_call), which
 * names its failures itself. */
static void worker_call(ex_worker *w)
{
    brg_executor *ex = w->ex;
    if (ex->call_alone) bind_worker(w, 1);
    const brg_status st = ex->call(ex->call_arg, w->device);
    if (ex->call_alone) bind_worker(w, 0);
    worker_done(w, st, st != BRG_OK ? brg_last_error() : "");
}

/* A worker thread lives as long as its executor and runs one step (or
 * optimizer step, or the caller's work) per run. A thread per step would
 * also start a fresh OpenMP team and oneDNN's per-thread state every step:
 * 20 ms of a 55 ms fmnist-cnn step on 2 cores. */
static void *worker_main(void *arg)
{
    ex_worker *w = arg;
    brg_executor *ex = w->ex;
    bind_worker(w, 0);
    pthread_mutex_lock(&ex->lock);
    for (;;) {
        while (!ex->quit && ex->run_id == w->seen) pthread_cond_wait(ex->go, &ex->lock);
        if (ex->quit) break;
        w->seen = ex->run_id;
        if (w->done) continue; /* a run for another device alone */
        const run_kind kind = ex->running;
        pthread_mutex_unlock(&ex->lock);
        if (kind == RUN_UPDATE) worker_update(w);
        else if (kind == RUN_CALL) worker_call(w);
        else worker_step(w);
        pthread_mutex_lock(&ex->lock);
    }
    pthread_mutex_unlock(&ex->lock);
    return NULL;
}

/* Start the threads of this rank's devices that have none yet (all of
 * them at the first run), before anything of a step runs. */
static brg_status start_workers(brg_executor *ex)
{
    for (int d = 0; d < ex->p; d++) {
        ex_worker *w = &ex->workers[d];
        if (!ex->programs[d] || w->started) continue;
        pthread_mutex_lock(&ex->lock);
        w->seen = ex->run_id;
        pthread_mutex_unlock(&ex->lock);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            return brg_error(BRG_ERR_HOST_MEMORY, "pipeline step %lld: cannot start the worker thread of device %d",
                             (long long)ex->step, d);
        w->started = 1;
    }
    return BRG_OK;
}

static void stop_workers(brg_executor *ex)
{
    pthread_mutex_lock(&ex->lock);
    ex->quit = 1;
    pthread_cond_broadcast(ex->go);
    pthread_mutex_unlock(&ex->lock);
    for (int d = 0; d < ex->p; d++)
        if (ex->workers[d].started) pthread_join(ex->workers[d].thread, NULL);
}

static int all_done_locked(const brg_executor *ex)
{
    for (int d = 0; d < ex->p; d++)
        if (!ex->workers[d].done) return 0;
    return 1;
}

/* Start a run of every worker here (only >= 0: of that device's alone),
 * with no error yet, and wait until all are done. */
static void run_workers(brg_executor *ex, run_kind kind, int only)
{
    pthread_mutex_lock(&ex->lock);
    ex->cancel = 0;
    ex->err = BRG_OK;
    ex->err_msg[0] = '\0';
    for (int d = 0; d < ex->p; d++) {
        ex_worker *w = &ex->workers[d];
        w->pc = 0;
        w->wait_ch = NULL;
        w->done = ex->programs[d] == NULL || (only >= 0 && d != only); /* NULL: another rank runs it */
    }
    ex->running = kind;
    ex->run_id++;
    pthread_cond_broadcast(ex->go);
    while (!all_done_locked(ex)) pthread_cond_wait(ex->finished, &ex->lock);
    pthread_mutex_unlock(&ex->lock);
}

/* ---- the executor ---- */

/* The channel block the tensors between the stages travel in: the one
 * every device computes in (CPU devices: oneDNN's, brg_device_channel_block)
 * when all of them are in this process, else 0 (plain). Another rank's
 * devices, or a GPU beside the CPUs, may hold another layout. */
static int common_block(brg_device *const *devices, int p, int distributed)
{
    if (distributed) return 0;
    const int b = brg_device_channel_block(devices[0]);
    for (int d = 1; d < p; d++)
        if (brg_device_channel_block(devices[d]) != b) return 0;
    return b;
}

/* Synchronized BatchNorm's gather (brg_stage_gather_fn) on a device's own
 * communicator, from its worker thread. */
static brg_status bn_gather(void *ctx, const double *mine, double *all, size_t n)
{
    return brg_replica_comm_gather(ctx, mine, all, n);
}

brg_status brg_executor_create(const brg_model *model, const brg_schedule *schedule, brg_device *const *devices,
                               const brg_device_part *parts, int micro_batch,
                               const brg_optimizer_config *optimizer, uint64_t seed, int deferred_batchnorm,
                               const brg_world *world, brg_executor **out)
{
    if (!out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_create: out is NULL");
    *out = NULL;
    if (!model || !schedule || !devices || !parts || !optimizer)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_executor_create: model, schedule, devices, parts and optimizer must be given");
    const int p = brg_schedule_devices(schedule);
    BRG_CHECK(brg_world_check_devices(world, p));
    for (int d = 0; d < p; d++) {
        if (!brg_world_holds(world, d, p)) {
            if (devices[d])
                return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_create: device %d is rank %d's, but this "
                                 "rank (%d) was given one; give NULL for devices of other ranks", d,
                                 brg_world_device_rank(world, d, p), brg_world_rank(world));
            continue;
        }
        if (!devices[d]) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_create: device %d is NULL", d);
        for (int e = 0; e < d; e++)
            if (devices[e] == devices[d])
                return brg_error(BRG_ERR_INVALID_ARGUMENT,
                                 "brg_executor_create: devices %d and %d are the same device; each worker needs its "
                                 "own", e, d);
    }
    brg_executor *ex = brg_calloc(1, sizeof *ex, "a pipeline executor");
    if (!ex) return BRG_ERR_HOST_MEMORY;
    brg_status ret = BRG_OK;
    ex->p = p;
    ex->v = brg_schedule_chunks(schedule);
    ex->m = brg_schedule_micro_batches(schedule);
    ex->V = ex->p * ex->v;
    ex->micro_batch = micro_batch;
    ex->model = model;
    ex->schedule = schedule;
    ex->step = 1;
    ex->world = world;
    ex->distributed = brg_world_is_distributed(world);
    ex->replicas = brg_world_replicas(world);
    ex->collective = ex->distributed || ex->replicas > 1;
    ex->first_rank = brg_world_device_rank(world, 0, p);
    ex->last_rank = brg_world_device_rank(world, last_device(ex), p);
    ex->programs = brg_calloc((size_t)p, sizeof *ex->programs, "the executor's programs");
    ex->devices = brg_calloc((size_t)p, sizeof *ex->devices, "the executor's devices");
    ex->here = brg_calloc((size_t)p, sizeof *ex->here, "the executor's devices");
    ex->workers = brg_calloc((size_t)p, sizeof *ex->workers, "the executor's workers");
    ex->cvs = brg_calloc((size_t)n_cvs(p), sizeof *ex->cvs, "the executor's condition variables");
    ex->t_start = brg_calloc((size_t)p, sizeof *ex->t_start, "the executor's action times");
    ex->t_end = brg_calloc((size_t)p, sizeof *ex->t_end, "the executor's action times");
    ex->copy_s = brg_calloc((size_t)p, sizeof *ex->copy_s, "the executor's copy times");
    ex->copy_hidden_s = brg_calloc((size_t)p, sizeof *ex->copy_hidden_s, "the executor's copy times");
    if (!ex->programs || !ex->devices || !ex->here || !ex->workers || !ex->cvs || !ex->t_start || !ex->t_end ||
        !ex->copy_s || !ex->copy_hidden_s) {
        ret = BRG_ERR_HOST_MEMORY;
        goto fail;
    }
    if (pthread_mutex_init(&ex->lock, NULL) != 0) {
        ret = brg_error(BRG_ERR_HOST_MEMORY, "brg_executor_create: pthread_mutex_init failed");
        goto fail;
    }
    int cvs = 0;
    for (; cvs < n_cvs(p); cvs++)
        if (pthread_cond_init(&ex->cvs[cvs], NULL) != 0) break;
    if (cvs < n_cvs(p)) {
        for (int i = 0; i < cvs; i++) pthread_cond_destroy(&ex->cvs[i]);
        pthread_mutex_destroy(&ex->lock);
        ret = brg_error(BRG_ERR_HOST_MEMORY, "brg_executor_create: pthread_cond_init failed");
        goto fail;
    }
    ex->go = &ex->cvs[n_cvs(p) - 2];
    ex->finished = &ex->cvs[n_cvs(p) - 1];
    ex->sync_ready = 1;
    ex->capacity = parts[0].channel_capacity ? parts[0].channel_capacity : BRG_CHANNEL_CAPACITY_DEFAULT;
    const int edge_block = common_block(devices, p, ex->distributed);
    for (int d = 0; d < p; d++) {
        if ((parts[d].channel_capacity ? parts[d].channel_capacity : BRG_CHANNEL_CAPACITY_DEFAULT) != ex->capacity) {
            ret = brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_create: device %d's part has channel capacity %d, "
                            "device 0's %d; every device's must agree", d, parts[d].channel_capacity,
                            parts[0].channel_capacity);
            goto fail;
        }
        ex_worker *w = &ex->workers[d];
        ex->devices[d] = devices[d];
        w->ex = ex;
        w->device = d;
        /* Times of every device, another rank's too (each run's sum of
         * them over the ranks, when recorded). */
        const size_t n_actions = (size_t)brg_schedule_action_count(schedule, d);
        const size_t n = n_actions ? n_actions : 1;
        ex->t_start[d] = brg_calloc(n, sizeof(double), "the executor's action times");
        ex->t_end[d] = brg_calloc(n, sizeof(double), "the executor's action times");
        ex->copy_s[d] = brg_calloc(n, sizeof(double), "the executor's copy times");
        ex->copy_hidden_s[d] = brg_calloc(n, sizeof(double), "the executor's copy times");
        if (!ex->t_start[d] || !ex->t_end[d] || !ex->copy_s[d] || !ex->copy_hidden_s[d]) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
        if (!devices[d]) continue; /* another rank's */
        ex->here[ex->n_here++] = devices[d];
        brg_device_part part = parts[d];
        part.edge_block = edge_block;
        BRG_CHECK_GOTO(brg_program_create(model, schedule, d, &part, micro_batch, optimizer, seed, deferred_batchnorm,
                                          devices[d], &ex->programs[d]),
                       ret, fail);
        w->ev_start = brg_calloc(n, sizeof *w->ev_start, "the executor's action events");
        w->ev_end = brg_calloc(n, sizeof *w->ev_end, "the executor's action events");
        w->ev_copy_begin = brg_calloc(n, sizeof *w->ev_copy_begin, "the executor's action events");
        w->ev_copy_end = brg_calloc(n, sizeof *w->ev_copy_end, "the executor's action events");
        if (!w->ev_start || !w->ev_end || !w->ev_copy_begin || !w->ev_copy_end) {
            ret = BRG_ERR_HOST_MEMORY;
            goto fail;
        }
        BRG_CHECK_GOTO(brg_event_create(devices[d], &w->t_base), ret, fail);
        brg_program_set_replica(ex->programs[d], brg_world_replica(world), ex->replicas);
        BRG_CHECK_GOTO(brg_grad_reducer_create(world, ex->programs[d], &w->reducer), ret, fail);
        if (parts[d].sync_batchnorm && ex->replicas > 1) {
            BRG_CHECK_GOTO(brg_replica_comm_create(world, &w->bn_comm), ret, fail);
            BRG_CHECK_GOTO(brg_program_set_gather(ex->programs[d], bn_gather, w->bn_comm, ex->replicas), ret, fail);
        }
        for (int c = 0; c < ex->v; c++) w->last_backward[c] = brg_schedule_last_backward(schedule, d, c);
        for (size_t i = 0; i < n_actions; i++) {
            BRG_CHECK_GOTO(brg_event_create(devices[d], &w->ev_start[i]), ret, fail);
            BRG_CHECK_GOTO(brg_event_create(devices[d], &w->ev_end[i]), ret, fail);
            const brg_action_type type = brg_schedule_action(schedule, d, (int)i)->type;
            if (type != BRG_ACTION_SEND_ACT && type != BRG_ACTION_SEND_GRAD) continue;
            BRG_CHECK_GOTO(brg_event_create(devices[d], &w->ev_copy_begin[i]), ret, fail);
            BRG_CHECK_GOTO(brg_event_create(devices[d], &w->ev_copy_end[i]), ret, fail);
        }
    }
    BRG_CHECK_GOTO(brg_transfer_channels_create(world, ex->programs, p, &ex->channels), ret, fail);
    *out = ex;
    return BRG_OK;
fail:
    brg_executor_destroy(ex);
    return ret;
}

brg_status brg_executor_share_labels(brg_executor *ex, const int32_t *labels, int64_t n, const int32_t **out)
{
    *out = labels;
    if (!ex->distributed || ex->first_rank == ex->last_rank) return BRG_OK;
    const size_t bytes = (size_t)n * (size_t)brg_model_label_count(ex->model) * sizeof(int32_t);
    const int me = brg_world_rank(ex->world);
    if (me == ex->first_rank) return brg_world_send(ex->world, ex->last_rank, labels, bytes);
    if (me != ex->last_rank) return BRG_OK;
    if (bytes > ex->labels_here_bytes) {
        int32_t *h = realloc(ex->labels_here, bytes);
        if (!h) return brg_error(BRG_ERR_HOST_MEMORY, "%zu bytes for the labels of a batch", bytes);
        ex->labels_here = h;
        ex->labels_here_bytes = bytes;
    }
    *out = ex->labels_here;
    return brg_world_recv(ex->world, ex->first_rank, ex->labels_here, bytes);
}

static void clear_channels(brg_executor *ex)
{
    for (int i = 0; ex->channels && i < 2 * ex->p * ex->p; i++)
        if (ex->channels[i]) brg_channel_clear(ex->channels[i]);
}

void brg_executor_destroy(brg_executor *ex)
{
    if (!ex) return;
    if (ex->sync_ready) stop_workers(ex);
    /* Channels hold events of the devices and point into the programs'
     * receive buffers: they go first. */
    brg_transfer_channels_destroy(ex->channels, ex->p);
    for (int d = 0; ex->workers && d < ex->p; d++) {
        ex_worker *w = &ex->workers[d];
        const int n = brg_schedule_action_count(ex->schedule, d);
        for (int i = 0; i < n; i++) {
            if (w->ev_start) brg_event_destroy(w->ev_start[i]);
            if (w->ev_end) brg_event_destroy(w->ev_end[i]);
            if (w->ev_copy_begin) brg_event_destroy(w->ev_copy_begin[i]);
            if (w->ev_copy_end) brg_event_destroy(w->ev_copy_end[i]);
        }
        free(w->ev_copy_begin);
        free(w->ev_copy_end);
        brg_grad_reducer_destroy(w->reducer);
        brg_replica_comm_destroy(w->bn_comm);
        brg_event_destroy(w->t_base);
        free(w->ev_start);
        free(w->ev_end);
    }
    if (ex->programs)
        for (int d = 0; d < ex->p; d++) brg_program_destroy(ex->programs[d]);
    if (ex->sync_ready) {
        for (int i = 0; i < n_cvs(ex->p); i++) pthread_cond_destroy(&ex->cvs[i]);
        pthread_mutex_destroy(&ex->lock);
    }
    for (int d = 0; d < ex->p; d++) {
        if (ex->t_start) free(ex->t_start[d]);
        if (ex->t_end) free(ex->t_end[d]);
        if (ex->copy_s) free(ex->copy_s[d]);
        if (ex->copy_hidden_s) free(ex->copy_hidden_s[d]);
    }
    free(ex->t_start);
    free(ex->t_end);
    free(ex->copy_s);
    free(ex->copy_hidden_s);
    free(ex->labels_here);
    free(ex->programs);
    free(ex->here);
    free(ex->devices);
    free(ex->workers);
    free(ex->cvs);
    free(ex);
}

int brg_executor_capacity(const brg_executor *ex) { return ex ? ex->capacity : 0; }

brg_status brg_executor_copy_times(const brg_executor *ex, int device, double *copy_s, double *hidden_s)
{
    const double *start, *end;
    BRG_CHECK(brg_executor_action_times(ex, device, &start, &end));
    *copy_s = *hidden_s = 0.0;
    for (int i = 0; i < brg_schedule_action_count(ex->schedule, device); i++) {
        *copy_s += ex->copy_s[device][i];
        *hidden_s += ex->copy_hidden_s[device][i];
    }
    return BRG_OK;
}
uint64_t brg_executor_host_bytes(const brg_executor *ex) { return ex ? ex->host_bytes : 0; }

void brg_executor_inject_fault(brg_executor *ex, const brg_executor_fault *fault)
{
    if (!ex) return;
    ex->fault_armed = fault != NULL;
    if (fault) ex->fault = *fault;
}

void brg_executor_record_times(brg_executor *ex, int on)
{
    if (!ex) return;
    ex->record_times = on != 0;
    ex->times_valid = 0;
}

/* Under several ranks, every device's action and copy times on every
 * rank: each rank has its own devices' and zeros for the others', summed
 * over the ranks. Times are seconds since each rank's own start of the
 * run; the ranks start a run within a collective's latency of each other
 * (the previous run ended with one). */
static brg_status share_times(brg_executor *ex)
{
    if (brg_world_size(ex->world) < 2) return BRG_OK;
    double **const rows[4] = {ex->t_start, ex->t_end, ex->copy_s, ex->copy_hidden_s};
    size_t total = 0;
    for (int d = 0; d < ex->p; d++) total += 4 * (size_t)brg_schedule_action_count(ex->schedule, d);
    double *v = brg_calloc(total ? total : 1, sizeof *v, "the executor's action times");
    if (!v) return BRG_ERR_HOST_MEMORY;
    size_t at = 0;
    for (int d = 0; d < ex->p; d++) {
        const size_t n = (size_t)brg_schedule_action_count(ex->schedule, d);
        for (int r = 0; r < 4; r++, at += n)
            if (ex->programs[d] && n) memcpy(v + at, rows[r][d], n * sizeof *v);
    }
    const brg_status st = brg_world_sum(ex->world, v, (int)total);
    at = 0;
    for (int d = 0; st == BRG_OK && d < ex->p; d++) {
        const size_t n = (size_t)brg_schedule_action_count(ex->schedule, d);
        for (int r = 0; r < 4; r++, at += n)
            if (n) memcpy(rows[r][d], v + at, n * sizeof *v);
    }
    free(v);
    return st;
}

brg_status brg_executor_action_times(const brg_executor *ex, int device, const double **start, const double **end)
{
    if (!ex || device < 0 || device >= ex->p || !start || !end)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_action_times: device %d of %d, or no outputs", device,
                         ex ? ex->p : 0);
    if (!ex->record_times || !ex->times_valid)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "no action times: %s",
                         !ex->record_times ? "they are not being recorded (record_times)"
                                           : "no step has succeeded since recording began");
    *start = ex->t_start[device];
    *end = ex->t_end[device];
    return BRG_OK;
}

brg_program *brg_executor_program(const brg_executor *ex, int device)
{
    return ex && device >= 0 && device < ex->p ? ex->programs[device] : NULL;
}
int64_t brg_executor_step_count(const brg_executor *ex) { return ex ? ex->step : 0; }
void brg_executor_set_step_count(brg_executor *ex, int64_t step)
{
    if (ex) ex->step = step;
}

/* After the workers (each device synchronized): the devices' checks of the
 * messages they sent. A NaN that left a device is the cause of what it did
 * downstream (a NaN loss, most often), so it replaces a numeric error found
 * there; upstream first: activations flow to higher devices, gradients to
 * lower ones, and a bad activation comes before the gradients it spoils. */
static void check_messages(brg_executor *ex)
{
    if (ex->err != BRG_OK && ex->err != BRG_ERR_NUMERIC) return;
    brg_status found = BRG_OK;
    int found_grad = 0;
    char msg[EX_MSG_MAX];
    for (int d = 0; d < ex->p; d++) {
        if (!ex->programs[d]) continue;
        int grad = -1;
        const brg_status st = brg_program_check_messages(ex->programs[d], &grad);
        if (st == BRG_OK) continue;
        int better;
        if (found == BRG_OK) better = 1;
        else if (found != BRG_ERR_NUMERIC || st != BRG_ERR_NUMERIC) better = 0;
        else if (grad != found_grad) better = !grad;
        else better = grad; /* the lowest device's activation, the highest's gradient */
        if (!better) continue;
        found = st;
        found_grad = grad;
        snprintf(msg, sizeof msg, "pipeline step %lld: %s", (long long)ex->step, brg_last_error());
    }
    if (found == BRG_OK) return;
    ex->err = found;
    snprintf(ex->err_msg, sizeof ex->err_msg, "%s", msg);
}

/* After a failed run: every stage slot emptied, partial gradients zeroed. */
static void abandon(brg_executor *ex)
{
    for (int d = 0; d < ex->p; d++) {
        if (!ex->programs[d]) continue;
        brg_program_abort(ex->programs[d]);
        for (int c = 0; c < ex->v; c++) {
            brg_stage *st = brg_program_stage(ex->programs[d], c);
            if (st) (void)brg_stage_zero_grads(st);
        }
    }
}

/* Replicas: the loss is the mean over every replica's counted labels,
 * so the last stage's backward divides by their sum (the last stage's
 * ranks add them up; labels are there after brg_executor_share_labels). */
static brg_status share_loss_count(brg_executor *ex, const int32_t *labels, int n)
{
    brg_program *last = ex->programs[last_device(ex)];
    if (!last) return BRG_OK;
    brg_stage *st = brg_program_stage(last, (ex->V - 1) / ex->p);
    double counted = (double)brg_stage_counted_labels(st, labels, n);
    BRG_CHECK(brg_world_replicas_sum(ex->world, &counted, 1));
    brg_program_set_loss_count(last, (int64_t)counted); /* 0: none counts anywhere, nor here */
    return BRG_OK;
}

/* brg_executor_work: the device's program warmed up. */
static brg_status warm_up_work(void *arg, int device)
{
    brg_executor *ex = arg;
    return brg_program_warm_up(ex->programs[device]);
}

/* Before the first step of ranks: every kernel of the step launched once
 * while nothing waits on a peer (brg_program_warm_up), which devices that
 * queue their work need (CUDA, whose channels and sums go through NCCL,
 * and its twin cpu-async). Every rank warms up, whatever its devices:
 * with synchronized BatchNorm the warm-up gathers statistics over the
 * replicas, and a replica on synchronous CPU devices that skipped it
 * would pair its first step's gathers with its twin's warm-up's. */
static brg_status warm_up_once(brg_executor *ex)
{
    if (ex->warmed || !ex->collective) return BRG_OK;
    ex->warmed = 1;
    return brg_executor_call(ex, warm_up_work, ex);
}

brg_status brg_executor_run(brg_executor *ex, const float *images, const int32_t *labels, int n, double *loss,
                            int64_t *correct)
{
    if (loss) *loss = 0.0;
    if (correct) *correct = 0;
    if (!ex) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_run: no executor");
    /* Only the first stage's rank reads the batch: it passes the labels on. */
    const int feeds = brg_world_rank(ex->world) == ex->first_rank;
    if (feeds && (!images || !labels))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_run: images and labels must be given%s",
                         ex->distributed ? " on the rank of the first stage" : "");
    if ((int64_t)n != (int64_t)ex->m * ex->micro_batch)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "brg_executor_run: %d samples, but the schedule's %d micro-batches of %d take %d", n, ex->m,
                         ex->micro_batch, ex->m * ex->micro_batch);
    brg_status started = start_workers(ex);
    if (started == BRG_OK) started = warm_up_once(ex);
    if (started != BRG_OK) {
        if (ex->collective) brg_world_abort(ex->world, 1, brg_last_error());
        return started;
    }
    BRG_CHECK(brg_executor_share_labels(ex, labels, n, &labels));
    if (ex->replicas > 1) BRG_CHECK(share_loss_count(ex, labels, n));
    for (int d = 0; d < ex->p; d++)
        if (ex->programs[d]) BRG_CHECK(brg_program_begin(ex->programs[d], ex->step));
    ex->images = images;
    ex->labels = labels;
    clear_channels(ex);
    ex->times_valid = 0;
    uint64_t host_before = 0;
    for (int d = 0; d < ex->p; d++)
        if (ex->devices[d]) host_before += brg_device_host_bytes(ex->devices[d]);
    ex->t0 = brg_now_seconds();
    /* Devices computing at once share the cores, for this step only. */
    brg_core_share cores;
    brg_devices_share_cores(ex->here, ex->n_here, &cores);
    for (int d = 0; d < ex->p; d++)
        if (ex->workers[d].reducer && brg_grad_reducer_begin(ex->workers[d].reducer) != BRG_OK)
            brg_world_abort(ex->world, 1, brg_last_error());
    run_workers(ex, RUN_STEP, -1);
    /* The other replicas wait for these sums: a failure ends the job. */
    for (int d = 0; d < ex->p; d++)
        if (ex->workers[d].reducer && brg_grad_reducer_end(ex->workers[d].reducer) != BRG_OK) {
            char where[EX_MSG_MAX + 64];
            snprintf(where, sizeof where, "pipeline step %lld: device %d (%s): %s", (long long)ex->step, d,
                     brg_device_name(ex->devices[d]), brg_last_error());
            brg_world_abort(ex->world, 1, where);
        }
    brg_devices_restore_cores(&cores);
    /* A rank whose step failed says so instead (its error ends the job). */
    if (ex->err == BRG_OK && brg_transfer_channels_agree(ex->channels, ex->p) != BRG_OK) {
        ex->err = BRG_ERR_INTERNAL;
        snprintf(ex->err_msg, sizeof ex->err_msg, "pipeline step %lld: %s", (long long)ex->step, brg_last_error());
    }
    check_messages(ex);
    clear_channels(ex);
    ex->images = NULL;
    ex->labels = NULL;
    if (ex->err != BRG_OK) {
        abandon(ex);
        return brg_error(ex->err, "%s", ex->err_msg);
    }
    uint64_t host_after = 0;
    for (int d = 0; d < ex->p; d++)
        if (ex->devices[d]) host_after += brg_device_host_bytes(ex->devices[d]);
    ex->host_bytes = host_after - host_before;
    if (ex->record_times) {
        /* Every device is synchronized: its events have their times. */
        for (int d = 0; d < ex->p; d++) {
            const ex_worker *w = &ex->workers[d];
            if (!ex->programs[d]) continue;
            const int count = brg_schedule_action_count(ex->schedule, d);
            for (int i = 0; i < count; i++) {
                double s0 = 0.0, s1 = 0.0;
                BRG_CHECK(brg_event_elapsed(w->t_base, w->ev_start[i], &s0));
                BRG_CHECK(brg_event_elapsed(w->t_base, w->ev_end[i], &s1));
                ex->t_start[d][i] = w->t_base_host + s0;
                ex->t_end[d][i] = w->t_base_host + s1;
            }
            for (int i = 0; i < count; i++) {
                ex->copy_s[d][i] = ex->copy_hidden_s[d][i] = 0.0;
                if (!w->ev_copy_begin[i] || !w->ev_copy_end[i]->recorded) continue;
                double c0 = 0.0, c1 = 0.0;
                BRG_CHECK(brg_event_elapsed(w->t_base, w->ev_copy_begin[i], &c0));
                BRG_CHECK(brg_event_elapsed(w->t_base, w->ev_copy_end[i], &c1));
                c0 += w->t_base_host;
                c1 += w->t_base_host;
                ex->copy_s[d][i] = c1 - c0;
                for (int k = 0; k < count; k++) {
                    if (brg_schedule_action(ex->schedule, d, k)->type > BRG_ACTION_BACKWARD_WEIGHT) continue;
                    const double lo = fmax(c0, ex->t_start[d][k]), hi = fmin(c1, ex->t_end[d][k]);
                    if (hi > lo) ex->copy_hidden_s[d][i] += hi - lo;
                }
            }
        }
    }
    if (ex->record_times) BRG_CHECK(share_times(ex));
    ex->times_valid = ex->record_times;
    /* The last stage's rank has the sums; every rank returns them. */
    double sums[3] = {0.0, 0.0, 0.0};
    const brg_program *last = ex->programs[last_device(ex)];
    if (last) {
        int64_t right = 0, counted = 0;
        brg_program_loss(last, &sums[0], &right, &counted);
        sums[1] = (double)right;
        sums[2] = (double)counted;
    }
    BRG_CHECK(brg_world_sum(ex->world, sums, 3));
    BRG_CHECK(brg_world_replicas_sum(ex->world, sums, 3));
    ex->counted = (int64_t)sums[2];
    if (loss) *loss = ex->counted > 0 ? sums[0] / (double)ex->counted : 0.0;
    if (correct) *correct = (int64_t)sums[1];
    return BRG_OK;
}

int64_t brg_executor_counted(const brg_executor *ex) { return ex->counted; }

void brg_executor_set_ignore_label(brg_executor *ex, int32_t ignore_label)
{
    for (int d = 0; d < ex->p; d++)
        if (ex->programs[d]) brg_program_set_ignore_label(ex->programs[d], ignore_label);
}

/* Replicas: every device's BatchNorm statistics made the same on its
 * twins before the step (brg_stage_replica_stats_pack), device by device
 * in order on every rank. */
static brg_status merge_batchnorm(brg_executor *ex)
{
    for (int d = 0; d < ex->p; d++)
        for (int c = 0; ex->programs[d] && c < ex->v; c++) {
            brg_stage *st = brg_program_stage(ex->programs[d], c);
            const size_t n = brg_stage_replica_stats_count(st);
            if (n == 0) continue;
            double *v = brg_calloc(n, sizeof *v, "BatchNorm statistics of the replicas");
            if (!v) return BRG_ERR_HOST_MEMORY;
            brg_status ret = brg_stage_replica_stats_pack(st, v);
            if (ret == BRG_OK) ret = brg_world_replicas_sum(ex->world, v, (int)n);
            if (ret == BRG_OK) ret = brg_stage_replica_stats_merge(st, v, ex->replicas);
            free(v);
            BRG_CHECK(ret);
        }
    return BRG_OK;
}

brg_status brg_executor_update(brg_executor *ex, float lr)
{
    if (!ex) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_update: no executor");
    if (ex->replicas > 1) BRG_CHECK(merge_batchnorm(ex));
    BRG_CHECK(start_workers(ex));
    ex->lr = lr;
    /* Each device updates its own weights on its worker, as it computes. */
    brg_core_share cores;
    brg_devices_share_cores(ex->here, ex->n_here, &cores);
    run_workers(ex, RUN_UPDATE, -1);
    brg_devices_restore_cores(&cores);
    if (ex->err != BRG_OK) return brg_error(ex->err, "%s", ex->err_msg);
    ex->step++;
    return BRG_OK;
}

/* brg_executor_call and _alone: only < 0 for every device here. */
static brg_status call_workers(brg_executor *ex, int only, brg_executor_work work, void *arg)
{
    if (!ex || !work || only >= ex->p || (only >= 0 && !ex->programs[only]))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_call: no executor or work, or not a device here");
    BRG_CHECK(start_workers(ex));
    ex->call = work;
    ex->call_arg = arg;
    ex->call_alone = only >= 0;
    /* Devices computing at once share the cores; one alone has them all. */
    brg_core_share cores = {0};
    if (only < 0) brg_devices_share_cores(ex->here, ex->n_here, &cores);
    run_workers(ex, RUN_CALL, only);
    brg_devices_restore_cores(&cores);
    ex->call = NULL;
    ex->call_arg = NULL;
    if (ex->err != BRG_OK) return brg_error(ex->err, "%s", ex->err_msg);
    return BRG_OK;
}

brg_status brg_executor_call(brg_executor *ex, brg_executor_work work, void *arg)
{
    return call_workers(ex, -1, work, arg);
}

brg_status brg_executor_call_alone(brg_executor *ex, int device, brg_executor_work work, void *arg)
{
    if (device < 0) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_executor_call_alone: device %d", device);
    return call_workers(ex, device, work, arg);
}
