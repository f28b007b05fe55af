/* Gradients summed over a pipeline's replicas, overlapping the backward.
 * See replicas.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "replicas.h"

/* A bucket is one block's gradient slab of one chunk: base[c] + b. */
struct brg_grad_reducer {
    brg_program *g;
    brg_replica_comm *comm;
    /* CUDA devices (NCCL) and cpu-async (its twin): the device's
     * communicator over its twins. Its stream waits for each bucket's
     * event and sums the slab in device memory; the reducer's thread only
     * queues, and the run ends when the sums are done (summed). */
    brg_comm *dev_comm;
    brg_wire wire; /* comm's, for the CPU twin of NCCL (cpu-async) */
    brg_event *summed;
    int base[BRG_PROGRAM_MAX_CHUNKS + 1];
    brg_event **ready; /* per bucket: the backward has passed its block */
    int *queue;        /* buckets in the order posted */
    int posting;       /* the chunk whose last backward is running */
    pthread_t thread;
    int running;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int queued, taken, closed; /* under lock */
    brg_status err;
    char err_msg[512];
};

/* How the twins sum: through their backend's communicators where every
 * one has them and all are of one backend (CUDA: NCCL; cpu-async: its
 * twin, over MPI), else through MPI on host memory where all are CPU
 * devices; otherwise not at all. Every twin learns what the others are
 * (a gather), so all decide alike. */
static brg_status choose_sums(brg_grad_reducer *r, brg_device *dev, int *by_comm)
{
    const double mine[2] = {(double)brg_device_backend(dev), (double)brg_device_has_comm(dev)};
    double all[2 * 64];
    const int D = r->comm ? brg_replica_comm_size(r->comm) : 1;
    if (D > 64) return brg_error(BRG_ERR_UNSUPPORTED, "%d replicas (64 at most)", D);
    BRG_CHECK(brg_replica_comm_gather(r->comm, mine, all, 2));
    int comm = 1, cpu = 1, same = 1;
    for (int i = 0; i < D; i++) {
        comm &= all[2 * i + 1] != 0.0;
        cpu &= all[2 * i] == (double)BRG_BACKEND_CPU;
        same &= all[2 * i] == all[0];
    }
    *by_comm = comm && same;
    if (*by_comm || cpu) return BRG_OK;
    return brg_error(BRG_ERR_UNSUPPORTED,
                     "device %d (%s): replicas sum their gradients through NCCL between CUDA devices and through MPI "
                     "between CPU devices; %s", brg_program_device_index(r->g), brg_device_name(dev),
                     same ? "this build has no NCCL (configure says NCCL: no)"
                          : "its twins in the other replicas are of another kind");
}

/* The device's communicator over its twins: replica 0 makes the id,
 * every replica gets it (collective, as the reducers are made). An id
 * that failed reaches the others as zeros and a flag, so no one waits
 * for a member that will not come. */
static brg_status make_dev_comm(brg_grad_reducer *r, const brg_world *world, brg_device *dev)
{
    struct {
        int ok;
        unsigned char id[BRG_COMM_ID_BYTES];
    } hello;
    memset(&hello, 0, sizeof hello);
    const int me = brg_replica_comm_rank(r->comm);
    brg_status made = BRG_OK;
    if (me == 0) {
        made = brg_comm_make_id(dev, hello.id);
        hello.ok = made == BRG_OK;
    }
    BRG_CHECK(brg_replica_comm_bcast(r->comm, &hello, sizeof hello));
    BRG_CHECK(made);
    if (!hello.ok)
        return brg_error(BRG_ERR_CANCELLED, "device %d: replica 0 could not set up the sums of its gradients",
                         brg_program_device_index(r->g));
    BRG_CHECK(brg_event_create(dev, &r->summed));
    r->wire = brg_replica_comm_wire(r->comm);
    const brg_status st =
        brg_comm_create(dev, hello.id, brg_world_replicas(world), me, BRG_COMM_SUMS, &r->wire, &r->dev_comm);
    if (st != BRG_OK)
        return brg_error_context(st, "rank %d: the gradient sums of device %d over %d replicas",
                                 brg_world_job_rank(world, -1), brg_program_device_index(r->g),
                                 brg_world_replicas(world));
    return BRG_OK;
}

brg_status brg_grad_reducer_create(const brg_world *world, brg_program *g, brg_grad_reducer **out)
{
    *out = NULL;
    if (brg_world_replicas(world) == 1) return BRG_OK;
    brg_device *dev = brg_program_device(g);
    brg_grad_reducer *r = brg_calloc(1, sizeof *r, "a gradient reducer");
    if (!r) return BRG_ERR_HOST_MEMORY;
    r->g = g;
    for (int c = 0; c < brg_program_chunks(g); c++)
        r->base[c + 1] = r->base[c] + brg_stage_grad_slab_count(brg_program_stage(g, c));
    const int buckets = r->base[brg_program_chunks(g)];
    if (pthread_mutex_init(&r->lock, NULL) != 0 || pthread_cond_init(&r->cv, NULL) != 0) {
        free(r);
        return brg_error(BRG_ERR_HOST_MEMORY, "a gradient reducer's lock");
    }
    r->ready = brg_calloc((size_t)buckets + 1, sizeof *r->ready, "a gradient reducer's events");
    r->queue = brg_calloc((size_t)buckets + 1, sizeof *r->queue, "a gradient reducer's queue");
    brg_status st = r->ready && r->queue ? brg_replica_comm_create(world, &r->comm) : BRG_ERR_HOST_MEMORY;
    for (int k = 0; k < buckets && st == BRG_OK; k++) st = brg_event_create(dev, &r->ready[k]);
    int by_comm = 0;
    if (st == BRG_OK) st = choose_sums(r, dev, &by_comm);
    if (st == BRG_OK && by_comm) st = make_dev_comm(r, world, dev);
    if (st != BRG_OK) {
        brg_grad_reducer_destroy(r);
        return st;
    }
    *out = r;
    return BRG_OK;
}

void brg_grad_reducer_destroy(brg_grad_reducer *r)
{
    if (!r) return;
    if (r->running) (void)brg_grad_reducer_end(r);
    brg_comm_destroy(r->dev_comm); /* first: it waits for its stream, which the events below are on */
    brg_event_destroy(r->summed);
    for (int k = 0; r->ready && k < r->base[brg_program_chunks(r->g)]; k++) brg_event_destroy(r->ready[k]);
    free(r->ready);
    free(r->queue);
    brg_replica_comm_destroy(r->comm);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* One bucket: wait until the backward has passed its block, then sum its
 * slab (NULL: a block without trainable parameters). */
static brg_status sum_bucket(brg_grad_reducer *r, int k)
{
    int c = 0;
    while (k >= r->base[c + 1]) c++;
    size_t n = 0;
    float *slab = brg_stage_grad_slab(brg_program_stage(r->g, c), k - r->base[c], &n);
    if (r->dev_comm) {
        if (!slab) return BRG_OK;
        BRG_CHECK(brg_comm_wait_event(r->dev_comm, r->ready[k]));
        return brg_comm_sum(r->dev_comm, slab, n);
    }
    BRG_CHECK(brg_event_synchronize(r->ready[k]));
    return slab ? brg_replica_comm_sum(r->comm, slab, n) : BRG_OK;
}

static void *reducer_main(void *arg)
{
    brg_grad_reducer *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        while (r->taken == r->queued && !r->closed) pthread_cond_wait(&r->cv, &r->lock);
        if (r->taken == r->queued) {
            pthread_mutex_unlock(&r->lock);
            return NULL;
        }
        const int k = r->queue[r->taken++];
        pthread_mutex_unlock(&r->lock);
        if (r->err != BRG_OK) continue; /* drain: a failed run aborts the job anyway */
        char activity[BRG_ACTIVITY_MAX];
        snprintf(activity, sizeof activity, "summing gradient bucket %d over the replicas", k);
        brg_device_set_activity(brg_program_device(r->g), activity);
        const brg_status st = sum_bucket(r, k);
        brg_device_set_activity(brg_program_device(r->g), NULL);
        if (st != BRG_OK) {
            r->err = st;
            snprintf(r->err_msg, sizeof r->err_msg, "summing gradients over the replicas (bucket %d): %s", k,
                     brg_last_error());
        }
    }
}

brg_status brg_grad_reducer_begin(brg_grad_reducer *r)
{
    r->queued = r->taken = r->closed = 0;
    r->err = BRG_OK;
    r->err_msg[0] = '\0';
    if (pthread_create(&r->thread, NULL, reducer_main, r) != 0)
        return brg_error(BRG_ERR_HOST_MEMORY, "cannot start a gradient reducer's thread");
    r->running = 1;
    return BRG_OK;
}

/* The stage's hook (brg_stage_set_grads_done): block b of the posting
 * chunk is done on the compute stream. */
static brg_status post_block(void *ctx, int b)
{
    brg_grad_reducer *r = ctx;
    const int k = r->base[r->posting] + b;
    BRG_CHECK(brg_event_record(r->ready[k], BRG_STREAM_COMPUTE));
    pthread_mutex_lock(&r->lock);
    const int ok = r->queued < r->base[brg_program_chunks(r->g)];
    if (ok) r->queue[r->queued++] = k;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->lock);
    return ok ? BRG_OK : brg_error(BRG_ERR_INTERNAL, "more gradient buckets posted than the stages have");
}

brg_status brg_grad_reducer_run_last(brg_grad_reducer *r, int chunk, brg_status (*run)(void *), void *arg)
{
    brg_stage *s = brg_program_stage(r->g, chunk);
    r->posting = chunk;
    brg_stage_set_grads_done(s, post_block, r);
    const brg_status st = run(arg);
    brg_stage_set_grads_done(s, NULL, NULL);
    return st;
}

brg_status brg_grad_reducer_end(brg_grad_reducer *r)
{
    if (!r->running) return BRG_OK;
    pthread_mutex_lock(&r->lock);
    r->closed = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    r->running = 0;
    if (r->err != BRG_OK) return brg_error(r->err, "%s", r->err_msg);
    if (r->dev_comm) { /* the step ends with the sums done, as through MPI: the update uses them */
        brg_device *dev = brg_program_device(r->g);
        brg_device_set_activity(dev, "the last gradient sums over the replicas");
        brg_status st = brg_comm_record_event(r->dev_comm, r->summed);
        if (st == BRG_OK) st = brg_event_synchronize(r->summed);
        brg_device_set_activity(dev, NULL);
        BRG_CHECK(st);
    }
    /* Every replica must have summed every bucket, or their sums would
     * not have matched. */
    if (r->queued != r->base[brg_program_chunks(r->g)])
        return brg_error(BRG_ERR_INTERNAL, "%d of %d gradient buckets were summed over the replicas this step",
                         r->queued, r->base[brg_program_chunks(r->g)]);
    return BRG_OK;
}
