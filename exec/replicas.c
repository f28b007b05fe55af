/* Gradients summed over a pipeline's replicas, overlapping the backward.
 * See replicas.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "replicas.h"

struct brg_grad_reducer {
    brg_program *g;
    brg_replica_comm *comm;
    brg_event *ready[BRG_PROGRAM_MAX_CHUNKS]; /* per chunk: its last backward done */
    pthread_t thread;
    int running;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int queue[BRG_PROGRAM_MAX_CHUNKS];
    int queued, taken, closed; /* under lock */
    brg_status err;
    char err_msg[512];
};

int brg_replicas_last_backward(const brg_schedule *schedule, int device, int chunk)
{
    int last = -1;
    for (int i = 0; i < brg_schedule_action_count(schedule, device); i++) {
        const brg_action *a = brg_schedule_action(schedule, device, i);
        if (a->chunk == chunk && (a->type == BRG_ACTION_BACKWARD || a->type == BRG_ACTION_BACKWARD_INPUT ||
                                  a->type == BRG_ACTION_BACKWARD_WEIGHT))
            last = i;
    }
    return last;
}

brg_status brg_grad_reducer_create(const brg_world *world, brg_program *g, brg_grad_reducer **out)
{
    *out = NULL;
    if (brg_world_replicas(world) == 1) return BRG_OK;
    brg_device *dev = brg_program_device(g);
    if (brg_device_backend(dev) != BRG_BACKEND_CPU)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "device %d (%s): replicas sum gradients through MPI, which takes CPU devices; the NCCL "
                         "all-reduce for GPU buffers is not written yet", brg_program_device_index(g),
                         brg_device_name(dev));
    brg_grad_reducer *r = brg_calloc(1, sizeof *r, "a gradient reducer");
    if (!r) return BRG_ERR_HOST_MEMORY;
    r->g = g;
    if (pthread_mutex_init(&r->lock, NULL) != 0 || pthread_cond_init(&r->cv, NULL) != 0) {
        free(r);
        return brg_error(BRG_ERR_HOST_MEMORY, "a gradient reducer's lock");
    }
    brg_status st = brg_replica_comm_create(world, &r->comm);
    for (int c = 0; c < brg_program_chunks(g) && st == BRG_OK; c++) st = brg_event_create(dev, &r->ready[c]);
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
    for (int c = 0; c < BRG_PROGRAM_MAX_CHUNKS; c++) brg_event_destroy(r->ready[c]);
    brg_replica_comm_destroy(r->comm);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* One chunk: wait for its backward, then its blocks' slabs, last first
 * (the order the backward finished them). */
static brg_status sum_chunk(brg_grad_reducer *r, int c)
{
    BRG_CHECK(brg_event_synchronize(r->ready[c]));
    brg_stage *st = brg_program_stage(r->g, c);
    for (int b = brg_stage_grad_slab_count(st) - 1; b >= 0; b--) {
        size_t n = 0;
        float *slab = brg_stage_grad_slab(st, b, &n);
        if (slab) BRG_CHECK(brg_replica_comm_sum(r->comm, slab, n));
    }
    return BRG_OK;
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
        const int c = r->queue[r->taken++];
        pthread_mutex_unlock(&r->lock);
        if (r->err != BRG_OK) continue; /* drain: a failed run aborts the job anyway */
        const brg_status st = sum_chunk(r, c);
        if (st != BRG_OK) {
            r->err = st;
            snprintf(r->err_msg, sizeof r->err_msg, "summing chunk %d's gradients over the replicas: %s", c,
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

brg_status brg_grad_reducer_post(brg_grad_reducer *r, int chunk)
{
    BRG_CHECK(brg_event_record(r->ready[chunk], BRG_STREAM_COMPUTE));
    pthread_mutex_lock(&r->lock);
    const int ok = r->queued < BRG_PROGRAM_MAX_CHUNKS;
    if (ok) r->queue[r->queued++] = chunk;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->lock);
    return ok ? BRG_OK : brg_error(BRG_ERR_INTERNAL, "chunk %d's gradients posted twice in a step", chunk);
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
    return BRG_OK;
}
